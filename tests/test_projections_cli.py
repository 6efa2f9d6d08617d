"""`cbledger project ...` end to end on a real ledger file in a temporary project root."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cbledger.cli.app import app
from cbledger.ledger.store import LedgerStore
from cbledger.projections import readmodel
from tests.factories import Stream, rich_project


def cli(*args: object) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture()
def root(tmp_path: Path) -> Path:
    return rich_project(tmp_path, "projection-test")


def test_all_writes_every_output_and_the_checks_then_pass(root):
    code, out, _ = cli("project", "all", "--root", root)
    assert code == 0, out
    assert (root / "LEADERBOARD.md").is_file() and (root / "results" / "cbledger.db").is_file()
    files = sorted(p.relative_to(root / "results").as_posix() for p in (root / "results").glob("20*/*/*/*.json"))
    marks = [f for f in files if f.endswith(".retracted.json")]
    records = [f for f in files if f not in marks]
    # 84 live records, and the retracted run's record kept beside its mark
    assert len(records) == 85 and "2026-09-06/vendor-model-a/rename-net/run-1.suite-1.1.0.json" in records
    assert len(marks) == 1 and marks[0].replace(".retracted.json", ".json") in records
    head = LedgerStore(root / "results" / "ledger" / "events.jsonl").head()
    assert f"| Ledger head | seq {head.seq}, `{head.hash}` |" in (root / "LEADERBOARD.md").read_text()
    assert cli("project", "leaderboard", "--check", "--root", root)[0] == 0
    assert cli("project", "records", "--check", "--root", root)[0] == 0
    code, out, _ = cli("project", "all", "--check", "--root", root)
    # what it does not check is said: a clean check is not the whole of what replay --verify checks
    assert code == 0 and "not checked: the read model and the site" in out


def test_leaderboard_check_prints_a_unified_diff_and_fails(root):
    assert cli("project", "leaderboard", "--root", root)[0] == 0
    path = root / "LEADERBOARD.md"
    path.write_text(path.read_text().replace("first suite", "a hand edit"))
    code, out, err = cli("project", "leaderboard", "--check", "--root", root)
    assert code == 1
    assert "--- LEADERBOARD.md (committed)" in out and "+++ LEADERBOARD.md (regenerated)" in out
    assert "-| `1.0.0` | 82 | seq 2, 2026-09-06 | a hand edit |" in out
    assert "differs from a regeneration" in err


def test_leaderboard_check_of_a_board_not_utf8_or_not_there_says_so(root):
    """A LEADERBOARD.md not in UTF-8 ended the check (and replay --verify, as "chain broken") in a
    traceback; one not there was "differing" from a "committed" one."""
    path = root / "LEADERBOARD.md"
    path.write_bytes(b"\xff\xfe x\n")
    code, out, err = cli("project", "leaderboard", "--check", "--root", root)
    assert code == 1 and "differs from a regeneration" in err and "Traceback" not in err, err
    assert "-\ufffd\ufffd x" in out
    path.unlink()
    code, out, err = cli("project", "leaderboard", "--check", "--root", root)
    assert code == 1 and f"{path}: not there" in err and "--- LEADERBOARD.md (not there)" in out, err


def test_record_lines_name_the_files_where_they_are(root, tmp_path):
    """Under --results DIR, and for --export DIR, each line named `results/…`, which is not there."""
    import shutil

    assert cli("project", "all", "--root", root)[0] == 0
    copy = tmp_path / "copy"
    shutil.copytree(root / "results", copy)
    rel = "2026-09-06/vendor-model-a/rename-net/run-1.json"
    (copy / rel).unlink()
    code, out, err = cli("--results", copy, "project", "records", "--root", root)
    assert code == 0 and f"created  {copy / rel}" in out, out + err
    export = tmp_path / "export"
    export.mkdir()
    code, out, err = cli("project", "records", "--export", export, "--root", root)
    assert code == 0 and f"created  {export / rel}" in out, out + err


def test_a_torn_tail_is_said_by_the_project_commands(root):
    """They read up to the last whole event, as they must, and said "up to date" without a word of
    the bytes after it."""
    assert cli("project", "all", "--root", root)[0] == 0
    ledger = root / "results" / "ledger" / "events.jsonl"
    head = LedgerStore(ledger).head().seq
    with ledger.open("ab") as f:
        f.write(b'{"event":{"actor"')
    for args in (("project", "leaderboard", "--check"), ("project", "all")):
        code, _out, err = cli(*args, "--root", root)
        assert code == 0, err
        assert f"17 byte(s) after seq {head} are no whole event" in err and "repair --truncate-torn-tail" in err, err


def test_a_retraction_keeps_the_published_records_and_marks_them(root):
    assert cli("project", "records", "--root", root)[0] == 0
    day = root / "results/2026-09-06/vendor-model-a/rename-net"
    published = {p.name: p.read_bytes() for p in (day / "run-1.json", day / "run-1.suite-1.1.0.json")}
    store = LedgerStore(root / "results" / "ledger" / "events.jsonl")
    s = Stream()
    s.retract("r00001", "a retraction made by a test")
    store.append(s.drafts()[1:])
    code, out, _ = cli("project", "records", "--check", "--root", root)
    assert code == 1 and "created  results/2026-09-06/vendor-model-a/rename-net/run-1.retracted.json" in out
    assert "removed" not in out
    code, out, _ = cli("project", "all", "--root", root)
    assert code == 0 and "2 retracted run(s) marked (their records kept)" in out
    # the records stay byte for byte as they were published; the mark beside them says why
    assert {name: (day / name).read_bytes() for name in published} == published
    mark = json.loads((day / "run-1.retracted.json").read_text())
    assert mark == {
        "format": "cbledger-retraction/1", "runId": "r00001", "retracted": True,
        "retractedAtSeq": mark["retractedAtSeq"], "reason": "a retraction made by a test",
        "records": ["run-1.json", "run-1.suite-1.1.0.json"],
    }
    board = (root / "LEADERBOARD.md").read_text()
    assert "| r00001 |" in board and "a retraction made by a test" in board
    assert "`results/2026-09-06/vendor-model-a/rename-net/run-1.json`" in board
    assert cli("project", "all", "--check", "--root", root)[0] == 0


def test_a_snapshot_whose_selection_holds_no_run_is_refused_and_not_written(root, tmp_path):
    """A mistyped batch id made an empty baseline with exit 0; `compare` refused it only later."""
    snap = tmp_path / "base.json"
    code, out, err = cli("project", "snapshot", "--select", "batch=no-such-batch", "-o", snap, "--root", root)
    ledger = root / "results" / "ledger" / "events.jsonl"
    assert code == 2, out
    assert err.strip() == f"error: --select batch=no-such-batch: {ledger}: no run in it is selected; nothing written"
    assert not snap.exists()
    assert cli("project", "snapshot", "--select", "model=cheap:model-b", "-o", snap, "--root", root)[0] == 0


def test_snapshot_and_compare(root, tmp_path):
    snap = tmp_path / "base.json"
    assert cli("project", "snapshot", "-o", snap, "--root", root)[0] == 0
    doc = json.loads(snap.read_text())
    assert doc["format"] == "cbledger-snapshot/2" and doc["currentSuite"] == "1.1.0" and doc["selection"] == "all"
    # a snapshot compared with the ledger it came from shares every run: refused, not "no regression"
    code, out, _ = cli("project", "compare", "--baseline", snap, "--candidate-select", "all", "--root", root, "--suite", "1.0.0")
    assert code == 2 and "share" in out
    # the candidate is never assumed
    code, _, err = cli("project", "compare", "--baseline", snap, "--root", root, "--suite", "1.0.0")
    assert code == 2 and "name the candidate runs" in err
    # a baseline where model-b passed everything, against model-b's runs now: its tiers fire
    for suite in doc["suites"]:
        for row in suite["rows"]:
            for cell in row["cells"]:
                for run in cell["runs"]:
                    run["runId"] = "baseline-" + run["runId"]
                    if row["model"] == "cheap:model-b":
                        run["passed"] = True
    better = tmp_path / "better-baseline.json"
    better.write_text(json.dumps(doc))
    code, out, _ = cli("project", "compare", "--baseline", better, "--candidate-select", "model=cheap:model-b",
                       "--root", root, "--suite", "1.0.0", "--json")
    assert code == 1, out
    result = json.loads(out)
    fired = {(f["tier"], f["model"], f["metric"]) for f in result["findings"] if f["fired"]}
    assert ("hard", "cheap:model-b", "strict pass rate") in fired and result["regressions"] == len(fired)
    assert result["candidate"] == "model=cheap:model-b"
    others = [f for f in result["findings"] if f["model"] != "cheap:model-b"]
    assert others and all(f["metric"] == "row" and f["note"] == "only in the baseline: not compared, no pass" and not f["gated"] for f in others)
    assert result["notGated"] == len(others)  # rows the candidate does not have are no pass: select the same models on both sides
    code, out, _ = cli("project", "compare", "--baseline", better, "--candidate", snap, "--suite", "9.9.9")
    assert code == 2 and "not comparable" in out
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    assert cli("project", "compare", "--baseline", bad, "--candidate-select", "all", "--root", root)[0] == 2
    old = tmp_path / "old.json"
    old.write_text(json.dumps({"format": "cbledger-snapshot/1"}))
    code, _, err = cli("project", "compare", "--baseline", old, "--candidate-select", "all", "--root", root)
    assert code == 2 and "no per-task counts" in err
    code, _, err = cli("project", "compare", "--baseline-select", "modle=x", "--candidate-select", "all", "--root", root)
    assert code == 2 and "'modle=x': not a selection term" in err


def test_workqueue_json_and_text(root):
    code, out, _ = cli("project", "workqueue", "--json", "--root", root, "--suite", "1.0.0")
    assert code == 0
    q = json.loads(out)
    assert q["suiteVersion"] == "1.0.0" and q["entries"][0]["rank"] == 1
    code, out, _ = cli("project", "workqueue", "--root", root, "--suite", "1.0.0")
    assert code == 0 and out.startswith("work queue, suite 1.0.0, condition default:")
    code, _, err = cli("project", "workqueue", "--root", root, "--suite", "1.0.0", "--condition", "max-turns=2")
    assert code == 2 and "no agent run of suite 1.0.0 was made under it (known: 'default')" in err


def test_readmodel_default_path_and_dump(root):
    assert cli("project", "readmodel", "--root", root)[0] == 0
    dump = readmodel.canonical_dump(root / "results" / "cbledger.db")
    assert "table runs (" in dump


def test_missing_ledger_is_a_clear_error(tmp_path):
    from tests.factories import run_cli

    out = run_cli(["project", "leaderboard", "--root", tmp_path])
    assert out.exit_code == 2 and "no ledger here" in out.stderr


def test_projections_import_the_ledger_and_nothing_else_of_cbledger():
    """Besides the domain-free utilities (the workspace layout among them)."""
    from tests.test_architecture import UTILITIES, imported_domains

    package = Path(__file__).resolve().parent.parent / "cbledger" / "projections"
    for path in package.glob("*.py"):
        used = imported_domains(path.read_text(), str(path))
        assert used <= {"ledger", "projections"} | UTILITIES, (path.name, used)


def test_all_names_the_site_of_the_workspace_it_wrote(root, tmp_path):
    """With --results elsewhere, the page to open is that workspace's, not the project's results/site."""
    ws = tmp_path / "elsewhere"
    (ws / "ledger").mkdir(parents=True)
    (ws / "ledger" / "events.jsonl").write_bytes((root / "results" / "ledger" / "events.jsonl").read_bytes())
    code, out, _ = cli("--results", ws, "project", "all", "--root", root)
    assert code == 0, out
    assert (ws / "site" / "index.html").is_file()
    assert f"open {ws / 'site' / 'index.html'}" in out
