"""Run selections for the gate: every term, and every malformed one refused by name."""

from __future__ import annotations

import datetime as dt

import pytest

from cbledger.projections import selection as sel
from cbledger.projections.fold import fold
from tests.factories import Stream

COMMIT_A = "a2471b374ac1904e1a8dfc9f1b4fa6a2ef87acd8"
COMMIT_B = "0123456789abcdef0123456789abcdef01234567"


def runs():
    s = Stream()
    day = dt.datetime(2026, 11, 30, 23, 30, tzinfo=dt.UTC)
    ids = {
        "old": s.run("t", "vendor:a", copperhead_version="0.8.1", copperhead_commit=COMMIT_B, batch="b1", started=day),
        "new": s.run("t", "vendor:a", copperhead_version="0.9.0", copperhead_commit=COMMIT_A, batch="b2",
                     started=day + dt.timedelta(hours=1)),
        "other": s.run("t", "vendor:b", copperhead_version="0.9.0", copperhead_commit=None, batch=None,
                       started=day + dt.timedelta(days=2)),
    }
    state = fold(s.events)
    return {name: state.runs[rid].run for name, rid in ids.items()}


def chosen(terms: str) -> set[str]:
    s = sel.parse(terms)
    return {name for name, run in runs().items() if s.matches(run)}


@pytest.mark.parametrize(
    "terms, names",
    [
        ("all", {"old", "new", "other"}),
        ("copperhead=0.9.0", {"new", "other"}),
        ("copperhead=0.8.1,0.9.0", {"old", "new", "other"}),
        ("commit=a2471b3", {"new"}),
        (f"commit={COMMIT_B}", {"old"}),
        ("model=vendor:b", {"other"}),
        ("batch=b1", {"old"}),
        ("since=2026-12-01", {"new", "other"}),  # a date starts at 00:00 UTC
        ("until=2026-11-30", {"old"}),  # ... and covers its whole day
        ("since=2026-12-01T00:15:00+00:00 until=2026-12-01", {"new"}),
        ("copperhead=0.9.0 model=vendor:a", {"new"}),  # terms all match
    ],
)
def test_each_term_selects_what_it_says(terms, names):
    assert chosen(terms) == names


def test_run_ids():
    r = runs()
    s = sel.parse([f"runs={r['old'].run_id}", f"runs={r['other'].run_id}"])
    assert {n for n, run in r.items() if s.matches(run)} == {"old", "other"} and not s.empty


@pytest.mark.parametrize(
    "terms, message",
    [
        ("model", "'model': not a selection term"),
        ("modle=x", "'modle=x': not a selection term"),
        ("model=", "'model=': model= needs a value"),
        ("commit=xyz", "commit=xyz: a copperhead commit is 7 to 40 lowercase hex digits"),
        ("since=yesterday", "since=yesterday: not a date"),
        ("since=2026-13-01", "since=2026-13-01: not a date (month must be in 1..12)"),
        ("until=2026-02-30", "until=2026-02-30: not a date (day is out of range for month)"),
        ("since=2026-12-01T10:00:00", "a time needs its offset"),
        ("since=2026-12-02 until=2026-12-01", "is after until=2026-12-01"),
        ("since=2026-12-01 since=2026-12-02", "since= takes one value"),
        ("all model=x", "`all` selects every run and takes no other term"),
    ],
)
def test_a_malformed_term_is_refused_by_name(terms, message):
    with pytest.raises(sel.SelectionError, match=message.replace("(", r"\(").replace(")", r"\)")):
        sel.parse(terms)


def test_nothing_is_not_everything():
    assert sel.parse([]).empty and not sel.parse("all").empty
    assert not any(sel.parse([]).matches(run) for run in runs().values())
