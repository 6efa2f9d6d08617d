"""The fence around the rubric tier: model-judged scores, their judge lane and reviews move no
deterministic number.

The committed ledger is copied, a `rubric.scored` (criteria, judge lane tokens and a cost) and a
`review.recorded` are appended for every live run through the store, and the two ledgers'
projections are compared: every table from the main comparability group down to the
model-judged section, the result records (verdicts, partial credit), the gate's snapshot and a
comparison of it, and every metric row but the rubric fields must be byte-identical; the
model-judged and lanes sections must differ (or the test proves nothing).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import msgspec

from cbledger.ledger.events import (
    Actor,
    Cost,
    CriterionScore,
    LaneUsage,
    ReviewRecorded,
    RubricScored,
    make_event,
)
from cbledger.ledger.store import LedgerStore
from cbledger.projections import gate, lanes_part, leaderboard, records
from cbledger.projections.fold import LedgerState, fold
from cbledger.projections.selection import parse
from tests.factories import all_suite_metrics, rich_stream

REPO = Path(__file__).resolve().parent.parent
COMMITTED = REPO / "results" / "ledger" / "events.jsonl"
JUDGE = Actor(kind="reviewer", name="fence")


def _fenced(text: str) -> str:
    """The deterministic part of the page: from the main group to the model-judged section."""
    start = text.index("## Main comparability group")
    end = text.index(f"## {lanes_part.JUDGED_TITLE}")
    return text[start:end]


def _judged(text: str) -> str:
    return text[text.index(f"## {lanes_part.JUDGED_TITLE}"):text.index("## Suite versions in the ledger")]


def _metric_rows(state: LedgerState) -> bytes:
    out = []
    for sm in all_suite_metrics(state):
        for g in sm.groups:
            for r in g.rows:
                fields = {f: getattr(r, f) for f in r.__struct_fields__ if not f.startswith("rubric")}
                fields["cost_per_pass"] = str(r.cost_per_pass_micros)
                out.append((sm.suite_version, g.key, fields))
            out.append((sm.suite_version, g.key, msgspec.to_builtins(g.ablations)))
    return msgspec.json.encode(out)


def _judge_events(state: LedgerState) -> list:
    events = []
    for i, run_id in enumerate(sorted(set(state.runs) - set(state.retracted))):
        body = RubricScored(
            run_id=run_id, suite_version="1.3.0", judge_model="compat:judge-fence", prompt_sha256="ab" * 32,
            score=(i % 5) / 4, rationale="fence",
            criteria=[CriterionScore(id="tidy", points=i % 5, max_points=4)],
            usage=LaneUsage(lane="harness-judge", tokens_in=1000 + i, tokens_out=10, cost=Cost(usd_micros=1000 + i, price_table_version="t"),
                            provider_models=["judge-echo"]),
        )
        events.append(make_event(body, id=f"rubric:{run_id}:1", actor=JUDGE))
        events.append(make_event(
            ReviewRecorded(run_id=run_id, narrative="the run stopped at the first gate", author="fence"),
            id=f"review:{run_id}:1", actor=JUDGE,
        ))
    return events


def _assert_fenced(without: LedgerState, with_: LedgerState, suite: str | None) -> None:
    a, b = leaderboard.render(without, suite), leaderboard.render(with_, suite)
    assert _fenced(a) == _fenced(b)
    assert _judged(a) != _judged(b), "the judged section did not change: the events were not folded"
    assert "model-judged" in _judged(b) and "Harness-judge" in _judged(b)
    assert "## Reviews (report-only)" in _judged(b) and "the run stopped at the first gate" in _judged(b)
    assert records.published(without) == records.published(with_)
    assert _metric_rows(without) == _metric_rows(with_)
    sa, sb = gate.build_snapshot(without, parse("all")), gate.build_snapshot(with_, parse("all"))
    assert sa.suites == sb.suites
    assert gate.render_comparison(gate.compare(sa, sa)) == gate.render_comparison(gate.compare(sa, sb))


def test_the_committed_ledger_renders_the_same_with_and_without_judged_events(tmp_path):
    ledger = tmp_path / "events.jsonl"
    shutil.copyfile(COMMITTED, ledger)
    store = LedgerStore(ledger)
    without = fold(store.read())
    store.append(_judge_events(without))
    with_ = fold(LedgerStore(ledger).read())
    assert sum(len(v) for v in with_.rubric.values()) == len(set(without.runs) - set(without.retracted))
    _assert_fenced(without, with_, None)


def test_a_stream_with_costed_agent_runs_is_fenced_too():
    """The committed ledger has no model rows yet; the synthetic stream has costed agent runs,
    ablations, re-grades and a gate to move."""
    plain = rich_stream()
    judged = rich_stream()
    for e in _judge_events(fold(plain.events)):
        judged.events.append(msgspec.structs.replace(e, seq=len(judged.events) + 1))
    without, with_ = fold(plain.events), fold(judged.events)
    assert any(r.cost_per_pass_micros is not None for sm in all_suite_metrics(without) for g in sm.groups for r in g.rows)
    for suite in ("1.0.0", None):
        _assert_fenced(without, with_, suite)
    headline = _fenced(leaderboard.render(with_, "1.0.0"))
    assert "Cost per passing task" in headline and "Rubric" not in headline
