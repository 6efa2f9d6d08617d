"""Writers: the only code in `projections` that touches the file system.

Folds and renderers are pure; these functions read a ledger into a state and turn views into
files. The records writer writes only files that are new or whose bytes differ from the
rendering, and removes nothing but the record files of retracted runs — the one permitted change
to an existing record. Files it does not own (anything that is not a record path) are never
touched.
"""

from __future__ import annotations

import difflib
import gc
import os
from pathlib import Path

from msgspec import Struct

from typing import Any, NamedTuple

from cbledger.ledger.chain import parse_line
from cbledger.ledger.encoding import decode
from cbledger.ledger.store import LedgerStore
from cbledger.projections import records as rec
from cbledger.projections.fold import LedgerState, ProjectionError, Projector


class _Line(NamedTuple):
    event: Any
    hash: str
    prev: str
    offset: int
    end: int


class LedgerFollower:
    """Keeps a state up to date with a ledger file, reading only the bytes appended since.

    `LedgerStore.read(since=...)` re-parses every line before `since`, which makes an
    incremental update cost a full scan; the follower remembers the byte offset after the last
    event it folded and starts there. It reads only up to the committed size (never a torn tail)
    and checks that the first new line links to the last folded hash, so a rewritten file is
    refused rather than folded onto a stale state.
    """

    def __init__(self, ledger: Path, projector: Projector | None = None) -> None:
        self.store = LedgerStore(ledger)
        self.projector = projector or Projector()
        self.offset = 0
        if self.projector.last_seq:
            raise ProjectionError("a follower starts from an empty state (it must learn the offset)")

    @property
    def state(self) -> LedgerState:
        return self.projector.state

    def _new_events(self):
        limit = self.store.committed_size()
        with open(self.store.path, "rb") as f:
            f.seek(self.offset)
            offset = self.offset
            for line in f:
                if offset + len(line) > limit or not line.endswith(b"\n"):
                    return
                try:
                    parsed = parse_line(line)
                    event = decode(parsed.event)
                except Exception as exc:  # a line that does not parse where one should start
                    raise ProjectionError(
                        f"{self.store.path}: no ledger line at byte {offset} ({exc}); the file "
                        "changed underneath (rebuild from scratch)"
                    ) from None
                yield _Line(event, parsed.hash, parsed.prev, offset, offset + len(line))
                offset += len(line)

    def poll(self) -> int:
        """Folds whatever was appended since the last poll; returns how many events.

        The cyclic garbage collector is paused while folding: a rebuild creates hundreds of
        thousands of long-lived objects that the collector would otherwise re-scan again and
        again (about a fifth of a 100k-run rebuild), and folding creates no cycles to collect.
        """
        was_enabled = gc.isenabled()
        gc.disable()
        try:
            return self._poll()
        finally:
            if was_enabled:
                gc.enable()

    def _poll(self) -> int:
        n = 0
        expected_prev = self.state.head_hash
        for stored in self._new_events():
            if expected_prev is not None and stored.prev != expected_prev:
                raise ProjectionError(
                    f"{self.store.path}: the line at byte {stored.offset} does not link to the last "
                    "folded event; the file changed underneath (rebuild from scratch)"
                )
            n += self.projector.apply([stored])
            expected_prev = stored.hash
            self.offset = stored.end
        return n


def load_state(ledger: Path) -> LedgerState:
    """A full rebuild from a ledger file."""
    follower = LedgerFollower(ledger)
    follower.poll()
    return follower.state


def write_atomic(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


class RecordsReport(Struct, kw_only=True):
    created: list[str]
    updated: list[str]
    removed: list[str]
    unchanged: int

    @property
    def clean(self) -> bool:
        return not (self.created or self.updated or self.removed)


def sync_records(state: LedgerState, results: Path, check: bool = False) -> RecordsReport:
    """Makes `results/` hold exactly the live records. With `check`, only reports what differs."""
    created, updated, removed = [], [], []
    unchanged = 0
    for entry in rec.record_entries(state):
        data = rec.render(entry.record)
        target = results / entry.path
        try:
            existing = target.read_bytes()
        except FileNotFoundError:
            existing = None
        if existing == data:
            unchanged += 1
            continue
        (created if existing is None else updated).append(entry.path)
        if not check:
            write_atomic(target, data)
    for relpath in rec.retracted_paths(state):
        target = results / relpath
        if target.is_file():
            removed.append(relpath)
            if not check:
                target.unlink()
    return RecordsReport(created=created, updated=updated, removed=removed, unchanged=unchanged)


class FileCheck(Struct, kw_only=True):
    path: str
    matches: bool
    diff: str


def check_text(path: Path, expected: str, label: str) -> FileCheck:
    """Compares a committed generated file with its regeneration; `diff` is unified, committed -> fresh."""
    try:
        actual = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        actual = ""
    if actual == expected:
        return FileCheck(path=str(path), matches=True, diff="")
    diff = "".join(
        difflib.unified_diff(
            actual.splitlines(keepends=True),
            expected.splitlines(keepends=True),
            fromfile=f"{label} (committed)",
            tofile=f"{label} (regenerated)",
        )
    )
    return FileCheck(path=str(path), matches=False, diff=diff)


def write_text_if_changed(path: Path, text: str) -> bool:
    data = text.encode("utf-8")
    try:
        if path.read_bytes() == data:
            return False
    except FileNotFoundError:
        pass
    write_atomic(path, data)
    return True
