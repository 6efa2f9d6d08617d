"""Signed notes, Ed25519 keys and checkpoints in the C2SP text formats, held to the figures the Go
note package publishes (tests/data/tlog/signed-note-vectors.json): our keys parse theirs, our
signatures are byte-identical to theirs, and every mangling is refused."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from cbledger.ledger import checkpoint as cp
from cbledger.ledger.checkpoint import Checkpoint, CheckpointError
from cbledger.ledger.keys import SigningKey, VerifierKey, open_note, sign_note
from cbledger.ledger.merkle import EMPTY_ROOT
from cbledger.ledger.note import NoteError, key_id, parse
from cbledger.ledger.signed_checkpoint import open_checkpoint, sign

V = json.loads((Path(__file__).parent / "data" / "tlog" / "signed-note-vectors.json").read_text())
PETER = V["keys"]["PeterNeumann"]
ENOCH = V["keys"]["EnochRoot"]
TEXT = V["text"]
PETER_SIG = V["signatureLines"]["PeterNeumann"]
ENOCH_SIG = V["signatureLines"]["EnochRoot"]


def test_the_published_keys_parse_and_their_ids_follow_the_key_id_rule():
    peter = VerifierKey.parse(PETER["vkey"])
    assert peter.name == "PeterNeumann" and f"{peter.key_id:08x}" == PETER["keyId"]
    assert peter.text() == PETER["vkey"]
    assert key_id("PeterNeumann", 1, peter.public) == peter.key_id
    signer = SigningKey.parse(PETER["skey"])
    assert signer.verifier() == peter
    assert signer.text() == PETER["skey"]
    assert "seed" not in repr(signer) and signer.seed.hex() not in repr(signer)
    assert VerifierKey.parse(ENOCH["vkey"]).label == "EnochRoot+af0cfe78"


def test_our_signature_is_the_published_one_byte_for_byte():
    signer = SigningKey.parse(PETER["skey"])
    assert sign_note(TEXT, [signer]) == TEXT + "\n" + PETER_SIG


def test_opening_ignores_unknown_keys_and_needs_one_trusted_signature():
    peter, enoch = VerifierKey.parse(PETER["vkey"]), VerifierKey.parse(ENOCH["vkey"])
    both = TEXT + "\n" + PETER_SIG + ENOCH_SIG
    opened = open_note(both, [peter])
    assert opened.note.text == TEXT and opened.verified == (peter,)
    assert [s.label for s in opened.unknown] == ["EnochRoot+af0cfe78"]
    assert open_note(both, [peter, enoch]).verified == (peter, enoch)
    with pytest.raises(NoteError, match="no signature by a trusted key"):
        open_note(both, [])
    forged = TEXT + "\n" + PETER_SIG[:60] + "ABCD" + PETER_SIG[60:]
    with pytest.raises(NoteError, match="PeterNeumann\\+c74f20a3 does not verify"):
        open_note(forged, [peter])
    with pytest.raises(NoteError, match="does not verify"):
        open_note(TEXT.replace("problem", "answer", 1) + "\n" + PETER_SIG, [peter])


@pytest.mark.parametrize(
    "bad",
    [
        TEXT,
        TEXT + "\n",
        TEXT + "\n" + PETER_SIG[:-1],
        "\x01" + TEXT + "\n" + PETER_SIG,
        TEXT + "\n" + "— Bad Name " + PETER_SIG.split(" ")[2],
        TEXT + "\n" + PETER_SIG + "Unexpected line.\n",
        TEXT + "\n" + PETER_SIG * 101,
        TEXT + "\n" + PETER_SIG.replace("— ", "- "),
    ],
)
def test_malformed_notes_are_refused(bad):
    with pytest.raises(NoteError):
        open_note(bad, [VerifierKey.parse(PETER["vkey"])])


def test_invalid_utf8_is_refused_with_its_offset():
    with pytest.raises(NoteError, match="not UTF-8 at byte 0"):
        parse(b"\xff" + (TEXT + "\n" + PETER_SIG).encode())


@pytest.mark.parametrize("bad", V["malformedKeys"] + [
    PETER["vkey"][:-1], PETER["vkey"] + "=", PETER["vkey"].replace("c74f20a3", "c74f20a4"),
    PETER["vkey"].replace("PeterNeumann", "PeterNeuman"), "PeterNeumann+c74f20a3", "",
])
def test_mangled_verifier_keys_are_refused(bad):
    with pytest.raises(NoteError):
        VerifierKey.parse(bad)


def test_mangled_signing_keys_are_refused():
    skey = PETER["skey"]
    for bad in (skey[len("PRIVATE+KEY+"):], skey.replace("c74f20a3", "c74f20a4"), skey[:-2], PETER["vkey"]):
        with pytest.raises(NoteError):
            SigningKey.parse(bad)


# --------------------------------------------------------------------------- checkpoints


def test_a_checkpoint_round_trips_and_is_signed_over_its_text():
    key = SigningKey.generate("example.com/log")
    c = Checkpoint("example.com/log", 82, bytes(range(32)))
    assert c.text() == "example.com/log\n82\nAAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=\n"
    note = sign(c, [key])
    opened = open_checkpoint(note, [key.verifier()], "82.txt")
    assert opened.checkpoint == c and opened.signers == (key.verifier(),) and opened.note == note
    assert cp.read_unverified(note) == c
    other = SigningKey.generate("example.com/log")
    with pytest.raises(CheckpointError, match=r"82\.txt: no signature by a trusted key"):
        open_checkpoint(note, [other.verifier()], "82.txt")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("o\n01\nAAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=\n", "leading zeros"),
        ("o\n-1\nAAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=\n", "decimal"),
        ("o\n1\nAAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8\n", "base64"),
        ("o\n1\nAAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwd\n", "30 bytes"),
        ("\n1\nAAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=\n", "origin is empty"),
        ("o\n1\n", "3 lines|2 lines"),
    ],
)
def test_malformed_checkpoint_text_is_refused(text, message):
    with pytest.raises(CheckpointError, match=message):
        Checkpoint.parse_text(text)


def test_the_empty_tree_and_extension_lines():
    c = Checkpoint.parse_text("o\n0\n" + base64.b64encode(EMPTY_ROOT).decode() + "\next one\n")
    assert c.size == 0 and c.root == EMPTY_ROOT and c.extensions == ("ext one",)


def test_the_event_check_compares_the_note_with_the_fields():
    key = SigningKey.generate("o")
    note = sign(Checkpoint("o", 5, bytes(32)), [key])
    assert cp.event_problem(note, "o", 5, "00" * 32) is None
    assert "size 5" in (cp.event_problem(note, "o", 6, "00" * 32) or "")
    assert "not a checkpoint" in (cp.event_problem("hello\n", "o", 5, "00" * 32) or "")


def test_a_checkpoint_event_whose_note_states_other_fields_does_not_decode():
    import datetime as dt

    import msgspec

    from cbledger.ledger import encoding
    from cbledger.ledger.encoding import InvalidEvent
    from cbledger.ledger.events import Actor, CheckpointPublished, make_event

    key = SigningKey.generate("o")
    note = sign(Checkpoint("o", 5, bytes(32)), [key])
    body = CheckpointPublished(origin="o", tree_size=5, root_hash="00" * 32, note=note)
    event = make_event(body, id="checkpoint:5", actor=Actor(kind="maintainer", name="m"),
                       at=dt.datetime(2026, 1, 1, tzinfo=dt.UTC))
    data = encoding.encode(event)
    assert encoding.decode(data) == event
    lying = data.replace(b'"treeSize":5', b'"treeSize":6')
    with pytest.raises(InvalidEvent, match="note states origin 'o', size 5"):
        encoding.decode(lying)
    with pytest.raises(msgspec.ValidationError):
        msgspec.convert({"origin": "o", "treeSize": 5, "rootHash": "00" * 32, "note": "hello\n"}, CheckpointPublished)
