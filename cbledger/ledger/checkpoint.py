"""Checkpoints (C2SP `tlog-checkpoint`): a signed note whose text is a tree head.

    <origin>
    <tree size, decimal, no leading zeros>
    <base64 of the RFC 6962 root hash>

    — <key name> <base64(key ID || Ed25519 signature)>

The origin names the log (the ledger); the key name should be the origin. A checkpoint of size N
covers the events with seq 1..N (leaf N-1 is seq N, see `cbledger.ledger.tlog`). Parsing is strict
in the ways the format is — exactly the decimal size, exactly one base64 spelling of a 32-byte root —
so two files that mean the same checkpoint are the same bytes.

This module is the text only (no cryptography, so the event types can check a recorded checkpoint
against its own fields cheaply); signing and opening are `cbledger.ledger.signed_checkpoint`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from cbledger.ledger.merkle import HASH_SIZE
from cbledger.ledger.note import NoteError, b64, parse, unb64

_SIZE = re.compile(r"0|[1-9][0-9]*")


class CheckpointError(NoteError):
    """A file that is not a checkpoint, or not one signed by a trusted key."""


@dataclass(frozen=True)
class Checkpoint:
    origin: str
    size: int
    root: bytes
    extensions: tuple[str, ...] = ()

    def text(self) -> str:
        lines = [self.origin, str(self.size), b64(self.root), *self.extensions]
        return "".join(line + "\n" for line in lines)

    @property
    def root_hex(self) -> str:
        return self.root.hex()

    @classmethod
    def parse_text(cls, text: str) -> Checkpoint:
        lines = text.split("\n")
        if lines[-1] != "":
            raise CheckpointError("checkpoint text must end with a newline")
        lines = lines[:-1]
        if len(lines) < 3:
            raise CheckpointError(f"checkpoint text has {len(lines)} lines; origin, size and root hash are three")
        origin, size, root, *extensions = lines
        if not origin:
            raise CheckpointError("line 1: the origin is empty")
        if not _SIZE.fullmatch(size):
            raise CheckpointError(f"line 2: tree size {size[:30]!r} is not a decimal number without leading zeros")
        try:
            raw = unb64(root, "line 3 (root hash)")
        except NoteError as exc:
            raise CheckpointError(str(exc)) from None
        if len(raw) != HASH_SIZE:
            raise CheckpointError(f"line 3: root hash is {len(raw)} bytes, not {HASH_SIZE}")
        for n, ext in enumerate(extensions, start=4):
            if not ext:
                raise CheckpointError(f"line {n}: an extension line must not be empty")
        return cls(origin, int(size), raw, tuple(extensions))


def read_unverified(data: bytes | str) -> Checkpoint:
    """The checkpoint a note states, without checking any signature (for a ledger event's own
    consistency; a checkpoint is only trusted once `signed_checkpoint.open_checkpoint` opened it)."""
    return Checkpoint.parse_text(parse(data).text)


def event_problem(note: str, origin: str, size: int, root_hex: str) -> str | None:
    """Why a `checkpoint.published` body's note does not state its origin, size and root, if it
    does not: the fields are what the views read, the note is what was signed, and they must agree."""
    try:
        stated = read_unverified(note)
    except NoteError as exc:
        return f"note is not a checkpoint: {exc}"
    if (stated.origin, stated.size, stated.root_hex) != (origin, size, root_hex):
        return (
            f"note states origin {stated.origin!r}, size {stated.size}, root {stated.root_hex[:16]}…; "
            f"the event says {origin!r}, {size}, {root_hex[:16]}…"
        )
    return None
