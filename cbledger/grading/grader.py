"""Grading: a pure function of (task, fixture baseline, evidence).

`grade()` evaluates every assertion of the task in order, scores the run and classifies a
failure. Replay calls this same function on a restored preserved run, so a recorded grade can be
reproduced exactly; `GRADER_VERSION` changes whenever a check's behaviour changes, and the suite
version must be bumped with it.

Scoring (the standard, section 7): the verdict is `pass` exactly when every required assertion
passes; there is no third state, so an assertion that cannot be evaluated fails with a detail
saying why. Partial credit is the weighted fraction of all assertions that passed, rounded to 4
decimals; it is a diagnostic, never a headline.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import pygit2

from cbledger.grading import findings
from cbledger.grading.context import EVALUATION_ERRORS, GradeContext
from cbledger.grading.evidence.bundle import Evidence, from_repo
from cbledger.grading.registry import all_checks
from cbledger.grading.taxonomy import TaxonomyInput, classify
from cbledger.ledger.events import AssertionOutcome, RunRecorded
from cbledger.ledger.types import FailureCategory
from cbledger.tasks.catalog import Fixture, Task

GRADER_VERSION = "1.3.0"
#: the grader whose taxonomy first asks whether a run edited anything (`TaxonomyInput.edited`)
EDITED_SINCE = (1, 3, 0)
#: copperhead's own records of a run, which every run leaves: not an edit of the project
RUN_RECORDS = ".copperhead/runs/"

Verdict = Literal["pass", "fail"]


@dataclass(frozen=True)
class Grade:
    outcomes: tuple[AssertionOutcome, ...]
    verdict: Verdict
    partial_credit: float
    first_failed_required: str | None
    failure_category: FailureCategory | None
    dominant_tool_error: str | None
    exit_path: str | None


def evaluate(task: Task, ctx: GradeContext) -> list[AssertionOutcome]:
    checks = all_checks()
    outcomes = []
    for spec in task.assertions:
        fn = checks[spec.type]
        try:
            passed, detail = fn(spec.args, ctx)
        except EVALUATION_ERRORS as exc:
            passed, detail = False, f"could not be evaluated: {exc}"
        outcomes.append(
            AssertionOutcome(
                id=spec.id,
                type=spec.type,
                status="pass" if passed else "fail",
                weight=spec.weight,
                required=spec.required,
                evidence_source=spec.evidence_source,
                detail=detail or "(no detail)",
            )
        )
    return outcomes


def score(outcomes: list[AssertionOutcome]) -> tuple[Verdict, float, AssertionOutcome | None]:
    total = sum(o.weight for o in outcomes)
    passed = sum(o.weight for o in outcomes if o.status == "pass")
    partial = round(passed / total, 4) if total else 0.0
    first = next((o for o in outcomes if o.required and o.status == "fail"), None)
    return ("fail" if first else "pass"), partial, first


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in text.split(".") if p.isdigit())


def grade(task: Task, fixture: Fixture, evidence: Evidence, grader_version: str = GRADER_VERSION) -> Grade:
    """`grader_version`: the rules to grade by; a grade recorded by an earlier grader is
    reproduced under its own (`replay --verify` passes the recorded one), a new grade uses today's."""
    ctx = GradeContext(task, fixture, evidence)
    outcomes = findings.outcomes(evidence) + evaluate(task, ctx)
    verdict, partial, first = score(outcomes)
    transcript = evidence.transcript
    category: FailureCategory | None = None
    if verdict == "fail":
        category = classify(
            TaxonomyInput.from_transcript(
                transcript,
                evidence.exit_path,
                first.type if first else None,
                task.manifest.expected_outcome,
                edited=any(not p.startswith(RUN_RECORDS) for p in evidence.diff.paths)
                if _version(grader_version) >= EDITED_SINCE else None,
            )
        )
    return Grade(
        outcomes=tuple(outcomes),
        verdict=verdict,
        partial_credit=partial,
        first_failed_required=first.id if first else None,
        failure_category=category,
        dominant_tool_error=transcript.dominant_tool_error(),
        exit_path=evidence.exit_path,
    )


def grade_preserved(
    task: Task, fixture: Fixture, repo: pygit2.Repository, run: RunRecorded, grader_version: str = GRADER_VERSION,
) -> Grade:
    """Today's grade of a preserved run restored into `repo`, from the commits its `run.recorded`
    names. Re-scoring and `replay --verify` restore a run each in their own way (one stops at the
    first problem, the other records every one); both grade it here, so they cannot drift."""
    ref = run.sandbox
    evidence = from_repo(
        repo,
        baseline_sha=ref.baseline_sha,
        head_sha=ref.head_sha,
        capture_sha=ref.capture_sha,
        evidence_sha=ref.evidence_sha,
        runner_exit=run.runner_exit,
    )
    return grade(task, fixture, evidence, grader_version)
