"""The regression gate: paired by task, an exact test and a floor, run sets named, never assumed."""

from __future__ import annotations

import datetime as dt
import os
import re
from fractions import Fraction
from pathlib import Path

import pytest

from cbledger.ledger.events import Ablations
from cbledger.projections import gate
from cbledger.projections import selection as sel
from cbledger.projections.fold import fold
from tests.factories import Stream

SIMPLE = [f"s{i}" for i in range(7)]
HARD = [f"h{i}" for i in range(7)]
DOCS = Path(__file__).resolve().parent.parent / "docs" / "PROJECTIONS.md"


def ledger(
    fails: dict[str, set[tuple[str, int]]], cost: int = 100_000, suite: str = "1.0.0", prefix: str = "b",
    tasks: list[str] | None = None,
) -> gate.Snapshot:
    """7 simple and 7 hard tasks x 3 repeats; `fails[model]` names the (task, repeat) that fail.
    Run ids start with `prefix`, so two of these never share a run."""
    s = Stream()
    for t in SIMPLE:
        s.task(t, tier="simple")
    for t in HARD:
        s.task(t, tier="hard")
    n = 0
    for model, failing in fails.items():
        for t in tasks or SIMPLE + HARD:
            for r in (1, 2, 3):
                n += 1
                bad = (t, r) in failing
                s.graded_run(t, model, "fail" if bad else "pass", repeat=r, usd_micros=cost, suite=suite,
                             category="wrong-target", run_id=f"{prefix}{n:05d}")
    return gate.build_snapshot(fold(s.events))


def fired(c: gate.Comparison) -> list[tuple[str, str, str]]:
    return [(f.tier, f.model, f.metric) for f in c.regressions]


def rate(c: gate.Comparison, tier: str = "simple") -> gate.Finding:
    return next(f for f in c.findings if f.tier == tier and f.metric == "strict pass rate")


def test_one_flipped_repeat_out_of_three_on_a_tier_of_seven_tasks_does_not_fire():
    base = ledger({"vendor:a": set()})
    cur = ledger({"vendor:a": {("s3", 2)}}, prefix="c")
    c = gate.compare(base, cur)
    assert c.comparable and fired(c) == []
    f = rate(c)
    assert f.before == "100.0% (21/21)" and f.after == "95.2% (20/21)" and f.delta == "-4.8 pts"
    assert f.paired_tasks == 7 and f.p_value == 0.5
    # nor does the cost rise that one lost pass causes: every task still passed, so none at all
    cost = next(f for f in c.findings if f.tier == "simple" and f.metric == "cost per passing task")
    assert not cost.fired and cost.delta == "+0.0%"


def test_three_flips_spread_over_a_tier_of_twenty_one_runs_are_still_noise():
    base = ledger({"vendor:a": set()})
    cur = ledger({"vendor:a": {("s0", 1), ("s1", 2), ("s2", 3)}}, prefix="c")
    c = gate.compare(base, cur)
    assert fired(c) == [] and rate(c).p_value == 0.125  # (1/2)^3: each task 3/3 -> 2/3


def test_a_real_drop_fires_and_names_tier_model_before_after_delta_threshold_and_p():
    base = ledger({"vendor:a": set()})
    cur = ledger({"vendor:a": {(t, r) for t in SIMPLE[:3] for r in (1, 2, 3)}}, prefix="c")  # 21 -> 12 passes
    c = gate.compare(base, cur)
    assert ("simple", "vendor:a", "strict pass rate") in fired(c)
    f = next(f for f in c.regressions if f.metric == "strict pass rate")
    assert (f.before, f.after, f.delta) == ("100.0% (21/21)", "57.1% (12/21)", "-42.9 pts")
    assert f.threshold == "drop > 10.0 pts and p <= 0.1" and f.p_value == float(Fraction(1, 20) ** 3)
    text = gate.render_comparison(c)
    assert "REGRESSION tier=simple model=vendor:a strict pass rate" in text and "7 task(s) paired" in text


@pytest.mark.parametrize(
    "failing",
    [{("t1", 1), ("t1", 2), ("t1", 3)}, {("t0", 1), ("t1", 1), ("t1", 2)}],
    ids=["one-task-lost-whole", "spread-over-both"],
)
def test_six_of_six_to_three_of_six_at_three_repeats_fires(failing):
    """The case the old z-score gate let through: two tasks, three repeats, half the passes gone."""
    tasks = ["t0", "t1"]
    base = ledger({"vendor:a": set()}, tasks=tasks)
    cur = ledger({"vendor:a": failing}, tasks=tasks, prefix="c")
    c = gate.compare(base, cur)
    f = rate(c)
    assert (f.before, f.after) == ("100.0% (6/6)", "50.0% (3/6)")
    assert f.fired and f.p_value <= 0.1


def test_three_of_six_to_none_fires_and_one_flipped_repeat_of_six_does_not():
    tasks = ["t0", "t1"]
    base = ledger({"vendor:a": {("t1", 1), ("t1", 2), ("t1", 3)}}, tasks=tasks)  # 3/6
    gone = ledger({"vendor:a": {(t, r) for t in tasks for r in (1, 2, 3)}}, tasks=tasks, prefix="c")  # 0/6
    assert rate(gate.compare(base, gone)).fired
    full = ledger({"vendor:a": set()}, tasks=tasks)
    flip = ledger({"vendor:a": {("t0", 2)}}, tasks=tasks, prefix="c")
    f = rate(gate.compare(full, flip))
    assert not f.fired and f.delta == "-16.7 pts"  # one run's worth (1/6) never fires


def test_six_crashed_new_runs_cannot_hide_behind_the_old_ones():
    """Baseline 3/6; six new runs all crash (no run-end). Named by batch, the candidate is 0/6 and
    fires; the old gate pooled it with the ledger (3/12) and reported no regression."""
    s = Stream()
    for t in ("t0", "t1"):
        s.task(t, tier="simple")
    day = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)
    for t, passed in (("t0", True), ("t1", False)):
        for r in (1, 2, 3):
            s.graded_run(t, "vendor:a", "pass" if passed else "fail", repeat=r, batch="old", started=day)
    for t in ("t0", "t1"):
        for r in (1, 2, 3):
            s.graded_run(t, "vendor:a", "fail", repeat=r, batch="new", exit_path=None, usd_micros=None,
                         category="stalled", started=day + dt.timedelta(days=1))
    state = fold(s.events)
    base = gate.build_snapshot(state, sel.parse("batch=old"))
    new = gate.build_snapshot(state, sel.parse("batch=new"))
    c = gate.compare(base, new)
    assert c.comparable and rate(c).after == "0.0% (0/6)" and rate(c).fired
    # the same candidate named by date
    assert rate(gate.compare(base, gate.build_snapshot(state, sel.parse("since=2026-12-02")))).fired
    # the whole ledger as the candidate is the baseline again: refused, never a silent 3/12
    everything = gate.build_snapshot(state, sel.parse("all"))
    refused = gate.compare(base, everything)
    assert not refused.comparable and "share 6 run(s)" in refused.reason
    assert not gate.compare(base, gate.build_snapshot(state, sel.parse("batch=none-such"))).comparable


def test_paired_by_task_a_candidate_on_other_tasks_proves_nothing_either_way():
    base = ledger({"vendor:a": {("s0", r) for r in (1, 2, 3)}})  # s0 failed before, the others passed
    only_s0 = ledger({"vendor:a": set()}, tasks=["s0"], prefix="c")  # s0 passes now, nothing else ran
    f = rate(gate.compare(base, only_s0))
    assert f.paired_tasks == 1 and f.before == "0.0% (0/3)" and f.after == "100.0% (3/3)"
    assert "left out: s1, s2, s3, s4, s5, s6" in f.note
    # ... and a candidate that ran only the tasks it keeps passing does not mask a drop on s1
    dropped = ledger({"vendor:a": {("s1", r) for r in (1, 2, 3)}}, tasks=["s1", "s2"], prefix="d")
    g = rate(gate.compare(ledger({"vendor:a": set()}), dropped))
    assert g.paired_tasks == 2 and g.after == "50.0% (3/6)" and g.fired


def test_per_tier_never_netted_a_lift_elsewhere_does_not_hide_a_drop():
    base = ledger({"vendor:a": {(t, r) for t in HARD for r in (1, 2, 3)}})  # hard: 0/21
    cur = ledger({"vendor:a": {(t, r) for t in SIMPLE[:4] for r in (1, 2, 3)}}, prefix="c")  # hard 21/21, simple 9/21
    tiers = {t for t, _, m in fired(gate.compare(base, cur)) if m == "strict pass rate"}
    assert tiers == {"simple"}


def test_cost_per_passing_task_rise_fires_beyond_the_floor_and_the_test_only():
    base = ledger({"vendor:a": set()}, cost=100_000)
    small = ledger({"vendor:a": set()}, cost=120_000, prefix="c")
    large = ledger({"vendor:a": set()}, cost=140_000, prefix="d")
    within = next(f for f in gate.compare(base, small).findings if f.metric == "cost per passing task")
    assert not within.fired and within.p_value is None and "within the floor" in within.note
    c = gate.compare(base, large)
    assert ("simple", "vendor:a", "cost per passing task") in fired(c)
    f = next(f for f in c.regressions if f.metric == "cost per passing task")
    assert f.delta == "+40.0%" and f.p_value == pytest.approx(1 / 4001)  # no relabelling beats it


def test_limits():
    t = gate.Thresholds()
    assert gate.rate_limit(3, 3, t) == Fraction(1, 3)  # a small tier: one run's worth dominates
    assert gate.rate_limit(200, 199, t) == Fraction(1, 10)  # a large one: the floor
    assert gate.cost_limit(2, t) == Fraction(1, 2) and gate.cost_limit(40, t) == Fraction(1, 4)


def test_different_suite_versions_are_not_compared():
    base = ledger({"vendor:a": set()}, suite="1.0.0")
    cur = ledger({"vendor:a": set()}, suite="2.0.0", prefix="c")
    c = gate.compare(base, cur)
    assert not c.comparable and "not comparable" in gate.render_comparison(c)


def test_snapshots_naming_no_suite_say_so_not_suite_none():
    empty = gate.build_snapshot(fold(Stream().events))
    c = gate.compare(empty, empty)
    assert not c.comparable and "None" not in c.reason and "neither snapshot names a suite version" in c.reason, c.reason


def test_snapshot_round_trips_and_is_byte_stable():
    snap = ledger({"vendor:a": {("s1", 1)}})
    data = gate.render_snapshot(snap)
    assert gate.parse_snapshot(data, "x") == snap
    assert gate.render_snapshot(gate.parse_snapshot(data, "x")) == data
    row = next(r for r in snap.suites[0].rows if r.tier == "simple")
    # 21 runs at $0.10 over the 7 tasks passed (s1 still passed twice): $0.30 a passing task
    assert (row.runs, row.passes, row.tasks_passed, row.cost_per_passing_task_usd) == (21, 20, 7, 0.3)


def test_ablated_runs_never_enter_the_default_comparison():
    s = Stream()
    for t in ("t0", "t1"):
        s.task(t, tier="simple")
    for t in ("t0", "t1"):
        for r in (1, 2, 3):
            s.graded_run(t, "vendor:a", "pass", repeat=r, batch="old")
            s.graded_run(t, "vendor:a", "pass", repeat=r, batch="new")
            s.graded_run(t, "vendor:a", "fail", repeat=r, batch="new", category="turn-budget",
                         ablations=Ablations(max_turns=2, tool_subset=["read_file", "finish"]))
    state = fold(s.events)
    base = gate.build_snapshot(state, sel.parse("batch=old"))
    new = gate.build_snapshot(state, sel.parse("batch=new"))
    c = gate.compare(base, new)
    assert fired(c) == [] and rate(c).after == "100.0% (6/6)"
    ablated = gate.compare(base, new, condition="max-turns=2; tool-subset=finish,read_file")
    assert not ablated.comparable and "baseline holds no run under condition" in ablated.reason


# --------------------------------------------------------------------------- the firing table


def test_the_firing_table_in_the_docs_is_the_one_the_code_generates():
    begin, end = "<!-- BEGIN GENERATED: gate.firing_table() -->\n", "<!-- END GENERATED: gate.firing_table() -->"
    text = DOCS.read_text(encoding="utf-8")
    table = gate.firing_table()
    if os.environ.get("CBLEDGER_UPDATE_GOLDEN") == "1":
        text = re.sub(re.escape(begin) + ".*?" + re.escape(end), lambda _: begin + "\n" + table + "\n" + end, text, flags=re.S)
        DOCS.write_text(text, encoding="utf-8")
    assert begin + "\n" + table + "\n" + end in text, "docs/PROJECTIONS.md: regenerate the firing table (CBLEDGER_UPDATE_GOLDEN=1)"


def test_the_firing_table_says_what_the_gate_does():
    table = gate.firing_table()
    rows = {line.split(" | ")[0].strip("| "): line.split(" | ")[1:] for line in table.splitlines()[2:]}
    two_tasks = rows["2 (6)"]
    assert two_tasks[0].startswith("no: floor") and two_tasks[2].startswith("**fires**")  # 6/6 -> 3/6
    assert all(cell.startswith("no: floor") for cell in rows["20 (60)"][:6])  # floor: up to 10 points
    for tasks, cells in rows.items():
        assert cells[0].startswith("no"), tasks  # one flipped repeat never fires


def test_the_sites_regressions_page_compares_the_versions_of_the_main_group_in_version_order():
    """A version whose runs were all made under another kicad-cli (another comparability group)
    split the pair around it into two "not comparable" ones and hid a regression; `0.9.1-rc.1`
    was ordered after `0.9.1`; and `0.9.1-1` beside `0.9.1-dev` raised."""
    from cbledger.projections.site.render import _regressions, version_order

    s = Stream()
    for t in SIMPLE:
        s.task(t, tier="simple")
    n = 0
    for version, kicad, failing in (("0.9.4", "9.0.8", set()), ("0.9.5", "8.0.4", set()),
                                    ("0.9.6", "9.0.8", set(SIMPLE[:4]))):
        for t in SIMPLE:
            for r in (1, 2, 3):
                n += 1
                s.graded_run(t, "vendor:a", "fail" if t in failing else "pass", repeat=r, copperhead_version=version,
                             kicad=kicad, category="wrong-target", run_id=f"r{n:05d}")
    reg = _regressions(fold(s.events))
    assert reg["versions"] == ["0.9.4", "0.9.6"]
    (pair,) = reg["comparisons"]
    assert (pair["before"], pair["after"], pair["exit"]) == ("0.9.4", "0.9.6", 1)
    from cbledger.projections.site.render import regressions_page
    page = regressions_page(fold(s.events)).decode()
    assert "Runs before: 21 under copperhead 0.9.4 commit unknown; kicad-cli 9.0.8" in page, page
    assert fired(pair["c"]) == [("simple", "vendor:a", "strict pass rate"), ("simple", "vendor:a", "cost per passing task")]
    assert sorted(["0.9.1", "0.9.1-rc.1", "0.9.1-dev", "0.9.1-1", "0.10.0"], key=version_order) == [
        "0.9.1-1", "0.9.1-dev", "0.9.1-rc.1", "0.9.1", "0.10.0"]


def test_a_row_the_rule_cannot_decide_is_counted_apart_and_never_reads_as_a_pass():
    """12/12 before and 0/4 after on a single repeat printed `0 regression(s)` and `note`, exit 0:
    a CI job read a 100% -> 0% drop as a pass."""
    base = ledger({"vendor:a": set()})
    s = Stream()
    for t in SIMPLE:
        s.task(t, tier="simple")
    for n, t in enumerate(SIMPLE):
        s.graded_run(t, "vendor:a", "fail", repeat=1, usd_micros=100_000, category="wrong-target", run_id=f"c{n:05d}")
    c = gate.compare(base, gate.build_snapshot(fold(s.events)))
    # the hard tier is only in the baseline: the candidate lost it, which is no pass either
    assert c.comparable and c.regressions == [] and [(f.tier, f.metric) for f in c.not_gated] == [
        ("simple", "row"), ("hard", "row")]
    text = gate.render_comparison(c)
    head, *lines = text.splitlines()
    assert head.endswith(": 0 regression(s), 2 finding(s) not gated (no verdict, so no pass)")
    findings = [line for line in lines if not line.startswith(("baseline:", "candidate:", "  "))]
    assert [line.split()[0:2] for line in findings] == [["not", "gated"]] * 2
    assert "before 21/21, after 0/7" in findings[0] and "single repeat: not a result, not gated" in findings[0]
    assert "tier=hard" in findings[1] and "(only in the baseline: not compared, no pass)" in findings[1]
    # a row only the candidate has (a model added) is a note, and decides nothing either way
    added = gate.compare(gate.build_snapshot(fold(s.events)), base)
    assert [f.note for f in added.findings if f.gated and f.metric == "row"] == ["only in the candidate"]


def test_a_verdict_names_the_builds_and_environments_it_compared_and_a_side_that_pools_builds():
    """With batch selections the verdict named no copperhead build, Node or OS, and a candidate
    pooling two builds read as one."""
    s = Stream()
    for t in SIMPLE:
        s.task(t, tier="simple")
    n = 0
    for version, batch in (("0.9.0", "b"), ("0.9.2", "c"), ("0.9.8", "c")):
        for t in SIMPLE:
            for r in (1, 2, 3):
                n += 1
                s.graded_run(t, "vendor:a", "pass", repeat=r, copperhead_version=version, category="wrong-target",
                             run_id=f"{batch}{n:05d}")
    state = fold(s.events)
    c = gate.compare(gate.build_snapshot(state, sel.parse(["copperhead=0.9.0"])),
                     gate.build_snapshot(state, sel.parse(["copperhead=0.9.2,0.9.8"])))
    assert c.comparable and len(c.baseline_environments) == 1 and sum(c.candidate_environments.values()) == 42
    text = gate.render_comparison(c)
    (base_env,) = [line for line in text.splitlines() if line.startswith("  21 run(s): copperhead 0.9.0 ")]
    assert "kicad-cli 9.0.8" in base_env and "node " in base_env
    assert ("  note: the candidate pools 2 copperhead builds (0.9.2 commit unknown, 0.9.8 commit unknown); select one "
            "per side (copperhead=V, commit=C) to compare builds") in text
    assert "note: the baseline pools" not in text
    # an ablation's runs are another condition's: a default verdict names none of their builds
    s.graded_run(SIMPLE[0], "vendor:a", "pass", copperhead_version="0.9.9", ablations=Ablations(max_turns=2), run_id="x00001")
    everything = gate.build_snapshot(fold(s.events)).suites[0].environments
    assert sorted(everything) == ["default", "max-turns=2"] and all("0.9.9" not in env for env in everything["default"])


def test_a_side_that_selects_only_runs_no_row_counts_says_what_it_selected():
    """A batch of scripted runs (the documented check of a new build) was refused as holding 'no
    agent run', as a mistyped batch id is; a kicad-cli 8 candidate without saying it is in
    another comparability group."""
    s = Stream()
    for t in SIMPLE:
        s.task(t, tier="simple")
    n = 0
    for batch, model, mode, kicad in (("base", "vendor:a", None, "9.0.8"), ("script", "compat:scripted-solve", "scripted", "9.0.8"),
                                      ("old", "vendor:a", None, "8.0.4")):
        for t in SIMPLE:
            for r in (1, 2, 3):
                n += 1
                s.graded_run(t, model, "pass", repeat=r, run_mode=mode, kicad=kicad, batch=batch,
                             category="wrong-target", run_id=f"r{n:05d}")
    state = fold(s.events)
    base = gate.build_snapshot(state, sel.parse(["batch=base"]))
    scripted = gate.build_snapshot(state, sel.parse(["batch=script"]))
    assert scripted.suites[0].selected_runs == 0 and scripted.suites[0].left_out == {"scripted": 21}
    c = gate.compare(base, scripted)
    assert not c.comparable and c.reason.startswith(
        "the candidate (batch=script) holds no agent run of the main group of suite 1.0.0; it selects 21 run(s) no "
        "row counts: 21 scripted (the gate compares the model runs of the main group")
    old = gate.compare(base, gate.build_snapshot(state, sel.parse(["batch=old"])))
    assert "it selects 21 run(s) no row counts: 21 another comparability group (kicad-cli major 8" in old.reason, old.reason
