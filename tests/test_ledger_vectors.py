"""The chain and the canonical encoding against fixed vectors (tests/data/ledger/).

The vectors were built by hand, not by this code: event bytes typed out in the canonical form
docs/LEDGER.md describes, and every hash computed by the `b3sum` tool over hand-assembled input
bytes (prev as 32 raw bytes, seq as 8 bytes big-endian, the event bytes). So a change to the
line format, the hash layout or the encoding fails here even if the code and its other tests
changed together.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import msgspec
import pytest

from cbledger.ledger import encoding
from cbledger.ledger.chain import GENESIS, format_line, link_hash, parse_line
from cbledger.ledger.store import LedgerStore
from cbledger.ledger.verify import verify_chain
from tests.factories import parse_events

DATA = Path(__file__).parent / "data" / "ledger"
CHAIN: dict[str, Any] = json.loads((DATA / "chain-vectors.json").read_text(encoding="utf-8"))
ENCODING: dict[str, Any] = json.loads((DATA / "encoding-vectors.json").read_text(encoding="utf-8"))
LINES = (DATA / "chain.jsonl").read_bytes().splitlines(keepends=True)


def _name(v: dict[str, Any]) -> str:
    return str(v["name"])


@pytest.mark.parametrize("vector", CHAIN["vectors"], ids=_name)
def test_link_hash_matches_the_vector(vector: dict[str, Any]) -> None:
    event = vector["event"].encode()
    assert link_hash(vector["prev"], vector["seq"], event) == vector["hash"]
    assert link_hash(vector["prev"], vector["seq"] + 1, event) != vector["hash"]  # seq is hashed


def test_the_lines_are_the_stored_layout() -> None:
    assert len(LINES) == 3
    for line, vector in zip(LINES, CHAIN["vectors"], strict=False):
        event = vector["event"].encode()
        assert format_line(event, vector["hash"], vector["prev"]) == line
        parsed = parse_line(line)
        assert (bytes(parsed.event), parsed.hash, parsed.prev) == (event, vector["hash"], vector["prev"])
    assert CHAIN["vectors"][0]["prev"] == GENESIS


def test_the_vector_ledger_verifies(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    shutil.copy(DATA / "chain.jsonl", path)
    report = verify_chain(path)
    assert report.ok, report.problem
    assert (report.head.seq, report.head.hash) == (CHAIN["head"]["seq"], CHAIN["head"]["hash"])
    stored = list(LedgerStore(path).read())
    assert [s.raw for s in stored] == [v["event"].encode() for v in CHAIN["vectors"][:3]]


def test_appending_the_vector_events_writes_the_vector_bytes(tmp_path: Path) -> None:
    """End to end: the genesis line alone, then the two later events appended as drafts, must
    give the vector file byte for byte (encoding, seq, chain and line format together)."""
    path = tmp_path / "events.jsonl"
    path.write_bytes(LINES[0])
    drafts = [
        msgspec.structs.replace(encoding.decode(v["event"].encode()), seq=0) for v in CHAIN["vectors"][1:3]
    ]
    results = LedgerStore(path).append(drafts)
    assert [(r.seq, r.hash) for r in results] == [(v["seq"], v["hash"]) for v in CHAIN["vectors"][1:3]]
    assert path.read_bytes() == (DATA / "chain.jsonl").read_bytes()


@pytest.mark.parametrize("vector", ENCODING["vectors"], ids=_name)
def test_canonical_encoding_matches_the_vector(vector: dict[str, Any]) -> None:
    [draft] = parse_events(vector["input"].encode(), vector["name"])
    canonical = encoding.encode(draft)
    assert canonical == vector["canonical"].encode()
    # canonical bytes are a fixed point: decoding and encoding them again changes nothing
    assert encoding.encode(encoding.decode(canonical)) == canonical


@pytest.mark.parametrize("vector", ENCODING["vectors"], ids=_name)
def test_the_encoding_vectors_are_intact(vector: dict[str, Any]) -> None:
    """The recorded digest of each expected byte string, so an edit of a vector file that keeps
    the JSON valid but changes a byte is caught rather than silently redefining canonical."""
    from blake3 import blake3

    assert blake3(vector["canonical"].encode()).hexdigest() == vector["blake3"]
