"""The project layout (`cbledger/workspace.py`), `regenerate_all` and the login-name fallback.

The layout is part of the ledger's meaning (a bundle path is recorded in `run.recorded`), so the
committed ledger is the check that the derived names are the ones that were written.
"""

from __future__ import annotations

import getpass
from pathlib import Path

import pytest

from cbledger import workspace as layout
from cbledger.ledger.store import LedgerStore
from cbledger.login import login_name
from cbledger.projections import leaderboard, readmodel, records, writers
from cbledger.workspace import Workspace
from tests.factories import MAINTAINER, Stream, rich_stream

REPO = Path(__file__).resolve().parent.parent


def test_every_output_path_is_derived_from_the_root(tmp_path):
    ws = Workspace.at(tmp_path)
    assert ws.ledger == tmp_path / "results" / "ledger" / "events.jsonl"
    assert ws.results == tmp_path / "results"
    assert ws.leaderboard == tmp_path / "LEADERBOARD.md"
    assert ws.read_model == tmp_path / "results" / "cbledger.db"
    assert ws.runs == tmp_path / "results" / "runs"
    assert ws.record("2026-09-06/m/t/run-1.json") == tmp_path / "results" / "2026-09-06" / "m" / "t" / "run-1.json"
    assert ws.staged_bundle("r1") == tmp_path / "results" / "runs" / ".r1.bundle.tmp"
    assert ws.kept_import("ab" * 32) == tmp_path / "results" / "imports" / ("ab" * 32)
    assert layout.record_name("2026-09-06/m/t/run-1.json") == "results/2026-09-06/m/t/run-1.json"


def test_a_ledger_given_elsewhere_takes_its_outputs_with_it(tmp_path):
    """A ledger and its projections are one unit: a ledger away from the project's results/ keeps
    its records, runs and read model in its own results directory (issue: records written beside
    another ledger's, so replay --verify on either named the other's as extra)."""
    elsewhere = tmp_path / "other" / "log.jsonl"
    ws = Workspace.at(tmp_path / "project", elsewhere)
    assert ws.ledger == elsewhere
    assert ws.results == tmp_path / "other"
    assert ws.read_model == tmp_path / "other" / "cbledger.db"
    assert ws.leaderboard == tmp_path / "other" / "LEADERBOARD.md"
    assert ws.stored("results/runs/r1.bundle") == tmp_path / "other" / "runs" / "r1.bundle"
    laid_out = Workspace.at(tmp_path / "project", tmp_path / "w" / "ledger" / "events.jsonl")
    assert laid_out.results == tmp_path / "w" and laid_out.runs == tmp_path / "w" / "runs"
    default = Workspace.at(tmp_path / "project", tmp_path / "project" / "results" / "ledger" / "events.jsonl")
    assert default == Workspace.at(tmp_path / "project")


def test_a_chosen_results_directory_holds_every_output(tmp_path):
    root, results = tmp_path / "project", tmp_path / "scratch" / "results"
    ws = Workspace.at(root, results=results)
    assert ws.ledger == results / "ledger" / "events.jsonl"
    for path in (ws.read_model, ws.runs, ws.leaderboard, ws.checkpoint(7), ws.suites, ws.suite_object("ab" * 32),
                 ws.kept_import("cd" * 32), ws.record("2026-01-01/m/t/run-1.json")):
        assert path.is_relative_to(results), path
    assert ws.keys == root / "keys" and ws.stored("fixtures/f/tree") == root / "fixtures" / "f" / "tree"
    kept = ws.kept_import("cd" * 32) / "a.json"
    assert ws.stored(ws.recorded_name(kept)) == kept and ws.recorded_name(kept).startswith("results/imports/")
    assert Workspace.at(root, results=root / "results") == Workspace.at(root)


@pytest.mark.parametrize("stored", ["/etc/passwd", "../outside.bundle", "results/../../x.bundle"])
def test_a_recorded_path_that_leaves_the_project_is_refused(tmp_path, stored):
    assert Workspace.at(tmp_path).stored(stored) is None


def test_a_recorded_path_inside_the_project_resolves_under_the_root(tmp_path):
    assert Workspace.at(tmp_path).stored("results/runs/r1.bundle") == tmp_path / "results" / "runs" / "r1.bundle"


def test_bundle_names_are_the_ones_the_committed_ledger_recorded():
    ws = Workspace.at(REPO)
    runs = [s.event.body for s in LedgerStore(ws.ledger).read(types={"run.recorded"})]
    assert runs, "the committed ledger records runs"
    for run in runs:
        assert run.sandbox.store == layout.bundle_name(run.run_id)
        assert ws.stored(run.sandbox.store) == ws.runs / f"{run.run_id}.bundle"


# --------------------------------------------------------------------------- regenerate_all


@pytest.fixture()
def project(tmp_path: Path) -> Workspace:
    ws = Workspace.at(tmp_path)
    LedgerStore(ws.ledger).init("workspace-test", MAINTAINER)
    LedgerStore(ws.ledger).append(rich_stream().drafts()[1:])
    return ws


def _assert_outputs_are_the_state(ws: Workspace) -> None:
    state = writers.load_state(ws.ledger)
    for entry in records.record_entries(state):
        assert ws.record(entry.path).read_bytes() == records.render(entry.record)
    for rel, data in records.published(state):
        assert ws.record(rel).read_bytes() == data  # retracted runs' records kept, and their marks
    assert ws.leaderboard.read_text() == leaderboard.render(state, None)
    assert readmodel.canonical_dump(ws.read_model) == readmodel.canonical_dump_tables(readmodel.build_tables(state))


def test_regenerate_all_writes_every_output_then_nothing(project):
    first = writers.regenerate_all(writers.load_state(project.ledger), project)
    # 84 live records, the retracted run's record and its mark
    assert len(first.records.created) == 86 and first.records.marks == 1 and first.leaderboard and first.read_model
    _assert_outputs_are_the_state(project)
    db = project.read_model.stat()
    again = writers.regenerate_all(writers.load_state(project.ledger), project)
    assert again.records.clean and again.records.unchanged == 86
    assert not again.leaderboard and not again.read_model
    assert project.read_model.stat().st_mtime_ns == db.st_mtime_ns  # the same content is not rewritten


def test_regenerate_all_without_the_read_model_leaves_it_alone(project):
    done = writers.regenerate_all(writers.load_state(project.ledger), project, read_model=False)
    assert done.leaderboard and not done.read_model and not project.read_model.exists()


def test_an_incremental_regeneration_touches_only_the_named_runs(project):
    writers.regenerate_all(writers.load_state(project.ledger), project)
    s = Stream()
    s.retract("r00001", "a retraction made by a test")
    LedgerStore(project.ledger).append(s.drafts()[1:])
    state = writers.load_state(project.ledger)
    done = writers.regenerate_all(state, project, runs={"r00001"})
    mark = next(path for path, m in records.retraction_marks(state) if m.run_id == "r00001")
    assert done.records.created == [mark] and done.records.updated == []
    assert done.records.unchanged == len(records.record_paths(state, "r00001"))  # its records stay
    assert done.leaderboard and done.read_model
    _assert_outputs_are_the_state(project)


# --------------------------------------------------------------------------- login name


def test_login_name_is_the_user_when_there_is_one(monkeypatch):
    monkeypatch.setattr(getpass, "getuser", lambda: "ada")
    assert login_name("maintainer") == "ada"


def test_login_name_falls_back_where_the_lookup_fails(monkeypatch):
    def no_passwd_entry() -> str:
        raise KeyError("getpwuid(): uid not found: 4242")

    monkeypatch.setattr(getpass, "getuser", no_passwd_entry)
    assert login_name("importer") == "importer"
    monkeypatch.setattr(getpass, "getuser", lambda: "")
    assert login_name("maintainer") == "maintainer"


def test_a_ledger_file_in_the_project_root_keeps_its_outputs_off_the_project(tmp_path):
    """Beside a ledger in the root, `suites/` (kept definitions) would land on the project's own
    suite definitions and `runs/` beside `tasks/`: its results go to `<stem>.results/` instead."""
    root = tmp_path / "project"
    ws = Workspace.at(root, root / "ledger.jsonl")
    assert ws.results == root / "ledger.results"
    assert ws.suites.is_relative_to(root / "ledger.results") and ws.suites != root / "suites"
    assert ws.runs == root / "ledger.results" / "runs"
