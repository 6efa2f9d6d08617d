"""The work queue ranks failure categories by frequency x mean run cost; uncosted runs are shown,
never priced."""

from __future__ import annotations

from cbledger.projections.fold import fold
from cbledger.projections.workqueue import render_text, work_queue
from tests.factories import Stream


def test_ranking_by_costed_spend_then_frequency_with_uncosted_shown_separately():
    s = Stream()
    # stalled: 3 cheap runs (3 x 0.01 = 0.03 USD)
    for r in (1, 2, 3):
        s.graded_run("a", "vendor:a", "fail", repeat=r, usd_micros=10_000, category="stalled")
    # wrong-target: 1 expensive run (0.50 USD) + 2 uncosted saved-login runs
    s.graded_run("b", "vendor:a", "fail", usd_micros=500_000, category="wrong-target")
    for r in (1, 2):
        s.graded_run("b", "claude-code", "fail", repeat=r, segment="saved-login", usd_micros=None, category="wrong-target")
    # turn-budget: only uncosted, but frequent
    for r in (1, 2, 3, 4):
        s.graded_run("c", "claude-code", "fail", repeat=r, segment="saved-login", usd_micros=None, category="turn-budget")
    # harness failures never count
    s.graded_run("a", "harness:noop", "fail", category="drift-left")
    q = work_queue(fold(s.events), "1.0.0")
    assert [e.category for e in q.entries] == ["wrong-target", "stalled", "turn-budget"]
    wt, st, tb = q.entries
    assert (wt.runs, wt.costed_runs, wt.uncosted_runs, wt.mean_run_usd, wt.score_usd) == (3, 1, 2, 0.5, 0.5)
    assert (st.mean_run_usd, st.score_usd) == (0.01, 0.03)
    assert (tb.costed_runs, tb.score_usd, tb.mean_run_usd) == (0, None, None)
    assert [(o.name, o.runs) for o in wt.models] == [("claude-code", 2), ("vendor:a", 1)]
    assert [(o.name, o.runs) for o in wt.tasks] == [("b", 3)]
    assert q.failed_runs == 10
    text = render_text(q)
    assert text.splitlines()[2].split()[:2] == ["1", "wrong-target"]


def test_empty_queue():
    s = Stream()
    s.graded_run("a")
    q = work_queue(fold(s.events), "1.0.0")
    assert q.entries == [] and q.failed_runs == 0
    assert work_queue(fold(Stream().events), None).entries == []
