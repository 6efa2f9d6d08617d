"""The billed lanes sum every feedback pass of an attempt: pass 2 was paid for as much as pass 1,
though only pass 1 is the attempt's record."""

from __future__ import annotations

from cbledger.ledger.events import PassRef
from cbledger.projections import judged, leaderboard
from cbledger.projections.aggregates import Views
from cbledger.projections.fold import Projector, fold
from cbledger.projections.records import record_entries
from tests.factories import Stream


def _two_pass(third: bool = True) -> Stream:
    s = Stream()
    s.task("rename-net", tier="simple")
    s.suite("1.0.0", reason="first suite")
    first = s.run("rename-net", passes=PassRef(index=1, allowed=3), tokens=(1500, 40), usd_micros=1_000)
    s.grade(first, "fail", category="wrong-target")
    second = s.run("rename-net", passes=PassRef(index=2, allowed=3, first=first, previous=first, hints=["h"]),
                   tokens=(31_500, 1_380), usd_micros=20_000)
    s.grade(second, "fail", category="wrong-target")
    if third:
        later = s.run("rename-net", passes=PassRef(index=3, allowed=3, first=first, previous=second, hints=["h"]),
                      tokens=(40_000, 2_000), usd_micros=30_000)
        s.retract(later)  # a retracted pass ends the attempt, as in the passes table
    s.graded_run("rename-net", "vendor:model-b", "pass", tokens=(900, 10), usd_micros=500)
    return s


def test_the_system_lane_holds_every_live_pass():
    state = fold(_two_pass().events)
    rows = {r.model: r for r in judged.lane_rows(state, record_entries(state, "1.0.0"))}
    a = rows["vendor:model-a"]
    assert (a.runs, a.system_tokens_in, a.system_tokens_out, a.system_usd_micros) == (1, 33_000, 1_420, 21_000)
    b = rows["vendor:model-b"]
    assert (b.system_tokens_in, b.system_tokens_out, b.system_usd_micros) == (900, 10, 500)


def test_a_later_pass_folded_after_its_record_gives_the_rebuilt_lanes():
    events = _two_pass(third=False).events  # no retraction, which would rebuild everything anyway
    projector = Projector()
    views = Views.attach(projector)
    for event in events:  # pass 2 arrives after pass 1's record was added, and read each time
        projector.apply([event])
        leaderboard.render(projector.state, views=views)
    assert leaderboard.render(projector.state, views=views) == leaderboard.render(fold(events))
    assert "| 1 | 33000 / 1420 |" in leaderboard.render(fold(events))


def test_a_replay_bills_nothing_in_the_lanes():
    """A replay calls no model; the cost its record carries is its original's, and the lanes summed
    it again: $21 of lanes against a $15 bill."""
    s = Stream()
    s.task("rename-net", tier="simple")
    s.suite("1.0.0", reason="first suite")
    s.graded_run("rename-net", "vendor:model-a", "pass", tokens=(1000, 10), usd_micros=6_000_000)
    s.graded_run("rename-net", "vendor:model-a", "pass", run_mode="replay", tokens=(1000, 10), usd_micros=6_000_000)
    state = fold(s.events)
    rows = {(r.model, r.kind): r for r in judged.lane_rows(state, record_entries(state, "1.0.0"))}
    assert rows[("vendor:model-a", "agent")].system_usd_micros == 6_000_000
    replayed = rows[("vendor:model-a", "replay")]
    assert (replayed.runs, replayed.system_usd_micros, replayed.system_tokens_in) == (1, 0, 0)


def test_a_retracted_run_shows_what_it_cost_and_a_retracted_replay_nothing():
    """A retraction takes a run out of every figure, not off the bill: its cost was in no figure."""
    s = Stream()
    s.task("rename-net", tier="simple")
    s.suite("1.0.0", reason="first suite")
    paid = s.graded_run("rename-net", "vendor:model-a", "pass", usd_micros=1_000_000)
    replay = s.graded_run("rename-net", "vendor:model-a", "pass", run_mode="replay", usd_micros=1_000_000)
    s.retract(paid)
    s.retract(replay)
    board = leaderboard.render(fold(s.events))
    listed = board.split("## Retracted runs")[1].split("\n## ")[0]
    assert f"| {paid} | " in listed and "| $1.0000 |" in listed
    assert "— (a replay bills nothing)" in listed
