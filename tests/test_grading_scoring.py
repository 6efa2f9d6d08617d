"""Scoring, golden: the verdict is pass exactly when every required assertion passes; partial
credit is the weighted fraction passed, rounded to 4 decimals; the first failed required
assertion is the first in assertions.json order, optional failures skipped."""

from __future__ import annotations

import pytest

from cbledger.grading.grader import score
from cbledger.ledger.events import AssertionOutcome
from tests.test_grading_kit import assertion, done, make_box, write_fixture, write_task


def o(ident: str, status: str, weight: float = 1, required: bool = True) -> AssertionOutcome:
    return AssertionOutcome(
        id=ident, type="net_present", status=status, weight=weight, required=required, evidence_source="end-state", detail="d"
    )


@pytest.mark.parametrize(
    ("outcomes", "verdict", "partial", "first"),
    [
        ([o("a", "pass"), o("b", "pass")], "pass", 1.0, None),
        ([o("a", "pass"), o("b", "fail")], "fail", 0.5, "b"),
        ([o("a", "fail", required=False), o("b", "pass")], "pass", 0.5, None),
        ([o("a", "fail", required=False), o("b", "fail"), o("c", "fail")], "fail", 0.0, "b"),
        ([o("a", "pass"), o("b", "fail"), o("c", "fail")], "fail", 0.3333, "b"),
        ([o("a", "pass"), o("b", "pass"), o("c", "fail")], "fail", 0.6667, "c"),
        ([o("a", "pass", 3), o("b", "fail", 1)], "fail", 0.75, "b"),
        ([o("a", "pass", 1), o("b", "fail", 2), o("c", "pass", 4)], "fail", 0.7143, "b"),
        ([o("a", "pass", 0.1), o("b", "pass", 0.2), o("c", "fail", 0.7, required=False)], "pass", 0.3, None),
        ([o("a", "pass", 1), o("b", "fail", 99999)], "fail", 0.0, "b"),  # 1/100000 rounds to 0.0
        ([o("a", "pass", 1), o("b", "fail", 19999)], "fail", 0.0001, "b"),  # 1/20000 is a float just above 0.00005: 0.0001
        ([], "pass", 0.0, None),
    ],
)
def test_score(outcomes, verdict, partial, first):
    got_verdict, got_partial, got_first = score(outcomes)
    assert got_verdict == verdict
    assert got_partial == partial
    assert (got_first.id if got_first else None) == first


def test_partial_credit_is_a_diagnostic_the_verdict_ignores(tmp_path):
    """Nine optional passes cannot carry one failed required assertion."""
    fixture = write_fixture(tmp_path / "project")
    asserts = [assertion(f"opt{i}", "net_present", {"net": "SIG"}, weight=10, required=False) for i in range(9)]
    asserts.append(assertion("req", "net_present", {"net": "SENSE"}, weight=1))
    task = write_task(tmp_path / "project", "score", fixture, asserts)
    box = make_box(tmp_path, task, fixture)
    box.transcript(done())
    g = box.grade()
    assert (g.verdict, g.partial_credit, g.first_failed_required) == ("fail", round(90 / 91, 4), "req")
    assert [x.status for x in g.outcomes] == ["pass"] * 9 + ["fail"]
    assert all(x.evidence_source == "end-state" for x in g.outcomes)


def test_outcomes_keep_the_order_weights_and_flags_of_assertions_json(tmp_path):
    fixture = write_fixture(tmp_path / "project")
    asserts = [
        assertion("z-last-alphabetically", "exit_path_in", {"paths": ["done"]}, weight=2),
        assertion("a-first", "commit_count", {"max": 0}, weight=0.5, required=False),
    ]
    task = write_task(tmp_path / "project", "order", fixture, asserts)
    box = make_box(tmp_path, task, fixture)
    g = box.grade()
    assert [(x.id, x.type, x.weight, x.required, x.evidence_source) for x in g.outcomes] == [
        ("z-last-alphabetically", "exit_path_in", 2, True, "transcript"),
        ("a-first", "commit_count", 0.5, False, "diff"),
    ]
    assert (g.verdict, g.partial_credit) == ("fail", 0.2)
