"""Writers: the only code in `projections` that touches the file system.

Folds and renderers are pure; these functions read a ledger into a state and turn views into
files, and `regenerate_all` is the one place that writes every output of a state (`project all`,
`demo` and `watch` all call it). The records writer writes only files that are new or whose bytes differ from the
rendering, and removes nothing: a retracted run's records stay as published, with a
`run-<n>.retracted.json` beside them. Files it does not own (anything that is not a record or a
retraction mark) are never touched. A workspace whose records are packed (`packed.py`, one SQLite
file) gets rows where it would get files, the same bytes at the same paths (`RecordStore`).
"""

from __future__ import annotations

import contextlib
import difflib
import errno
import fcntl
import functools
import gc
import os
import re
import sqlite3
import stat
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path

import msgspec
from msgspec import Struct

from cbledger import invocation
from cbledger.errors import UserError
from cbledger.ledger.durable import (
    flock_saying,
    fsync_directory,
    naming,
    remove_dead_temps,
    temp_name,
    write_atomic,
    written_name,
)
from cbledger.ledger.jsonl import JsonLinesRecorder
from cbledger.ledger.recorder import CorruptRecord, LedgerMissing, StoreUnavailable
from cbledger.ledger.store import LedgerStore, StoredEvent
from cbledger.projections import leaderboard, paths, readmodel, snapshot, spill
from cbledger.projections import packed as packed_mod
from cbledger.projections import records as rec
from cbledger.projections.aggregates import Views
from cbledger.projections.fold import PER_RUN, LedgerState, ProjectionError, Projector
from cbledger.projections.site import render as site
from cbledger.projections.site.evidence import RunEvidence
from cbledger.workspace import Workspace


class LedgerFollower:
    """Keeps a state up to date with a ledger, reading only the events appended since.

    It reads through the store's read API (`LedgerStore.read(since=…)`), so it follows any
    backend: the JSON Lines recorder resumes a read at the byte offset where its last one
    stopped, a database selects by seq. Reads stop at what is committed (never a torn tail or
    part of an append in progress), and the first new event must link to the last folded hash, so
    a ledger rewritten underneath is refused rather than folded onto a stale state; each new
    event must hash to its own recorded link too, so an edited line is refused: a state, and every
    head published from it, is only ever built from a chain that verifies. `on_folded`,
    if given, sees every record folded, in order.
    """

    def __init__(
        self,
        ledger: Path | str | LedgerStore,
        projector: Projector | None = None,
        on_folded: Callable[[StoredEvent], None] | None = None,
        *,
        resumed: bool = False,
    ) -> None:
        self.store = ledger if isinstance(ledger, LedgerStore) else LedgerStore(ledger)
        self.projector = projector or Projector()
        held = getattr(self.projector, "views", None)  # a projector that keeps its own (the watch's)
        #: the aggregates kept current with this follower's folds: a snapshot's when it held them
        #: (`resume`), else computed from the state when first read
        self.views: Views = held if isinstance(held, Views) else Views.attach(self.projector)
        self.on_folded = on_folded
        #: the seq the fold started after: 0, or that of the snapshot it resumed from (`resume`)
        self.base_seq = self.projector.last_seq if resumed else 0
        if self.projector.last_seq and not resumed:
            raise ProjectionError("a follower starts from an empty state, or from a snapshot the ledger confirmed")

    @property
    def state(self) -> LedgerState:
        return self.projector.state

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
        where = self.store.location
        try:
            for stored in self.store.read(since=self.state.head_seq):
                if expected_prev is not None and stored.prev != expected_prev:
                    raise ProjectionError(
                        f"{where}: the event at seq {stored.seq} does not link to the last folded "
                        f"event (seq {self.state.head_seq}); the ledger changed underneath (rebuild from scratch)"
                    )
                if not stored.hashes_to_link():
                    raise ProjectionError(
                        f"{where}: the event at seq {stored.seq} does not hash to its recorded link; "
                        f"the ledger was edited (`{invocation.command('replay', '--verify')}` locates it)"
                    )
                n += self.projector.apply([stored])
                expected_prev = stored.hash
                if self.on_folded is not None:
                    self.on_folded(stored)
        except (ProjectionError, StoreUnavailable):  # a server down is no change to the ledger
            raise
        except CorruptRecord as exc:  # the store names the line and what is wrong with it
            raise ProjectionError(str(exc)) from None
        except (UserError, msgspec.MsgspecError, ValueError) as exc:
            # a line or row that is not a ledger record where the next one should start
            # read from the start, a command meets a damaged line; a follower may also meet a
            # ledger replaced underneath it: either way verification names the line
            raise ProjectionError(
                f"{where}: no readable event after seq {self.state.head_seq} ({exc}): the ledger is damaged "
                f"there, or was replaced underneath (`{invocation.command('replay', '--verify', '--chain-only')}` names the line)"
            ) from None
        return n


def load_state(
    ledger: Path | str | LedgerStore, snapshots: Path | None = None, note: Callable[[str], None] | None = None
) -> LedgerState:
    """The state at the ledger's head (a file, a database URL, or a store): resumed from the latest
    snapshot in `snapshots` the ledger confirms, else a full rebuild. No ledger at all is the one
    refusal every command gives for it (exit 2), not an empty state nor a read error."""
    return follow(ledger, snapshots, note).state


def follow(
    ledger: Path | str | LedgerStore, snapshots: Path | None = None, note: Callable[[str], None] | None = None,
    projector: Callable[[LedgerState | None], Projector] = Projector,
    on_folded: Callable[[StoredEvent], None] | None = None,
) -> LedgerFollower:
    """A follower folded to the ledger's head, from the latest valid snapshot if there is one."""
    store = ledger if isinstance(ledger, LedgerStore) else LedgerStore(ledger)
    if not store.exists():
        raise LedgerMissing(f"{store.location}: no ledger here (run `{invocation.command('init')}` first)")
    follower = resume(store, snapshots, note, projector, on_folded)
    follower.poll()
    return follower


def snapshot_files(directory: Path | None) -> list[tuple[int, Path]]:
    """The snapshot files in `directory`, newest (highest seq) first."""
    if directory is None:
        return []
    try:
        names = os.listdir(directory)
    except OSError:
        return []
    found = [(seq, directory / name) for name in names if (seq := snapshot.seq_of(name)) is not None]
    return sorted(found, reverse=True)


def event_at(store: LedgerStore, seq: int, offset: int | None = None) -> StoredEvent | None:
    """The ledger's event at `seq`: for a file, read at the byte offset just after its line (a
    snapshot's, or one the store's reads passed), which also lets reads resume there, rather than
    by reading the file up to it."""
    recorder = store.recorder
    if isinstance(recorder, JsonLinesRecorder):
        offset = offset if offset is not None else recorder.offset_after(seq)
        found = None if offset is None else recorder.record_ending_at(offset)
        if found is not None and found.seq == seq:
            return found
    return store.find(seq) if seq > 0 else None


def resume(
    store: LedgerStore, directory: Path | None, note: Callable[[str], None] | None = None,
    projector: Callable[[LedgerState | None], Projector] = Projector,
    on_folded: Callable[[StoredEvent], None] | None = None,
) -> LedgerFollower:
    """A follower whose state is the latest snapshot the ledger confirms, or empty (then `note`
    hears why the latest snapshot was ignored, in one line)."""
    latest = snapshot_files(directory)[:1]
    for _seq, path in latest:
        try:
            loaded = _read_snapshot(store, path)
        except OSError as exc:
            problem = f"{path}: cannot be read ({exc.strerror})"
        except StoreUnavailable:
            raise  # the database away, not the snapshot: it is tried again once the server is back
        except (snapshot.SnapshotError, UserError) as exc:
            problem = str(exc)
        else:
            follower = LedgerFollower(store, projector(loaded.state), on_folded, resumed=True)
            if loaded.aggregates is not None:  # before anything folds onto them
                follower.views.adopt(loaded.aggregates)
            return follower
        if note is not None:
            note(f"snapshot ignored, folding from seq 1: {problem}")
    return LedgerFollower(store, projector(None), on_folded)


def _read_snapshot(store: LedgerStore, path: Path) -> snapshot.Loaded:
    """The state (and aggregates) a snapshot holds, once its header matches this code and the
    ledger confirms it."""
    with open(path, "rb") as f:
        head = snapshot.header(f, str(path))
        found = event_at(store, head.seq, head.offset)
        problem = snapshot.anchor_problem(head, None if found is None else found.seq,
                                          None if found is None else found.hash, str(path))
        if problem is not None:
            raise snapshot.SnapshotError(problem)
        was_enabled = gc.isenabled()
        gc.disable()  # as `LedgerFollower.poll` does: a state is long-lived objects without cycles
        try:
            return snapshot.read(f, head, str(path), path.parent)
        finally:
            if was_enabled:
                gc.enable()


def save_snapshot(follower: LedgerFollower, directory: Path, keep: int = 2) -> Path | None:
    """Writes the follower's state as a snapshot (None when there is nothing new to keep: an empty
    ledger, or the state is the snapshot it resumed from) and removes all but the `keep` newest,
    never the one just written (a results directory two ledgers share holds the other's newer
    ones: it was removed at once and named as kept)."""
    state = follower.state
    if state.head_seq == 0 or state.head_hash is None or state.head_seq == follower.base_seq:
        return None
    if snapshot.key_problem() is not None:
        return None  # sealed with this process's own key, it would serve no later one
    recorder = follower.store.recorder
    offset = recorder.offset_after(state.head_seq) if isinstance(recorder, JsonLinesRecorder) else None
    target = directory / snapshot.file_name(state.head_seq)
    directory.mkdir(parents=True, exist_ok=True)
    tables = _save_tables(state, directory) if spill.file_of(state.runs) is not None else None
    views = follower.views
    aggregates = views.dumps() if views.built else None  # never computed for the snapshot's sake
    write_atomic(target, snapshot.encode(state, offset, tables, aggregates))
    for _seq, old in snapshot_files(directory)[keep:]:
        if old != target:
            old.unlink(missing_ok=True)
    _drop_tables(directory)
    return target


def _save_tables(state: LedgerState, directory: Path) -> snapshot.Tables:
    """A spilled state's maps keyed by run id, copied beside the snapshot (`spill.copy_tables`):
    the scratch file goes on changing, and goes when the process does. Once they were copied
    whole (or read from a snapshot), a later snapshot writes only the rows changed since, beside
    the base it names (`spill.delta_base`); a quarter of the base changed, every row again."""
    maps = {field: getattr(state, field) for field, _ in PER_RUN}
    base = spill.delta_base(maps)
    remove_dead_temps(directory)  # what a save killed half way left (gigabytes at 10^7 events)
    if base is not None and _base_here(directory, base):
        delta = _write_tables(maps, directory, snapshot.delta_name(state.head_seq, _seq(base)), delta=True)
        if _base_here(directory, base):  # not pruned by another process while the delta was written
            return snapshot.Tables(base, delta)
        (directory / delta.file).unlink(missing_ok=True)
    whole = _write_tables(maps, directory, snapshot.tables_name(state.head_seq), delta=False)
    spill.mark_copied(maps, whole)
    return snapshot.Tables(whole)


def _seq(base: spill.TableFile) -> int:
    seqs = snapshot.table_file_seqs(base.file)
    assert seqs is not None  # a name `_write_tables` gave
    return seqs[0]


def _base_here(directory: Path, base: spill.TableFile) -> bool:
    """The tables a delta would name are beside it, and still the ones this state copied (another
    process folding to the same seq puts its own in place, with a nonce of its own)."""
    return spill.base_holds(str(directory / base.file), base, snapshot.sealer(base.nonce))


def _write_tables(maps: dict[str, spill.SpilledMap[object]], directory: Path, name: str, *, delta: bool) -> spill.TableFile:
    staged = Path(temp_name(directory / name))
    nonce = os.urandom(16).hex()
    try:
        rows = spill.copy_tables(maps, str(staged), snapshot.sealer(nonce), delta=delta)
        os.replace(staged, directory / name)
    except sqlite3.Error as exc:  # a full disk, said as the disk's, as any other write's
        raise OSError(errno.ENOSPC if "full" in str(exc) else errno.EIO, str(exc), str(staged)) from None
    finally:
        staged.unlink(missing_ok=True)
    fsync_directory(directory)
    return spill.TableFile(name, rows, nonce)


def _drop_tables(directory: Path) -> None:
    """Snapshot tables and deltas older than every kept snapshot (their snapshots were removed),
    but the tables a kept or newer delta names as its base. Newer ones no snapshot names yet are
    left: another process may be writing the snapshot that will."""
    kept = [seq for seq, _ in snapshot_files(directory)]
    if not kept:
        return
    oldest = min(kept)
    named = [seqs for name in os.listdir(directory) if (seqs := snapshot.table_file_seqs(name)) is not None]
    needed = {base for seq, base in named if seq >= oldest}
    for name in os.listdir(directory):
        seqs = snapshot.table_file_seqs(name)
        if seqs is not None and seqs[0] < oldest and seqs[0] not in needed:
            (directory / name).unlink(missing_ok=True)


def keep_snapshot(follower: LedgerFollower, directory: Path, note: Callable[[str], None]) -> Path | None:
    """`save_snapshot` for a command whose outputs are written already: a snapshot that cannot be
    written is a cache missed, said in one line, not a failure of the command."""
    if (problem := snapshot.key_problem()) is not None:
        note(f"no snapshot written: {problem}; every fold starts at seq 1")
        return None
    try:
        return save_snapshot(follower, directory)
    except OSError as exc:
        note(f"{written_name(exc) or directory}: no snapshot written ({exc.strerror}); the next fold starts further back")
        return None
    except spill.TableDamaged as exc:  # the snapshot this fold resumed from, damaged since: said, not fatal
        note(f"no snapshot written: {exc}")
        return None


class RecordsReport(Struct, kw_only=True):
    created: list[str]
    updated: list[str]
    unchanged: int
    #: marks of retracted runs (`run-<n>.retracted.json`) among the files above
    marks: int = 0

    @property
    def clean(self) -> bool:
        return not (self.created or self.updated)


#: files staged before they are put in place: a full rebuild at 10^7 events stages 5 million,
#: and held them all (a name each, and as many staged files on disk) until its end
STAGED_BATCH = 100_000


class RecordStore:
    """The records a results directory holds, in whichever layout it keeps them: one file per
    record path (the default) or rows of the packed store (`packed`, when its file exists).
    `packed` forces a layout (True creates the store). Writes are put in place together by
    `commit`: staged files with two flushes, or rows in one transaction (rolled back when the
    batch ends without it)."""

    def __init__(self, results: Path, packed: bool | None = None) -> None:
        self.results = results
        self.store: packed_mod.PackedRecords | None = None
        if packed is None:  # the workspace's own layout: a store that is there, never a new one
            if packed_mod.is_packed(results):
                self.store = packed_mod.PackedRecords(packed_mod.store_path(results))
        elif packed:
            results.mkdir(parents=True, exist_ok=True)
            self.store = packed_mod.PackedRecords(packed_mod.store_path(results), create=True)
        #: files written under a temporary name, put in place together by `commit`
        self.staged: list[str] = []

    def __enter__(self) -> RecordStore:
        return self

    def __exit__(self, *exc: object) -> None:
        _discard(self.staged)  # a batch that failed before `commit` leaves no staged file
        self.staged = []
        if self.store is not None:
            self.store.close()

    @property
    def layout(self) -> str:
        return "files" if self.store is None else "packed"

    def paths(self) -> set[str]:
        """Every record path and retraction mark held, relative to `results/`."""
        return record_files(self.results) if self.store is None else self.store.paths()

    def read(self, relpath: str) -> bytes | None:
        if self.store is not None:
            return self.store.get(relpath)
        return output_bytes(self.results / relpath)

    def items(self) -> Iterator[tuple[str, bytes]]:
        """Every record and mark held, in path order."""
        if self.store is not None:
            yield from self.store.items()
            return
        for relpath in sorted(self.paths()):
            yield relpath, (self.results / relpath).read_bytes()

    def write(self, relpath: str, data: bytes) -> None:
        if self.store is not None:
            self.store.write(relpath, data)
        else:
            self.staged.append(_stage(self.results / relpath, data))
            if len(self.staged) >= STAGED_BATCH:
                self.commit()  # each file stays old or new and whole; a batch need not be every record

    def commit(self) -> None:
        if self.store is not None:
            self.store.commit()
        else:
            _commit_staged(self.staged)
            self.staged = []


def record_files(results: Path) -> set[str]:
    """Every file under `results/` laid out as a record path or a retraction mark, relative to
    `results/`."""
    found: set[str] = set()
    if not results.is_dir():
        return found
    for day in results.iterdir():
        if day.is_dir() and paths.DATE_DIR.match(day.name):
            for p in day.glob("*/*/*.json"):
                rel = p.relative_to(results).as_posix()
                if paths.is_record_path(rel) or paths.is_retraction_path(rel):
                    found.add(rel)
    return found


class _Sync:
    """What a records pass found, record by record; `check` writes and removes nothing."""

    def __init__(self, store: RecordStore, check: bool) -> None:
        self.store, self.check = store, check
        self.created: list[str] = []
        self.updated: list[str] = []
        self.unchanged = 0
        self.marks = 0

    def put(self, relpath: str, data: bytes) -> None:
        if paths.is_retraction_path(relpath):
            self.marks += 1
        existing = self.store.read(relpath)
        if existing == data:
            self.unchanged += 1
            return
        (self.created if existing is None else self.updated).append(relpath)
        if not self.check:
            self.store.write(relpath, data)

    def report(self) -> RecordsReport:
        self.store.commit()
        return RecordsReport(created=self.created, updated=self.updated, unchanged=self.unchanged, marks=self.marks)


def _stage(path: Path, data: bytes) -> str:
    """Writes `data` beside `path` under a temporary name (`durable.temp_name`), not yet synced
    nor in place; returns the target as a string (a batch of a million keeps a string each, not
    Paths). What a killed writer staged in that directory before is removed first."""
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_dead_temps(path.parent)
    target = os.fspath(path)
    staged = temp_name(target)
    try:
        with naming(target), open(staged, "wb") as f:
            f.write(data)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(staged)
        raise
    return target


def _discard(staged: list[str]) -> None:
    """Removes the staged files of a batch that will not be committed."""
    for path in staged:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp_name(path))


def _commit_staged(staged: list[str]) -> None:
    """Puts staged files in place as `write_atomic` would each, with two flushes for the batch.

    Why a crash leaves every file either as it was or whole and new, never torn: each target is
    only ever replaced by renaming a staged file over it, and the staged files' bytes are made
    durable (the first flush) before the first rename. A rename is atomic, so after a crash a
    name points at the old inode or at the new, complete one; renames not yet durable at the
    crash simply read as old. The second flush makes the renames themselves durable before the
    function returns. A single file is synced alone (its fsync and its directory's); a batch
    with one `syncfs` of the file system before and after the renames, rather than an fsync per
    file and per directory (100k records: two flushes, not some 105,000). A failure (a full or
    failing disk) names the file and leaves no staged file behind; the targets renamed before
    it are whole and new, the others as they were."""
    if not staged:
        return
    done = 0
    try:
        if len(staged) == 1:
            path = staged[0]
            with naming(path):
                with open(temp_name(path), "rb") as f:
                    os.fsync(f.fileno())
                os.replace(temp_name(path), path)
                done = 1
                fsync_directory(Path(path).parent)
            return
        where = Path(staged[0]).parent
        with naming(where):
            _sync_filesystem(where)
        for path in staged:
            os.replace(temp_name(path), path)
            done += 1
        with naming(where):
            _sync_filesystem(where)
    except BaseException:
        _discard(staged[done:])
        raise


def _sync_filesystem(directory: Path) -> None:
    """Flushes the file system holding `directory` (Linux `syncfs`; elsewhere every file system)."""
    syncfs = _syncfs()
    fd = os.open(directory, os.O_RDONLY)
    try:
        if syncfs is None or syncfs(fd) != 0:
            os.sync()
    finally:
        os.close(fd)


@functools.cache
def _syncfs() -> Callable[[int], int] | None:
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        fn: Callable[[int], int] = libc.syncfs
        return fn
    except (OSError, AttributeError):
        return None


def sync_records(state: LedgerState, results: Path, check: bool = False, packed: bool | None = None) -> RecordsReport:
    """Makes `results/` hold every record and retraction mark the ledger produces, in its own
    layout unless `packed` chooses one. With `check`, only reports what differs."""
    with RecordStore(results, packed) as store:
        sync = _Sync(store, check)
        for relpath, data in rec.iter_published(state):
            sync.put(relpath, data)
        return sync.report()


def sync_run_records(state: LedgerState, results: Path, run_ids: Iterable[str]) -> RecordsReport:
    """`sync_records` for the records of some runs only: a record depends on nothing but its run,
    that run's grades and rubric scores, so after new events only the runs they name can change."""
    wanted = set(run_ids)
    marks = {mark.run_id: (path, mark) for path, mark in rec.retraction_marks(state) if mark.run_id in wanted}
    with RecordStore(results) as store:
        sync = _Sync(store, check=False)
        for run_id in sorted(wanted):
            entry = state.runs.get(run_id)
            if entry is None:
                continue
            for relpath, _suite, graded in rec.record_paths(state, run_id):
                sync.put(relpath, rec.render(rec.build_record(state, entry, graded)))
            if run_id in marks:
                path, mark = marks[run_id]
                sync.put(path, rec.render(mark))
        return sync.report()


def export_records(results: Path, directory: Path) -> RecordsReport:
    """Writes the records `results/` holds (either layout) into `directory` as the standard file
    tree, the same bytes; like the records writer, only files missing or different."""
    with RecordStore(results) as source, RecordStore(directory, packed=False) as target:
        sync = _Sync(target, check=False)
        for relpath, data in source.items():
            sync.put(relpath, data)
        return sync.report()


def use_layout(state: LedgerState, results: Path, packed: bool) -> RecordsReport:
    """Makes `results/` keep its records in the chosen layout from now on: every record the
    ledger produces written there (the records are a function of the ledger, so nothing is
    carried over), and for files, the packed store removed afterwards so that the files are what
    is read. Record files left by a switch to packed are neither read nor written from then on."""
    report = sync_records(state, results, packed=packed)
    if not packed and packed_mod.is_packed(results):
        packed_mod.store_path(results).unlink()
        fsync_directory(results)
    return report


#: Reads the evidence of some runs (None: every run) for their pages. It opens the preserved
#: bundles, which a projection never does, so the caller hands it in
#: (`cbledger.reproduce.site_evidence.source`).
SiteEvidence = Callable[[LedgerState, Iterable[str] | None], Mapping[str, RunEvidence]]


_CHAIN_TABLE = re.compile(rb'<table class="chain">.*?</table>', re.S)


def _chain_table(page: bytes) -> bytes | None:
    """A run page's table of the run's own events and their links: what the ledger says of it."""
    found = _CHAIN_TABLE.search(page)
    return found.group() if found else None


def sync_site(
    state: LedgerState, directory: Path, evidence: SiteEvidence, runs: Iterable[str] | None = None,
    kept: list[tuple[str, str]] | None = None,
) -> list[str]:
    """Writes the site's pages whose bytes differ (with `runs`, only those runs' pages beside the
    aggregate ones); returns the paths written, relative to the site. Removes nothing.

    A run page already there whose run's evidence this checkout cannot read (its fixture's tree
    is not materialized: a clone's real boards) is left as it is, and added to `kept` with the
    reason: rendered now it would say only "evidence not shown", and a clone's first `project
    site` replaced the committed pages' ERC tables, transcripts and diffs with that line. Only
    while the run's own events are those the page lists in its chain table: a grade, score or
    retraction since then is the ledger's word on the run, and the page is written without its
    evidence rather than kept saying otherwise."""
    wanted = None if runs is None else sorted(set(runs))
    written = []
    staged: list[str] = []
    found = evidence(state, wanted)
    problems = {site.run_page(rid): ev.problem for rid, ev in found.items() if ev.problem is not None and ev.here_only}
    for relpath, data in site.render(state, found, wanted):
        target = directory / relpath
        # what a killed writer staged is cleared even where nothing is written now: the site's
        # check lists every file, and a `project site` with nothing to write left it there
        remove_dead_temps(target.parent)
        try:
            there = target.read_bytes()
        except FileNotFoundError:
            there = None
        if there == data:
            continue
        if there is not None and relpath in problems and _chain_table(there) == _chain_table(data) is not None:
            if kept is not None:
                kept.append((relpath, problems[relpath]))
            continue
        try:
            staged.append(_stage(target, data))
        except BaseException:
            _discard(staged)
            raise
        written.append(relpath)
    _commit_staged(staged)
    return written


class Regenerated(Struct, kw_only=True):
    records: RecordsReport
    leaderboard: bool  # LEADERBOARD.md rewritten
    read_model: bool  # the read model rewritten
    #: site pages rewritten, relative to the site (none when no evidence source was given)
    site: list[str] = []
    #: run pages left as they were, their runs' evidence unreadable here, each with the reason
    site_kept: list[tuple[str, str]] = []


@contextlib.contextmanager
def one_projector(workspace: Workspace) -> Iterator[None]:
    """Holds the results directory for one fold-and-write at a time. Two commands that append and
    then project (two campaigns' `run`, a `judge` beside a `run`) each fold the ledger as they find
    it and write; without this, the one that folded first could write last, leaving the site and
    the read model a few events behind a ledger nobody appends to any more. Held, the second
    folds after the first wrote, so the last to write has folded the most. An advisory `flock` on
    the directory itself: nothing is created, so a command that then refuses writes nothing; a
    directory not there yet, or not ours to open, is not held (no other writer can be in it), nor
    one on a file system that cannot lock a directory (NFS)."""
    try:
        fd = os.open(workspace.results, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        yield
        return
    try:
        try:
            flock_saying(fd, fcntl.LOCK_EX, f"{workspace.results}: another cbledger command is writing these outputs")
        except OSError:
            pass  # a file system that locks no directory (NFS: EBADF, ENOLCK): unheld, as before it was
        yield
    finally:
        os.close(fd)  # the lock goes with the descriptor


def regenerate_all(
    state: LedgerState,
    workspace: Workspace,
    *,
    runs: Iterable[str] | None = None,
    read_model: bool = True,
    site_evidence: SiteEvidence | None = None,
    views: Views | None = None,
) -> Regenerated:
    """Writes every output of `state` that differs from what is on disk: the records,
    LEADERBOARD.md, (unless `read_model` is false) the SQLite read model and (given
    `site_evidence`) the HTML site.

    `runs` names the only runs whose records can have changed, for a caller that has just folded
    new events onto a state it wrote before; then the read model, whose `meta` table carries the
    ledger head, has changed for certain and is written without comparing. Without `runs` every
    record is checked and the read model is written only when its content differs.

    `views` are aggregates kept current with `state` as it folded (`Views.attach`), which the
    leaderboard and the read model are rendered from instead of walking the state; given them
    and `runs`, the read model on disk (written from these views before) is updated by row in
    one transaction (`readmodel.update`) rather than rebuilt, unless the views were computed
    again since (then any row may have changed, and it is rebuilt).
    """
    if views is None:
        views = Views(state)
    if runs is not None:
        runs = list(runs)
    if runs is None:
        records = sync_records(state, workspace.results)
    else:
        records = sync_run_records(state, workspace.results, runs)
    board = write_text_if_changed(workspace.leaderboard, leaderboard.render(state, None, views))
    db = False
    changed = views.take_changes()
    if read_model:
        write_text_if_changed(readmodel.metadata_path(workspace.read_model), readmodel.metadata(workspace.read_model.stem))
        db = runs is not None and changed is not None and _update_read_model(state, workspace.read_model, views, changed)
        if not db:  # written a row at a time; a full rebuild leaves an unchanged model as it is
            tables = readmodel.stream_tables(state, views)
            if runs is None:
                db = readmodel.write_if_changed(tables, workspace.read_model)
            else:
                readmodel.write(tables, workspace.read_model)
                db = True
    kept: list[tuple[str, str]] = []
    pages = sync_site(state, workspace.site, site_evidence, runs, kept) if site_evidence is not None else []
    return Regenerated(records=records, leaderboard=board, read_model=db, site=pages, site_kept=kept)


def _update_read_model(state: LedgerState, path: Path, views: Views, changed: set[str]) -> bool:
    """Updates the read model by row; False when there is none to update, or it is not one
    this code wrote (a missing table, another schema): then it is rebuilt."""
    if not path.is_file():
        return False
    try:
        readmodel.update(path, state, views, changed)
    except (sqlite3.Error, KeyError):
        return False
    return True


class FileCheck(Struct, kw_only=True):
    path: str
    matches: bool
    diff: str
    #: the file is not there at all (the diff is then the whole regeneration)
    missing: bool = False


#: what a check shows of a generated file that is a link or a special file, which it never opens
NOT_READ = b"(a link or special file where a generated file should be: not read)\n"


def output_bytes(path: Path) -> bytes | None:
    """A generated file's bytes for a check (None: not there). A link or a special file is never
    opened: a results directory handed over could link LEADERBOARD.md or a record to any file of
    this machine, whose lines a difference would then quote (or a FIFO, which would hang it)."""
    try:
        if not stat.S_ISREG(path.lstat().st_mode):
            return NOT_READ
        return path.read_bytes()
    except FileNotFoundError:
        return None


def check_text(path: Path, expected: str, label: str) -> FileCheck:
    """Compares a committed generated file with its regeneration; `diff` is unified, committed -> fresh."""
    data = output_bytes(path)
    missing = data is None
    # bytes that are not UTF-8 differ like any other (a traceback once): shown replaced
    actual = "" if data is None else data.decode("utf-8", "replace")
    if actual == expected:
        return FileCheck(path=str(path), matches=True, diff="")
    diff = "".join(
        difflib.unified_diff(
            actual.splitlines(keepends=True),
            expected.splitlines(keepends=True),
            fromfile=f"{label} ({'not there' if missing else 'committed'})",
            tofile=f"{label} (regenerated)",
        )
    )
    return FileCheck(path=str(path), matches=False, diff=diff, missing=missing)


def write_text_if_changed(path: Path, text: str) -> bool:
    data = text.encode("utf-8")
    try:
        if path.read_bytes() == data:
            return False
    except FileNotFoundError:
        pass
    write_atomic(path, data)
    return True
