"""Writers: the only code in `projections` that touches the file system.

Folds and renderers are pure; these functions read a ledger into a state and turn views into
files, and `regenerate_all` is the one place that writes every output of a state (`project all`,
`demo` and `watch` all call it). The records writer writes only files that are new or whose bytes differ from the
rendering, and removes nothing but the record files of retracted runs — the one permitted change
to an existing record. Files it does not own (anything that is not a record path) are never
touched.
"""

from __future__ import annotations

import difflib
import gc
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

from msgspec import Struct

from cbledger.ledger.chain import link_hash, parse_line
from cbledger.ledger.encoding import decode
from cbledger.ledger.jsonl import JsonLinesRecorder
from cbledger.projections import leaderboard, readmodel
from cbledger.projections import records as rec
from cbledger.projections.fold import LedgerState, ProjectionError, Projector
from cbledger.workspace import Workspace


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
    event it folded and starts there. It reads only up to the committed size (never a torn tail),
    checks that each new line links to the last folded hash and that its hash is its own (the
    BLAKE3 link over its bytes), so a rewritten or edited file is refused rather than folded: a
    state, and every head published from it, is only ever built from a chain that verifies.
    """

    def __init__(self, ledger: Path, projector: Projector | None = None) -> None:
        self.store = JsonLinesRecorder(ledger)
        self.projector = projector or Projector()
        self.offset = 0
        if self.projector.last_seq:
            raise ProjectionError("a follower starts from an empty state (it must learn the offset)")

    @property
    def state(self) -> LedgerState:
        return self.projector.state

    def _new_events(self) -> Iterator[_Line]:
        limit = self.store.committed_size()
        with open(self.store.path, "rb") as f:
            f.seek(self.offset)
            offset = self.offset
            seq = self.state.head_seq
            for line in f:
                if offset + len(line) > limit or not line.endswith(b"\n"):
                    return
                try:
                    parsed = parse_line(line)
                    event = decode(parsed.event)
                except Exception as exc:  # a line that does not parse where one should start
                    raise ProjectionError(
                        f"{self.store.path}: no ledger line at byte {offset} (seq {seq + 1} expected): {exc}; "
                        "the ledger is damaged there, or changed underneath (`cbledger replay --verify` locates it)"
                    ) from None
                if link_hash(parsed.prev, event.seq, parsed.event) != parsed.hash:
                    raise ProjectionError(
                        f"{self.store.path}: the line at byte {offset} (seq {event.seq}) does not hash to its "
                        "recorded link; the ledger was edited (`cbledger replay --verify` locates it)"
                    )
                yield _Line(event, parsed.hash, parsed.prev, offset, offset + len(line))
                seq = event.seq
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


class _Sync:
    """What a records pass found, file by file; `check` writes and removes nothing."""

    def __init__(self, results: Path, check: bool) -> None:
        self.results, self.check = results, check
        self.created: list[str] = []
        self.updated: list[str] = []
        self.removed: list[str] = []
        self.unchanged = 0

    def put(self, relpath: str, data: bytes) -> None:
        target = self.results / relpath
        try:
            existing = target.read_bytes()
        except FileNotFoundError:
            existing = None
        if existing == data:
            self.unchanged += 1
            return
        (self.created if existing is None else self.updated).append(relpath)
        if not self.check:
            write_atomic(target, data)

    def remove(self, relpath: str) -> None:
        target = self.results / relpath
        if target.is_file():
            self.removed.append(relpath)
            if not self.check:
                target.unlink()

    def report(self) -> RecordsReport:
        return RecordsReport(created=self.created, updated=self.updated, removed=self.removed, unchanged=self.unchanged)


def sync_records(state: LedgerState, results: Path, check: bool = False) -> RecordsReport:
    """Makes `results/` hold exactly the live records. With `check`, only reports what differs."""
    sync = _Sync(results, check)
    for entry in rec.record_entries(state):
        sync.put(entry.path, rec.render(entry.built))
    for relpath in rec.retracted_paths(state):
        sync.remove(relpath)
    return sync.report()


def sync_run_records(state: LedgerState, results: Path, run_ids: Iterable[str]) -> RecordsReport:
    """`sync_records` for the records of some runs only: a record depends on nothing but its run,
    that run's grades and rubric scores, so after new events only the runs they name can change."""
    sync = _Sync(results, check=False)
    for run_id in sorted(run_ids):
        entry = state.runs.get(run_id)
        if entry is None:
            continue
        for relpath, _suite, graded in rec.record_paths(state, run_id):
            if run_id in state.retracted:
                sync.remove(relpath)
            else:
                sync.put(relpath, rec.render(rec.build_record(state, entry, graded)))
    return sync.report()


def read_model_matches(path: Path, tables: list[readmodel.Table]) -> bool:
    """Does the database at `path` already hold this content? SQLite's bytes are not a function
    of the content, so a committed read model is rewritten only when what it says changed."""
    if not path.is_file():
        return False
    try:
        return readmodel.canonical_dump(path) == readmodel.canonical_dump_tables(tables)
    except Exception:  # not a read model: rewrite it
        return False


class Regenerated(Struct, kw_only=True):
    records: RecordsReport
    leaderboard: bool  # LEADERBOARD.md rewritten
    read_model: bool  # the read model rewritten


def regenerate_all(
    state: LedgerState, workspace: Workspace, *, runs: Iterable[str] | None = None, read_model: bool = True
) -> Regenerated:
    """Writes every output of `state` that differs from what is on disk: the records,
    LEADERBOARD.md and (unless `read_model` is false) the SQLite read model.

    `runs` names the only runs whose records can have changed, for a caller that has just folded
    new events onto a state it wrote before; then the read model, whose `meta` table carries the
    ledger head, has changed for certain and is written without comparing. Without `runs` every
    record is checked and the read model is written only when its content differs.
    """
    if runs is None:
        records = sync_records(state, workspace.results)
    else:
        records = sync_run_records(state, workspace.results, runs)
    board = write_text_if_changed(workspace.leaderboard, leaderboard.render(state, None))
    db = False
    if read_model:
        tables = readmodel.build_tables(state)
        if runs is not None or not read_model_matches(workspace.read_model, tables):
            readmodel.write(tables, workspace.read_model)
            db = True
    return Regenerated(records=records, leaderboard=board, read_model=db)


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
