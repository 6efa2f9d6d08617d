"""Ed25519 keys for signed notes, in the text forms the Go checksum database tools use.

    verifier key  <name>+<key ID, 8 hex digits>+<base64(0x01 || 32-byte public key)>
    signing key   PRIVATE+KEY+<name>+<key ID>+<base64(0x01 || 32-byte private seed)>

The key ID is the signed-note rule (`cbledger.ledger.note.key_id`, signature type 0x01), and a key
whose stated ID does not match its name and public key is refused, so a key file cannot claim to be
another key. Signing and verifying are `cryptography`'s Ed25519 (RFC 8032): deterministic, so the
same key signs the same checkpoint with the same bytes.

Opening a note follows signed-note: a signature by a key we do not know is ignored; a signature by a
known key that fails rejects the whole note; a note with no verified signature is rejected.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)

from cbledger.ledger.note import (
    Note,
    NoteError,
    Signature,
    b64,
    check_text,
    key_id,
    parse,
    unb64,
    valid_key_name,
)

ED25519 = 0x01


class SignatureFails(NoteError):
    """A trusted key's signature that does not verify: the note is false, not malformed (a command
    that only checks notes, `verify-proof` and `witness`, reports it as a failed check)."""


class Untrusted(NoteError):
    """A well-formed note that no trusted key signed (as opposed to one whose signature fails)."""

_PRIVATE_PREFIX = "PRIVATE+KEY+"
_HEX8 = re.compile(r"[0-9a-f]{8}")


def _key_parts(text: str, what: str) -> tuple[str, int, bytes]:
    parts = text.split("+", 2)  # base64 may hold a plus; the name and the ID may not
    if len(parts) != 3:
        raise NoteError(f"{what}: not `<name>+<key ID>+<base64 key>`")
    name, hex_id, encoded = parts
    if not valid_key_name(name):
        raise NoteError(f"{what}: key name {name[:40]!r} is empty or holds a space")
    if not _HEX8.fullmatch(hex_id):
        raise NoteError(f"{what}: key ID {hex_id[:16]!r} is not 8 lowercase hex digits")
    raw = unb64(encoded, what)
    if len(raw) != 33 or raw[0] != ED25519:
        raise NoteError(f"{what}: not an Ed25519 key (type byte 0x01 and 32 bytes)")
    return name, int(hex_id, 16), raw[1:]


@dataclass(frozen=True)
class VerifierKey:
    name: str
    key_id: int
    public: bytes

    @classmethod
    def from_public(cls, name: str, public: bytes) -> VerifierKey:
        if not valid_key_name(name):
            raise NoteError(f"key name {name[:40]!r} is empty or holds a space or a plus")
        return cls(name, key_id(name, ED25519, public), public)

    @classmethod
    def parse(cls, text: str, source: str = "verifier key") -> VerifierKey:
        name, stated, public = _key_parts(text.strip(), source)
        key = cls.from_public(name, public)
        if key.key_id != stated:
            raise NoteError(f"{source}: key ID {stated:08x} is not this key's ({key.key_id:08x})")
        return key

    @property
    def label(self) -> str:
        return f"{self.name}+{self.key_id:08x}"

    def text(self) -> str:
        return f"{self.label}+{b64(bytes([ED25519]) + self.public)}"

    def verifies(self, message: bytes, signature: bytes) -> bool:
        try:
            Ed25519PublicKey.from_public_bytes(self.public).verify(signature, message)
        except InvalidSignature:
            return False
        return True


@dataclass(frozen=True)
class SigningKey:
    name: str
    key_id: int
    seed: bytes = field(repr=False)

    @classmethod
    def generate(cls, name: str) -> SigningKey:
        private = Ed25519PrivateKey.generate()
        seed = private.private_bytes(
            serialization.Encoding.Raw, serialization.PrivateFormat.Raw, serialization.NoEncryption()
        )
        return cls.from_seed(name, seed)

    @classmethod
    def from_seed(cls, name: str, seed: bytes) -> SigningKey:
        verifier = VerifierKey.from_public(name, _public_of(seed))
        return cls(name, verifier.key_id, seed)

    @classmethod
    def parse(cls, text: str, source: str = "signing key") -> SigningKey:
        text = text.strip()
        if not text.startswith(_PRIVATE_PREFIX):
            raise NoteError(f"{source}: not a signing key (it starts with {_PRIVATE_PREFIX})")
        name, stated, seed = _key_parts(text[len(_PRIVATE_PREFIX) :], source)
        key = cls.from_seed(name, seed)
        if key.key_id != stated:
            raise NoteError(f"{source}: key ID {stated:08x} is not this key's ({key.key_id:08x})")
        return key

    def text(self) -> str:
        return f"{_PRIVATE_PREFIX}{self.name}+{self.key_id:08x}+{b64(bytes([ED25519]) + self.seed)}"

    def verifier(self) -> VerifierKey:
        return VerifierKey(self.name, self.key_id, _public_of(self.seed))

    def sign(self, message: bytes) -> bytes:
        return Ed25519PrivateKey.from_private_bytes(self.seed).sign(message)


def _public_of(seed: bytes) -> bytes:
    if len(seed) != 32:
        raise NoteError(f"an Ed25519 seed is 32 bytes, not {len(seed)}")
    return Ed25519PrivateKey.from_private_bytes(seed).public_key().public_bytes(
        serialization.Encoding.Raw, serialization.PublicFormat.Raw
    )


def sign_note(text: str, keys: Sequence[SigningKey]) -> str:
    """The signed note: `text`, a blank line, one signature line per key, in the order given."""
    check_text(text)
    message = text.encode("utf-8")
    sigs = tuple(Signature(k.name, k.key_id, k.sign(message)) for k in keys)
    if not sigs:
        raise NoteError("a signed note needs at least one key")
    return Note(text, sigs).render()


@dataclass(frozen=True)
class Opened:
    note: Note
    verified: tuple[VerifierKey, ...]
    unknown: tuple[Signature, ...]


def open_note(data: bytes | str, trusted: Sequence[VerifierKey]) -> Opened:
    """The note, if at least one trusted key signed it and no trusted key's signature fails."""
    note = parse(data)
    message = note.text.encode("utf-8")
    verified: list[VerifierKey] = []
    unknown: list[Signature] = []
    for sig in note.signatures:
        matches = [k for k in trusted if k.name == sig.name and k.key_id == sig.key_id]
        if not matches:
            unknown.append(sig)
            continue
        if len({k.public for k in matches}) > 1:
            raise NoteError(f"two trusted keys are named {sig.label}")
        if not matches[0].verifies(message, sig.signature):
            raise SignatureFails(f"the signature by {sig.label} does not verify: the text was changed or the signature forged")
        if matches[0] not in verified:
            verified.append(matches[0])
    if not verified:
        signers = ", ".join(s.label for s in note.signatures)
        known = ", ".join(k.label for k in trusted) or "none"
        raise Untrusted(f"no signature by a trusted key (signed by {signers}; trusted: {known})")
    return Opened(note, tuple(verified), tuple(unknown))
