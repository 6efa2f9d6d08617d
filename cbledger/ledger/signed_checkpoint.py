"""A checkpoint signed with Ed25519 keys, and opened with trusted ones.

What `cbledger checkpoint` writes to `results/checkpoints/<size>.txt` and what every verifier reads:
the checkpoint text of `cbledger.ledger.checkpoint` as a signed note (`cbledger.ledger.keys`).
Opening a checkpoint is the only way to trust one: it must carry a verifying signature by a key
the reader trusts, and no trusted key's signature on it may fail.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from cbledger.ledger.checkpoint import Checkpoint, CheckpointError
from cbledger.ledger.keys import (
    SignatureFails,
    SigningKey,
    Untrusted,
    VerifierKey,
    open_note,
    sign_note,
)
from cbledger.ledger.note import NoteError


@dataclass(frozen=True)
class SignedCheckpoint:
    checkpoint: Checkpoint
    note: str  # the whole signed note, as published
    signers: tuple[VerifierKey, ...]  # the trusted keys whose signatures verified

    @property
    def size(self) -> int:
        return self.checkpoint.size

    @property
    def root(self) -> bytes:
        return self.checkpoint.root


def sign(checkpoint: Checkpoint, keys: Sequence[SigningKey]) -> str:
    """The signed note of a checkpoint."""
    return sign_note(checkpoint.text(), keys)


class UntrustedCheckpoint(CheckpointError):
    """A well-formed checkpoint no trusted key signed (as opposed to one whose signature fails)."""


class ForgedCheckpoint(CheckpointError):
    """A checkpoint a trusted key's signature does not verify: its text was changed or the
    signature forged. `verify-proof` and `witness` exit 1 on it (a failed check); every other
    command keeps its own codes (exit 1 of `replay --verify` means a broken chain)."""


def open_checkpoint(data: bytes | str, trusted: Sequence[VerifierKey], source: str) -> SignedCheckpoint:
    """A checkpoint signed by at least one trusted key; raises CheckpointError naming `source`."""
    try:
        opened = open_note(data, trusted)
        checkpoint = Checkpoint.parse_text(opened.note.text)
    except Untrusted as exc:
        raise UntrustedCheckpoint(f"{source}: {exc}") from None
    except SignatureFails as exc:
        raise ForgedCheckpoint(f"{source}: {exc}") from None
    except NoteError as exc:
        raise CheckpointError(f"{source}: {exc}") from None
    text = data.decode("utf-8") if isinstance(data, bytes) else data
    return SignedCheckpoint(checkpoint, text, opened.verified)
