"""RFC 6962 Merkle trees: hashing, a compact range, proof planning and proof verification.

The tree is exactly RFC 6962's (section 2.1, restated in RFC 9162 section 2.1): SHA-256, a leaf
hashes as `SHA-256(0x00 || leaf bytes)`, an interior node as `SHA-256(0x01 || left || right)`, and
the tree over n leaves splits at the largest power of two below n. Using the standard rather than a
tree of our own is what lets anyone check a checkpoint with any RFC 6962 verifier, and lets this
implementation be checked against numbers it did not produce (`tests/data/tlog/`).

Nothing here keeps the tree. `CompactRange` holds one hash per set bit of the size (the roots of the
perfect subtrees the leaves so far fall into), so a root over a million leaves costs one pass and
about twenty hashes of memory, and an append costs O(log n). A proof is planned first as the list of
leaf ranges whose subtree hashes it needs (`inclusion_ranges`, `consistency_ranges`), then every
range is hashed in one pass over the leaves (`RangeHasher`), which is how a proof over a ledger file
is made without holding the tree either.

Verification (`verify_inclusion`, `verify_consistency`) follows RFC 9162 sections 2.1.3.2 and
2.1.4.2. It checks the proof's length against the one the two sizes imply before it hashes
anything, so a padded or truncated proof is refused for what it is.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Sequence
from itertools import pairwise


def shown_hash(h: bytes) -> str:
    """A hash in a message as a reader holds it: standard base64, as checkpoints, proofs and
    LEADERBOARD.md write it (its first 16 characters)."""
    return base64.b64encode(h).decode("ascii")[:16] + "…"


HASH_SIZE = 32
#: The root of the empty tree: SHA-256 of no bytes (RFC 6962 section 2.1).
EMPTY_ROOT = hashlib.sha256(b"").digest()

Range = tuple[int, int]  # leaves [start, end), 0-based


class ProofError(ValueError):
    """A proof that does not verify, or that is malformed; the message says which and why."""


def leaf_hash(data: bytes | memoryview) -> bytes:
    h = hashlib.sha256(b"\x00")
    h.update(data)
    return h.digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(b"\x01" + left + right).digest()


def _split(n: int) -> int:
    """The largest power of two strictly less than n (n >= 2): where RFC 6962 splits n leaves."""
    return 1 << ((n - 1).bit_length() - 1)


class CompactRange:
    """The roots of the perfect subtrees covering leaves [0, size), largest (leftmost) first.

    There is one per set bit of `size`; appending a leaf merges the trailing equal-sized subtrees,
    as adding one to a binary counter carries. `root()` folds them right to left, which is the
    RFC 6962 root because the tree over n leaves splits at the largest power of two below n.
    """

    __slots__ = ("nodes", "size")

    def __init__(self) -> None:
        self.size = 0
        self.nodes: list[bytes] = []

    def append(self, leaf: bytes) -> None:
        """Adds one leaf hash (not leaf bytes: see `leaf_hash`)."""
        h = leaf
        carry = self.size
        nodes = self.nodes
        while carry & 1:
            h = node_hash(nodes.pop(), h)
            carry >>= 1
        nodes.append(h)
        self.size += 1

    def root(self) -> bytes:
        if not self.nodes:
            return EMPTY_ROOT
        nodes = self.nodes
        h = nodes[-1]
        for left in reversed(nodes[:-1]):
            h = node_hash(left, h)
        return h


# --------------------------------------------------------------------------- proof planning


def inclusion_ranges(index: int, size: int) -> list[Range]:
    """The leaf ranges whose hashes make the audit path of leaf `index` in a tree of `size` leaves,
    in proof order (from the leaf up): RFC 6962 section 2.1.1, PATH(m, D[n])."""
    if not 0 <= index < size:
        raise ProofError(f"leaf index {index} is not in a tree of {size} leaves")
    out: list[Range] = []
    start, n, m = 0, size, index
    while n > 1:
        k = _split(n)
        if m < k:
            out.append((start + k, start + n))
            n = k
        else:
            out.append((start, start + k))
            start, n, m = start + k, n - k, m - k
    out.reverse()
    return out


def consistency_ranges(old: int, new: int) -> list[Range]:
    """The leaf ranges whose hashes prove that the tree of `old` leaves is a prefix of the tree of
    `new` leaves, in proof order: RFC 6962 section 2.1.2, PROOF(m, D[n]) = SUBPROOF(m, D[n], true).
    Empty when old is 0 or old equals new."""
    if not 0 <= old <= new:
        raise ProofError(f"no consistency proof from {old} leaves to {new}")
    if old == 0 or old == new:
        return []
    out: list[Range] = []
    start, n, m, whole = 0, new, old, True
    while m != n:
        k = _split(n)
        if m <= k:
            out.append((start + k, start + n))
            n = k
        else:
            out.append((start, start + k))
            start, n, m, whole = start + k, n - k, m - k, False
    if not whole:
        out.append((start, start + n))
    out.reverse()
    return out


class RangeHasher:
    """Hashes several leaf ranges (and tree heads at several sizes) in one pass over the leaves.

    The ranges a proof needs never overlap, so a leaf feeds at most one range; each range is hashed
    as the tree over its own leaves, which is the subtree hash RFC 6962 defines for it.
    """

    def __init__(self, ranges: Sequence[Range], sizes: Sequence[int] = ()) -> None:
        ordered = sorted(set(ranges))
        for (_, end), (start, _) in pairwise(ordered):
            if start < end:
                raise ValueError(f"ranges overlap: {ordered}")
        self._pending = ordered
        self._next = 0
        self._active: CompactRange | None = None
        self._tree = CompactRange()
        self._sizes = sorted(set(sizes))
        self._size_at = 0
        self.ranges: dict[Range, bytes] = {}
        self.roots: dict[int, bytes] = {}
        if self._sizes and self._sizes[0] == 0:
            self.roots[0] = EMPTY_ROOT
            self._size_at = 1

    @property
    def leaves(self) -> int:
        return self._tree.size

    @property
    def needed(self) -> int:
        """Leaves still to be read before every range and size is known."""
        last_range = self._pending[-1][1] if self._pending else 0
        last_size = self._sizes[-1] if self._sizes else 0
        return max(last_range, last_size) - self._tree.size

    def add(self, leaf: bytes) -> None:
        i = self._tree.size
        pending = self._pending
        if self._next < len(pending) and pending[self._next][0] == i:
            self._active = CompactRange()
        if self._active is not None:
            self._active.append(leaf)
            start, end = pending[self._next]
            if i + 1 == end:
                self.ranges[(start, end)] = self._active.root()
                self._active = None
                self._next += 1
        self._tree.append(leaf)
        sizes = self._sizes
        while self._size_at < len(sizes) and sizes[self._size_at] == self._tree.size:
            self.roots[self._tree.size] = self._tree.root()
            self._size_at += 1

    def root(self) -> bytes:
        """The tree head over every leaf read so far (also kept in `roots`)."""
        root = self._tree.root()
        self.roots[self._tree.size] = root
        return root

    def hashes(self, ranges: Sequence[Range]) -> list[bytes]:
        missing = [r for r in ranges if r not in self.ranges]
        if missing:
            raise ProofError(f"only {self._tree.size} leaves were read; ranges {missing} are beyond them")
        return [self.ranges[r] for r in ranges]


# --------------------------------------------------------------------------- proof lengths


def inclusion_proof_length(index: int, size: int) -> int:
    """How many hashes the audit path of leaf `index` in a tree of `size` leaves has."""
    if not 0 <= index < size:
        raise ProofError(f"leaf index {index} is not in a tree of {size} leaves")
    inner = (index ^ (size - 1)).bit_length()
    return inner + (index >> inner).bit_count()


def consistency_proof_length(old: int, new: int) -> int:
    """How many hashes the consistency proof from `old` leaves to `new` leaves has."""
    if not 0 <= old <= new:
        raise ProofError(f"no consistency proof from {old} leaves to {new}")
    if old == 0 or old == new:
        return 0
    inner = ((old - 1) ^ (new - 1)).bit_length()
    border = ((old - 1) >> inner).bit_count()
    shift = (old & -old).bit_length() - 1  # trailing zeros of old
    start = 0 if old & (old - 1) == 0 else 1  # a power of two's root is a node of the new tree
    return start + (inner - shift) + border


def _check_shape(proof: Sequence[bytes], expected: int, what: str) -> None:
    if len(proof) != expected:
        raise ProofError(f"{what} has {len(proof)} hashes; these sizes need exactly {expected}")
    for i, h in enumerate(proof):
        if len(h) != HASH_SIZE:
            raise ProofError(f"{what}: hash {i} is {len(h)} bytes, not {HASH_SIZE}")


# --------------------------------------------------------------------------- verification


def root_from_inclusion(index: int, size: int, leaf: bytes, proof: Sequence[bytes]) -> bytes:
    """The root an audit path leads to (RFC 9162 section 2.1.3.2); raises on a malformed proof."""
    _check_shape(proof, inclusion_proof_length(index, size), "inclusion proof")
    if len(leaf) != HASH_SIZE:
        raise ProofError(f"leaf hash is {len(leaf)} bytes, not {HASH_SIZE}")
    fn, sn, r = index, size - 1, leaf
    for p in proof:
        if sn == 0:
            raise ProofError("inclusion proof is longer than the path")
        if fn & 1 or fn == sn:
            r = node_hash(p, r)
            while not fn & 1 and fn != 0:
                fn >>= 1
                sn >>= 1
        else:
            r = node_hash(r, p)
        fn >>= 1
        sn >>= 1
    if sn != 0:
        raise ProofError("inclusion proof is shorter than the path")
    return r


def verify_inclusion(index: int, size: int, leaf: bytes, proof: Sequence[bytes], root: bytes) -> None:
    """Raises ProofError unless `proof` shows leaf hash `leaf` at `index` in the tree with `root`."""
    got = root_from_inclusion(index, size, leaf, proof)
    if got != root:
        raise ProofError(
            f"inclusion proof leads to root {shown_hash(got)}, the tree head is {shown_hash(root)}"
        )


def verify_consistency(old: int, new: int, old_root: bytes, new_root: bytes, proof: Sequence[bytes]) -> None:
    """Raises ProofError unless `proof` shows the tree (old, old_root) is a prefix of (new, new_root)
    (RFC 9162 section 2.1.4.2)."""
    _check_shape(proof, consistency_proof_length(old, new), "consistency proof")
    if old == new:
        if old_root != new_root:
            raise ProofError(f"two different roots for the same size {old}")
        return
    if old == 0:
        if old_root != EMPTY_ROOT:
            raise ProofError("the root of a tree of 0 leaves must be the empty root")
        return
    path = list(proof)
    if old & (old - 1) == 0:  # old is a power of two: its root is a node of the new tree
        path.insert(0, old_root)
    fn, sn = old - 1, new - 1
    while fn & 1:
        fn >>= 1
        sn >>= 1
    fr = sr = path[0]
    for c in path[1:]:
        if sn == 0:
            raise ProofError("consistency proof is longer than the path")
        if fn & 1 or fn == sn:
            fr = node_hash(c, fr)
            sr = node_hash(c, sr)
            while not fn & 1 and fn != 0:
                fn >>= 1
                sn >>= 1
        else:
            sr = node_hash(sr, c)
        fn >>= 1
        sn >>= 1
    if sn != 0:
        raise ProofError("consistency proof is shorter than the path")
    if fr != old_root:
        raise ProofError(
            f"consistency proof rebuilds the old root as {shown_hash(fr)}, the old tree head is "
            f"{shown_hash(old_root)}"
        )
    if sr != new_root:
        raise ProofError(
            f"consistency proof rebuilds the new root as {shown_hash(sr)}, the new tree head is "
            f"{shown_hash(new_root)}"
        )
