"""Runs that measure no model stay out of every model metric, each in a section of its own: the
real harness against a session script (`scripted`), and runs the harness ended before the model
took part (`harnessFailure`)."""

from __future__ import annotations

from cbledger.ledger.events import HarnessFailure
from cbledger.projections import leaderboard, metrics, readmodel, workqueue
from cbledger.projections.fold import fold
from cbledger.projections.records import build_record, record_entries
from tests.factories import Stream


def _stream() -> Stream:
    s = Stream()
    s.task("rename-net", tier="simple")
    s.task("budget-refusal", tier="medium", outcome="refusal")
    s.suite("1.0.0", reason="first suite")
    for repeat in (1, 2):
        s.graded_run("rename-net", "vendor:model-a", "pass", repeat=repeat)
        s.graded_run("budget-refusal", "vendor:model-a", "fail", repeat=repeat, category="constraint-violation")
    # the model never answered: a dirty tree, a missing key
    s.graded_run(
        "rename-net", "vendor:model-a", "fail", repeat=3, category="stalled", usd_micros=None, exit_path="stalled",
        harness_failure=HarnessFailure(kind="preflight", detail="working tree is dirty; copperhead refuses to run"),
    )
    s.graded_run(
        "budget-refusal", "vendor:model-a", "fail", repeat=3, category="stalled", usd_micros=None, exit_path=None,
        harness_failure=HarnessFailure(kind="missing-key", detail="OPENAI_API_KEY is not set"),
    )
    # the real harness against session scripts
    for task, verdict, category in (("rename-net", "pass", None), ("rename-net", "fail", "wrong-target"), ("budget-refusal", "pass", None)):
        s.graded_run(task, "compat:scripted", verdict, run_mode="scripted", segment="harness", usd_micros=None, category=category)
    return s


def test_no_model_metric_counts_them():
    state = fold(_stream().events)
    (group,) = metrics.suite_metrics(state, "1.0.0").groups
    rows = {(r.tier, r.model): r for r in group.rows}
    # only the four real samples of model-a: the two runs that never reached it are not failures of it
    assert rows[("all", "vendor:model-a")].runs == 4 and rows[("all", "vendor:model-a")].passes == 2
    assert {m for _, m in rows} == {"vendor:model-a"}  # compat:scripted has no row
    assert group.harness == []  # scripted runs are not the gold/noop discrimination check either
    assert [(r.task_id, r.passes, r.runs, r.categories) for r in group.scripted] == [
        ("rename-net", 1, 2, {"wrong-target": 1}),
        ("budget-refusal", 1, 1, {}),
    ]
    assert sorted((r.task_id, r.kind) for r in group.not_the_models) == [("budget-refusal", "missing-key"), ("rename-net", "preflight")]
    queue = workqueue.work_queue(state, "1.0.0")
    assert queue.failed_runs == 2 and [e.category for e in queue.entries] == ["constraint-violation"]


def test_the_leaderboard_lists_them_with_the_reason():
    text = leaderboard.render(fold(_stream().events), None)
    assert "### Real harness, scripted model" in text
    assert "| simple | rename-net | edit | `compat:scripted` | `0.9.0 commit unknown` | 1/2 | wrong-target 1 |" in text
    assert "### Runs ended by the harness or its environment" in text
    assert "preflight: working tree is dirty; copperhead refuses to run" in text
    assert "missing-key: OPENAI_API_KEY is not set" in text
    headline = text.split("### Headline")[1].split("###")[0]
    assert "compat:scripted" not in headline


def test_records_and_read_model_label_them():
    state = fold(_stream().events)
    entries = {e.run_id: e for e in record_entries(state, "1.0.0")}
    kinds = {rid: (e.record.run.run_mode, e.record.harness_failure.kind if e.record.harness_failure else None) for rid, e in entries.items()}
    assert list(kinds.values()).count(("scripted", None)) == 3
    assert ("agent", "preflight") in kinds.values() and ("agent", "missing-key") in kinds.values()
    # an ordinary record carries no harnessFailure key at all (the reference layout is kept)
    ordinary = next(e for e in entries.values() if e.record.harness_failure is None and e.record.run.run_mode == "agent")
    assert ordinary.record is not None and build_record(state, ordinary.run, ordinary.graded) == ordinary.record
    from cbledger.projections.records import render

    assert b"harnessFailure" not in render(ordinary.record)
    tables = {t.name: t for t in readmodel.build_tables(state)}
    assert sorted({row["kind"] for row in tables["runs"].rows}) == ["agent", "not-the-model", "scripted"]


def _provider_outage() -> Stream:
    """model-a passes two runs; a third failed on the provider's 500 at its third model call, after
    paying for two turns; a fourth was killed from outside."""
    s = Stream()
    s.task("rename-net", tier="simple")
    s.suite("1.0.0", reason="first suite")
    for repeat in (1, 2):
        s.graded_run("rename-net", "vendor:model-a", "pass", repeat=repeat, usd_micros=10_000)
    s.graded_run(
        "rename-net", "vendor:model-a", "fail", repeat=3, category="stalled", usd_micros=2_203, exit_path="provider-error",
        harness_failure=HarnessFailure(kind="provider-status", detail="provider error: 500 overloaded", turn=3, status=500),
    )
    s.graded_run(
        "rename-net", "vendor:model-a", "fail", repeat=4, category="stalled", usd_micros=None, exit_path=None,
        harness_failure=HarnessFailure(kind="harness-signal", detail="the harness was ended by SIGKILL (exit 137)", turn=2),
    )
    return s


def test_a_provider_outage_enters_no_row_and_gets_a_rate_of_its_own():
    state = fold(_provider_outage().events)
    (group,) = metrics.suite_metrics(state, "1.0.0").groups
    row = next(r for r in group.rows if r.tier == "all")
    # the row is the model's two runs: a pass rate of 2/2 and its cost per passing task from them alone
    assert (row.runs, row.passes, row.usd_micros_total) == (2, 2, 20_000)
    assert row.cost_per_pass_micros == 20_000  # the uncosted killed run does not make it n/a
    (rate,) = group.environment_failures
    assert (rate.model, rate.route, rate.runs, rate.failures) == ("vendor:model-a", "vendor", 4, 2)
    assert rate.kinds == {"harness-signal": 1, "provider-status": 1}
    text = leaderboard.render(state, None)
    section = text.split("### Environment failures by model and route")[1].split("\n### ")[0]
    assert "| `vendor:model-a` | vendor | 50.0% (2/4) | harness-signal 1, provider-status 1 |" in section
    assert "provider-status (model call 3): provider error: 500 overloaded" in text
    from cbledger.projections.site.render import index_page

    page = index_page(state).decode()
    assert "Environment failures by model and route" in page
    assert "<td>vendor:model-a</td><td>vendor</td><td class=\"num\">4</td><td class=\"num\">2</td><td class=\"num\">50.0%</td>" in page


def test_a_group_without_environment_failures_shows_no_rate_table():
    state = fold(_stream().events)
    (group,) = metrics.suite_metrics(state, "1.0.0").groups
    assert len(group.environment_failures) == 2  # preflight and missing-key are the environment's too
    s = Stream()
    s.task("rename-net", tier="simple")
    s.suite("1.0.0", reason="first suite")
    s.graded_run("rename-net", "vendor:model-a", "pass")
    state = fold(s.events)
    assert metrics.suite_metrics(state, "1.0.0").groups[0].environment_failures == []
    assert "Environment failures by model and route" not in leaderboard.render(state, None)


def test_the_site_counts_them_apart_as_the_leaderboard_does():
    """The site's heat map, task and model pages counted a run that never reached the model, and an
    ablated run, in the model's default-condition rate (3/8 beside LEADERBOARD.md's 3/6)."""
    import re

    from cbledger.ledger.events import Ablations
    from cbledger.projections.site import render as site

    s = _stream()
    s.graded_run("rename-net", "vendor:model-a", "fail", repeat=4, ablations=Ablations(max_turns=2))
    s.graded_run("rename-net", "vendor:model-a", "pass", repeat=5, run_mode="replay")  # under the model's id
    s.graded_run("rename-net", "vendor:model-a", "pass", repeat=6, run_mode="scripted", segment="harness")  # a session script's
    state = fold(s.events)
    cells = dict(re.findall(r"<title>([^<]+ × [^<]+): (\d+/\d+)</title>", str(site._heatmap(state, "1.0.0"))))
    assert cells["rename-net × vendor:model-a"] == "2/2" and cells["budget-refusal × vendor:model-a"] == "0/2", cells
    assert cells["rename-net × vendor:model-a (scripted)"] == "1/1", cells
    # a run's mode in the lists and on its page says what keeps it out of the model's rate
    modes = {e.run.run_id: site._run_mode(e) for e in state.runs.values() if e.run.model.id == "vendor:model-a"}
    assert sorted(set(modes.values())) == ["agent", "agent, max-turns=2", "agent; not the model (missing-key)",
                                           "agent; not the model (preflight)", "replay", "scripted"], modes
    # and the read model's segment of the model is its model runs', not a session script's
    tables = {t.name: t for t in readmodel.build_tables(state)}
    (row,) = [r for r in tables["models"].rows if r["model_id"] == "vendor:model-a"]
    assert row["segment"] == "api-frontier", row
    rows = {(task, mode): (t.passes, t.runs) for (task, model, _seg, mode), t in site._tallies(state, "1.0.0").items()
            if model == "vendor:model-a"}
    assert rows == {("rename-net", "agent"): (2, 2), ("budget-refusal", "agent"): (0, 2),
                    ("rename-net", "not the model"): (0, 1), ("budget-refusal", "not the model"): (0, 1),
                    ("rename-net", "agent, max-turns=2"): (0, 1), ("rename-net", "replay"): (1, 1),
                    ("rename-net", "scripted"): (1, 1)}, rows
