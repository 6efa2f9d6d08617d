"""Keeping a project's outputs current with its ledger, one batch of new events at a time.

The fold is incremental (`LedgerFollower` reads only what was appended since the last poll,
through the store, so a file and a database ledger are followed alike), and
so are the records: a record depends only on its run, that run's grades and the rubric scores
recorded before the grade, so only runs named by the new events can have a new or changed record
(a retraction adds a mark beside its records and removes nothing). LEADERBOARD.md and the read model aggregate everything, so
they are rendered whole, and written only when their content changed — which, since both carry
the ledger head, is whenever an event was folded.

A ledger that cannot be folded further (an append that is torn, does not decode or does not link)
leaves the outputs at the last good state and is reported, and folding resumes from there once
the ledger is repaired. If the records already folded were themselves rewritten, the state is
rebuilt from scratch: the last folded record must still be there with its hash on every refresh,
and after a problem a running BLAKE3 of the folded records (each as its JSON Lines line) tells the
two cases apart.
"""

from __future__ import annotations

import re
import sqlite3
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import msgspec
from blake3 import blake3

from cbledger import credentials, invocation
from cbledger.errors import UserError
from cbledger.ledger.chain import format_line
from cbledger.ledger.durable import write_atomic
from cbledger.ledger.jsonl import JsonLinesRecorder
from cbledger.ledger.recorder import StoreUnavailable
from cbledger.ledger.store import LedgerStore, StoredEvent
from cbledger.projections import readmodel, writers
from cbledger.projections.aggregates import Views
from cbledger.projections.fold import LedgerState, ProjectionError, Projector
from cbledger.projections.site import render as site_render
from cbledger.projections.writers import LedgerFollower
from cbledger.reproduce import evidence_cache, site_evidence
from cbledger.workspace import Workspace


class _TrackingProjector(Projector):
    """A projector that remembers which runs the events it folds name."""

    def __init__(self, state: LedgerState | None = None) -> None:
        super().__init__(state)
        self.touched: set[str] = set()
        #: the leaderboard's and the read model's aggregates, kept current by these folds
        self.views = Views.attach(self)

    def apply(self, items: Iterable[Any]) -> int:
        items = list(items)
        for item in items:
            event = getattr(item, "event", item)
            if event.seq > self.last_seq:
                run_id = getattr(event.body, "run_id", None)
                if run_id is not None:
                    self.touched.add(run_id)
        return super().apply(items)


def regenerate_after(workspace: Workspace, recorded: str) -> tuple[LedgerState | None, str | None]:
    """Every output (the site too), folded and written under the results lock, after a command
    appended `recorded` ("run(s)", "score(s)"): (the state written, None), or (None, why not).
    What was appended stays appended, so a full disk or a ledger that does not fold is said as
    such, with the way on, never as bad input with nothing written."""
    try:
        with writers.one_projector(workspace):
            state = writers.load_state(workspace.ledger)
            writers.regenerate_all(state, workspace)
            writers.sync_site(state, workspace.site, site_evidence.source(workspace), site_runs_due(workspace, state))
            _site_made(workspace, state)
        return state, None
    except (UserError, OSError, ProjectionError) as exc:
        return None, (f"the {recorded} are recorded, but the outputs could not be regenerated "
                      f"({credentials.printable(str(exc))}); `{invocation.command('project', 'all')}` brings them "
                      "up to date once it can")


#: where each output names the ledger head it was made at: LEADERBOARD.md's head row and the
#: site's front page (the read model keeps it in its `meta` table)
_HEAD_ROW = re.compile(r"^\| Ledger head \| seq (\d+),", re.MULTILINE)
_SITE_HEAD = re.compile(r"seq (\d+) \(head")


#: beside the site, what `regenerate_after` last made it from: the ledger head (seq and hash) and
#: the code that renders it; absent, or naming anything else, every page is rewritten
SITE_MADE = ".site-made.json"


class _SiteMade(msgspec.Struct, frozen=True):
    seq: int
    hash: str
    code: str


def site_runs_due(workspace: Workspace, state: LedgerState) -> set[str] | None:
    """The runs whose pages can differ from the site on disk, when `regenerate_after` made the site
    at an earlier point of this same ledger (`SITE_MADE`: its seq and hash still the ledger's
    there) with this same code, and every event since is a run's (a run, a grade, a score, a
    retraction): those runs and their attempts' other passes. None, for every page, otherwise: a
    suite bump since changes the verdict each page shows, a ledger put back to an earlier state
    and grown again names other events at the same seqs, new code renders other bytes.

    Each `run`, `judge` and `rescore` regenerated the site whole, and the evidence of every page
    is a restore of its run: a ledger of n runs restored n runs after each command, so a campaign
    run one task at a time restored n²/2 (a test recording eight runs in turn made 36 restores,
    not 8). What the marker cannot see is put back by `project site` or `project all`, not here
    (and named by `replay --verify`): a page edited or removed by hand, bundles that arrived for
    runs whose pages said they could not be read."""
    try:
        made = msgspec.json.decode((workspace.results / SITE_MADE).read_bytes(), type=_SiteMade)
    except (OSError, msgspec.DecodeError):
        return None
    if not (workspace.site / site_render.INDEX).is_file() or made.seq > state.head_seq or made.code != evidence_cache.code_identity():
        return None
    store = LedgerStore(workspace.ledger)
    there = store.find(made.seq) if made.seq else None
    if there is None or there.hash != made.hash:
        return None
    touched: set[str] = set()
    for stored in store.read(made.seq, state.head_seq):
        run_id = getattr(getattr(stored.event, "body", None), "run_id", None)
        if run_id is None:
            return None
        touched.add(run_id)
    return site_render.with_attempts(state, touched)


def _site_made(workspace: Workspace, state: LedgerState) -> None:
    """Said once the site is whole at `state`'s head; a command stopped before that leaves the
    earlier mark, whose pages since are rewritten by the next."""
    if state.head_hash is not None:
        write_atomic(workspace.results / SITE_MADE, msgspec.json.encode(_SiteMade(state.head_seq, state.head_hash, evidence_cache.code_identity())))


def behind(workspace: Workspace) -> bool:
    """Is an output missing, or made at an earlier head than the ledger's? What a command that
    found nothing to do asks, so that outputs an interrupt left behind (LEADERBOARD.md, the read
    model and the site are written in that order) are caught up by the same command again."""
    head = LedgerStore(workspace.ledger).head().seq
    try:
        board = _HEAD_ROW.search(workspace.leaderboard.read_text(encoding="utf-8"))
        site = _SITE_HEAD.search((workspace.site / "index.html").read_text(encoding="utf-8"))
        model = readmodel.head_seq(workspace.read_model)
    except (OSError, UnicodeDecodeError, sqlite3.Error):
        return True
    made = [board.group(1) if board else None, site.group(1) if site else None, model]
    return any(seq != str(head) for seq in made)


@dataclass
class Update:
    folded: int = 0
    head_seq: int = 0
    records_written: list[str] = field(default_factory=list)
    leaderboard: bool = False
    read_model: bool = False
    site_pages: int = 0
    #: what became of the site: "written" (now), "deferred" (to a quiet second), "off" (--no-site)
    site: str = "written"
    rebuilt: bool = False
    #: the seq of the snapshot a rebuild resumed from (0: it folded from seq 1)
    resumed_from: int = 0
    seconds: float = 0.0

    def describe(self) -> str:
        parts = [f"{self.folded} event(s) folded, head seq {self.head_seq}"]
        if self.rebuilt:
            parts.append(f"rebuilt from the snapshot at seq {self.resumed_from}" if self.resumed_from else "rebuilt from scratch")
        parts.append(f"{len(self.records_written)} record(s) written")
        parts.append("LEADERBOARD.md " + ("rewritten" if self.leaderboard else "unchanged"))
        parts.append("read model " + ("rewritten" if self.read_model else "unchanged"))
        parts.append({"off": "site not written (--no-site)", "deferred": "site pages due when the ledger is quiet"}.get(
            self.site, f"{self.site_pages} site page(s) written"))
        return "; ".join(parts) + f" ({self.seconds:.2f} s)"


class Regenerator:
    def __init__(
        self, workspace: Workspace, read_model: bool = True, site: bool = True, defer_site: bool = False,
        note: Callable[[str], None] | None = None,
    ) -> None:
        self.workspace = workspace
        #: hears why a snapshot was ignored when a rebuild had to fold from seq 1
        self.note = note
        self.ledger = workspace.ledger
        self.with_read_model = read_model
        self.with_site = site
        #: write the site only when asked (`flush_site`), not on every refresh: its aggregate
        #: pages are rendered from the whole state, so a watch writes them once the ledger is quiet
        self.defer_site = defer_site
        self._site_runs: set[str] = set()
        self._site_all = False
        self._site_due = False
        self.follower: LedgerFollower | None = None
        self._prefix = blake3()
        self._prefix_len = 0  # bytes of the ledger file the prefix digest covers
        self._prefix_start = 0  # where they start: 0, or the end of the snapshot's event a rebuild resumed from
        self.problem: str | None = None  # why the ledger cannot be folded further, if it cannot
        self.written_seq = 0  # the head the outputs on disk were written for
        #: the first fold stopped short of the ledger's end (a line that does not hash or link):
        #: nothing is written until it folds to the end, so outputs another command wrote from
        #: the whole ledger are not rolled back to the part before the damage
        self.withheld = False
        self._stopped = False  # this refresh's fold met an event it cannot fold

    # ------------------------------------------------------------------ folding

    def _fresh(self) -> LedgerFollower:
        """A follower from the latest snapshot the ledger confirms (else from seq 1); the bytes it
        reads from there on are what the prefix digest covers."""
        self._prefix = blake3()
        self._prefix_len = 0
        follower = writers.resume(LedgerStore(self.ledger), self.workspace.snapshots, self.note,
                                  _TrackingProjector, on_folded=self._hash)
        recorder = follower.store.recorder
        start = recorder.offset_after(follower.base_seq) if isinstance(recorder, JsonLinesRecorder) else None
        self._prefix_start = start or 0
        return follower

    def _hash(self, stored: StoredEvent) -> None:
        line = format_line(stored.raw, stored.hash, stored.prev)
        self._prefix.update(line)
        self._prefix_len += len(line)

    def _prefix_intact(self, follower: LedgerFollower) -> bool:
        """Do the records up to the folded head still hash to what was folded?"""
        head, base = follower.state.head_seq, follower.base_seq
        h = blake3()
        n = 0
        try:
            for stored in LedgerStore(self.ledger).read(since=base, until=head):
                h.update(format_line(stored.raw, stored.hash, stored.prev))
                n += 1
        except StoreUnavailable:
            raise  # the server away says nothing of the ledger: waited out, not rebuilt from
        except Exception:  # unreadable where it was read before: rewritten
            return False
        return n == head - base and h.digest() == self._prefix.digest()

    def _poll(self, follower: LedgerFollower) -> str | None:
        """Folds what it can; returns why it stopped early, if it did."""
        try:
            follower.poll()
            problem = None
        except ProjectionError as exc:
            problem = str(exc)
            self._stopped = True
        return problem or self._torn(follower)

    def _torn(self, follower: LedgerFollower) -> str | None:
        try:
            tail = follower.store.torn_tail()
        except UserError:
            return None
        if not tail:
            return None
        # a live append's bytes, or what a dead appender left (a torn line, an interrupted batch's
        # lines), which nobody completes: only the repair removes those
        return (
            f"{follower.store.location}: torn append after seq {follower.state.head_seq} ({len(tail)} byte(s) "
            f"not acknowledged); waiting for it to complete, or, if its appender died, to be removed "
            f"(`{invocation.command('repair', '--truncate-torn-tail')}`)"
        )

    def _head_still_there(self) -> bool:
        """Is the last folded record still there, with the hash it was folded with? A ledger
        replaced by a shorter or different one fails this before anything is folded onto it."""
        assert self.follower is not None
        seq, head = self.follower.state.head_seq, self.follower.state.head_hash
        if seq == 0 or head is None:
            return True
        try:
            found = writers.event_at(self.follower.store, seq)
        except StoreUnavailable:
            raise  # the server away says nothing of the ledger: waited out, not rebuilt from
        except Exception:
            return False
        return found is not None and found.hash == head

    def _rebuild(self) -> tuple[bool, str | None]:
        """A fresh fold of the whole ledger: (adopted?, problem). Adopted when it folds to the
        end, or when there is no earlier state to keep."""
        kept, kept_len, kept_start = self._prefix, self._prefix_len, self._prefix_start
        follower: LedgerFollower | None = None
        try:
            follower = self._fresh()
            follower.poll()
            problem = None
        except StoreUnavailable:  # the server went away meanwhile: the state folded so far stands
            self._prefix, self._prefix_len, self._prefix_start = kept, kept_len, kept_start
            raise
        except ProjectionError as exc:
            problem = str(exc)
            self._stopped = True
        if problem is not None and self.follower is not None:
            self._prefix, self._prefix_len, self._prefix_start = kept, kept_len, kept_start
            return False, f"{problem} (the part already folded was rewritten, and the new ledger does not fold either)"
        if problem is not None and self.written_seq == 0:
            self.withheld = True
        assert follower is not None  # made, or `_fresh` raised
        self.follower = follower
        return True, problem or self._torn(follower)

    def refresh(self) -> Update | None:
        """`_refresh_outputs` while no other command folds and writes the same results
        (`writers.one_projector`): what it folds to is then what the outputs last say."""
        with writers.one_projector(self.workspace):
            return self._refresh_outputs()

    def _refresh_outputs(self) -> Update | None:
        """Folds new events and rewrites what changed; None when nothing new was folded.

        Nothing is published from bytes that were not verified: the prefix already folded must
        still hash to what was folded (a same-size edit in place leaves every offset where it
        was, so only its digest tells), and every new line must link and hash (the follower).
        A missing ledger (deleted, or between `git checkout`'s unlink and write) is a problem
        reported like any other; the outputs stay where they are until it is back."""
        started = time.perf_counter()
        self._stopped = False
        try:
            path = self.workspace.ledger_file
            if path is not None and not path.exists():
                raise FileNotFoundError(path)
            rebuilt, problem = self._refresh()
        except FileNotFoundError:
            rebuilt, problem = False, (
                f"{self.ledger}: the ledger is missing (deleted or being replaced); waiting for it to come back"
            )
        except OSError as exc:
            rebuilt, problem = False, f"{self.ledger}: cannot be read ({exc.strerror}); waiting"
        except StoreUnavailable as exc:  # a database server down or restarting: folded when back
            rebuilt, problem = False, f"{exc}; waiting"
            self._stopped = True
        self.problem = problem
        if self.follower is None:
            return None
        if self.withheld:
            if problem is not None and (self._stopped or "torn append" not in problem):
                return None
            self.withheld, rebuilt = False, True  # it folds to the end now: everything is written
        assert self.follower is not None
        projector = self.follower.projector
        assert isinstance(projector, _TrackingProjector)  # every follower here comes from _fresh()
        if not rebuilt and self.follower.state.head_seq == self.written_seq:
            return None
        update = self._write(rebuilt, projector.touched)
        projector.touched = set()
        update.seconds = time.perf_counter() - started
        return update

    def _refresh(self) -> tuple[bool, str | None]:
        if self.follower is None or not self._head_still_there() or not self._bytes_intact():
            return self._rebuild()
        head = self.follower.state.head_seq
        problem = self._poll(self.follower)
        if problem is not None and self.follower.state.head_seq == head and not self._prefix_intact(self.follower):
            return self._rebuild()
        return False, problem

    def _bytes_intact(self) -> bool:
        """For a file ledger: do the bytes up to the folded head still hash to what was folded?
        A same-size edit in place leaves every offset and the head's hash where they were, so
        only this digest tells; BLAKE3 over the raw prefix costs a fraction of one fold. A
        database ledger's table refuses updates and deletes, so its head check suffices."""
        path = self.workspace.ledger_file
        if path is None or not self._prefix_len:
            return True
        h = blake3()
        left = self._prefix_len
        with open(path, "rb") as f:
            f.seek(self._prefix_start)
            while left > 0:
                chunk = f.read(min(left, 1 << 20))
                if not chunk:
                    return False
                h.update(chunk)
                left -= len(chunk)
        return h.digest() == self._prefix.digest()

    # ------------------------------------------------------------------ writing

    def flush_site(self) -> tuple[int, int, float] | None:
        """Writes the site pages deferred since the last flush (every aggregate page and the
        pages of the runs folded since); (head seq, pages written, seconds), or None when none
        was due."""
        if not self._site_due or self.follower is None:
            return None
        started = time.perf_counter()
        with writers.one_projector(self.workspace):
            # another command may have appended and written since this fold: fold up to it first,
            # so the site written last is never older than the one it replaces
            self._refresh_outputs()
            if self.problem is not None:
                return None  # the site waits with the rest until the ledger folds again
            state = self.follower.state
            runs = None if self._site_all else self._site_runs
            pages = writers.sync_site(state, self.workspace.site, site_evidence.source(self.workspace), runs)
        self._site_due, self._site_all, self._site_runs = False, False, set()
        return self.written_seq, len(pages), time.perf_counter() - started

    def _views(self) -> Views:
        assert self.follower is not None
        projector = self.follower.projector
        assert isinstance(projector, _TrackingProjector)
        return projector.views

    def _write(self, everything: bool, touched: set[str]) -> Update:
        assert self.follower is not None
        state = self.follower.state
        base = self.follower.base_seq
        folded = state.head_seq - base if everything else state.head_seq - self.written_seq
        now = self.with_site and not self.defer_site
        touched = site_render.with_attempts(state, touched) if not everything else touched
        done = writers.regenerate_all(
            state, self.workspace, runs=None if everything else touched, read_model=self.with_read_model,
            site_evidence=site_evidence.source(self.workspace) if now else None, views=self._views(),
        )
        if self.with_site and self.defer_site:
            self._site_due = True
            self._site_all = self._site_all or everything
            self._site_runs |= touched
        self.written_seq = state.head_seq
        return Update(
            folded=folded,
            head_seq=state.head_seq,
            records_written=done.records.created + done.records.updated,
            leaderboard=done.leaderboard,
            read_model=done.read_model,
            site_pages=len(done.site),
            site="written" if now else ("deferred" if self.with_site else "off"),
            rebuilt=everything,
            resumed_from=base if everything else 0,
        )
