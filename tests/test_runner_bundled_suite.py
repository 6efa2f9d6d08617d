"""The bundled suite's own discrimination check, run end to end: the gold agent must pass every
task of `suites/full.json`, and the do-nothing agent must fail every edit task and every refusal
or flag task's budget citation — otherwise the assertions are not measuring anything.

Runs against a copy of the repository's `fixtures/`, `tasks/` and `suites/` with a ledger of its
own, so the repository's results are never touched. A missing `suites/full.json` is a failure,
not a skip: the suite is part of what this repository ships.
"""

from __future__ import annotations

import json
import shutil

import pytest

from tests.factories import run_cli
from tests.runner_project import REPO

pytestmark = [pytest.mark.slow, pytest.mark.kicad, pytest.mark.copperhead]


@pytest.fixture(scope="module")
def bundled(tmp_path_factory, request, kicad_cli, copperhead_cli):
    full = REPO / "suites" / "full.json"
    if not full.is_file():
        pytest.fail(f"{full.relative_to(REPO)} is missing: the repository must bundle the full suite", pytrace=False)
    root = tmp_path_factory.mktemp("bundled") / "project"
    for part in ("fixtures", "tasks", "suites"):
        shutil.copytree(REPO / part, root / part)
    tasks = json.loads(full.read_text())["tasks"]
    for task in tasks:
        fixture_id = json.loads((root / "tasks" / task / "task.json").read_text())["fixture"]["path"].split("/", 1)[1]
        tree = root / "fixtures" / fixture_id / "tree"
        if not tree.is_dir():  # a real board is materialized from the shared data, as CI does
            shared_real = request.getfixturevalue("shared_real")
            shutil.copytree(shared_real / "fixtures" / fixture_id / "tree", tree)
    ledger = root / "ledger.jsonl"
    sandboxes = root.parent / "sandboxes"

    def cli(*args):
        return run_cli([*args, "--root", root, "--ledger", ledger])

    for args in (("init",), ("suite", "bump", "--reason", "bundled suite under test", "--skip-trial")):
        result = cli(*args)
        assert result.exit_code == 0, result.output
    for agent in ("gold", "noop"):
        # the real CLI runs the tasks' setup and the `copperhead check` that check_clean grades
        result = cli("run", "--suite", "full", "--agent", agent, "--repeats", "1", "--jobs", "2", "--sandbox-root", sandboxes,
                     "--copperhead-cli", copperhead_cli)
        assert result.exit_code == 0, result.output

    from cbledger.ledger.store import LedgerStore

    events = [s.event.body for s in LedgerStore(ledger).read(types={"run.recorded", "grade.recorded"})]
    grades = {g.run_id: g for g in events if g.__class__.__name__ == "GradeRecorded"}
    runs = [r for r in events if r.__class__.__name__ == "RunRecorded"]
    return tasks, {(r.run_mode, r.task.id): (r, grades[r.run_id]) for r in runs}


def failures(grade) -> list:
    return [(a.id, a.detail) for a in grade.assertions if a.status == "fail"]


def test_gold_passes_every_task_of_the_full_suite(bundled):
    tasks, results = bundled
    assert len(tasks) >= 3
    for task in tasks:
        _, grade = results[("gold", task)]
        assert grade.verdict == "pass", (task, failures(grade))


def test_the_full_suite_holds_every_outcome_class(bundled):
    tasks, results = bundled
    outcomes = {results[("gold", t)][0].task.expected_outcome for t in tasks}
    assert outcomes == {"edit", "refusal", "flag"}


def test_noop_fails_every_edit_task_and_every_refusal_citation(bundled):
    tasks, results = bundled
    for task in tasks:
        run, grade = results[("noop", task)]
        assert grade.verdict == "fail", task
        assert grade.failure_category is not None
        if run.task.expected_outcome in ("refusal", "flag"):
            cites = [a for a in grade.assertions if a.type == "refusal_cites_budget"]
            assert cites, f"{task}: a {run.task.expected_outcome} task must grade its budget citation"
            assert all(a.status == "fail" for a in cites), (task, failures(grade))
