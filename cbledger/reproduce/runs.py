"""One preserved run, checked end to end: restored, its digests recomputed, re-graded, compared.

A pure function of (the workspace, the run's event, its recorded grades) so it can run in a worker
process for `--jobs`. The grade is recomputed once and compared with every recorded grade whose
task manifest is still the one on disk; a grade made under other tasks cannot be reproduced with
today's tasks, which is a note (it is what suite versions are for), not a failure.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

from cbledger.errors import UserError
from cbledger.grading.grader import grade_preserved
from cbledger.ledger.events import GradeRecorded, RunRecorded
from cbledger.reproduce.compare import compare_grade
from cbledger.reproduce.findings import Finding, GradeCheck, RunCheck
from cbledger.reproduce.restore import check_digests, restore_run
from cbledger.tasks.catalog import Catalog, Task
from cbledger.workspace import Workspace


def _note(run: RunRecorded, seq: int, kind: str, message: str, **extra) -> Finding:
    return Finding(check="run", kind=kind, message=message, seq=seq, run_id=run.run_id, **extra)


def _current_task(catalog: Catalog, task_id: str) -> tuple[Task | None, str | None]:
    try:
        return catalog.task(task_id), None
    except UserError as exc:
        return None, str(exc)


def check_run(workspace: Workspace, run: RunRecorded, seq: int, grades: list[tuple[int, GradeRecorded]]) -> RunCheck:
    started = time.perf_counter()
    result = RunCheck(run.run_id, seq, run.task.id, run.model.id, run.run_mode)
    catalog = Catalog(workspace.root)
    task, task_problem = _current_task(catalog, run.task.id)
    regradable: list[tuple[int, GradeRecorded]] = []
    for gseq, g in grades:
        if task is None:
            result.grades.append(GradeCheck(g.suite_version, gseq, "not-regradable"))
            result.note(_note(run, gseq, "not-regradable",
                              f"not re-gradable under the current suite: task {run.task.id} is not on disk ({task_problem})",
                              suite_version=g.suite_version))
        elif g.task_manifest_hash != task.manifest_hash:
            result.grades.append(GradeCheck(g.suite_version, gseq, "not-regradable"))
            result.note(_note(run, gseq, "not-regradable",
                              f"not re-gradable under the current suite: graded against task manifest "
                              f"{g.task_manifest_hash[:12]}, tasks/{run.task.id} is now {task.manifest_hash[:12]}",
                              suite_version=g.suite_version))
        else:
            regradable.append((gseq, g))
    if not grades:
        result.note(_note(run, seq, "ungraded", "no grade is recorded for this run; its preserved sandbox is still checked"))

    scratch = Path(tempfile.mkdtemp(prefix="cbledger-verify-"))
    try:
        restored = restore_run(workspace, catalog, run, seq, scratch / "repo")
        for f in restored.failures:
            result.fail(f)
        if restored.repo is not None and not any(f.kind in ("seed-mismatch", "bundle-unreadable") for f in restored.failures):
            for f in check_digests(restored.repo, run, seq, restored.complete):
                result.fail(f)
        if regradable and task is not None:  # a grade is re-gradable only against a task on disk
            _regrade_and_compare(result, run, seq, task, restored, regradable)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    result.grades.sort(key=lambda g: g.seq)
    if result.status != "failed" and not any(g.status == "reproduced" for g in result.grades):
        result.status = "restored"  # the sandbox checks out; no grade could be compared today
    result.seconds = time.perf_counter() - started
    return result


def _regrade_and_compare(result: RunCheck, run: RunRecorded, seq: int, task: Task, restored, regradable) -> None:
    if not restored.complete or restored.fixture is None:
        for gseq, g in regradable:
            result.grades.append(GradeCheck(g.suite_version, gseq, "not-regraded"))
        return
    try:
        today = grade_preserved(task, restored.fixture, restored.repo, run)
    except Exception as exc:  # a grader that crashes on recorded evidence does not reproduce it
        result.fail(_note(run, seq, "regrade-error", f"grading raised {type(exc).__name__}: {exc}"))
        for gseq, g in regradable:
            result.grades.append(GradeCheck(g.suite_version, gseq, "not-regraded"))
        return
    for gseq, g in regradable:
        diffs = compare_grade(g, today, gseq)
        result.grades.append(GradeCheck(g.suite_version, gseq, "mismatch" if diffs else "reproduced"))
        for f in diffs:
            result.fail(f)
