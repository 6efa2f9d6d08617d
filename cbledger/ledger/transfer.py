"""Moving a ledger between backends without changing a byte: `cbledger export --jsonl` and
`cbledger import --jsonl`.

Every backend stores the same records (the service computes each hash and prev over the event's
canonical bytes), so the JSON Lines file is the interchange form: an export writes each record as
the line the file holds, and an import copies a file's records verbatim, hashes and all, into
another store. Nothing is re-encoded on either side, so the chain that verified before is the
chain that verifies after, and an export of an import is the file it came from.

An export checks each record's hash as it copies it (a record edited in place is no copy to keep);
an import is refused whole unless the file verifies (`cbledger.ledger.verify`) and no event
matches a credential pattern; the destination must be empty, or hold a prefix of the file (an
import that was interrupted resumes where it stopped). It appends in batches, each with the head
it continues as the expected one, so a writer that slips in between makes it stop with
`HeadMoved` rather than interleave.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from cbledger.errors import UserError
from cbledger.inputs import refuse_non_regular
from cbledger.ledger.chain import format_line, link_hash
from cbledger.ledger.credential_guard import refuse_credentials
from cbledger.ledger.jsonl import JsonLinesRecorder
from cbledger.ledger.recorder import EMPTY, Head, StoredEvent
from cbledger.ledger.store import LedgerStore
from cbledger.ledger.tlog import recorded_problems, verified_scan

#: records per append when importing: one transaction (or one write and fsync) each
BATCH = 2000


def export_jsonl(store: LedgerStore, out: BinaryIO) -> Head:
    """Writes the ledger to `out` as the JSON Lines file; returns the head it wrote up to."""
    last = EMPTY
    pending: list[bytes] = []
    for stored in store.read(until=store.head().seq):
        # a copy is what a backup or a move is trusted as: a record edited in place (same seq,
        # same links, another body) is refused here rather than found by whoever imports it
        if link_hash(stored.prev, stored.seq, stored.raw) != stored.hash:
            raise UserError(f"{store.location}: the event at seq {stored.seq} does not hash to its recorded hash "
                            "(edited in place; `cbledger replay --verify` says more); the export stops there")
        pending.append(format_line(stored.raw, stored.hash, stored.prev))
        last = Head(stored.seq, stored.hash)
        if len(pending) >= BATCH:
            out.write(b"".join(pending))
            pending = []
    out.write(b"".join(pending))
    return last


@dataclass(frozen=True)
class Imported:
    source_events: int
    already_there: int
    copied: int
    head: Head


def import_jsonl(source: Path, store: LedgerStore, batch: int = BATCH) -> Imported:
    """Copies the JSON Lines ledger at `source` into `store`, record for record."""
    refuse_non_regular(source, "a ledger to import")  # a symlink, FIFO or directory, before opening
    # The chain alone is what a forger who recomputes every link keeps; the checkpoints the file
    # records publishing must still be its roots, as `replay --verify --chain-only` requires.
    report, scanned, found = verified_scan(source)
    if not report.ok:
        raise UserError(f"{source}: does not verify ({report.problem}); nothing imported")
    problems = recorded_problems(found, scanned)
    if problems:
        raise UserError(f"{source}: does not verify ({problems[0][1]}); nothing imported")
    file = JsonLinesRecorder(source)
    for i, stored in enumerate(file.read(until=report.head.seq)):
        refuse_credentials(i, stored.event, stored.raw)

    if not store.exists():
        store.recorder.create()
    start = store.head()
    if start.seq > report.head.seq:
        raise UserError(
            f"{store.location}: holds {start.seq} events, {source} only {report.head.seq}; "
            "the destination is not a prefix of the file; nothing imported"
        )
    if start.seq:
        there = next(file.read(since=start.seq - 1, until=start.seq))
        if there.hash != start.hash:
            raise UserError(
                f"{store.location}: seq {start.seq} holds {start.hash[:16]}…, {source} has "
                f"{there.hash[:16]}… there: a different ledger; nothing imported"
            )
    head, chunk = start, []
    copied = 0
    for stored in file.read(since=start.seq, until=report.head.seq):
        chunk.append(stored)
        if len(chunk) >= batch:
            head = _append(store, chunk, head)
            copied += len(chunk)
            chunk = []
    if chunk:
        head = _append(store, chunk, head)
        copied += len(chunk)
    return Imported(report.head.seq, start.seq, copied, head)


def _append(store: LedgerStore, records: list[StoredEvent], head: Head) -> Head:
    with store.recorder.exclusive():
        store.recorder.append(records, head)
    last = records[-1]
    return Head(last.seq, last.hash)
