"""`cbledger rescore`: a suite bump re-grades every preserved run offline — restored from its
bundle on top of a seed rebuilt from the fixture — and appends one new grade per run under the
new version, without ever making a sandbox, calling an agent or running kicad-cli."""

from __future__ import annotations

import dataclasses
import json
import shutil

import pytest

from tests.offline import Forbidden, forbid_running
from tests.runner_project import MIC_FIXTURE, MIC_SCH, REFUSAL_TASK, RENAME_TASK, build_project

pytestmark = [pytest.mark.slow, pytest.mark.kicad, pytest.mark.shared]




@pytest.fixture(scope="module")
def graded_once(tmp_path_factory, shared_real, kicad_cli):
    project = build_project(tmp_path_factory.mktemp("rescore"), shared_real)
    for agent in ("gold", "noop"):
        result = project.run("--suite", "smoke", "--agent", agent)
        assert result.exit_code == 0, result.output
    return project


@pytest.fixture
def graded(graded_once, tmp_path):
    """A private copy of the graded project: bundles are stored relative to the root, so a
    copied project is as restorable as the original."""
    root = tmp_path / "project"
    shutil.copytree(graded_once.root, root)
    return dataclasses.replace(graded_once, root=root, sandboxes=tmp_path / "sandboxes")


@pytest.fixture
def offline(monkeypatch):
    forbid_running(monkeypatch)


def reweigh(project, assertion_id: str, weight: float) -> None:
    path = project.root / "tasks" / RENAME_TASK / "assertions.json"
    assertions = json.loads(path.read_text())
    (item,) = [a for a in assertions if a["id"] == assertion_id]
    item["weight"] = weight
    path.write_text(json.dumps(assertions, indent=2) + "\n")


def test_rescore_after_a_bump_appends_one_grade_per_run_under_the_new_version(graded, offline):
    project = graded
    runs = project.runs()
    reweigh(project, "new-net-exists", 30)
    project.bump("new-net-exists weighs more")
    before = len(project.events())

    result = project.cli("rescore", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert sorted(g["runId"] for g in report["graded"]) == sorted(r.run_id for r in runs)
    assert report["failed"] == []

    new = list(project.events()[before:])
    assert len(new) == len(runs) and all(e.id == f"grade:{e.body.run_id}:1.1.0" for e in new)
    # the new version's records and leaderboard rows are written, as after `run`: replay --verify
    # found the outputs behind the ledger
    checked = project.cli("project", "leaderboard", "--check")
    assert checked.exit_code == 0, checked.output
    assert {e.body.run_id for e in new} == {r.run_id for r in runs}
    old = {(g.run_id, g.suite_version): g for g in project.grades()}
    for run in runs:
        before_bump, after_bump = old[(run.run_id, "1.0.0")], old[(run.run_id, "1.1.0")]
        assert after_bump.verdict == before_bump.verdict  # same evidence, same verdict
        if run.task.id == RENAME_TASK:
            weights = {a.id: a.weight for a in after_bump.assertions}
            assert weights["new-net-exists"] == 30
            assert after_bump.task_manifest_hash != before_bump.task_manifest_hash
            if run.run_mode == "noop":  # the heavier failed check lowers the partial credit
                assert after_bump.partial_credit < before_bump.partial_credit
        else:
            assert after_bump.assertions == before_bump.assertions

    again = project.cli("rescore", "--json")
    assert again.exit_code == 0, again.output
    second = json.loads(again.stdout)
    assert second["graded"] == [] and len(second["skipped"]) == len(runs)
    assert all("already graded under 1.1.0" in s["reason"] for s in second["skipped"])
    assert len(project.events()) == before + len(runs)


def test_rescore_refuses_a_run_whose_fixture_tree_moved(graded, offline):
    project = graded
    sch = project.root / "fixtures" / MIC_FIXTURE / "tree" / MIC_SCH
    sch.write_bytes(sch.read_bytes() + b"\n")
    reweigh(project, "new-net-exists", 4)
    project.bump("reweigh")
    before = project.ledger_bytes()

    result = project.cli("rescore", "--json")
    assert result.exit_code != 0
    report = json.loads(result.stdout)
    assert report["graded"] == [] and len(report["failed"]) == 4
    for failure in report["failed"]:
        assert "differs from the recorded" in failure["error"]
        assert "the fixture tree or the task config changed since the run" in failure["error"]
    assert project.ledger_bytes() == before


def test_the_offline_guard_is_live(graded, offline):
    with pytest.raises(Forbidden, match="must not make a sandbox"):
        graded.run(RENAME_TASK, "--agent", "gold")


def test_rescore_without_a_bump_has_nothing_to_do(graded, offline):
    result = graded.cli("rescore")
    assert result.exit_code == 0, result.output
    assert "re-graded 0, skipped 4 (4 already graded), failed 0" in result.stdout
    assert "skipped (already graded under " in result.stderr  # each progress line says why
    assert {RENAME_TASK, REFUSAL_TASK} == {r.task.id for r in graded.runs()}


def test_rescore_shows_a_step_per_run(graded, offline):
    """Progress on the long step: one line per run off a terminal (a bar on one), on stderr."""
    project = graded
    runs = project.runs()
    reweigh(project, "new-net-exists", 5)
    project.bump("new-net-exists reweighed for the progress test")
    result = project.cli("rescore")
    assert result.exit_code == 0, result.output
    steps = [line for line in result.stderr.splitlines() if line.startswith("[")]
    assert len(steps) == len(runs) and steps[-1].startswith(f"[{len(runs)}/{len(runs)}] ")
    assert {line.split()[1] for line in steps} == {r.run_id for r in runs}
