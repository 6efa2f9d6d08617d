"""Chain verification: does every stored byte still mean what it meant when it was appended?

Reads the file once, front to back, and stops at the first problem, because after a break every
later link is suspect and a list of a thousand consequential errors hides the one cause (past an
`unreadable` line it reads on, holding each later line to its link alone, so that an edit still
shows as a break). The problem kinds are the ones a reader can act on:

* `torn-tail`     the last line has no newline, or a batch's append was interrupted (a kill or crash
                  mid-append); `cbledger repair` fixes it
* `undecodable`   a line that is not a ledger line, not byte-for-byte the line the store writes
                  (its layout, or its event in other than its one encoding), or an event the
                  schema rejects
* `seq-gap`       a seq out of order (a dropped, duplicated, reordered or inserted line)
* `broken-link`   `prev` is not the previous line's hash
* `hash-mismatch` the event bytes changed after they were hashed
* `duplicate-id`  an idempotency key used twice
* `genesis`       seq 1 is not `ledger.created`, or `ledger.created` appears again
* `unreadable`    an event that fails as a newer build's would (a type, version or field this build
                  does not know) on a line whose link holds, and every later line links: upgrade
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import msgspec

from cbledger import invocation
from cbledger.errors import UserError
from cbledger.ledger.chain import GENESIS, format_line, link_hash, parse_line
from cbledger.ledger.encoding import InvalidEvent, decode, encode_value
from cbledger.ledger.events import EventBase, LedgerCreatedEvent
from cbledger.ledger.jsonl import JsonLinesRecorder
from cbledger.ledger.recorder import EMPTY, Head
from cbledger.ledger.store import LedgerStore
from cbledger.ledger.versions import NEWER_BUILD_HINT, from_a_newer_build
from cbledger.workspace import is_database_url

# A stored line is exactly format_line(event, hash, prev): this prefix, the event bytes, then a
# fixed-length tail. Splitting on that layout instead of parsing the line as JSON finds the same
# event bytes for every line the store writes, and it rejects lines that only *parse* the same
# (whitespace, reordered keys, escaped digits), which would otherwise pass with different bytes.
_PREFIX = b'{"event":'
_TAIL_LEN = len(format_line(b"", GENESIS, GENESIS)) - len(_PREFIX)
_TAIL = re.compile(rb',"hash":"([0-9a-f]{64})","prev":"([0-9a-f]{64})"\}\n\Z')


@dataclass(frozen=True)
class Problem:
    kind: str
    line: int
    seq: int | None
    offset: int
    message: str

    def __str__(self) -> str:
        where = f"seq {self.seq}" if self.seq is not None else "no seq"
        return f"{self.kind} at line {self.line} ({where}, byte {self.offset}): {self.message}"


@dataclass
class ChainReport:
    path: str
    events: int = 0
    bytes: int = 0
    head: Head = EMPTY
    problem: Problem | None = None
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.problem is None and self.events > 0

    def to_dict(self) -> dict[str, object]:
        return {
            "path": self.path,
            "ok": self.ok,
            "events": self.events,
            "bytes": self.bytes,
            "head": {"seq": self.head.seq, "hash": self.head.hash},
            "problem": None
            if self.problem is None
            else {
                "kind": self.problem.kind,
                "line": self.problem.line,
                "seq": self.problem.seq,
                "offset": self.problem.offset,
                "message": self.problem.message,
            },
            "seconds": round(self.seconds, 6),
        }


def _split(line: bytes) -> tuple[memoryview, str, str] | None:
    """(event bytes, hash, prev) of a line in the exact stored layout, else None."""
    tail_at = len(line) - _TAIL_LEN
    if tail_at <= len(_PREFIX) or not line.startswith(_PREFIX):
        return None
    tail = _TAIL.match(line, tail_at)
    if tail is None or line[len(_PREFIX)] != 0x7B or line[tail_at - 1] != 0x7D:  # {...}
        return None
    return memoryview(line)[len(_PREFIX) : tail_at], tail[1].decode(), tail[2].decode()


def _canonical(event: EventBase, data: memoryview) -> bool:
    """Whether `data` is the one encoding of what it holds: the bytes the store writes. The
    typed event encodes back to them when it is at its stored version with every field present
    (nearly every event, one encode); an event read through an upcaster, or stored before a field
    with a default existed, is checked as plain JSON values encoded again the store's way, which
    any other spacing, key order or escape fails."""
    stored = data.tobytes()  # a memoryview compares with bytes item by item, bytes with memcmp
    if encode_value(event) == stored:
        return True
    return encode_value(msgspec.json.decode(stored)) == stored


def _why_not_split(line: bytes) -> str:
    try:
        parse_line(line)
    except msgspec.MsgspecError as exc:
        return f"not a ledger line: {exc}"
    return "not in the stored layout (same JSON, different bytes)"


def verify_chain(
    where: Path | str | LedgerStore,
    progress: Callable[[int, int], None] | None = None,
    on_line: Callable[[bytes], None] | None = None,
) -> ChainReport:
    """Verifies the whole chain. `progress(bytes_done, bytes_total)` is called now and then;
    `on_line(line)` gets each line that verified, as stored (newline included), in order: the Merkle
    tree's leaves (`cbledger.ledger.tlog`), so a checkpoint costs no second pass.

    A file is read as it is. Any other store (a database) is verified as its export: each record
    as the line the file would hold (`chain.format_line`), through the same checks, so a ledger
    verifies the same whichever backend keeps it."""
    if isinstance(where, LedgerStore) and isinstance(where.recorder, JsonLinesRecorder):
        where = where.recorder.path
    if isinstance(where, LedgerStore) or is_database_url(where):
        store = where if isinstance(where, LedgerStore) else LedgerStore(where)
        if not store.exists():
            raise UserError(f"{store.location}: no ledger here")
        head = store.head()
        lines = (format_line(r.raw, r.hash, r.prev) for r in store.read(until=head.seq))
        # The size is not known before the pass; progress counts events instead of bytes.
        return _verify_lines(store.location, lines, head.seq, progress, on_line, by_count=True)
    path = Path(where)
    if not path.is_file():
        raise UserError(f"{path}: no ledger here")
    total, batch = JsonLinesRecorder(path).committed()
    with open(path, "rb") as f:
        report = _verify_lines(str(path), f, total, progress, on_line)
    if report.problem is None and batch is not None and report.bytes == batch[0]:
        # the committed part ends where the batch began: its lines, whole or not, were never
        # acknowledged and no reader takes them
        report.problem = Problem(
            "torn-tail", report.events + 1, report.head.seq + 1, batch[0],
            f"an append was interrupted: {path.stat().st_size - batch[0]} of its {batch[1] - batch[0]} bytes were "
            f"written and never acknowledged (run `{invocation.command('repair', '--truncate-torn-tail')}`: "
            "it removes them; the same append again writes the batch whole)",
        )
    return report


def _torn_tail(line: bytes, prev: str, expected: int) -> str:
    """What a last line without its newline is, as `repair` tells it."""
    whole = _split(line + b"\n")
    if whole is not None and whole[2] == prev and link_hash(prev, expected, whole[0]) == whole[1]:
        # written whole and linked: only its newline is missing
        return (f"the final event ({len(line)} bytes) is complete but its newline is missing "
                f"(run `{invocation.command('repair', '--truncate-torn-tail')}`: it restores the newline and removes nothing)")
    return f"incomplete final line of {len(line)} bytes (run `{invocation.command('repair', '--truncate-torn-tail')}`)"


def _event_problem(
    event: EventBase, event_bytes: memoryview, stored_hash: str, stored_prev: str, prev: str, expected: int, seen: set[str],
) -> tuple[str, str, int] | None:
    """(kind, message, seq) of what is wrong with a line that decoded, or None."""
    if not _canonical(event, event_bytes):
        return ("undecodable", "the event is not in its one encoding (compact JSON, keys sorted, as the store "
                "writes it): same JSON, different bytes", expected)
    if event.seq != expected:
        return "seq-gap", f"expected seq {expected}, found {event.seq}", event.seq
    if stored_prev != prev:
        return "broken-link", f"prev is {stored_prev[:16]}…, the previous hash is {prev[:16]}…", event.seq
    actual = link_hash(prev, expected, event_bytes)
    if actual != stored_hash:
        return "hash-mismatch", f"stored hash {stored_hash[:16]}…, the bytes hash to {actual[:16]}…", event.seq
    if event.id in seen:
        return "duplicate-id", f"event id {event.id!r} appears twice", event.seq
    if (type(event) is LedgerCreatedEvent) != (expected == 1):
        return "genesis", "seq 1 must be ledger.created and nothing else may be", event.seq
    return None


def _verify_lines(
    label: str,
    lines: Iterable[bytes],
    total: int,
    progress: Callable[[int, int], None] | None,
    on_line: Callable[[bytes], None] | None,
    by_count: bool = False,
) -> ChainReport:
    """The checks, over lines in the stored layout; `total` is where the committed part ends
    (bytes, or events with `by_count`)."""
    report = ChainReport(path=label)
    started = time.perf_counter()
    prev = GENESIS
    seen: set[str] = set()
    offset = 0
    seq = 0  # the last seq that verified
    lineno = 0
    # a line this build cannot read as a newer build's would fail: the lines after it are held to
    # their links alone, so an edit made after it (or to it, with only its own hash redone) still
    # shows as a break; only a ledger whose every later link holds reads as a newer build's
    unreadable: Problem | None = None
    skipped = 0  # lines read past it, links only
    verified = (0, GENESIS)  # (bytes, hash) of the last line that verified whole

    def fail(kind: str, message: str, at_seq: int | None) -> ChainReport:
        if unreadable is not None and kind == "torn-tail":  # an append cut short, as any build's can be
            message += f" (after seq {unreadable.seq}, which this build cannot read: upgrade cbledger, then repair)"
        elif unreadable is not None:
            message += (f" (after seq {unreadable.seq}, which this build could not read: the ledger is damaged "
                        "there, whatever wrote that event)")
        report.problem = Problem(kind, lineno, at_seq, offset, message)
        done, head = verified if unreadable is not None else (offset, prev)
        report.events, report.bytes, report.head = seq, done, Head(seq, head)
        report.seconds = time.perf_counter() - started
        return report

    for lineno, line in enumerate(lines, start=1):
        expected = seq + skipped + 1
        if ((seq + skipped) if by_count else offset) >= total:
            break
        if not line.endswith(b"\n"):
            return fail("torn-tail", _torn_tail(line, prev, expected), expected)
        parts = _split(line)
        if parts is None:
            return fail("undecodable", _why_not_split(line), expected)
        event_bytes, stored_hash, stored_prev = parts
        linked = stored_prev == prev and link_hash(prev, expected, event_bytes) == stored_hash
        if unreadable is not None:
            if not linked:
                return fail("broken-link" if stored_prev != prev else "hash-mismatch",
                            "the line does not link to the one before it", expected)
            # not handed to `on_line`: it gets the lines that verified whole (the Merkle tree's
            # leaves; a checkpoint's own decode would fail on a newer build's)
            prev, skipped, offset = stored_hash, skipped + 1, offset + len(line)
            continue
        try:
            event = decode(event_bytes)
        except InvalidEvent as exc:
            # only a line whose link holds can be a newer build's event: an edit of a line that
            # adds, renames or retypes a field breaks its hash, and is tampering, not a version
            if linked and from_a_newer_build(exc):
                unreadable = Problem("unreadable", lineno, expected, offset,
                                     f"this build cannot read the event: {exc}; {NEWER_BUILD_HINT}")
                verified = (offset, prev)
                prev, skipped, offset = stored_hash, 1, offset + len(line)
                continue
            return fail("undecodable", f"event rejected by the schema: {exc}", expected)
        found = _event_problem(event, event_bytes, stored_hash, stored_prev, prev, expected, seen)
        if found is not None:
            return fail(*found)
        seen.add(event.id)
        if on_line is not None:
            on_line(line)
        prev = stored_hash
        seq = expected
        offset += len(line)
        if progress is not None and lineno % 4096 == 0:
            progress(seq if by_count else offset, total)
    if unreadable is not None:
        report.problem = unreadable
        report.events, report.bytes, report.head = seq, verified[0], Head(seq, verified[1])
        report.seconds = time.perf_counter() - started
        return report
    report.events, report.bytes, report.head = seq, offset, Head(seq, prev)
    if seq == 0 and report.problem is None:
        report.problem = Problem("genesis", 0, None, 0, "the ledger holds no events")
    report.seconds = time.perf_counter() - started
    if progress is not None:
        progress(seq if by_count else offset, total)
    return report
