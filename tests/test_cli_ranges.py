"""Every numeric option of the command line is range-checked before anything runs, and `--suite`
must name a suite version the ledger records: each refusal exits 2, names the option and writes
nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.factories import new_ledger, run_cli, suite_bumped


@pytest.fixture
def root(tmp_path) -> Path:
    project = tmp_path / "project"
    ledger = project / "results" / "ledger" / "events.jsonl"
    ledger.parent.mkdir(parents=True)
    new_ledger(ledger).append([suite_bumped(1)])
    return project


OUT_OF_RANGE = [
    (["run", "--agent", "gold", "--suite", "smoke", "--jobs", "0"], "--jobs"),
    (["run", "--agent", "gold", "--suite", "smoke", "--repeats", "0"], "--repeats"),
    (["run", "--agent", "gold", "--suite", "smoke", "--repeats", "101"], "--repeats"),
    (["run", "--agent", "gold", "--suite", "smoke", "--max-turns", "0"], "--max-turns"),
    (["run", "--agent", "gold", "--suite", "smoke", "--max-repair-cycles", "-1"], "--max-repair-cycles"),
    (["demo", "--jobs", "0"], "--jobs"),
    (["replay", "--verify", "--since", "-5"], "--since"),
    (["log", "--since", "-5"], "--since"),
    (["log", "--until", "0"], "--until"),
    (["endpoint", "serve", "{ledger}", "--port", "70000"], "--port"),
    (["prove", "inclusion", "0"], "'seq'"),
    (["project", "compare", "--baseline", "b.json", "--rate-floor", "1.5"], "--rate-floor"),
    (["project", "compare", "--baseline", "b.json", "--alpha", "-1"], "--alpha"),
    (["project", "compare", "--baseline", "b.json", "--cost-floor", "-0.1"], "--cost-floor"),
]


@pytest.mark.parametrize(("args", "option"), OUT_OF_RANGE, ids=[" ".join(a) for a, _o in OUT_OF_RANGE])
def test_a_numeric_option_out_of_range_is_refused(root, args, option):
    ledger = root / "results" / "ledger" / "events.jsonl"
    before = ledger.read_bytes()
    argv = [str(ledger) if a == "{ledger}" else a for a in args]
    r = run_cli(argv if args[0] == "endpoint" else [*argv, "--root", str(root)])
    assert r.exit_code == 2, (r.stdout, r.stderr)
    assert "Invalid value" in r.stderr and option in r.stderr
    assert ledger.read_bytes() == before
    assert sorted(p.name for p in root.iterdir()) == ["results"]  # nothing else written


@pytest.mark.parametrize("command", [["project", "leaderboard"], ["project", "workqueue"]])
def test_an_unknown_suite_version_is_refused_not_rendered_empty(root, command):
    r = run_cli([*command, "--suite", "9.9.9", "--root", root])
    assert r.exit_code == 2
    assert "--suite 9.9.9: the ledger records no such suite version (recorded: 1.1.0)" in r.stderr
    assert not (root / "LEADERBOARD.md").exists()
    r = run_cli([*command, "--suite", "1.1.0", "--root", root])
    assert r.exit_code == 0, r.stderr
