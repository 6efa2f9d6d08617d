"""What an event says about the rest of the log, checked before a person's batch is appended.

The store validates each event on its own (schema, credentials, idempotency); these rules read
the log: a retraction, a grade, a rubric score, a review or an attached cassette must name a run that was recorded (earlier in
the ledger, or earlier in the same batch), and no event may be stamped later than the clock
allows, and a surface an event names must be one of the catalog's, and a price table's prices must be
below the bound `pricing publish` holds them to. They live here, beside the store and above the recorder, because they need nothing but
the log; `cbledger append` runs them (the path by which events written by hand arrive), while
the runner, re-scoring and imports build their events from the runs they just read or made.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
from collections.abc import Sequence

from msgspec import UNSET

from cbledger.errors import UserError, did_you_mean
from cbledger.ledger import surfaces
from cbledger.ledger.events import (
    CassetteAttachedEvent,
    EventBase,
    EvidenceImported,
    EvidenceImportedEvent,
    GradeRecordedEvent,
    PricingPublishedEvent,
    ReviewRecordedEvent,
    RubricScoredEvent,
    RunRecordedEvent,
    RunRetractedEvent,
    price_table_problems,
)
from cbledger.ledger.store import LedgerStore

#: how far an event's `at` may run ahead of this machine's clock: clocks of two honest machines
#: disagree by seconds, not minutes, and a later stamp would sort a retraction or a grade before
#: events that in truth came first
MAX_CLOCK_SKEW = _dt.timedelta(minutes=5)

_REFERRING = (RunRetractedEvent, GradeRecordedEvent, RubricScoredEvent, ReviewRecordedEvent, CassetteAttachedEvent)


def _recorded_runs(store: LedgerStore, wanted: set[str]) -> set[str]:
    """The run ids among `wanted` that a `run.recorded` event in the ledger carries. The runner
    gives that event the id `run:<runId>`, so one lookup each answers the common case; a run
    recorded under another id is found by reading the run events once."""
    found = set()
    for run_id in wanted:
        stored = store.find(f"run:{run_id}")
        if stored is not None and isinstance(stored.event, RunRecordedEvent) and stored.event.body.run_id == run_id:
            found.add(run_id)
    missing = wanted - found
    if missing and store.exists():
        for stored in store.read(types={"run.recorded"}):
            event = stored.event
            if isinstance(event, RunRecordedEvent) and event.body.run_id in missing:
                found.add(event.body.run_id)
    return found


def import_problems(event_id: str, body: EvidenceImported) -> list[str]:
    """An import is addressed by the digest of what it holds (docs/REPRODUCE.md): its content
    must hash to its `sha256`, and its id must name that digest. One that does not claims
    evidence it does not carry (another import's hash, or a rewritten content)."""
    out = []
    found = hashlib.sha256(body.content.encode("utf-8")).hexdigest()
    if found != body.sha256:
        out.append(f"$.body.content hashes to sha256 {found}, not the $.body.sha256 {body.sha256} it states")
    if event_id != f"evidence.imported:{body.sha256}":
        out.append(f"$.id must be evidence.imported:<$.body.sha256> (evidence.imported:{body.sha256})")
    return out


def check_batch(
    store: LedgerStore, events: Sequence[EventBase], labels: Sequence[str] | None = None, now: _dt.datetime | None = None,
) -> None:
    """Raises UserError naming every event of the batch that refers to a run nobody recorded or
    is stamped too far in the future; nothing is appended then. `labels` name the events where
    they were read ("events.jsonl: line 5"), else their place in the batch."""
    clock = now or _dt.datetime.now(_dt.UTC)
    named = list(labels) if labels is not None else [f"event {i}" for i in range(len(events))]
    problems: list[str] = []
    for index, event in enumerate(events):
        if event.at > clock + MAX_CLOCK_SKEW:
            problems.append(
                f"{named[index]} ({event.id}): at {event.at.isoformat()} is ahead of the clock "
                f"({clock.isoformat(timespec='seconds')}) by more than {int(MAX_CLOCK_SKEW.total_seconds() // 60)} minutes"
            )
    known = [s.id for s in surfaces.catalog().surfaces]
    for index, event in enumerate(events):
        # a surface the catalog does not hold is a typo nobody could correct later: the anomaly
        # list is for a known surface the event's own facts contradict
        named_surface = event.body.surface if isinstance(event, (RunRecordedEvent, EvidenceImportedEvent)) else UNSET
        if isinstance(named_surface, str) and named_surface not in known:
            problems.append(f"{named[index]} ({event.id}): surface {named_surface!r} is not in "
                            f"cbledger/ledger/surfaces.json{did_you_mean(named_surface, known)}")
    for index, event in enumerate(events):
        if isinstance(event, EvidenceImportedEvent):
            problems += [f"{named[index]} ({event.id}): {p}" for p in import_problems(event.id, event.body)]
    for index, event in enumerate(events):
        if isinstance(event, PricingPublishedEvent):
            found = price_table_problems(event.body)
            if found and not store.holds([event.id]):  # recorded before a rule was made: a no-op again
                problems += [f"{named[index]} ({event.id}): $.body.{at}: {why}" for at, why in found]
    in_batch: set[str] = set()
    wanted: dict[str, list[tuple[int, EventBase]]] = {}
    for index, event in enumerate(events):
        if isinstance(event, RunRecordedEvent):
            in_batch.add(event.body.run_id)
        elif isinstance(event, _REFERRING) and event.body.run_id not in in_batch:
            wanted.setdefault(event.body.run_id, []).append((index, event))
    recorded = _recorded_runs(store, set(wanted)) if wanted else set()
    for run_id, referrers in sorted(wanted.items()):
        if run_id in recorded:
            continue
        for index, event in referrers:
            problems.append(f"{named[index]} ({event.id}): names run {run_id!r}, which no run.recorded event in the ledger or before it in this input carries")
    if problems:
        raise UserError("; ".join(problems) + f"; nothing appended to {store.location}")
