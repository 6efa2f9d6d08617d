"""The ledger as an RFC 6962 log: which bytes are its leaves, and its tree heads and subtree hashes
computed in one pass through the store's read API.

**The leaf.** Leaf i (0-based) is the event with seq i + 1, and its bytes are that event's stored
line without the final newline:

    {"event":<event bytes>,"hash":"<64 hex>","prev":"<64 hex>"}

exactly as `cbledger.ledger.chain.format_line` writes it (and, for a ledger that verifies, exactly
the file's bytes: verification refuses a line in any other layout). The line rather than the event
bytes alone, so that a leaf commits to the chain link too. A tree of size N therefore covers
seq 1..N, and its leaf hash for seq s is `SHA-256(0x00 || line of seq s)`.

The tree is never stored: a checkpoint is recomputed from the ledger (one pass, a compact range),
and so is every proof (one pass over the leaves the proof needs, `merkle.RangeHasher`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from cbledger import invocation
from cbledger.errors import UserError
from cbledger.ledger.chain import GENESIS, format_line, link_hash, parse_line
from cbledger.ledger.encoding import decode
from cbledger.ledger.events import CheckpointPublished, CheckpointPublishedEvent
from cbledger.ledger.merkle import Range, RangeHasher, leaf_hash, shown_hash
from cbledger.ledger.store import LedgerStore, StoredEvent
from cbledger.ledger.verify import ChainReport, verify_chain

CHECKPOINT_TYPE = "checkpoint.published"
_CHECKPOINT_MARK = b'"type":"checkpoint.published"'


class TreeError(UserError):
    """The ledger cannot give the leaves asked for (it is shorter, or its seqs are not contiguous)."""


def leaf_bytes(stored: StoredEvent) -> bytes:
    """The stored line of an event, without its newline: the bytes its leaf hashes."""
    return format_line(stored.raw, stored.hash, stored.prev)[:-1]


class ChainBroken(TreeError):
    """A line the tree would be hashed over does not link to the one before it: a proof or root
    made from it would vouch for a ledger no checkpoint could have signed."""


def leaf_hashes(store: LedgerStore, until: int | None = None) -> Iterator[bytes]:
    """Leaf hashes of seq 1..until (or to the end), in order; refuses a ledger with a seq gap,
    over which no tree is defined, and a line whose hash is not its own or does not link to the
    line before it (one hash per event, beside the leaf's own)."""
    expected, prev = 1, GENESIS
    for stored in store.read(until=until):
        if stored.seq != expected:
            raise TreeError(f"{store.location}: seq {stored.seq} where {expected} was expected; "
                            f"run `{invocation.command('replay', '--verify', '--chain-only')}`")
        if stored.prev != prev or link_hash(prev, stored.seq, stored.raw) != stored.hash:
            raise ChainBroken(f"{store.location}: the chain is broken at seq {stored.seq} (its "
                              f"{'link to seq ' + str(stored.seq - 1) if stored.prev != prev else 'hash'} does not hold); "
                              f"no proof is made from it: run `{invocation.command('replay', '--verify', '--chain-only')}`")
        yield leaf_hash(leaf_bytes(stored))
        prev = stored.hash
        expected += 1


@dataclass(frozen=True)
class Scan:
    """Tree heads at some sizes and subtree hashes of some leaf ranges, from one pass."""

    leaves: int  # how many leaves were read
    roots: dict[int, bytes]
    hasher: RangeHasher

    def root(self, size: int) -> bytes:
        if size not in self.roots:
            raise TreeError(f"the ledger has {self.leaves} events; no tree of size {size}")
        return self.roots[size]

    def hashes(self, ranges: Sequence[Range]) -> list[bytes]:
        return self.hasher.hashes(ranges)


def scan(store: LedgerStore, sizes: Sequence[int], ranges: Sequence[Range] = ()) -> Scan:
    """Reads the ledger as far as the largest size or range needs, and no further."""
    hasher = RangeHasher(ranges, sizes)
    needed = hasher.needed
    if needed > 0:
        for leaf in leaf_hashes(store, until=needed):
            hasher.add(leaf)
    return Scan(hasher.leaves, dict(hasher.roots), hasher)


def size(store: LedgerStore) -> int:
    """The tree size of the whole ledger: its head seq."""
    return store.head().seq


@dataclass(frozen=True)
class Recorded:
    """A `checkpoint.published` event: the ledger's record of one of its own publications."""

    seq: int
    body: CheckpointPublished


def recorded(store: LedgerStore) -> list[Recorded]:
    """Every checkpoint the ledger records publishing, in ledger order."""
    out: list[Recorded] = []
    for stored in store.read(types={CHECKPOINT_TYPE}):
        event = stored.event
        if isinstance(event, CheckpointPublishedEvent):
            out.append(Recorded(stored.seq, event.body))
    return out


def verified_scan(
    path: Path | str, sizes: Sequence[int] = (), ranges: Sequence[Range] = (),
    progress: Callable[[int, int], None] | None = None,
) -> tuple[ChainReport, Scan, list[Recorded]]:
    """The chain verified and the tree hashed in the same pass over the file, with the checkpoints
    the ledger records and its tree heads at their sizes. The leaves are the very lines that
    verified, so a root is never computed over a line the chain refused.

    A checkpoint's record normally lands right after the events it covers, so its tree head is the
    one in hand when its line is read; a record that landed later (other events came between)
    has its size hashed in a second pass.
    """
    hasher = RangeHasher(ranges, sizes)
    found: list[Recorded] = []

    def on_line(line: bytes) -> None:
        if _CHECKPOINT_MARK in line:
            event = decode(parse_line(line).event)
            if isinstance(event, CheckpointPublishedEvent):
                found.append(Recorded(event.seq, event.body))
                hasher.root()
        hasher.add(leaf_hash(memoryview(line)[:-1]))

    report = verify_chain(path, progress=progress, on_line=on_line)
    roots = dict(hasher.roots)
    roots[hasher.leaves] = hasher.root()
    result = Scan(hasher.leaves, roots, hasher)
    late = sorted({r.body.tree_size for r in found} - set(roots))
    if late and report.ok:
        again = scan(LedgerStore(path), late)
        result.roots.update({s: again.roots[s] for s in late if s in again.roots})
    return report, result, found


def recorded_problems(recorded_checkpoints: Sequence[Recorded], result: Scan) -> list[tuple[Recorded, str]]:
    """Each recorded checkpoint whose root is not the ledger's root at its size, and why."""
    out: list[tuple[Recorded, str]] = []
    for r in recorded_checkpoints:
        size_ = r.body.tree_size
        if size_ not in result.roots:
            out.append((r, f"seq {r.seq} records a checkpoint of size {size_}; the ledger verified to {result.leaves}"))
        elif result.roots[size_].hex() != r.body.root_hash:
            why = (f"seq {r.seq} records root {shown_hash(bytes.fromhex(r.body.root_hash))} for size {size_}; the ledger's "
                   f"first {size_} events hash to {shown_hash(result.roots[size_])}")
            out.append((r, why))
    return out
