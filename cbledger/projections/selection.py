"""Which runs a regression check compares: a selection over the runs of the ledger.

A gate that compares "the ledger now" with a baseline lets every old run dilute what the new ones
did: six crashed runs added to three passes out of six read as 3/12, not 0/6. So a comparison
names both of its run sets, each by what a maintainer knows about it:

    copperhead=0.9.0      the copperhead version the run recorded (several: `0.8.1,0.9.0`)
    commit=a2471b3        the copperhead commit (full, or a prefix of at least 7 hex digits)
    model=ID              the model id
    runs=ID,ID            run ids (the command line also takes `runs=@FILE`, one id a line)
    batch=ID              the `cbledger run` invocation (printed at the end of each run)
    since=DATE            started at or after DATE (`2026-12-01`, or a time with its offset)
    until=DATE            started at or before DATE (a date includes the whole day)
    all                   every run: only ever by name, never by default

Terms are separated by spaces; a term's values by commas (any of them matches); terms all have to
match. A term that is not one of these, or has no value, is refused with the term named.
"""

from __future__ import annotations

import datetime as _dt
import re

from msgspec import Struct

from cbledger.ledger.events import RunRecorded

KEYS = ("copperhead", "commit", "model", "runs", "batch", "since", "until")
_COMMIT = re.compile(r"^[0-9a-f]{7,40}\Z")
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}\Z")


class SelectionError(ValueError):
    """A selection that cannot be read; the message names the term."""


class Selection(Struct, frozen=True, kw_only=True):
    everything: bool = False
    copperhead: tuple[str, ...] = ()
    commit: tuple[str, ...] = ()
    model: tuple[str, ...] = ()
    runs: tuple[str, ...] = ()
    batch: tuple[str, ...] = ()
    since: _dt.datetime | None = None
    until: _dt.datetime | None = None
    #: the terms as given, for the snapshot and the report
    text: str = ""

    @property
    def empty(self) -> bool:
        """Names no run set at all (neither `all` nor any term)."""
        return not self.everything and not any(
            (self.copperhead, self.commit, self.model, self.runs, self.batch, self.since, self.until)
        )

    def matches(self, run: RunRecorded) -> bool:
        """Whether the run is in the set; an empty selection holds no run (never all of them)."""
        if self.everything:
            return True
        if self.empty:
            return False
        c = run.comparability
        if self.copperhead and c.copperhead_version not in self.copperhead:
            return False
        if self.commit and not (c.copperhead_commit and any(c.copperhead_commit.startswith(p) for p in self.commit)):
            return False
        if self.model and run.model.id not in self.model:
            return False
        if self.runs and run.run_id not in self.runs:
            return False
        if self.batch and run.batch not in self.batch:
            return False
        started = run.timings.started_at
        if self.since is not None and started < self.since:
            return False
        return not (self.until is not None and started > self.until)


def _instant(key: str, value: str, end_of_day: bool) -> _dt.datetime:
    if _DATE.match(value):
        try:
            day = _dt.date.fromisoformat(value)
        except ValueError as exc:  # 2026-13-01, 2026-02-30: a traceback once
            raise SelectionError(f"{key}={value}: not a date ({exc})") from None
        start = _dt.datetime(day.year, day.month, day.day, tzinfo=_dt.UTC)
        return start + _dt.timedelta(days=1, microseconds=-1) if end_of_day else start
    try:
        when = _dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise SelectionError(f"{key}={value}: not a date (YYYY-MM-DD) or a time with its offset") from None
    if when.tzinfo is None:
        raise SelectionError(f"{key}={value}: a time needs its offset (Z or +HH:MM)")
    return when.astimezone(_dt.UTC)


def parse(terms: str | list[str]) -> Selection:
    """A selection from its terms (one string, or several, each holding terms separated by spaces)."""
    words = [w for t in ([terms] if isinstance(terms, str) else terms) for w in t.split()]
    if words == ["all"]:
        return Selection(everything=True, text="all")
    if "all" in words:
        raise SelectionError("`all` selects every run and takes no other term")
    values: dict[str, list[str]] = {}
    for word in words:
        key, sep, value = word.partition("=")
        if not sep or key not in KEYS:
            raise SelectionError(f"{word!r}: not a selection term (use {', '.join(k + '=' for k in KEYS)} or all)")
        items = [v for v in value.split(",") if v]
        if not items:
            raise SelectionError(f"{word!r}: {key}= needs a value")
        values.setdefault(key, []).extend(items)
    for commit in values.get("commit", []):
        if not _COMMIT.match(commit):
            raise SelectionError(f"commit={commit}: a copperhead commit is 7 to 40 lowercase hex digits")
    bounds: dict[str, _dt.datetime] = {}
    for key in ("since", "until"):
        given = values.get(key, [])
        if len(given) > 1:
            raise SelectionError(f"{key}= takes one value, not {', '.join(given)}")
        if given:
            bounds[key] = _instant(key, given[0], end_of_day=key == "until")
    if "since" in bounds and "until" in bounds and bounds["since"] > bounds["until"]:
        raise SelectionError(f"since={values['since'][0]} is after until={values['until'][0]}: no run can match")
    return Selection(
        copperhead=tuple(values.get("copperhead", [])),
        commit=tuple(values.get("commit", [])),
        model=tuple(values.get("model", [])),
        runs=tuple(values.get("runs", [])),
        batch=tuple(values.get("batch", [])),
        since=bounds.get("since"),
        until=bounds.get("until"),
        text=" ".join(words),
    )
