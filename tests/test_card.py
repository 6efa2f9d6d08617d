"""The benchmark card is generated from the ledger and the surfaces catalog: each row follows the
data it states."""

from __future__ import annotations

from cbledger.projections import card, leaderboard
from cbledger.projections.fold import fold
from cbledger.projections.records import record_entries
from tests.factories import Stream, rich_stream


def _card(stream, suite: str) -> dict[str, str]:
    state = fold(stream.events)
    lines = card.render(state, suite, record_entries(state, suite, build=False))
    rows = [line.split(" | ") for line in lines if line.startswith("| ") and not line.startswith(("|  |", "| ---"))]
    return {r[0].lstrip("| "): r[1].rstrip(" |") for r in rows}


def test_the_card_states_scope_surfaces_and_judged_parts_from_the_data():
    s = rich_stream()
    before = _card(s, "1.0.0")
    assert "suite `1.0.0`" in before["Scope"] and "graded record(s) by run kind" in before["Scope"]
    assert "`copperhead-api-provider`" in before["Surfaces"] and "`copperhead-saved-login`" in before["Surfaces"]
    assert "`scripted-harness-agents`" in before["Surfaces"]
    assert "`judge:model`" in before["Judged parts"]  # the stream's rubric scores
    graded = {e.body.run_id for e in s.events if e.__struct_config__.tag == "grade.recorded"}
    for run_id in sorted(graded)[:3]:
        s.rubric(run_id, 0.4)
    after = _card(s, "1.0.0")
    assert after["Judged parts"] != before["Judged parts"]
    assert after["Scope"] == before["Scope"] and after["Deterministic parts"] == before["Deterministic parts"]


def test_the_card_sits_in_leaderboard_before_the_tables():
    text = leaderboard.render(fold(rich_stream().events))
    assert text.index(f"## {card.TITLE}") < text.index("## Main comparability group")


def test_the_scope_says_whose_tiers_it_counts_when_some_tasks_have_no_record():
    """Tier and outcome come from records: a suite of three tasks with two run must not read as
    three tasks whose tiers add up to two."""
    s = Stream()
    s.task("rename-net", tier="simple")
    s.task("budget-refusal", tier="medium", outcome="refusal")
    s.task("route-power", tier="hard")
    s.suite("1.0.0", reason="first suite")
    s.graded_run("rename-net", "harness:gold", "pass")
    s.graded_run("budget-refusal", "harness:gold", "pass")
    scope = _card(s, "1.0.0")["Scope"]
    assert scope.startswith("suite `1.0.0`: 3 task(s) (2 with a graded record: simple 1, medium 1, hard 0; "
                            "expected outcomes: edit 1, refusal 1) on "), scope
    s.graded_run("route-power", "harness:gold", "pass")
    assert "3 task(s) (simple 1, medium 1, hard 1; " in _card(s, "1.0.0")["Scope"]
