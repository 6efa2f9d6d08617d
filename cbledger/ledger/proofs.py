"""Inclusion and consistency proofs as JSON documents: made from a ledger, checked without one.

An inclusion proof says "this stored line is seq S of the tree of size N with this root"; a
consistency proof says "the tree of size M with root A is a prefix of the tree of size N with root
B". `cbledger prove` writes them; `cbledger verify-proof` checks them against signed checkpoints and
nothing else — no ledger — which is what lets a reader who holds only a checkpoint hold the ledger
to it. The shapes (`docs/CHECKPOINTS.md`):

    {"proof": "inclusion", "format": "cbledger-proof/1", "origin": "<origin or null>",
     "treeSize": N, "rootHash": "<base64>", "seq": S, "leafIndex": S-1,
     "line": "<the stored line, without its newline>", "leafHash": "<base64>",
     "hashes": ["<base64>", ...]}

    {"proof": "consistency", "format": "cbledger-proof/1", "origin": "<origin or null>",
     "oldSize": M, "oldRoot": "<base64>", "newSize": N, "newRoot": "<base64>",
     "hashes": ["<base64>", ...]}

Hashes are standard base64, as in a checkpoint. Checking a proof first checks its form and its
length against the sizes it names, and only then hashes anything.
"""

from __future__ import annotations

from typing import Literal

import msgspec

from cbledger.errors import UserError
from cbledger.ledger.chain import parse_line
from cbledger.ledger.checkpoint import Checkpoint
from cbledger.ledger.merkle import (
    HASH_SIZE,
    ProofError,
    consistency_proof_length,
    consistency_ranges,
    inclusion_proof_length,
    inclusion_ranges,
    leaf_hash,
    verify_consistency,
    verify_inclusion,
)
from cbledger.ledger.note import NoteError, b64, unb64
from cbledger.ledger.store import LedgerStore
from cbledger.ledger.tlog import TreeError, leaf_bytes, scan

FORMAT: Literal["cbledger-proof/1"] = "cbledger-proof/1"


class ProofFormatError(UserError):
    """A proof file that is not a proof document (bad JSON, a missing or mistyped field)."""


class _Doc(msgspec.Struct, tag_field="proof", forbid_unknown_fields=True, rename="camel", kw_only=True):
    format: Literal["cbledger-proof/1"] = FORMAT
    origin: str | None = None


class InclusionProof(_Doc, tag="inclusion", kw_only=True):
    tree_size: int
    root_hash: str
    seq: int
    leaf_index: int
    line: str
    leaf_hash: str
    hashes: list[str]


class ConsistencyProof(_Doc, tag="consistency", kw_only=True):
    old_size: int
    old_root: str
    new_size: int
    new_root: str
    hashes: list[str]


Proof = InclusionProof | ConsistencyProof
_DECODER = msgspec.json.Decoder(Proof)
_ENCODER = msgspec.json.Encoder()


def encode(proof: Proof) -> bytes:
    return msgspec.json.format(_ENCODER.encode(proof), indent=2) + b"\n"


def decode(data: bytes, source: str) -> Proof:
    try:
        return _DECODER.decode(data)
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        raise ProofFormatError(f"{source}: not a proof document: {exc}") from None


# --------------------------------------------------------------------------- making proofs


def prove_inclusion(store: LedgerStore, seq: int, tree_size: int, origin: str | None) -> InclusionProof:
    """The audit path of seq `seq` in the tree of the first `tree_size` events."""
    if not 1 <= seq <= tree_size:
        raise TreeError(f"seq {seq} is not in a tree of {tree_size} events (seq 1..{tree_size})")
    ranges = inclusion_ranges(seq - 1, tree_size)
    result = scan(store, [tree_size], ranges)
    root = result.root(tree_size)
    stored = next(store.read(since=seq - 1, until=seq))
    line = leaf_bytes(stored)
    return InclusionProof(
        origin=origin, tree_size=tree_size, root_hash=b64(root), seq=seq, leaf_index=seq - 1,
        line=line.decode("utf-8"), leaf_hash=b64(leaf_hash(line)),
        hashes=[b64(x) for x in result.hashes(ranges)],
    )


def prove_consistency(store: LedgerStore, old: int, new: int, origin: str | None) -> ConsistencyProof:
    """The proof that the tree of the first `old` events is a prefix of the tree of the first `new`."""
    if not 0 <= old <= new:
        raise TreeError(f"no consistency proof from size {old} to size {new}: the old size must not be larger")
    ranges = consistency_ranges(old, new)
    result = scan(store, [old, new], ranges)
    return ConsistencyProof(
        origin=origin, old_size=old, old_root=b64(result.root(old)), new_size=new,
        new_root=b64(result.root(new)), hashes=[b64(x) for x in result.hashes(ranges)],
    )


# --------------------------------------------------------------------------- checking proofs


def _hash(value: str, what: str) -> bytes:
    try:
        raw = unb64(value, what)
    except NoteError as exc:
        raise ProofError(str(exc)) from None
    if len(raw) != HASH_SIZE:
        raise ProofError(f"{what} is {len(raw)} bytes, not {HASH_SIZE}")
    return raw


def _hashes(proof: Proof, expected: int) -> list[bytes]:
    """The proof's hashes, once their count is the one its sizes need (checked before decoding)."""
    if len(proof.hashes) != expected:
        raise ProofError(f"malformed proof: {len(proof.hashes)} hashes where its sizes need exactly {expected}")
    return [_hash(h, f"hashes[{i}]") for i, h in enumerate(proof.hashes)]


def _origin(proof: Proof, checkpoint: Checkpoint) -> None:
    if proof.origin is not None and proof.origin != checkpoint.origin:
        raise ProofError(f"the proof is for log {proof.origin!r}, the checkpoint for {checkpoint.origin!r}")


def verify_inclusion_proof(proof: InclusionProof, checkpoint: Checkpoint) -> None:
    """Raises ProofError unless `proof` shows its line as seq `seq` of the checkpoint's tree."""
    if proof.tree_size != checkpoint.size:
        raise ProofError(f"the proof is for a tree of {proof.tree_size} events, the checkpoint is of {checkpoint.size}")
    _origin(proof, checkpoint)
    if proof.leaf_index != proof.seq - 1:
        raise ProofError(f"leafIndex {proof.leaf_index} is not seq {proof.seq} - 1")
    try:
        expected = inclusion_proof_length(proof.leaf_index, proof.tree_size)
    except ProofError as exc:
        raise ProofError(f"malformed proof: {exc}") from None
    path = _hashes(proof, expected)
    if _hash(proof.root_hash, "rootHash") != checkpoint.root:
        raise ProofError("the proof's rootHash is not the checkpoint's root")
    claimed = _hash(proof.leaf_hash, "leafHash")
    line = proof.line.encode("utf-8")
    if leaf_hash(line) != claimed:
        raise ProofError("leafHash is not the hash of the line")
    try:
        seq = msgspec.json.decode(bytes(parse_line(line + b"\n").event), type=_Seq).seq
    except msgspec.MsgspecError as exc:
        raise ProofError(f"the line is not a ledger line: {exc}") from None
    if seq != proof.seq:
        raise ProofError(f"the line holds seq {seq}, the proof says {proof.seq}")
    verify_inclusion(proof.leaf_index, proof.tree_size, claimed, path, checkpoint.root)


class _Seq(msgspec.Struct):
    seq: int


def verify_consistency_proof(proof: ConsistencyProof, old: Checkpoint, new: Checkpoint) -> None:
    """Raises ProofError unless `proof` shows checkpoint `old`'s tree is a prefix of `new`'s."""
    if (proof.old_size, proof.new_size) != (old.size, new.size):
        raise ProofError(
            f"the proof is from size {proof.old_size} to {proof.new_size}; the checkpoints are of "
            f"{old.size} and {new.size}"
        )
    if old.origin != new.origin:
        raise ProofError(f"the checkpoints are of two logs: {old.origin!r} and {new.origin!r}")
    _origin(proof, new)
    try:
        expected = consistency_proof_length(proof.old_size, proof.new_size)
    except ProofError as exc:
        raise ProofError(f"malformed proof: {exc}") from None
    path = _hashes(proof, expected)
    if _hash(proof.old_root, "oldRoot") != old.root or _hash(proof.new_root, "newRoot") != new.root:
        raise ProofError("the proof's roots are not the checkpoints' roots")
    verify_consistency(old.size, new.size, old.root, new.root, path)
