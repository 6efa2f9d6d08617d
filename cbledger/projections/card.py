"""The benchmark card: what this suite version measures, which parts are deterministic and which
judged, what it does not claim and where its safety boundary lies, generated from the ledger (the
suite bump, the graded runs, the rubric scores) and the surfaces catalog, never written by hand.
"""

from __future__ import annotations

from cbledger.ledger import surfaces
from cbledger.projections import format as fmt
from cbledger.projections.fold import LedgerState, suite_bump
from cbledger.projections.isolation import isolation
from cbledger.projections.judged import run_kind
from cbledger.projections.metrics import TIERS
from cbledger.projections.records import RecordEntry

TITLE = "Benchmark card"


def _counts(items: list[str]) -> str:
    tally: dict[str, int] = {}
    for item in items:
        tally[item] = tally.get(item, 0) + 1
    return ", ".join(f"{k} {v}" for k, v in sorted(tally.items())) or "none"


def render(state: LedgerState, suite: str, records: list[RecordEntry]) -> list[str]:
    bump = suite_bump(state, suite)
    tasks = {rec.run.run.task.id: rec.run.run.task for rec in records}
    named = sorted(bump.body.task_manifest_hashes) if bump else sorted(tasks)
    fixtures = sorted(bump.body.fixture_hashes) if bump else sorted({rec.run.run.fixture.id for rec in records})
    tier_of = {t: tasks[t].tier for t in named if t in tasks}
    by_tier = ", ".join(f"{tier} {sum(1 for v in tier_of.values() if v == tier)}" for tier in TIERS)
    outcomes = _counts([tasks[t].expected_outcome for t in named if t in tasks])
    checks = ", ".join(sorted({f"{a.type} ({a.evidence_source})" for rec in records for a in rec.graded.grade.assertions}))
    kinds = _counts([run_kind(rec) for rec in records])
    judged = [rec for rec in records if state.rubric.get(rec.run_id)]
    judges = sorted({state.rubric[rec.run_id][0].rubric.judge_model for rec in judged})
    used = sorted({surfaces.run_surface(rec.run.run) for rec in records}
                  | {surfaces.import_surface(i.body) for i in state.imports})
    confined = _counts([isolation(rec.run.run) for rec in records])
    catalog = surfaces.catalog()
    rows = [
        ["Scope", (
            f"suite `{suite}`: {len(named)} task(s) ({by_tier}; expected outcomes: {outcomes}) on "
            f"{len(fixtures)} fixture(s); {len(records)} graded record(s) by run kind: {kinds}"
        )],
        ["Deterministic parts", (
            "every verdict, partial credit, pass rate and cost per passing task: kicad-cli reports, the "
            "diff, the transcript and the docs read by the grader, re-graded offline by `replay --verify`. "
            f"Checks graded under this suite (type and evidence): {checks or 'none'}"
        )],
        ["Judged parts", (
            f"{len(judged)} record(s) with a model-judged rubric score, by {', '.join(f'`{j}`' for j in judges)}; "
            "shown only in the model-judged section, read by no metric" if judged else
            "none graded under this suite; a rubric score would be model-judged and read by no metric"
        )],
        ["Surfaces", "; ".join(
            f"`{s}` ({catalog.get(s).ownership}, {catalog.get(s).execution}, redaction `{catalog.get(s).redaction}`)"
            for s in used
        ) or "none"],
        ["Limitations", (
            "what the copperhead harness lets a model do on these tasks, not fabrication readiness, "
            "design quality or general capability (see above); single-repeat rows are listed, never "
            "compared; records of another environment stay in their own comparability group"
        )],
        ["Safety boundary", (
            f"runs confined: {confined}; a credential found in anything bound for `results/` is "
            "redacted and fails the run, and one in imported evidence refuses the import; surfaces "
            f"with credentials in reach: {', '.join(f'`{s}`' for s in used if catalog.get(s).credentials) or 'none'}"
        )],
    ]
    return [f"## {TITLE}", "", "> Generated from the ledger and `cbledger/ledger/surfaces.json`.", "",
            *fmt.table(["", "This suite version"], rows), ""]
