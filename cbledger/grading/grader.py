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

import json
import posixpath
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
from cbledger.tasks.model import CONFIG_PATH

GRADER_VERSION = "1.5.0"
#: the grader whose taxonomy first asks whether a run edited anything (`TaxonomyInput.edited`)
EDITED_SINCE = (1, 3, 0)
#: copperhead's own records of a run, which every run leaves: not an edit of the project
RUN_RECORDS = ".copperhead/runs/"
#: copperhead's commit step writes these on every run that ends `done`, whatever the model did:
#: the `.history/` line in .gitignore and an entry in the docs' changelog (its "Files:" line
#: reads "(none)" when nothing changed). Since grader 1.4.0 neither is the model's edit: a
#: refusal task answered `done` with nothing changed was a constraint-violation, as if the model
#: had made the change the budget forbids, under the real harness every time.
BOOKKEEPING_SINCE = (1, 4, 0)
#: since grader 1.5.0 a run that ended `done` or `refused` is categorised by the assertion it
#: failed even when its dominant tool error is a reverted edit: one revert it recovered from made
#: a run that finished and then touched a file too many `file-revert`, pointing a model's
#: developer at the wrong fix (`TaxonomyInput.finished_by_assertion`)
FINISHED_BY_ASSERTION_SINCE = (1, 5, 0)

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


def _edited(evidence: Evidence, version: tuple[int, ...]) -> bool | None:
    """Did the run change a file of the project? None under the rules before grader 1.3.0."""
    if version < EDITED_SINCE:
        return None
    bookkeeping: set[str] = set()
    if version >= BOOKKEEPING_SINCE:
        docs = _docs_dir(evidence)
        bookkeeping = {".gitignore", f"{docs}/CHANGELOG.md" if docs else "CHANGELOG.md"}
    return any(not p.startswith(RUN_RECORDS) and p not in bookkeeping for p in evidence.diff.paths)


def _docs_dir(evidence: Evidence) -> str:
    """The docs directory copperhead was given: the seed's config, which the runner wrote (the end
    state's is the run's to change, and would move the changelog this rule leaves out), read as
    copperhead joins it; its default `docs`."""
    text = evidence.baseline.text(CONFIG_PATH)
    try:
        docs = json.loads(text).get("docs") if text else None
    except (ValueError, AttributeError, RecursionError):
        docs = None
    return posixpath.normpath(docs).strip("/") if isinstance(docs, str) and docs.strip() else "docs"


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
                edited=_edited(evidence, _version(grader_version)),
                finished_by_assertion=_version(grader_version) >= FINISHED_BY_ASSERTION_SINCE,
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
