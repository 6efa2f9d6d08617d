"""Keeping a project's outputs current with its ledger, one batch of new events at a time.

The fold is incremental (`LedgerFollower` reads only the bytes appended since the last poll), and
so are the records: a record depends only on its run, that run's grades and the rubric scores
recorded before the grade, so only runs named by the new events can have a new or changed record
(a retraction removes its records). LEADERBOARD.md and the read model aggregate everything, so
they are rendered whole, and written only when their content changed — which, since both carry
the ledger head, is whenever an event was folded.

A ledger that cannot be folded further (an append that is torn, does not decode or does not link)
leaves the outputs at the last good state and is reported, and folding resumes from there once
the file is repaired. If the bytes already folded were themselves rewritten, the state is rebuilt
from scratch: a running BLAKE3 of the folded prefix tells the two cases apart.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from blake3 import blake3

from cbledger.projections import writers
from cbledger.projections.fold import ProjectionError, Projector
from cbledger.projections.writers import LedgerFollower
from cbledger.workspace import Workspace


class _TrackingProjector(Projector):
    """A projector that remembers which runs the events it folds name."""

    def __init__(self) -> None:
        super().__init__()
        self.touched: set[str] = set()

    def apply(self, items: Iterable[Any]) -> int:
        items = list(items)
        for item in items:
            event = getattr(item, "event", item)
            if event.seq > self.last_seq:
                run_id = getattr(event.body, "run_id", None)
                if run_id is not None:
                    self.touched.add(run_id)
        return super().apply(items)


@dataclass
class Update:
    folded: int = 0
    head_seq: int = 0
    records_written: list[str] = field(default_factory=list)
    records_removed: list[str] = field(default_factory=list)
    leaderboard: bool = False
    read_model: bool = False
    rebuilt: bool = False
    seconds: float = 0.0

    def describe(self) -> str:
        parts = [f"{self.folded} event(s) folded, head seq {self.head_seq}"]
        if self.rebuilt:
            parts.append("rebuilt from scratch")
        parts.append(f"{len(self.records_written)} record(s) written")
        if self.records_removed:
            parts.append(f"{len(self.records_removed)} removed")
        parts.append("LEADERBOARD.md " + ("rewritten" if self.leaderboard else "unchanged"))
        parts.append("read model " + ("rewritten" if self.read_model else "unchanged"))
        return "; ".join(parts) + f" ({self.seconds:.2f} s)"


class Regenerator:
    def __init__(self, workspace: Workspace, read_model: bool = True) -> None:
        self.workspace = workspace
        self.ledger = workspace.ledger
        self.with_read_model = read_model
        self.follower: LedgerFollower | None = None
        self._prefix = blake3()
        self.problem: str | None = None  # why the ledger cannot be folded further, if it cannot
        self.written_seq = 0  # the head the outputs on disk were written for

    # ------------------------------------------------------------------ folding

    def _fresh(self) -> LedgerFollower:
        return LedgerFollower(self.ledger, _TrackingProjector())

    def _hash_prefix(self, start: int, end: int, into) -> None:
        with open(self.ledger, "rb") as f:
            f.seek(start)
            remaining = end - start
            while remaining > 0:
                chunk = f.read(min(remaining, 1 << 20))
                if not chunk:
                    break
                into.update(chunk)
                remaining -= len(chunk)

    def _prefix_intact(self, offset: int) -> bool:
        if os.path.getsize(self.ledger) < offset:
            return False
        h = blake3()
        self._hash_prefix(0, offset, h)
        return h.digest() == self._prefix.digest()

    def _poll(self, follower: LedgerFollower) -> str | None:
        """Folds what it can; returns why it stopped early, if it did."""
        before = follower.offset
        try:
            follower.poll()
            problem = None
        except ProjectionError as exc:
            problem = str(exc)
        self._hash_prefix(before, follower.offset, self._prefix)
        return problem or self._torn(follower)

    def _torn(self, follower: LedgerFollower) -> str | None:
        size = os.path.getsize(self.ledger)
        if size <= follower.offset:
            return None
        return (
            f"{self.ledger}: torn append at byte {follower.offset} ({size - follower.offset} byte(s) without a "
            "newline); waiting for it to complete or be removed (`cbledger repair --truncate-torn-tail`)"
        )

    def _head_still_there(self) -> bool:
        """Does the line the last folded event came from still end where the fold stopped? A file
        replaced by a shorter or different one fails this before anything is folded onto it."""
        assert self.follower is not None
        offset, head = self.follower.offset, self.follower.state.head_hash
        if offset == 0 or head is None:
            return True
        if os.path.getsize(self.ledger) < offset:
            return False
        with open(self.ledger, "rb") as f:
            f.seek(max(0, offset - 200))
            tail = f.read(min(200, offset))
        return tail.endswith(b'"}\n') and f'"hash":"{head}","prev":"'.encode() in tail

    def _rebuild(self) -> tuple[bool, str | None]:
        """A fresh fold of the whole file: (adopted?, problem). Adopted when it folds to the end,
        or when there is no earlier state to keep."""
        follower = self._fresh()
        try:
            follower.poll()
            problem = None
        except ProjectionError as exc:
            problem = str(exc)
        if problem is not None and self.follower is not None:
            return False, f"{problem} (the part already folded was rewritten, and the new file does not fold either)"
        self.follower = follower
        self._prefix = blake3()
        self._hash_prefix(0, follower.offset, self._prefix)
        return True, problem or self._torn(follower)

    def refresh(self) -> Update | None:
        """Folds new events and rewrites what changed; None when nothing new was folded.

        Nothing is published from bytes that were not verified: the prefix already folded must
        still hash to what was folded (a same-size edit in place leaves every offset where it
        was, so only its digest tells), and every new line must link and hash (the follower).
        A missing ledger (deleted, or between `git checkout`'s unlink and write) is a problem
        reported like any other; the outputs stay where they are until it is back."""
        started = time.perf_counter()
        try:
            rebuilt, problem = self._refresh()
        except FileNotFoundError:
            rebuilt, problem = False, (
                f"{self.ledger}: the ledger is missing (deleted or being replaced); waiting for it to come back"
            )
        except OSError as exc:
            rebuilt, problem = False, f"{self.ledger}: cannot be read ({exc.strerror}); waiting"
        self.problem = problem
        if self.follower is None:
            return None
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
        if self.follower is None or not self._head_still_there() or not self._prefix_intact(self.follower.offset):
            return self._rebuild()
        return False, self._poll(self.follower)

    # ------------------------------------------------------------------ writing

    def _write(self, everything: bool, touched: set[str]) -> Update:
        assert self.follower is not None
        state = self.follower.state
        folded = state.head_seq if everything else state.head_seq - self.written_seq
        done = writers.regenerate_all(
            state, self.workspace, runs=None if everything else touched, read_model=self.with_read_model
        )
        self.written_seq = state.head_seq
        return Update(
            folded=folded,
            head_seq=state.head_seq,
            records_written=done.records.created + done.records.updated,
            records_removed=done.records.removed,
            leaderboard=done.leaderboard,
            read_model=done.read_model,
            rebuilt=everything,
        )
