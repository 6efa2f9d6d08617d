"""The JSON Lines recorder: one file, one exclusive lock, one write and one fsync per batch.

The file format is `cbledger.ledger.chain`'s line, one per event, in seq order. Everything that
is about the file lives here and nowhere else:

* Appends serialise on an exclusive `flock` of the file. Under the lock the appender first reads
  whatever other processes appended since it last looked (its index: where the file ends, the
  head, and where each id's line is), then compares the head with the one the batch was built
  on, then writes the batch with one `write` and makes it durable with one `fsync`.
* Readers take a shared lock only long enough to learn a size; a writer holds the exclusive lock
  for its whole write, so that size ends on a batch boundary and a reader never mistakes an
  append in progress for a crash's torn tail.
* A read resumes where an earlier one stopped: the recorder remembers the byte offset after the
  last lines it read (and after its index's head), so `read(since=N)` for such an N seeks there
  instead of parsing the file from the start, which is what keeps a follower's poll incremental.
  A remembered offset is used only if a line still ends just before it and the line after it has
  seq N + 1; otherwise the read starts from the beginning.
* A batch of more than one event is written whole or not at all. Before its bytes, the appender
  makes a mark durable beside the ledger (`.<name>.batch`: where the batch starts and where it
  will end) and removes it once the batch is synced. A mark found with the file shorter than its
  end, and the batch's first line at its start, is an append that died part-way (a kill, a
  crash): everything from its start is a torn tail, complete lines or not. Any other mark (its
  batch whole, never begun, or another line at its start) is no tear; the next locked reader or
  writer removes it.
* A torn tail is never read (the committed size ends before it), appending refuses to build on
  it, and only `truncate_torn_tail` removes it: the bytes after the last newline, or the
  interrupted batch from its start. No other code path deletes or rewrites ledger bytes; a
  failed write removes only its own never-acknowledged bytes, under the lock.
"""

from __future__ import annotations

import fcntl
import os
import stat
import weakref
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import msgspec

from cbledger import invocation
from cbledger.errors import UserError
from cbledger.ledger.chain import GENESIS, format_line, link_hash, parse_line
from cbledger.ledger.durable import flock_saying, fsync_directory, naming
from cbledger.ledger.recorder import (
    EMPTY,
    CorruptRecord,
    Head,
    HeadMoved,
    LedgerMissing,
    Recorder,
    StoredEvent,
    TailRepair,
    TornTail,
    check_continues,
)


class _IdSeq(msgspec.Struct):
    id: str
    seq: int


class _LineView(msgspec.Struct):
    event: _IdSeq
    hash: str
    prev: str


class _EventView(msgspec.Struct):
    id: str
    seq: int
    type: str


_LINE_VIEW = msgspec.json.Decoder(_LineView)
_EVENT_VIEW = msgspec.json.Decoder(_EventView)


def _read_only_mount(path: Path) -> bool:
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def _unlinked(seq: int, prev: str | None, head: Head) -> str:
    """What is wrong with a line that does not follow the one before it."""
    if seq <= head.seq:
        return f"seq {seq} again (a line copied or moved)"
    if seq > head.seq + 1:
        return f"seq {head.seq + 1} is missing (a line removed)"
    return f"its prev {(prev or '?')[:16]}… is not seq {head.seq}'s hash {head.hash[:16]}… (a line replaced)"


@dataclass
class _Index:
    """What an appender must know of the file: where it ends, its head and each id's line."""

    offset: int = 0
    head: Head = EMPTY
    ids: dict[str, int] = field(default_factory=dict)  # id -> byte offset of its line


class JsonLinesRecorder(Recorder):
    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self._index = _Index()
        self._held: int | None = None  # the descriptor holding the exclusive lock, if we hold it
        # seq -> offset just after its line, for the last lines reads passed: where reads resume
        self._marks: dict[int, int] = {}
        self._kept: tuple[int, int, Any] | None = None  # descriptor, owning process, its closer

    @property
    def location(self) -> str:
        return str(self.path)

    # ------------------------------------------------------------------ creation

    def exists(self) -> bool:
        return self.path.is_file() and self.path.stat().st_size > 0

    def create(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_CREAT | os.O_WRONLY | os.O_APPEND, 0o644)
        os.close(fd)
        fsync_directory(self.path.parent)

    def _require(self) -> None:
        if not self.path.is_file():
            raise LedgerMissing(f"{self.path}: no ledger here (run `{invocation.command('init')}` first)")

    # ------------------------------------------------------------------ appending

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        if self._held is not None:
            raise RuntimeError(f"{self.path}: exclusive() is already held by this recorder")
        with self._locked() as fd:
            # Nobody else appends until we let go, so one catch-up keeps the index current for
            # the whole section: head() and lookup() inside it read the index alone.
            self._catch_up(fd)
            self._held = fd
            try:
                yield
            finally:
                self._held = None

    def append(self, records: Sequence[StoredEvent], expected: Head) -> None:
        check_continues(self.location, records, expected)
        if self._held is not None:
            self._append_locked(self._held, records, expected)
            return
        with self._locked() as fd:
            self._append_locked(fd, records, expected)

    def _append_locked(self, fd: int, records: Sequence[StoredEvent], expected: Head) -> None:
        if self._held is None:  # inside exclusive() the index was brought up to date on entry
            self._catch_up(fd)
        if self._index.head != expected:
            raise HeadMoved(self.location, expected, self._index.head)
        if not records:
            return
        lines = [format_line(r.raw, r.hash, r.prev) for r in records]
        offset = self._write_durably(fd, b"".join(lines), first=records[0].hash if len(lines) > 1 else None)
        ids = self._index.ids
        for r, line in zip(records, lines, strict=True):
            ids[r.id] = offset
            offset += len(line)
        last = records[-1]
        self._index.offset = offset
        self._index.head = Head(last.seq, last.hash)

    def _write_durably(self, fd: int, data: bytes, first: str | None = None) -> int:
        """Writes and fsyncs `data` at the end of the file; returns where it starts. `first`: the
        hash of the first of several lines, which a kill or crash part-way must not leave as
        complete events, so the batch's extent is marked first (one line tears at most itself)."""
        start = os.lseek(fd, 0, os.SEEK_END)
        marked = first is not None and self._mark_batch(start, start + len(data), first)
        with naming(self.path):  # ENOSPC or EIO from a descriptor names no file
            try:
                view = memoryview(data)
                while view:
                    n = os.write(fd, view)
                    view = view[n:]
                _datasync(fd)
            except BaseException:
                # A failed write, or Ctrl-C part-way (no one was told of the batch either way).
                # Only our own, never-acknowledged bytes are removed: we hold the lock, and
                # `start` was the end of the file when we took it.
                os.ftruncate(fd, start)
                os.fsync(fd)
                if marked:
                    self._batch_mark.unlink(missing_ok=True)
                raise
        if marked:
            # not synced: a mark that comes back after a crash finds its batch whole
            self._batch_mark.unlink(missing_ok=True)
        return start

    def check_appendable(self) -> None:
        """Also that the ledger, and its directory (where a batch's mark is made), can be written:
        a read-only or immutable one refused each run's events only after the run was done.
        Asked with `access`, which writes nothing (and sees an immutable file or a read-only
        mount for root too). The file is indexed under the readers' lock first: the writers'
        is then held only to find a torn tail or an interrupted batch."""
        self.head()
        with self.exclusive():
            for what in (self.path, self.path.parent):
                if not os.access(what, os.W_OK):
                    why = "a read-only file system" if _read_only_mount(what) else "not writable by this user, or immutable"
                    raise UserError(f"{self.path}: cannot be appended to: {what} cannot be written ({why}); "
                                    "nothing was run or written")

    @property
    def _batch_mark(self) -> Path:
        return self.path.with_name(f".{self.path.name}.batch")

    def _mark_batch(self, start: int, end: int, first: str) -> bool:
        """Makes the mark of a batch about to be written durable (its bytes, then its name)."""
        mark = self._batch_mark
        try:
            with naming(mark):
                mfd = os.open(mark, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
                try:
                    # the batch's first line's hash too: a mark outliving its batch (its removal
                    # lost in a crash, a ledger restored in its place) finds another line there
                    os.write(mfd, f"{_MARK_FORMAT} {start} {end} {first}\n".encode())
                    os.fsync(mfd)
                finally:
                    os.close(mfd)
            fsync_directory(mark.parent)
        except OSError:
            mark.unlink(missing_ok=True)  # a full disk: nothing of the batch is written either
            raise
        return True

    def interrupted_batch(self, size: int | None = None) -> tuple[int, int] | None:
        """(where an interrupted batch starts, where it was to end) when one is marked and the
        file (of `size`, else as it is) stops short of its end; else None. Read under a lock."""
        marked, extent = self._batch_state(size)
        return extent if marked == "interrupted" else None

    def _batch_state(self, size: int | None = None) -> tuple[str, tuple[int, int] | None]:
        """"none", "left" (a mark whose batch reached its end, or never began) or "interrupted"."""
        try:
            text = self._batch_mark.read_bytes()
        except FileNotFoundError:
            return "none", None
        try:
            name, start, end, first = text.decode("ascii").split()
            if name != _MARK_FORMAT:
                raise ValueError(name)
            extent = int(start), int(end)
        except (UnicodeDecodeError, ValueError):
            # written before its fsync returned, so only a crash can leave it part-way: and then
            # nothing of the batch was written either
            return "left", None
        if size is None:
            size = self.path.stat().st_size
        # at its start nothing of it was written; at its end all of it: the mark alone is left
        if not extent[0] < size < extent[1]:
            return "left", extent
        return ("interrupted" if self._batch_begins(extent[0], size, first) else "left"), extent

    def _batch_begins(self, start: int, size: int, first: str) -> bool:
        """Do the bytes at `start` begin the marked batch: its first line torn, or whole with its
        hash? Any other line there (an event appended after the batch was rolled back, a copy
        restored in place) is no part of it, whatever the mark's offsets say."""
        with open(self.path, "rb") as f:
            f.seek(start)
            line = f.readline(size - start)
        if not line.endswith(b"\n"):
            return True  # torn: a tail either way, removed from the same byte
        try:
            return parse_line(line).hash == first
        except (msgspec.MsgspecError, ValueError):
            return False

    def _settle_mark(self, size: int) -> tuple[int, int] | None:
        """Under a lock no writer holds: the extent of an interrupted batch, if one is marked.
        Any other mark (its batch finished, never begun, or not there) goes, so a command run
        again leaves what an uninterrupted one does; a reader that may not write (a read-only
        copy) leaves it, as it is no tear."""
        marked, extent = self._batch_state(size)
        if marked == "left":
            try:
                self._batch_mark.unlink(missing_ok=True)
            except OSError:
                pass
        return extent if marked == "interrupted" else None

    @contextmanager
    def _locked(self) -> Iterator[int]:
        fd = self._descriptor()
        flock_saying(fd, fcntl.LOCK_EX, f"{self.path}: another append is writing this ledger")
        try:
            yield fd
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)

    def _descriptor(self) -> int:
        """The descriptor appends go through, kept open between appends (opening the file for
        each one cost more than its write). It is opened again when the path names another file
        than the one it holds (the ledger replaced underneath) and in a forked child: `flock`
        belongs to the open file, so a child sharing the parent's would share its lock too."""
        try:
            named = os.stat(self.path)  # one stat: is there a ledger, and is it the file we hold
        except FileNotFoundError:
            named = None
        if named is None or not stat.S_ISREG(named.st_mode):
            raise LedgerMissing(f"{self.path}: no ledger here (run `{invocation.command('init')}` first)")
        kept = self._kept
        if kept is not None:
            fd, pid, finalizer = kept
            if pid == os.getpid() and os.fstat(fd).st_ino == named.st_ino:
                return fd
            self._kept = None
            if pid == os.getpid():
                finalizer()
            else:
                finalizer.detach()  # the parent's to close
                os.close(fd)
        fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CLOEXEC)
        self._kept = (fd, os.getpid(), weakref.finalize(self, os.close, fd))
        return fd

    def close(self) -> None:
        """Closes the descriptor kept for appending (the next append opens it again)."""
        kept, self._kept = self._kept, None
        if kept is not None and kept[1] == os.getpid():
            kept[2]()

    def _catch_up(self, fd: int, size: int | None = None) -> None:
        """Indexes what was appended since we last looked, up to `size` (a committed size learnt
        under a lock); without `size` the caller holds the exclusive lock and reads to the end."""
        if size is None:
            size = os.fstat(fd).st_size
            batch = self._settle_mark(size)
            if batch is not None:
                raise TornTail(self._interrupted_message(batch, size))
        idx = self._index
        if size < idx.offset:
            raise UserError(f"{self.path}: the ledger shrank underneath this process")
        if size == idx.offset:
            return
        with open(self.path, "rb") as f:
            f.seek(idx.offset)
            offset = idx.offset
            for line in f:
                if offset + len(line) > size:
                    break  # an append that began after `size` was learnt; not ours to see yet
                if not line.endswith(b"\n"):
                    raise TornTail(
                        f"{self.path}: incomplete last line at byte {offset} "
                        f"(run `{invocation.command('repair', '--truncate-torn-tail')}`)"
                    )
                try:
                    view = _LINE_VIEW.decode(line)
                except msgspec.MsgspecError:
                    raise UserError(
                        f"{self.path}: undecodable line at byte {offset} (where seq {idx.head.seq + 1} should be); "
                        f"run `{invocation.command('replay', '--verify')}` to locate it"
                    ) from None
                if view.event.seq != idx.head.seq + 1 or view.prev != idx.head.hash:
                    # a line copied, moved or dropped by hand: appending after it would chain new
                    # events to a ledger `replay --verify` refuses, and every reader skip the line
                    raise CorruptRecord(
                        f"{self.path}: the line at byte {offset} (seq {view.event.seq}) does not follow seq "
                        f"{idx.head.seq}: {_unlinked(view.event.seq, view.prev, idx.head)}"
                    )
                idx.ids[view.event.id] = offset
                idx.head = Head(view.event.seq, view.hash)
                offset += len(line)
                # the head and where its line ends move together: a refusal further on (a torn
                # tail, a damaged line) leaves the index whole for the next catch-up to go on from
                idx.offset = offset

    # ------------------------------------------------------------------ reading

    def head(self) -> Head:
        if self._held is not None:
            return self._index.head
        with self._shared() as (size, _):
            if size != self._index.offset:
                fd = os.open(self.path, os.O_RDONLY)
                try:
                    self._catch_up(fd, size)
                finally:
                    os.close(fd)
        return self._index.head

    @contextmanager
    def _shared(self) -> Iterator[tuple[int, tuple[int, int] | None]]:
        """A shared lock for as long as it takes to learn a size that ends on a line boundary."""
        self._require()
        fd = os.open(self.path, os.O_RDONLY)
        try:
            flock_saying(fd, fcntl.LOCK_SH, f"{self.path}: an append is writing this ledger")
            size = os.fstat(fd).st_size
            batch = self._settle_mark(size)  # no writer holds the lock: a mark is a dead one's
            fcntl.flock(fd, fcntl.LOCK_UN)
            yield (batch[0] if batch is not None else size), batch
        finally:
            os.close(fd)

    def committed_size(self) -> int:
        """The file's size at the end of the last complete append (never inside one)."""
        return self.committed()[0]

    def committed(self) -> tuple[int, tuple[int, int] | None]:
        """`committed_size`, and the extent of the interrupted batch after it if there is one,
        learnt under one lock: read apart, a live writer's batch could pass for a dead one's."""
        if self._held is not None:
            return os.fstat(self._held).st_size, None
        with self._shared() as found:
            return found

    def read(
        self, since: int = 0, until: int | None = None, types: set[str] | None = None
    ) -> Iterator[StoredEvent]:
        limit = self.committed_size()
        with open(self.path, "rb") as f:
            start = self._resume_at(f, since, limit)
            if start:
                yield from self._read_from(f, start, limit, since, until, types, resumed=True)
            else:
                yield from self._read_from(f, 0, limit, since, until, types, resumed=False)

    def _resume_at(self, f: BinaryIO, since: int, limit: int) -> int:
        """Where the line after seq `since` starts, if a read or the index passed it (else 0)."""
        if since <= 0:
            return 0
        offset = self._marks.get(since, 0)
        if not offset and since == self._index.head.seq:
            offset = self._index.offset
        if not 0 < offset <= limit:
            return 0
        f.seek(offset - 1)
        return offset if f.read(1) == b"\n" else 0

    def _read_from(
        self, f: BinaryIO, start: int, limit: int, since: int, until: int | None,
        types: set[str] | None, *, resumed: bool,
    ) -> Iterator[StoredEvent]:
        f.seek(start)
        offset = start
        before = last = (0, 0)  # the marks of the last two lines passed
        try:
            for line in f:
                if offset + len(line) > limit or not line.endswith(b"\n"):
                    return
                offset += len(line)
                try:
                    parsed = parse_line(line)
                    raw = bytes(parsed.event)
                    view = _EVENT_VIEW.decode(raw)
                except (msgspec.MsgspecError, ValueError) as exc:
                    expected = (last[0] or since) + 1 if resumed or last[0] else 1
                    raise CorruptRecord(
                        f"{self.path}: the line at byte {offset - len(line)} (seq {expected} expected) "
                        f"is not a ledger line: {exc}"
                    ) from None
                if resumed:
                    resumed = False
                    if view.seq != since + 1:  # not the file the mark was taken in: start over
                        self._marks.clear()
                        yield from self._read_from(f, 0, limit, since, until, types, resumed=False)
                        return
                if last[0] and view.seq != last[0] + 1:
                    raise CorruptRecord(
                        f"{self.path}: the line at byte {offset - len(line)} (seq {view.seq}) does not follow seq "
                        f"{last[0]}: {_unlinked(view.seq, None, Head(last[0], ''))}"
                    )
                before, last = last, (view.seq, offset)
                if view.seq <= since:
                    continue
                if until is not None and view.seq > until:
                    return
                if types is not None and view.type not in types:
                    continue
                yield StoredEvent(view.seq, view.id, view.type, raw, parsed.hash, parsed.prev)
        finally:
            self._remember(before, last)

    def offset_after(self, seq: int) -> int | None:
        """The byte offset just after the line of `seq`, if a read or the index passed it: what a
        projection snapshot keeps so a later process can resume reading there."""
        if seq in self._marks:
            return self._marks[seq]
        return self._index.offset if seq and seq == self._index.head.seq else None

    def record_ending_at(self, offset: int) -> StoredEvent | None:
        """The record whose line ends at byte `offset` (one `offset_after` gave, perhaps in another
        process), or None when no complete line ends there; reads after its seq then resume at
        `offset` instead of parsing the file from the start."""
        limit = self.committed_size()
        if not 0 < offset <= limit:
            return None
        with open(self.path, "rb") as f:
            f.seek(offset - 1)
            if f.read(1) != b"\n":
                return None
            start, step = offset - 1, 1 << 16
            while start > 0:  # back to the newline before the line, a window at a time
                lo = max(0, start - step)
                f.seek(lo)
                cut = f.read(start - lo).rfind(b"\n")
                if cut >= 0:
                    start = lo + cut + 1
                    break
                start = lo
            f.seek(start)
            line = f.read(offset - start)
        try:
            parsed = parse_line(line)
            raw = bytes(parsed.event)
            view = _EVENT_VIEW.decode(raw)
        except (msgspec.MsgspecError, ValueError):
            return None
        self._remember((view.seq, offset))
        return StoredEvent(view.seq, view.id, view.type, raw, parsed.hash, parsed.prev)

    def _remember(self, *marks: tuple[int, int]) -> None:
        for seq, offset in marks:
            if seq:
                self._marks.pop(seq, None)
                self._marks[seq] = offset
        while len(self._marks) > 4:
            del self._marks[next(iter(self._marks))]

    def lookup(self, event_id: str) -> StoredEvent | None:
        if self._held is None:
            self.head()  # brings the index up to what is committed
        offset = self._index.ids.get(event_id)
        if offset is None:
            return None
        with open(self.path, "rb") as f:
            f.seek(offset)
            line = f.readline()
        try:
            parsed = parse_line(line)
            raw = bytes(parsed.event)
            view = _EVENT_VIEW.decode(raw)
        except (msgspec.MsgspecError, ValueError) as exc:
            raise CorruptRecord(f"{self.path}: the line of {event_id} at byte {offset} is not a ledger line: {exc}") from None
        return StoredEvent(view.seq, view.id, view.type, raw, parsed.hash, parsed.prev)

    # ------------------------------------------------------------------ repair

    def torn_tail(self) -> bytes | None:
        self._require()
        with open(self.path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            batch = self.interrupted_batch(size)
            cut = batch[0] if batch is not None else _end_of_last_line(f, size)
            f.seek(cut)
            return f.read() or None

    def _interrupted_message(self, batch: tuple[int, int], size: int) -> str:
        return (f"{self.path}: an append was interrupted: {size - batch[0]} of its {batch[1] - batch[0]} bytes, "
                f"from byte {batch[0]}, were written and never acknowledged "
                f"(run `{invocation.command('repair', '--truncate-torn-tail')}` to remove them; the same append again writes it whole)")

    def truncate_torn_tail(self) -> bytes | None:
        with self._locked() as fd:
            kind, cut, tail = self._classify_tail(fd)
            if kind == "none":
                return None
            if kind == "complete":
                raise UserError(
                    f"{self.path}: the final line is a complete event (seq {self._tail_seq(tail)}) whose newline "
                    f"was lost, not a torn tail; `{invocation.command('repair', '--truncate-torn-tail')}` restores the newline"
                )
            self._cut(fd, cut)
            return tail

    def _cut(self, fd: int, cut: int) -> None:
        """Removes what follows `cut` (a torn tail), then the mark of the batch it was, if any."""
        os.ftruncate(fd, cut)
        os.fsync(fd)
        self._index = _Index()
        if self._batch_mark.exists():
            self._batch_mark.unlink()
            fsync_directory(self.path.parent)

    def repair_tail(self) -> TailRepair:
        """Removes a torn tail; restores the newline of a complete, linked final event instead of
        deleting it (its bytes were written and may have been acknowledged); refuses a file that
        is not a ledger, so a mistyped --ledger never truncates something else."""
        with self._locked() as fd:
            kind, cut, tail = self._classify_tail(fd)
            if kind == "none":
                return TailRepair("none")
            if kind == "complete":
                os.lseek(fd, 0, os.SEEK_END)
                os.write(fd, b"\n")
                os.fsync(fd)
                self._index = _Index()
                return TailRepair("terminated", tail)
            self._cut(fd, cut)
            return TailRepair("removed", tail)

    @staticmethod
    def _tail_seq(tail: bytes) -> int:
        return int(_EVENT_VIEW.decode(bytes(parse_line(tail).event)).seq)

    def _classify_tail(self, fd: int) -> tuple[str, int, bytes]:
        """("none" | "torn" | "complete", where the last complete line ends, the bytes after it).
        Under the exclusive lock. Raises when the file is not a ledger. An interrupted batch is
        "torn" from its start: its complete lines were never acknowledged."""
        size = os.fstat(fd).st_size
        batch = self.interrupted_batch(size)
        if batch is not None:
            with open(self.path, "rb") as f:
                f.seek(batch[0])
                return "batch", batch[0], f.read()
        with open(self.path, "rb") as f:
            cut = _end_of_last_line(f, size)
            f.seek(cut)
            tail = f.read()
            prev_line = b""
            if cut > 0:
                start = _end_of_last_line(f, cut - 1)
                f.seek(start)
                prev_line = f.read(cut - start)
            f.seek(0)
            first = f.readline(1 << 20)
        if size == 0:
            return "none", 0, b""
        self._require_ledger(first, cut)
        if not tail:
            return "none", cut, b""
        # A complete final event has lost only its newline: it parses, links to the line before
        # it (or is the genesis event), and its hash is its own.
        try:
            line = parse_line(tail)
            seq = _EVENT_VIEW.decode(bytes(line.event)).seq
        except (msgspec.MsgspecError, ValueError):
            return "torn", cut, tail
        if prev_line:
            try:
                before = parse_line(prev_line)
                prev_hash, prev_seq = before.hash, _EVENT_VIEW.decode(bytes(before.event)).seq
            except (msgspec.MsgspecError, ValueError):
                return "torn", cut, tail
        else:
            prev_hash, prev_seq = GENESIS, 0
        if line.prev == prev_hash and seq == prev_seq + 1 and link_hash(line.prev, seq, bytes(line.event)) == line.hash:
            return "complete", cut, tail
        return "torn", cut, tail

    def _require_ledger(self, first: bytes, cut: int) -> None:
        """A ledger's first line is a chain line (or, with no complete line yet, the start of one)."""
        if cut == 0:
            if first.startswith(b'{"event":{'):
                return
        else:
            try:
                parse_line(first)
                return
            except (msgspec.MsgspecError, ValueError):
                pass
        raise UserError(
            f"{self.path}: not a cbledger ledger (its first line is not a chain line); refusing to repair it"
        )


def _end_of_last_line(f: BinaryIO, size: int) -> int:
    """Offset just past the last newline (0 if there is none), reading backwards in chunks."""
    pos = size
    chunk = 1 << 16
    while pos > 0:
        start = max(0, pos - chunk)
        f.seek(start)
        block = f.read(pos - start)
        i = block.rfind(b"\n")
        if i >= 0:
            return start + i + 1
        pos = start
    return 0


#: An append's durability: the data and what reading it back needs (the file's new size), without
#: the timestamps a full fsync also writes. Where there is no fdatasync, fsync.
_datasync = getattr(os, "fdatasync", os.fsync)
#: the first word of a batch mark; another word is a mark of another format, never read as this one
_MARK_FORMAT = "cbledger-batch/1"
