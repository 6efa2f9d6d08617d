"""Signed notes (C2SP `signed-note`): a text, a blank line, and one signature line per key.

    <text, ending in a newline>
    <blank line>
    — <key name> <base64(4-byte key ID || signature)>

The format is a published one so that a checkpoint can be checked with tools that are not this
project's. This module is the text format only — splitting, checking and writing notes, and the key
ID rule; signing and verifying with Ed25519 keys is `cbledger.ledger.keys`. Parsing is strict
(UTF-8, no control characters but newline, every signature line well formed, at most
`MAX_SIGNATURES`), because a note is read from files anyone may hand us.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from dataclasses import dataclass

from cbledger.errors import UserError

EM_DASH = "\u2014"
#: Verifiers must accept at least 16 signatures; past this many a note is refused as malformed.
MAX_SIGNATURES = 100
_SIG_PREFIX = EM_DASH + " "


class NoteError(UserError):
    """A note that is malformed, or whose signatures do not verify; the message says which."""


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def unb64(text: str, what: str) -> bytes:
    """Strict standard base64 (RFC 4648 section 4): no whitespace, no missing padding, and only the
    one canonical encoding of the bytes, so a value has exactly one spelling."""
    try:
        data = base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError):
        raise NoteError(f"{what}: not standard base64: {text[:40]!r}") from None
    if b64(data) != text:
        raise NoteError(f"{what}: not the canonical base64 of its bytes: {text[:40]!r}")
    return data


def valid_key_name(name: str) -> bool:
    """Non-empty, no Unicode space, no `+` (signed-note, Format)."""
    return bool(name) and "+" not in name and not any(c.isspace() for c in name)


def key_id(name: str, signature_type: int, public_key: bytes) -> int:
    """SHA-256(key name || 0x0A || signature type || public key), first four bytes, big-endian."""
    digest = hashlib.sha256(name.encode("utf-8") + b"\n" + bytes([signature_type]) + public_key).digest()
    return int.from_bytes(digest[:4], "big")


@dataclass(frozen=True)
class Signature:
    name: str
    key_id: int
    signature: bytes  # the signature proper, after the four key ID bytes

    def line(self) -> str:
        return f"{_SIG_PREFIX}{self.name} {b64(self.key_id.to_bytes(4, 'big') + self.signature)}\n"

    @property
    def label(self) -> str:
        """`name+keyid`, the way keys are named in messages."""
        return f"{self.name}+{self.key_id:08x}"


@dataclass(frozen=True)
class Note:
    text: str
    signatures: tuple[Signature, ...]

    def render(self) -> str:
        return self.text + "\n" + "".join(s.line() for s in self.signatures)


def check_text(text: str) -> None:
    """Raises NoteError unless `text` may be signed: non-empty, ends in a newline, no control
    characters but newline, and no blank line at its end (that would be read as the separator)."""
    if not text or not text.endswith("\n"):
        raise NoteError("note text must be non-empty and end with a newline")
    if text.endswith("\n\n") or text == "\n":
        raise NoteError("note text must not end with a blank line")
    _check_characters(text)


def _check_characters(text: str) -> None:
    for i, c in enumerate(text):
        if c < " " and c != "\n":
            raise NoteError(f"control character U+{ord(c):04X} at offset {i}")


def parse(data: bytes | str) -> Note:
    """Splits a signed note into its text and signature lines; checks the form, not the signatures."""
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise NoteError(f"not UTF-8 at byte {exc.start}") from None
    _check_characters(data)
    if not data.endswith("\n"):
        raise NoteError("a signed note ends with a newline")
    cut = data.rfind("\n\n")
    if cut < 0:
        raise NoteError("no blank line between the text and the signatures")
    text, block = data[: cut + 1], data[cut + 2 :]
    if not block:
        raise NoteError("no signature lines after the blank line")
    lines = block.split("\n")[:-1]
    if len(lines) > MAX_SIGNATURES:
        raise NoteError(f"{len(lines)} signature lines; at most {MAX_SIGNATURES} are read")
    return Note(text, tuple(_signature(n, line) for n, line in enumerate(lines, start=1)))


def _signature(n: int, line: str) -> Signature:
    where = f"signature line {n}"
    if not line.startswith(_SIG_PREFIX):
        raise NoteError(f"{where}: does not start with an em dash and a space")
    parts = line[len(_SIG_PREFIX) :].split(" ")
    if len(parts) != 2:
        raise NoteError(f"{where}: not `— <key name> <base64>`")
    name, encoded = parts
    if not valid_key_name(name):
        raise NoteError(f"{where}: key name {name[:40]!r} is empty or holds a space or a plus")
    raw = unb64(encoded, where)
    if len(raw) < 5:
        raise NoteError(f"{where}: {len(raw)} bytes; a key ID and a signature need more")
    return Signature(name, int.from_bytes(raw[:4], "big"), raw[4:])
