"""Every metric at its edges, on synthetic ledgers built with the real event types."""

from __future__ import annotations

from fractions import Fraction

import pytest

from cbledger.projections import gate, leaderboard
from cbledger.projections.fold import fold, suite_versions
from cbledger.projections.metrics import ALL_TIERS, RowMetrics, suite_metrics, wilson
from tests.factories import Stream, rich_stream


def rows(s: Stream, suite: str = "1.0.0") -> dict[tuple[str, str], RowMetrics]:
    sm = suite_metrics(fold(s.events), suite)
    main = sm.main_group()
    assert main is not None
    return {(r.model, r.tier): r for r in main.rows}


def test_wilson_interval_known_values_and_edges():
    lo, hi = wilson(8, 9)
    assert (round(lo, 4), round(hi, 4)) == (0.5650, 0.9801)
    lo, hi = wilson(0, 7)
    assert lo == 0.0 and round(hi, 4) == 0.3543
    lo, hi = wilson(7, 7)
    assert round(lo, 4) == 0.6457 and hi == 1.0
    assert wilson(0, 0) is None


def test_zero_passes_has_no_cost_per_pass_but_states_the_spend():
    s = Stream()
    for r in (1, 2, 3):
        s.graded_run("t", verdict="fail", repeat=r, usd_micros=10_000, category="stalled")
    row = rows(s)[("vendor:model-a", "simple")]
    assert (row.passes, row.runs, row.rate) == (0, 3, 0)
    assert row.cost_per_pass_micros is None and row.usd_micros_total == 30_000
    assert row.failure_categories == {"stalled": 3}
    text = leaderboard.render(fold(s.events))
    assert "— (no task passed; $0.0300 spent)" in text


def test_cost_per_passing_task_is_all_spend_over_the_tasks_passed_exactly():
    """The standard's definition: USD across all runs / the number of tasks passed. Task t passed
    twice and failed once, task u never passed: three runs of each, one task passed."""
    s = Stream()
    s.graded_run("t", repeat=1, usd_micros=100_001)
    s.graded_run("t", repeat=2, usd_micros=100_001)
    s.graded_run("t", repeat=3, verdict="fail", usd_micros=100_001)
    for r in (1, 2, 3):
        s.graded_run("u", repeat=r, verdict="fail", usd_micros=50_000)
    row = rows(s)[("vendor:model-a", "simple")]
    assert (row.passes, row.tasks, row.tasks_passed) == (2, 2, 1)
    assert row.cost_per_pass_micros == Fraction(450_003, 1)  # not / 2 passing runs
    assert "$0.4500" in leaderboard.render(fold(s.events))
    # the snapshot the gate reads says the same
    snap_row = next(r for r in gate.build_snapshot(fold(s.events)).suites[0].rows if r.tier == "simple")
    assert snap_row.cost_per_passing_task_usd == 0.450003 and snap_row.tasks_passed == 1


def test_all_uncosted_rows_sit_in_their_own_table_with_the_caveat():
    s = Stream()
    for r in (1, 2):
        s.graded_run("t", "claude-code", repeat=r, segment="saved-login", pinning="weak", usd_micros=None)
        s.graded_run("t", "local:llama", repeat=r, segment="open-weight-self-hosted", usd_micros=None)
    got = rows(s)
    assert not got[("claude-code", "simple")].costed and got[("claude-code", "simple")].cost_per_pass_micros is None
    text = leaderboard.render(fold(s.events))
    costed, uncosted = text.split("### Uncosted routes", 1)
    assert "`claude-code`" not in costed.split("### Headline", 1)[1]
    assert "Not costed, by rule" in uncosted and "`claude-code`" in uncosted and "`local:llama`" in uncosted
    assert "weakly pinned" in uncosted


def test_mixed_segments_never_share_a_cost_column_and_an_unpriced_run_voids_the_row_cost():
    s = Stream()
    for r in (1, 2):
        s.graded_run("t", "vendor:model-a", repeat=r, usd_micros=50_000)
        s.graded_run("t", "cheap:model-b", repeat=r, segment="api-cheap", usd_micros=None if r == 2 else 1_000)
        s.graded_run("t", "claude-code", repeat=r, segment="saved-login", usd_micros=None)
    got = rows(s)
    assert got[("vendor:model-a", "simple")].cost_per_pass_micros == 100_000  # two runs, one task
    b = got[("cheap:model-b", "simple")]
    assert b.costed and b.uncosted_runs == 1 and b.cost_per_pass_micros is None
    text = leaderboard.render(fold(s.events))
    assert "n/a: 1 of 2 runs uncosted" in text
    # each costed segment has a USD column of its own; no cell holds another segment's money
    headline = text.split("### Headline", 1)[1].split("\n### ", 1)[0]
    header = next(line for line in headline.splitlines() if line.startswith("| Tier"))
    columns = [c.strip() for c in header.strip("|").split("|")]
    frontier = columns.index("Cost per passing task, api-frontier (USD / tasks passed)")
    cheap = columns.index("Cost per passing task, api-cheap (USD / tasks passed)")
    for line in headline.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) == len(columns) and cells[2] in ("api-frontier", "api-cheap"):
            own, other = (frontier, cheap) if cells[2] == "api-frontier" else (cheap, frontier)
            assert cells[own] and cells[other] == "", line


def test_one_repeat_is_labelled_and_not_ranked():
    s = Stream()
    s.graded_run("a", "vendor:model-a")
    s.graded_run("b", "vendor:model-a")
    row = rows(s)[("vendor:model-a", "simple")]
    assert row.single_repeat and row.repeats_max == 1
    text = leaderboard.render(fold(s.events))
    headline = text.split("### Headline", 1)[1].split("###", 1)[0]
    assert "model-a" not in headline
    assert "Single-repeat results (not a comparison)" in text
    snap = gate.build_snapshot(fold(s.events))
    assert all(r.single_repeat for r in snap.suites[0].rows)


def test_pass_at_1_pass_hat_k_and_spread():
    s = Stream()
    outcomes = {  # task -> verdicts of repeats 1..3
        "a": ["pass", "pass", "pass"],
        "b": ["pass", "fail", "pass"],
        "c": ["fail", "fail", "pass"],
        "d": ["fail", "fail", "fail"],
    }
    for task, verdicts in outcomes.items():
        for r, v in enumerate(verdicts, start=1):
            s.graded_run(task, verdict=v, repeat=r)
    row = rows(s)[("vendor:model-a", "simple")]
    assert [(x.repeat, x.passes, x.runs) for x in row.repeat_rates] == [(1, 2, 4), (2, 1, 4), (3, 3, 4)]
    assert row.pass_at_1 == Fraction(1, 2)
    assert row.pass_hat_k == Fraction(1, 4) and row.repeats_max == 3
    text = leaderboard.render(fold(s.events))
    assert "25.0% (1/4 tasks, k=3)" in text and "25.0%–75.0% across 3 repeat indexes" in text


def test_correct_and_false_refusal_rates():
    s = Stream()
    s.task("refuse-me", outcome="refusal")
    s.task("edit-me", outcome="edit")
    s.task("flag-me", outcome="flag")
    for r in (1, 2):
        s.graded_run("refuse-me", repeat=r, verdict="pass", exit_path="refused")
        # refused but the grade failed (did not cite the budget): still a refusal, as the standard counts it
        s.graded_run("refuse-me", repeat=r, verdict="fail", exit_path="refused", category="wrong-target")
        # did not refuse
        s.graded_run("refuse-me", repeat=r, verdict="fail", exit_path="done", category="wrong-target")
        s.graded_run("edit-me", repeat=r, verdict="fail", exit_path="refused", category="false-refusal")
        s.graded_run("edit-me", repeat=r, verdict="pass")
        s.graded_run("edit-me", repeat=r, verdict="fail", exit_path=None, category="stalled")
        s.graded_run("flag-me", repeat=r, exit_path="refused")  # neither rate counts flag tasks
    row = rows(s)[("vendor:model-a", ALL_TIERS)]
    assert (row.correct_refusals, row.refusal_runs) == (4, 6)
    assert (row.false_refusals, row.edit_runs) == (2, 6)


def test_variant_gap_and_variants_without_originals():
    s = Stream()
    s.task("orig")
    s.task("orig-v", variant_of="orig")
    s.task("lonely-v", variant_of="missing")
    for r in (1, 2):
        s.graded_run("orig", repeat=r)
        s.graded_run("orig-v", repeat=r, verdict="fail" if r == 2 else "pass")
        s.graded_run("lonely-v", repeat=r)
        s.graded_run("orig-v", "cheap:other", repeat=r, segment="api-cheap")  # original never run by it
    g = suite_metrics(fold(s.events), "1.0.0").main_group()
    [gap] = g.variant_gaps
    assert gap.model == "vendor:model-a" and gap.gap == Fraction(1, 2) and gap.pairs == ["orig <- orig-v"]
    assert {(o.model, o.variant) for o in g.orphan_variants} == {
        ("vendor:model-a", "lonely-v"), ("cheap:other", "orig-v"),
    }


def test_harness_runs_never_enter_a_model_row_and_are_checked():
    s = Stream()
    s.task("e", outcome="edit")
    s.task("r", outcome="refusal")
    s.graded_run("e", "harness:gold")
    s.graded_run("e", "harness:noop", verdict="pass")   # does not discriminate
    s.graded_run("r", "harness:gold", verdict="fail", category="wrong-target")
    s.graded_run("r", "harness:noop", verdict="fail", category="wrong-target")
    g = suite_metrics(fold(s.events), "1.0.0").main_group()
    assert g.rows == []
    checks = {h.task_id: h.problems for h in g.harness}
    assert checks["e"] == ["noop passed 1 of 1: the task does not discriminate"]
    assert checks["r"] == ["gold failed 1 of 1: the task may not be solvable as graded"]


def test_gold_runs_that_failed_only_for_want_of_evidence_are_not_called_unsolvable():
    """Gold runs recorded before the suite read an evidence (re-scored under a later version)
    fail the assertion that reads it as `could not be evaluated`: the task is not in question."""
    s = Stream()
    s.task("old", outcome="edit")
    s.task("mixed", outcome="edit")
    lacking = "could not be evaluated: no copperhead check result was captured when this run ended"
    s.task("gone", outcome="edit")
    deleted = "could not be evaluated: docs/BOM.md does not exist in the end state"  # the run's own doing
    for task, details in (("old", [lacking, lacking]), ("mixed", [lacking, "R1 is 1k, not 680"]), ("gone", [deleted])):
        for n, detail in enumerate(details):
            s.grade(s.run(task, "harness:gold", repeat=n + 1), "fail", category="wrong-target", detail=detail)
        s.graded_run(task, "harness:noop", verdict="fail", category="wrong-target")
    checks = {h.task_id: h.problems for h in suite_metrics(fold(s.events), "1.0.0").main_group().harness}
    assert checks["old"] == ["gold failed 2 of 2, each only on assertions that could not be evaluated: those runs "
                             "lack evidence the suite now reads (recorded before it was captured?), which says "
                             "nothing of whether the task is solvable"]
    assert checks["mixed"] == ["gold failed 2 of 2 (1 only on assertions that could not be evaluated): the task "
                               "may not be solvable as graded"]
    assert checks["gone"] == ["gold failed 1 of 1: the task may not be solvable as graded"]


def test_imports_appear_only_in_their_own_section():
    s = Stream()
    s.imported(model="vendor:model-a", verdict="pass")
    s.graded_run("t", verdict="fail", category="stalled")
    s.graded_run("t", verdict="fail", repeat=2, category="stalled")
    state = fold(s.events)
    row = rows(s)[("vendor:model-a", "simple")]
    assert (row.passes, row.runs) == (0, 2)
    text = leaderboard.render(state)
    section = text.split("## Imported / reviewer-supplied evidence — not re-gradable, not project-owned", 1)[1]
    assert "reviewer-supplied" in section and "manual-reviewer-import" in section


def _headline_view(state) -> list:
    """Every figure of every row except the rubric fields."""
    out = []
    for sm in (suite_metrics(state, v) for v in suite_versions(state)):
        for g in sm.groups:
            for r in g.rows:
                d = {f: getattr(r, f) for f in r.__struct_fields__ if not f.startswith("rubric")}
                out.append((sm.suite_version, g.key, d))
    return out


def test_rubric_scores_change_no_headline_figure():
    plain = rich_stream()
    judged = rich_stream()
    for e in list(judged.events):
        body = getattr(e, "body", None)
        if e.__struct_config__.tag == "grade.recorded":
            judged.rubric(body.run_id, 0.123)
    without, with_ = fold(plain.events), fold(judged.events)
    assert _headline_view(without) == _headline_view(with_)
    a, b = gate.build_snapshot(without), gate.build_snapshot(with_)
    assert a.suites == b.suites
    # the leaderboard differs only in the model-judged section (and the snapshot's head lines)
    la = leaderboard.render(without, "1.0.0")
    lb = leaderboard.render(with_, "1.0.0")
    judged = "## Model-judged rubric scores"
    assert la.split(judged)[1] != lb.split(judged)[1]  # the section did move
    head_a, head_b = la.split(judged)[0].splitlines(), lb.split(judged)[0].splitlines()
    assert len(head_a) == len(head_b)
    for x, y in zip(head_a, head_b, strict=True):
        if x != y:
            assert x.startswith(("| Snapshot date", "| Ledger head", "| Signed checkpoint", "| Judged parts")), (x, y)


def test_incomparable_records_are_never_averaged_in():
    s = Stream()
    s.task("t")
    s.suite("1.0.0")
    for r in (1, 2, 3):
        s.graded_run("t", repeat=r)
    for r in (1, 2, 3):
        s.graded_run("t", repeat=r, verdict="fail", kicad="8.0.1", category="stalled")
    sm = suite_metrics(fold(s.events), "1.0.0")
    main = sm.main_group()
    assert {(r.tier, r.passes, r.runs) for r in main.rows} == {("simple", 3, 3), (ALL_TIERS, 3, 3)}
    [other] = [g for g in sm.groups if not g.main]
    assert other.reasons == ["kicad-cli major 8 (main group: 9)"]
    assert {(r.tier, r.passes, r.runs) for r in other.rows} == {("simple", 0, 3), (ALL_TIERS, 0, 3)}


@pytest.mark.parametrize("suite", ["1.0.0", "1.1.0"])
def test_leaderboard_uses_only_grades_made_under_the_suite(suite):
    state = fold(rich_stream().events)
    sm = suite_metrics(state, suite)
    assert sm.records == (2 if suite == "1.1.0" else 82)


def test_replays_count_only_in_their_own_section():
    s = Stream()
    s.graded_run("t", "harness:gold")
    s.graded_run("t", "harness:gold", run_mode="replay")
    s.graded_run("t", "vendor:model-a", run_mode="replay")
    g = suite_metrics(fold(s.events), "1.0.0").main_group()
    assert g.rows == []
    assert [(h.gold_runs, h.noop_runs) for h in g.harness] == [(1, 0)]
    assert [(r.model, r.runs) for r in g.replays] == [("harness:gold", 1), ("vendor:model-a", 1)]


def test_a_single_repeat_rows_cost_of_all_runs_is_never_the_sum_of_its_costed_runs_alone():
    """A row of single runs with one uncosted run once showed the costed runs' sum as "Cost of
    all runs", and the read model's usd_micros_total held it too, against its own description."""
    s = Stream()
    s.graded_run("t", "cheap:model-b", repeat=1, segment="api-cheap", usd_micros=1_000)
    s.graded_run("u", "cheap:model-b", repeat=1, segment="api-cheap", usd_micros=None)
    s.graded_run("t", "vendor:model-a", repeat=1, usd_micros=2_000)
    got = rows(s)
    partial, whole = got[("cheap:model-b", "simple")], got[("vendor:model-a", "simple")]
    assert partial.single_repeat and partial.uncosted_runs == 1 and partial.usd_micros_total is None
    assert whole.usd_micros_total == 2_000
    single = leaderboard.render(fold(s.events)).split("Cost of all runs", 1)[1]
    line = next(row for row in single.splitlines() if "`cheap:model-b`" in row)
    assert "n/a: 1 of 2 runs uncosted" in line and "$0.0010" not in line


def test_runs_a_money_limit_stopped_are_said_beside_the_models_failure_categories():
    """Counted as the model's, as a turn cap's stop is (docs/RUNNER.md), but the leaderboard said
    only `stalled`, so an operator's budget read as the model's failure."""
    from cbledger.ledger.events import CostCapStop

    s = Stream()
    stop = CostCapStop(cap_usd_micros=250_000, spent_usd_micros=300_000, campaign_budget_usd_micros=None)
    for r in (1, 2):
        s.graded_run("t", repeat=r, verdict="fail", category="stalled", cost_cap=stop)
    s.graded_run("t", repeat=3, verdict="fail", category="stalled")
    row = rows(s)[("vendor:model-a", "simple")]
    assert row.limit_stopped == 2 and row.failure_categories == {"stalled": 3}
    failures = leaderboard.render(fold(s.events)).split("Failure categories (diagnostic", 1)[1]
    line = next(x for x in failures.splitlines() if "`vendor:model-a`" in x)
    assert "stalled 3; 2 of the runs stopped by a money limit (--max-cost-usd or --budget-usd)" in line, line


def test_run_json_names_a_money_limits_stop():
    """`run --json` gave only `failureCategory: stalled` for a run a limit stopped."""
    import json
    from types import SimpleNamespace

    import msgspec

    from cbledger.cli.run_commands import _json_answer
    from cbledger.ledger.events import CostCapStop
    from cbledger.runner.suite_run import SuiteResult

    def output(rid: str, stop):
        run = SimpleNamespace(run_id=rid, task=SimpleNamespace(id="t"), repeat=1, harness_failure=None, cost_cap=stop,
                              passes=msgspec.UNSET)
        return SimpleNamespace(run=run, grade=SimpleNamespace(verdict="fail", failure_category="stalled"))

    stop = CostCapStop(cap_usd_micros=None, spent_usd_micros=200_000, campaign_budget_usd_micros=150_000)
    result = SuiteResult(outputs=[output("a", stop), output("b", msgspec.UNSET)])
    runs = json.loads(_json_answer(result, "c", None))["runs"]
    assert runs[0]["costCap"] == {"capUsdMicros": None, "spentUsdMicros": 200_000, "campaignBudgetUsdMicros": 150_000}
    assert runs[1]["costCap"] is None
