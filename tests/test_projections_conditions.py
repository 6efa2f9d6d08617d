"""Ablation conditions: part of every row key, never pooled into the default condition's numbers."""

from __future__ import annotations

from fractions import Fraction

from cbledger.ledger.events import Ablations
from cbledger.projections import leaderboard, records, workqueue
from cbledger.projections.conditions import DEFAULT, condition_key
from cbledger.projections.fold import fold
from cbledger.projections.metrics import suite_metrics
from tests.factories import Stream

TWO_TURNS = Ablations(max_turns=2, tool_subset=["read_file", "finish"])


def test_the_key_is_canonical_and_the_default_has_no_flag():
    assert condition_key(Ablations()) == DEFAULT
    assert condition_key(TWO_TURNS) == "max-turns=2; tool-subset=finish,read_file"
    assert condition_key(Ablations(tool_subset=["finish", "read_file", "finish"], max_turns=2)) == condition_key(TWO_TURNS)
    assert condition_key(Ablations(prompt_variant="terse", max_repair_cycles=0)) == "prompt-variant=terse; max-repair-cycles=0"


def _stream() -> tuple[Stream, list[str]]:
    """A model at 3/6 on two simple tasks, then a batch of nine runs with two turns and two tools,
    three of them passing, on those tasks and a third."""
    s = Stream()
    for t in ("t0", "t1", "t2"):
        s.task(t, tier="simple")
    for r in (1, 2, 3):
        s.graded_run("t0", "vendor:a", "pass", repeat=r)
        s.graded_run("t1", "vendor:a", "fail", repeat=r, category="wrong-target")
    ablated = []
    for t in ("t0", "t1", "t2"):
        for r in (1, 2, 3):
            ok = t == "t2"
            ablated.append(s.graded_run(t, "vendor:a", "pass" if ok else "fail", repeat=r, ablations=TWO_TURNS,
                                        category="turn-budget", usd_micros=5_000))
    return s, ablated


def test_an_ablation_batch_never_moves_the_headline_row():
    """The defect: nine ablated runs moved a simple-tier row from 3/6 to 6/15."""
    s, _ = _stream()
    state = fold(s.events)
    main = suite_metrics(state, "1.0.0").main_group()
    assert main is not None
    [headline] = [r for r in main.default_rows() if r.tier == "simple"]
    assert (headline.passes, headline.runs, headline.condition) == (3, 6, DEFAULT)
    assert headline.cost_per_pass_micros == Fraction(600_000, 1)  # six runs at $0.10 over one task passed
    text = leaderboard.render(state)
    head = text.split("### Headline", 1)[1].split("\n### ", 1)[0]
    assert "50.0% (3/6;" in head and "(6/15" not in text


def test_the_read_models_rates_keep_an_ablation_apart(tmp_path):
    """The canned pass-rate query and `models.current_suite_runs` pooled the ablated runs with
    the default ones (6/15 beside LEADERBOARD.md's 3/6)."""
    import json
    import sqlite3

    from cbledger.projections import readmodel

    s, _ = _stream()
    state = fold(s.events)
    db = readmodel.write(readmodel.build_tables(state), tmp_path / "cbledger.db")
    sql = json.loads(readmodel.metadata())["databases"]["cbledger"]["queries"]["pass_rate_by_model_and_tier"]["sql"]
    conn = sqlite3.connect(db)
    conn.row_factory = sqlite3.Row
    try:
        rates = {(r["condition"], r["tier"]): (r["passes"], r["runs"]) for r in conn.execute(sql) if r["model_id"] == "vendor:a"}
        assert rates == {(DEFAULT, "simple"): (3, 6), (condition_key(TWO_TURNS), "simple"): (3, 9)}, rates
        (model,) = conn.execute("select current_suite_runs, current_suite_passes from models where model_id = 'vendor:a'")
        assert tuple(model) == (6, 3)
    finally:
        conn.close()


def test_each_condition_is_set_against_the_default_on_the_same_tasks():
    s, _ = _stream()
    main = suite_metrics(fold(s.events), "1.0.0").main_group()
    assert main is not None
    [row] = [a for a in main.ablations if a.tier == "simple"]
    assert row.condition == condition_key(TWO_TURNS)
    # t2 ran only under the condition: named, never compared; its three passes are not counted
    assert (row.paired_tasks, row.unpaired_tasks) == (2, ["t2"])
    assert (row.passes, row.runs, row.default_passes, row.default_runs) == (0, 6, 3, 6)
    assert row.difference == Fraction(-1, 2)
    assert row.cost_per_pass_micros is None and row.default_cost_per_pass_micros == 600_000
    text = leaderboard.render(fold(s.events))
    section = text.split("### Ablation conditions", 1)[1].split("\n### ", 1)[0]
    assert "Condition `max-turns=2; tool-subset=finish,read_file`:" in section
    assert "| simple | `vendor:a` | api-frontier | 2 | 0.0% (0/6) | 50.0% (3/6) | -50.0 pts |" in section
    assert section.rstrip().endswith("| t2 |")


def test_records_carry_the_condition_and_the_work_queue_keeps_it_apart():
    s, ablated = _stream()
    state = fold(s.events)
    by_run = {e.run_id: e for e in records.record_entries(state)}
    assert by_run[ablated[0]].record is not None
    assert by_run[ablated[0]].built.run.ablations == records.RecordAblations(max_turns=2, tool_subset=["read_file", "finish"])
    assert by_run[ablated[0]].condition == condition_key(TWO_TURNS)
    queue = workqueue.work_queue(state, "1.0.0")
    assert queue.failed_runs == 3 and [e.category for e in queue.entries] == ["wrong-target"]
    assert queue.other_conditions == {condition_key(TWO_TURNS): 6}
    assert "(--condition 'max-turns=2; tool-subset=finish,read_file')" in workqueue.render_text(queue)
    other = workqueue.work_queue(state, "1.0.0", condition_key(TWO_TURNS))
    assert [e.category for e in other.entries] == ["turn-budget"] and other.other_conditions == {DEFAULT: 3}


def test_harness_and_scripted_runs_under_a_flag_are_listed_apart():
    s = Stream()
    s.graded_run("t", "harness:gold", "pass")
    s.graded_run("t", "harness:noop", "fail", category="wrong-target")
    s.graded_run("t", "harness:noop", "pass", ablations=Ablations(max_turns=2))
    s.graded_run("t", "compat:scripted-loop", "fail", run_mode="scripted", segment="harness", category="turn-budget")
    s.graded_run("t", "compat:scripted-loop", "fail", run_mode="scripted", segment="harness", category="turn-budget",
                 ablations=Ablations(max_turns=3))
    main = suite_metrics(fold(s.events), "1.0.0").main_group()
    assert main is not None
    checks = {(h.task_id, h.condition): (h.noop_passes, h.noop_runs) for h in main.harness}
    assert checks == {("t", DEFAULT): (0, 1), ("t", "max-turns=2"): (1, 1)}  # the default check is not spoiled
    assert [(r.condition, r.runs) for r in main.scripted] == [(DEFAULT, 1), ("max-turns=3", 1)]
    text = leaderboard.render(fold(s.events))
    assert "| simple | t under `max-turns=2` | edit |" in text
    assert "`compat:scripted-loop` under `max-turns=3`" in text
