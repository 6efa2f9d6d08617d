"""The regression gate: per tier, thresholds with a floor, one flipped repeat never fires."""

from __future__ import annotations

from fractions import Fraction

from cbledger.projections import gate
from cbledger.projections.fold import fold
from tests.factories import Stream

SIMPLE = [f"s{i}" for i in range(7)]
HARD = [f"h{i}" for i in range(7)]


def ledger(fails: dict[str, set[tuple[str, int]]], cost: int = 100_000, suite: str = "1.0.0") -> gate.Snapshot:
    """7 simple and 7 hard tasks x 3 repeats; `fails[model]` names the (task, repeat) that fail."""
    s = Stream()
    for t in SIMPLE:
        s.task(t, tier="simple")
    for t in HARD:
        s.task(t, tier="hard")
    for model, failing in fails.items():
        for t in SIMPLE + HARD:
            for r in (1, 2, 3):
                bad = (t, r) in failing
                s.graded_run(t, model, "fail" if bad else "pass", repeat=r, usd_micros=cost, suite=suite,
                             category="wrong-target")
    return gate.build_snapshot(fold(s.events))


def fired(c: gate.Comparison) -> list[tuple[str, str, str]]:
    return [(f.tier, f.model, f.metric) for f in c.regressions]


def test_one_flipped_repeat_out_of_three_on_a_tier_of_seven_tasks_does_not_fire():
    base = ledger({"vendor:a": set()})
    cur = ledger({"vendor:a": {("s3", 2)}})
    c = gate.compare(base, cur)
    assert c.comparable and fired(c) == []
    rate = next(f for f in c.findings if f.tier == "simple" and f.metric == "strict pass rate")
    assert rate.before == "100.0% (21/21)" and rate.after == "95.2% (20/21)" and rate.delta == "-4.8 pts"
    # nor does the cost rise that one lost pass causes (21/20 - 1 = 5%)
    cost = next(f for f in c.findings if f.tier == "simple" and f.metric == "cost per passing task")
    assert not cost.fired and cost.delta == "+5.0%"


def test_three_flips_on_a_tier_of_twenty_one_runs_are_still_noise():
    base = ledger({"vendor:a": set()})
    cur = ledger({"vendor:a": {("s0", 1), ("s1", 2), ("s2", 3)}})
    assert fired(gate.compare(base, cur)) == []


def test_a_real_drop_fires_and_names_tier_model_before_after_delta_threshold():
    base = ledger({"vendor:a": set()})
    cur = ledger({"vendor:a": {(t, r) for t in SIMPLE[:3] for r in (1, 2, 3)}})  # 21 -> 12 passes
    c = gate.compare(base, cur)
    assert ("simple", "vendor:a", "strict pass rate") in fired(c)
    f = next(f for f in c.regressions if f.metric == "strict pass rate")
    assert (f.before, f.after, f.delta) == ("100.0% (21/21)", "57.1% (12/21)", "-42.9 pts")
    assert f.threshold.startswith("-") and f.threshold.endswith(" pts")
    text = gate.render_comparison(c)
    assert "REGRESSION tier=simple model=vendor:a strict pass rate" in text


def test_per_tier_never_netted_a_lift_elsewhere_does_not_hide_a_drop():
    base = ledger({"vendor:a": {(t, r) for t in HARD for r in (1, 2, 3)}})  # hard: 0/21
    cur = ledger({"vendor:a": {(t, r) for t in SIMPLE[:4] for r in (1, 2, 3)}})  # hard 21/21, simple 9/21
    tiers = {t for t, _, m in fired(gate.compare(base, cur)) if m == "strict pass rate"}
    assert tiers == {"simple"}


def test_cost_per_passing_task_rise_fires_beyond_the_floor_only():
    base = ledger({"vendor:a": set()}, cost=100_000)
    small = ledger({"vendor:a": set()}, cost=120_000)
    large = ledger({"vendor:a": set()}, cost=140_000)
    assert fired(gate.compare(base, small)) == []
    assert ("simple", "vendor:a", "cost per passing task") in fired(gate.compare(base, large))


def test_threshold_parts():
    t = gate.Thresholds()
    # a small tier: one run's worth dominates
    assert gate.rate_threshold(3, 3, 2, 3, t) >= Fraction(1, 3)
    # a large, stable tier: the floor dominates
    assert gate.rate_threshold(200, 200, 199, 200, t) == Fraction(1, 10)
    assert gate.cost_threshold(2, t) == Fraction(1, 2) and gate.cost_threshold(40, t) == Fraction(1, 4)


def test_different_suite_versions_are_not_compared():
    base = ledger({"vendor:a": set()}, suite="1.0.0")
    cur = ledger({"vendor:a": set()}, suite="2.0.0")
    c = gate.compare(base, cur)
    assert not c.comparable and "not comparable" in gate.render_comparison(c)


def test_snapshot_round_trips_and_is_byte_stable():
    snap = ledger({"vendor:a": {("s1", 1)}})
    data = gate.render_snapshot(snap)
    assert gate.parse_snapshot(data, "x") == snap
    assert gate.render_snapshot(gate.parse_snapshot(data, "x")) == data
    row = next(r for r in snap.suites[0].rows if r.tier == "simple")
    assert (row.runs, row.passes, row.cost_per_passing_task_usd) == (21, 20, 0.105)
