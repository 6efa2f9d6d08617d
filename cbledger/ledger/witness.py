"""Witnessing: a third party keeps the last checkpoint it accepted and accepts a newer one only with
a consistency proof from it.

A witness needs no ledger. It holds one file (the last signed checkpoint it accepted) and the
public keys it trusts; given a new checkpoint and a consistency proof from its size to the new
one, it accepts the new checkpoint only if the proof verifies. A log that rewrote its history
between two publications cannot produce that proof, so the rewrite shows at the next publication
to everyone who kept the last one — the attack a hash chain alone cannot show, since whoever
holds the file can recompute every link.

Outcomes: `first` (nothing kept yet: the checkpoint is kept, trusted on first use), `same` (the
checkpoint already kept), `advanced` (consistent and newer: kept); anything else raises
`WitnessRefusal` and keeps the old checkpoint.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from cbledger.errors import UserError
from cbledger.ledger import durable
from cbledger.ledger.keys import VerifierKey
from cbledger.ledger.merkle import ProofError, shown_hash
from cbledger.ledger.proofs import ConsistencyProof, verify_consistency_proof
from cbledger.ledger.signed_checkpoint import SignedCheckpoint, open_checkpoint


class WitnessRefusal(UserError):
    """The new checkpoint is not consistent with the one kept: a rewrite, a fork or a rollback."""

    exit_code = 1


@dataclass(frozen=True)
class Witnessed:
    outcome: Literal["first", "same", "advanced"]
    kept: SignedCheckpoint
    previous: SignedCheckpoint | None


def witness(
    state: Path, new_note: bytes, new_source: str, proof: ConsistencyProof | None,
    trusted: Sequence[VerifierKey],
) -> Witnessed:
    """Checks `new_note` against the checkpoint kept in `state` and keeps it if it is consistent."""
    new = open_checkpoint(new_note, trusted, new_source)
    if not state.is_file():
        _keep(state, new.note)
        return Witnessed("first", new, None)
    old = open_checkpoint(state.read_bytes(), trusted, str(state))
    o, n = old.checkpoint, new.checkpoint
    if o.origin != n.origin:
        raise UserError(f"{new_source}: a checkpoint of {n.origin!r}; {state} keeps one of {o.origin!r}")
    if n.size < o.size:
        raise WitnessRefusal(
            f"ROLLBACK: {new_source} is of size {n.size}, older than the kept checkpoint of size {o.size}"
        )
    if n.size == o.size:
        if n.root != o.root:
            raise WitnessRefusal(
                f"FORK: two signed roots for size {n.size}: kept {shown_hash(o.root)}, new {shown_hash(n.root)}"
            )
        return Witnessed("same", old, old)
    if proof is None:
        raise UserError(f"a consistency proof from size {o.size} to {n.size} is needed to accept {new_source}")
    try:
        verify_consistency_proof(proof, o, n)
    except ProofError as exc:
        raise WitnessRefusal(
            f"NOT CONSISTENT: {new_source} (size {n.size}) does not extend the kept checkpoint "
            f"(size {o.size}): {exc}. The log's history between them was rewritten, or the proof is wrong."
        ) from None
    _keep(state, new.note)
    return Witnessed("advanced", new, old)


def _keep(state: Path, note: str) -> None:
    """Synced, and its name too: a state a power cut emptied would make the next witness trust
    whatever checkpoint it is shown first."""
    durable.write_atomic(state, note.encode("utf-8"))
    durable.fsync_directory(state.parent)
