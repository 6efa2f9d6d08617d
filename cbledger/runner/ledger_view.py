"""What the runner needs to know from the ledger: the current suite version and its hashes, the
latest price table, and the runs already recorded (for rescoring and replay).

This is a read of the log, not a projection: the runner never imports `cbledger.projections`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from msgspec import UNSET

from cbledger import invocation
from cbledger.errors import UserError
from cbledger.ledger.events import (
    CassetteAttached,
    CassetteAttachedEvent,
    CassetteRef,
    GradeRecorded,
    GradeRecordedEvent,
    PricingPublished,
    PricingPublishedEvent,
    RunRecorded,
    RunRecordedEvent,
    RunRetractedEvent,
    SuiteArchived,
    SuiteArchivedEvent,
    SuiteBumped,
    SuiteBumpedEvent,
)
from cbledger.ledger.store import LedgerStore
from cbledger.runner import pricing


@dataclass
class LedgerView:
    suite: SuiteBumped | None = None
    #: the price table in effect today (`pricing.in_effect`): what a run starting now is priced by
    pricing: PricingPublished | None = None
    #: every pricing.published, in ledger order
    price_tables: list[PricingPublished] = field(default_factory=list)
    runs: dict[str, RunRecorded] = field(default_factory=dict)
    grades: dict[tuple[str, str], GradeRecorded] = field(default_factory=dict)
    retracted: set[str] = field(default_factory=set)
    #: suite version -> its kept definitions' record (the first one)
    archives: dict[str, SuiteArchived] = field(default_factory=dict)
    #: every suite.bumped by version (the latest declaration of each)
    bumps: dict[str, SuiteBumped] = field(default_factory=dict)
    #: run id -> the cassette attached to it later (the first; only for a run without its own)
    attached: dict[str, CassetteAttached] = field(default_factory=dict)

    def cassette(self, run: RunRecorded) -> CassetteRef | None:
        """The run's cassette: the one it recorded, else the one attached to it, else None."""
        if run.cassette is not UNSET:
            return run.cassette
        attached = self.attached.get(run.run_id)
        return attached.cassette if attached is not None else None

    @property
    def archived(self) -> SuiteArchived | None:
        """The current suite version's kept definitions, when they were recorded."""
        return self.archives.get(self.suite.suite_version) if self.suite else None

    @property
    def suite_version(self) -> str | None:
        return self.suite.suite_version if self.suite else None


_READ = {"suite.bumped", "suite.archived", "pricing.published", "run.recorded", "grade.recorded", "run.retracted",
         "cassette.attached"}


def read(path: Path | str, *, links: bool = False) -> LedgerView:
    """The view a run is planned and recorded against. With `links`, every event's chain link is
    checked on the way (a hash per event, beside the decode the view already pays): a command
    about to append (`run`, `suite bump`) must not build on a ledger edited in place, which the
    store's own check of the last link cannot see; nor on one that cannot take an append now (a
    torn tail, an interrupted batch, a directory no file can be made in), found before any run
    is paid for rather than as each run's events are refused."""
    state = LedgerView()
    store = LedgerStore(path)
    if links:
        store.recorder.check_appendable()
    prev: str | None = None
    for stored in store.read(types=None if links else _READ):
        if links:
            if (prev is not None and stored.prev != prev) or not stored.hashes_to_link():
                raise UserError(f"{store.location}: the event at seq {stored.seq} does not hash to its recorded link; the "
                                f"ledger was edited (`{invocation.command('replay', '--verify')}` locates it); nothing written")
            prev = stored.hash
            if stored.type not in _READ:
                continue
        event = stored.event
        if isinstance(event, SuiteBumpedEvent):
            state.suite = event.body
            state.bumps[event.body.suite_version] = event.body
        elif isinstance(event, SuiteArchivedEvent):
            state.archives.setdefault(event.body.suite_version, event.body)
        elif isinstance(event, PricingPublishedEvent):
            state.price_tables.append(event.body)
        elif isinstance(event, RunRecordedEvent):
            state.runs[event.body.run_id] = event.body
        elif isinstance(event, GradeRecordedEvent):
            state.grades.setdefault((event.body.run_id, event.body.suite_version), event.body)
        elif isinstance(event, RunRetractedEvent):
            state.retracted.add(event.body.run_id)
        elif isinstance(event, CassetteAttachedEvent):
            run = state.runs.get(event.body.run_id)
            if run is not None and run.cassette is UNSET:
                state.attached.setdefault(event.body.run_id, event.body)
    state.pricing = pricing.in_effect(state.price_tables, pricing.today())
    return state
