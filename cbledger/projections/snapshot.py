"""Projection snapshots: the folded `LedgerState` at a seq, so a fold resumes there instead of at seq 1.

Why: every projection is a fold of the whole ledger, and at millions of events the fold is most of
the time a `project` command or a `watch` start-up takes. A snapshot is a derived local cache, never
evidence: it is trusted only as far as the ledger confirms it. It carries the seq it was taken at and
the chain hash of the event there (and, for a file ledger, the byte offset just after that event's
line, so the fold can seek rather than read from the start); a reader accepts it only when the
ledger's event at that seq has that hash, so a rewritten ledger invalidates it. It also carries its
own format version and the code's projection version (`PROJECTION`): a snapshot written by code
that folds differently, or whose state has another shape, is ignored. Anything ignored is said in
one line, and the fold starts at seq 1 — never an error, since the ledger alone is the truth.

Folding from a snapshot and then applying the later events equals folding from seq 1
(tests/test_snapshot.py holds that over random ledgers and split points). The encoding and the
checks are pure; the files are read and written by `writers` and the ledger is asked by `resume`.
"""

from __future__ import annotations

import msgspec
from blake3 import blake3
from msgspec import Struct

from cbledger.projections.fold import LedgerState

#: the file's own layout; a change here makes every older snapshot unreadable, so bump it
FORMAT = 1
#: bump when `Projector` folds the same events into a different state (a new rule, a new anomaly)
FOLD_RULES = 1
SUFFIX = ".msgpack"


def _projection_version() -> str:
    """The fold rules and the state's shape: a field added to any struct the state holds changes
    its schema, so a snapshot of the old shape is refused without anyone remembering to bump."""
    schema = msgspec.json.encode(msgspec.json.schema(LedgerState), order="sorted")
    return f"{FOLD_RULES}.{blake3(schema).hexdigest()[:16]}"


PROJECTION = _projection_version()


class SnapshotError(ValueError):
    """A snapshot that cannot be used (unreadable, another version, another ledger)."""


class Header(Struct, kw_only=True):
    """What a snapshot is checked by before its state is decoded."""

    format: int
    projection: str = ""
    seq: int = 0
    head_hash: str = ""
    #: a file ledger's byte offset just after the line of `seq` (None for a database ledger)
    offset: int | None = None


class Snapshot(Header, kw_only=True):
    state: LedgerState


_HEADER = msgspec.msgpack.Decoder(Header)
_SNAPSHOT = msgspec.msgpack.Decoder(Snapshot)
_ENCODER = msgspec.msgpack.Encoder()


def file_name(seq: int) -> str:
    return f"{seq}{SUFFIX}"


def seq_of(name: str) -> int | None:
    """The seq a snapshot file's name states, or None for any other file."""
    stem = name[: -len(SUFFIX)] if name.endswith(SUFFIX) else ""
    return int(stem) if stem.isascii() and stem.isdigit() else None


def encode(state: LedgerState, offset: int | None = None) -> bytes:
    if state.head_seq == 0 or state.head_hash is None:
        raise SnapshotError("an empty state, or one folded without chain hashes, is no snapshot")
    return _ENCODER.encode(Snapshot(
        format=FORMAT, projection=PROJECTION, seq=state.head_seq, head_hash=state.head_hash, offset=offset, state=state,
    ))


def header(data: bytes, source: str) -> Header:
    """The header, checked against this code's versions; raises SnapshotError saying why not."""
    try:
        head = _HEADER.decode(data)
    except msgspec.MsgspecError as exc:
        raise SnapshotError(f"{source}: not a snapshot ({exc})") from None
    if head.format != FORMAT:
        raise SnapshotError(f"{source}: snapshot format {head.format}, this code reads {FORMAT}")
    if head.projection != PROJECTION:
        raise SnapshotError(f"{source}: written by a fold of projection version {head.projection or 'none'}, "
                            f"this code's is {PROJECTION}")
    return head


def decode(data: bytes, source: str) -> Snapshot:
    header(data, source)
    try:
        snap = _SNAPSHOT.decode(data)
    except msgspec.MsgspecError as exc:
        raise SnapshotError(f"{source}: the state does not decode ({exc})") from None
    if snap.state.head_seq != snap.seq or snap.state.head_hash != snap.head_hash:
        raise SnapshotError(f"{source}: its state is at seq {snap.state.head_seq}, its header says {snap.seq}")
    return snap


def anchor_problem(head: Header, found_seq: int | None, found_hash: str | None, source: str) -> str | None:
    """Why the ledger does not confirm a snapshot: its event at the snapshot's seq must have the
    snapshot's hash (None: it does)."""
    if found_seq is None:
        return f"{source}: the ledger has no event at seq {head.seq} (shorter, or another ledger)"
    if found_hash != head.head_hash:
        return (f"{source}: the ledger's event at seq {head.seq} hashes to {(found_hash or '')[:16]}…, "
                f"the snapshot was taken at {head.head_hash[:16]}… (the ledger was rewritten, or is another)")
    return None
