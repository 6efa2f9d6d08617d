"""A workspace is one unit: a ledger and everything made from it (preserved runs, records, read
model, LEADERBOARD.md) live in one results directory, and `demo` runs into a scratch one,
leaving the project's tracked files alone."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cbledger.runner import report_cache
from tests.factories import run_cli

pytestmark = [pytest.mark.slow, pytest.mark.kicad]

REPO = Path(__file__).resolve().parent.parent
TASK = "led-resistor-swap"
NO_ENV = {"CBLEDGER_LEDGER": None, "CBLEDGER_ROOT": None, "CBLEDGER_RESULTS": None}


def _project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    for name in ("tasks", "suites", "fixtures"):  # a bump refuses a task whose fixture is not there
        shutil.copytree(REPO / name, root / name)
    return root


def test_run_with_a_ledger_elsewhere_keeps_its_outputs_beside_it(tmp_path, kicad_cli, copperhead_cli, monkeypatch):
    monkeypatch.delenv("COPPERHEAD_CLI", raising=False)
    root = _project(tmp_path)
    other = tmp_path / "other" / "ledger" / "events.jsonl"
    for args in (("init",), ("suite", "bump", "--reason", "x", "--skip-trial")):
        assert run_cli([*args, "--root", root, "--ledger", other], env=NO_ENV).exit_code == 0
    # the task grades check_clean: the end state's `copperhead check` needs the CLI
    result = run_cli(["run", TASK, "--agent", "gold", "--repeats", "1", "--json", "--copperhead-cli", copperhead_cli,
                      "--root", root, "--ledger", other], env=NO_ENV)
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert (doc["recorded"], doc["passed"], doc["notRecorded"]) == (1, 1, [])
    (run,) = doc["runs"]
    assert run["task"] == TASK and run["verdict"] == "pass" and run["records"]
    unit = tmp_path / "other"
    assert not (root / "results").exists() and not (root / "LEADERBOARD.md").exists()
    assert (unit / "runs" / f"{run['runId']}.bundle").is_file()
    assert run["bundle"] == f"results/runs/{run['runId']}.bundle" and run["bundleFile"] == str(unit / "runs" / f"{run['runId']}.bundle")
    for record in run["records"]:  # named as events name them: results/... in this workspace
        assert record.startswith("results/") and (unit / record.removeprefix("results/")).is_file()
    assert (unit / "LEADERBOARD.md").is_file() and (unit / "cbledger.db").is_file()
    verified = run_cli(["replay", "--verify", "--root", root, "--ledger", other], env=NO_ENV)
    assert verified.exit_code == 0, verified.output


def test_one_option_chooses_the_results_directory(tmp_path):
    root = _project(tmp_path)
    chosen = tmp_path / "chosen"
    assert run_cli(["--results", chosen, "init", "--root", root], env=NO_ENV).exit_code == 0
    assert (chosen / "ledger" / "events.jsonl").is_file() and not (root / "results").exists()
    by_env = run_cli(["log", "--root", root], env={**NO_ENV, "CBLEDGER_RESULTS": str(chosen)})
    assert by_env.exit_code == 0 and "ledger.created" in by_env.stdout


def test_the_projects_own_results_named_through_a_link_is_the_projects_own(tmp_path):
    """The root is resolved, the results directory was not: from a `$PWD` or `$HOME` that holds
    a link, `--results $PWD/results` was taken for a workspace elsewhere, whose LEADERBOARD.md
    was looked for (and written) inside `results/`."""
    from cbledger.workspace import Workspace

    root = _project(tmp_path)
    (root / "results").mkdir()
    (tmp_path / "link").symlink_to(root)
    (tmp_path / "results-link").symlink_to(root / "results")
    for named in (tmp_path / "link" / "results", tmp_path / "results-link"):
        where = Workspace.at(root.resolve(), results=named)
        assert where.results_dir is None and where.leaderboard == root.resolve() / "LEADERBOARD.md", named
    assert run_cli(["--results", tmp_path / "link" / "results", "init", "--root", root], env=NO_ENV).exit_code == 0
    done = run_cli(["--results", tmp_path / "link" / "results", "project", "leaderboard", "--root", root], env=NO_ENV)
    assert done.exit_code == 0, done.output
    assert (root / "LEADERBOARD.md").is_file() and not (root / "results" / "LEADERBOARD.md").exists()
    elsewhere = Workspace.at(root.resolve(), results=tmp_path / "other")  # another directory is still another
    assert elsewhere.results_dir == tmp_path / "other"
    (tmp_path / "loop-a").symlink_to(tmp_path / "loop-b")  # a loop of links: another place, said as ever
    (tmp_path / "loop-b").symlink_to(tmp_path / "loop-a")
    looped = run_cli(["--results", tmp_path / "loop-a", "log", "--root", root], env=NO_ENV)
    assert looped.exit_code == 2 and "Traceback" not in looped.output, looped.output


def test_demo_in_a_fresh_clone_runs_into_a_scratch_workspace_and_leaves_git_status_clean(tmp_path, kicad_cli, copperhead_cli):
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "--quiet", "--no-hardlinks", str(REPO), str(clone)], check=True)
    # none of the session's workspace settings, but its kicad-cli report cache (kept by what a report
    # was made from, so a tree the other tests verified is not verified again; conftest.py)
    env = {k: v for k, v in os.environ.items() if not k.startswith("CBLEDGER_") or k == report_cache.CACHE_ENV}
    env["PYTHONPATH"] = str(clone)  # the clone's own code
    # the copperhead CLI its bootstrap would install: the tasks that grade check_clean need it
    env["COPPERHEAD_CLI"] = str(copperhead_cli)
    cli = [sys.executable, "-m", "cbledger.cli.app"]
    done = subprocess.run([*cli, "demo", "--suite", "smoke"], cwd=clone, capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    found = re.search(r"^workspace: (\S+) ", done.stdout, re.MULTILINE)
    assert found, done.stdout[:500]
    scratch = Path(found.group(1))
    try:
        assert not scratch.is_relative_to(clone)
        assert (scratch / "ledger" / "events.jsonl").is_file() and (scratch / "LEADERBOARD.md").is_file()
        status = subprocess.run(["git", "status", "--porcelain"], cwd=clone, capture_output=True, text=True, check=True)
        assert status.stdout == ""
        verified = subprocess.run([*cli, "--results", str(scratch), "replay", "--verify"], cwd=clone, capture_output=True, text=True, env=env)
        assert verified.returncode == 0, verified.stdout[-2000:] + verified.stderr[-2000:]
    finally:
        shutil.rmtree(scratch.parent, ignore_errors=True)


def test_a_run_line_shows_each_file_where_a_reader_opens_it(tmp_path):
    """`run`'s line per run names its records and bundle: events name them `results/...`, which
    under `--results DIR` is DIR/..., the path printed; a packed store's records keep their name."""
    from cbledger.cli.run_commands import _shown
    from cbledger.projections import packed
    from cbledger.workspace import Workspace, bundle_name

    record, bundle = "results/2026-12-04/harness-gold/led-resistor-swap/run-1.json", bundle_name("r1")
    own = Workspace.at(tmp_path)
    assert (_shown(own, record), _shown(own, bundle)) == (record, bundle)  # the committed layout, from the root
    chosen = Workspace.at(tmp_path, results=tmp_path / "chosen")
    assert _shown(chosen, record) == str(tmp_path / "chosen" / "2026-12-04/harness-gold/led-resistor-swap/run-1.json")
    assert _shown(chosen, bundle) == str(tmp_path / "chosen" / "runs" / "r1.bundle")
    packed.store_path(chosen.results).parent.mkdir(parents=True)
    packed.store_path(chosen.results).write_bytes(b"")
    assert (_shown(chosen, record), _shown(chosen, bundle)) == (record, str(tmp_path / "chosen" / "runs" / "r1.bundle"))
