"""Rubric scores held to the kept definitions of the suite version they name.

`cbledger judge` reads a task's rubric from the working tree; a rubric edited (or written) after
the suite bump would be scored by a judge and kept in the ledger as if it were the suite's. A
score's criteria, each with its maximum, must therefore be the criteria of the rubric kept in
its suite version's definitions, or `replay --verify` names it.
"""

from __future__ import annotations

from cbledger.errors import UserError
from cbledger.projections.fold import LedgerState
from cbledger.reproduce.findings import Finding
from cbledger.reproduce.runs import Suites
from cbledger.tasks import rubric as rubric_mod
from cbledger.tasks.catalog import Catalog


def scored_versions(state: LedgerState) -> set[str]:
    """The suite versions rubric scores with criteria name: their kept definitions are needed."""
    return {e.rubric.suite_version for entries in state.rubric.values() for e in entries
            if e.rubric.suite_version is not None and e.rubric.criteria}


def rubric_findings(state: LedgerState, suites: Suites) -> list[Finding]:
    """A `rubric-not-kept` failure for every score whose criteria are not those of the rubric its
    suite version kept (a version whose definitions cannot be opened is named elsewhere)."""
    out: list[Finding] = []
    for run_id, entries in sorted(state.rubric.items()):
        run = state.runs.get(run_id)
        for entry in entries:
            body, version = entry.rubric, entry.rubric.suite_version
            catalog = suites.get(version) if version is not None else None
            if run is None or not body.criteria or not isinstance(catalog, Catalog) or catalog.damage_of(run.run.task.id):
                continue
            task_id = run.run.task.id
            try:
                task = catalog.task(task_id)
                kept = rubric_mod.load(task.dir, task.manifest.rubric)
            except UserError as exc:
                kept, why = None, f"its rubric does not load from the kept definitions: {exc}"
            else:
                why = f"task {task_id} has no rubric in suite {version}'s kept definitions"
            scored = sorted((c.id, c.max_points) for c in body.criteria)
            if kept is not None:
                expected = sorted((c.id, c.max_points) for c in kept.criteria)
                if scored == expected:
                    continue
                why = f"its criteria {scored} are not those of task {task_id}'s kept rubric {expected}"
            out.append(Finding(check="suite", kind="rubric-not-kept", seq=entry.seq, run_id=run_id,
                               suite_version=version, message=f"a rubric score of run {run_id}: {why}"))
    return out
