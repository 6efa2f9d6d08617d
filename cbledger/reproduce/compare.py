"""Does today's grade of a preserved run say exactly what the recorded grade said?

Everything a grade claims is compared, assertion by assertion (status and detail first, because
those are what a reader of a record sees) and then the scoring: verdict, partial credit, the
first failed required assertion, the failure category and the dominant tool error. Only the
labels that say *who* graded (suite and grader version) are not compared: re-grading under
today's grader is the point.
"""

from __future__ import annotations

from cbledger.grading.grader import Grade
from cbledger.ledger.events import GradeRecorded
from cbledger.reproduce.findings import Finding

ASSERTION_FIELDS = ("status", "detail", "type", "weight", "required", "evidence_source")
SCORE_FIELDS = (
    ("verdict", "verdict"),
    ("partial_credit", "partialCredit"),
    ("first_failed_required", "firstFailedRequired"),
    ("failure_category", "failureCategory"),
    ("dominant_tool_error", "dominantToolError"),
)
_CAMEL = {"evidence_source": "evidenceSource"}


def compare_grade(recorded: GradeRecorded, regraded: Grade, seq: int) -> list[Finding]:
    """Every difference between a recorded grade (at `seq`) and a re-grade, one finding each."""

    def finding(message: str, **extra) -> Finding:
        return Finding(
            check="run", kind="regrade-mismatch", message=message, seq=seq, run_id=recorded.run_id,
            suite_version=recorded.suite_version, **extra,
        )

    out: list[Finding] = []
    before = {a.id: a for a in recorded.assertions}
    after = {o.id: o for o in regraded.outcomes}
    for aid in before.keys() - after.keys():
        out.append(finding("the recorded assertion is not graded today", assertion=aid))
    for aid in after.keys() - before.keys():
        out.append(finding("today's grade has an assertion the recorded grade lacks", assertion=aid))
    order_before = [a.id for a in recorded.assertions if a.id in after]
    order_after = [o.id for o in regraded.outcomes if o.id in before]
    if order_before != order_after:
        out.append(finding("assertions are in a different order", field="assertions", expected=order_before, actual=order_after))
    for a in recorded.assertions:
        o = after.get(a.id)
        if o is None:
            continue
        for name in ASSERTION_FIELDS:
            was, now = getattr(a, name), getattr(o, name)
            if was != now:
                out.append(
                    finding(f"{_CAMEL.get(name, name)}: recorded {was!r}, re-graded {now!r}",
                            assertion=a.id, field=_CAMEL.get(name, name), expected=was, actual=now)
                )
    for attr, label in SCORE_FIELDS:
        was, now = getattr(recorded, attr), getattr(regraded, attr)
        if was != now:
            out.append(finding(f"{label}: recorded {was!r}, re-graded {now!r}", field=label, expected=was, actual=now))
    return out
