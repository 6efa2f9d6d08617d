"""Re-grading preserved runs under the current suite version. No agent runs, no model is called:
each run is restored from its bundle (the seed rebuilt from the fixture and checked), graded with
today's tasks and grader, and a new `grade.recorded` is appended under the current version.
Runs already graded under it are left alone; retracted runs are skipped.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass, field

from cbledger import invocation
from cbledger.errors import UserError
from cbledger.grading.grader import Grade, grade_preserved
from cbledger.ledger.events import Actor, GradeRecorded, RunRecorded, make_event
from cbledger.ledger.store import LedgerStore
from cbledger.runner import current_suite, ledger_view, preserve
from cbledger.runner.execute import grade_body
from cbledger.tasks.catalog import Catalog
from cbledger.workspace import Workspace


@dataclass
class RescoreResult:
    graded: list[GradeRecorded] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)


def regrade(workspace: Workspace, catalog: Catalog, run: RunRecorded) -> Grade:
    """The grade today's grader gives a preserved run, restored from its bundle for the purpose."""
    task = catalog.task(run.task.id)
    fixture = catalog.fixture(run.fixture.id)
    bundle = workspace.stored(run.sandbox.store)
    if bundle is None:
        raise UserError(f"run {run.run_id}: recorded store path {run.sandbox.store!r} is outside the project")
    restored = preserve.restore(bundle, run.sandbox, fixture)
    try:
        return grade_preserved(task, fixture, restored.repo, run)
    finally:
        shutil.rmtree(restored.path, ignore_errors=True)


def rescore(
    workspace: Workspace, actor: Actor, on_done: Callable[[str, str], None] | None = None,
    on_step: Callable[[int, int, str, str], None] | None = None,
) -> RescoreResult:
    """`on_step(done, total, run_id, outcome)` hears every run, skipped or not (a progress bar);
    `on_done(run_id, verdict)` only each one re-graded."""
    catalog = Catalog(workspace.root)
    view = ledger_view.read(workspace.ledger)
    if view.suite is None:
        raise UserError(f"no suite version is recorded; run `{invocation.command('suite', 'bump', '--reason', '...')}` first")
    version = current_suite.require(view, catalog, sorted({r.task.id for r in view.runs.values()} & set(catalog.task_ids())), workspace)
    store = LedgerStore(workspace.ledger)
    result = RescoreResult()
    total = len(view.runs)
    for done, (run_id, run) in enumerate(view.runs.items(), 1):
        outcome = _rescore_one(workspace, catalog, view, store, actor, version, run_id, run, result, on_done)
        if on_step is not None:
            on_step(done, total, run_id, outcome)
    return result


def _rescore_one(
    workspace: Workspace, catalog: Catalog, view: ledger_view.LedgerView, store: LedgerStore, actor: Actor,
    version: str, run_id: str, run: RunRecorded, result: RescoreResult, on_done: Callable[[str, str], None] | None,
) -> str:
    """One run re-graded (its verdict), skipped or failed, as `result` records it."""
    why = ("retracted" if run_id in view.retracted
           else f"already graded under {version}" if (run_id, version) in view.grades
           else f"task {run.task.id} no longer in the suite" if run.task.id not in catalog.task_ids() else None)
    if why is not None:
        result.skipped.append((run_id, why))
        return f"skipped ({why})"  # said on its progress line: a count alone reads as a failure
    try:
        g = regrade(workspace, catalog, run)
    except UserError as exc:
        result.failed.append((run_id, str(exc)))
        return "failed"
    task = catalog.task(run.task.id)
    body = grade_body(run_id, version, task.manifest_hash, g)
    store.append([make_event(body, id=f"grade:{run_id}:{version}", actor=actor)])
    result.graded.append(body)
    if on_done:
        on_done(run_id, body.verdict)
    return body.verdict
