"""The RFC 6962 tree, held to numbers it did not produce: the 8-leaf tree the Go reference
implementations publish (tests/data/tlog/rfc6962-8-leaves.json), and a direct transcription of the
RFC's recursive definitions (MTH, PATH, PROOF) over every size up to 70."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cbledger.ledger import merkle
from cbledger.ledger.merkle import (
    EMPTY_ROOT,
    CompactRange,
    ProofError,
    RangeHasher,
    consistency_proof_length,
    consistency_ranges,
    inclusion_proof_length,
    inclusion_ranges,
    leaf_hash,
    verify_consistency,
    verify_inclusion,
)

VECTORS = json.loads((Path(__file__).parent / "data" / "tlog" / "rfc6962-8-leaves.json").read_text())
LEAVES = [bytes.fromhex(x) for x in VECTORS["leaves"]]
HASHES = [leaf_hash(x) for x in LEAVES]
ROOTS = {int(k): bytes.fromhex(v) for k, v in VECTORS["roots"].items()}


def h(xs: list[str]) -> list[bytes]:
    return [bytes.fromhex(x) for x in xs]


# --------------------------------------------------------------------------- the RFC, transcribed


def mth(d: list[bytes]) -> bytes:
    if not d:
        return hashlib.sha256(b"").digest()
    if len(d) == 1:
        return hashlib.sha256(b"\x00" + d[0]).digest()
    k = 1
    while k * 2 < len(d):
        k *= 2
    return hashlib.sha256(b"\x01" + mth(d[:k]) + mth(d[k:])).digest()


def path(m: int, d: list[bytes]) -> list[bytes]:
    if len(d) == 1:
        return []
    k = 1
    while k * 2 < len(d):
        k *= 2
    if m < k:
        return path(m, d[:k]) + [mth(d[k:])]
    return path(m - k, d[k:]) + [mth(d[:k])]


def subproof(m: int, d: list[bytes], b: bool) -> list[bytes]:
    n = len(d)
    if m == n:
        return [] if b else [mth(d)]
    k = 1
    while k * 2 < n:
        k *= 2
    if m <= k:
        return subproof(m, d[:k], b) + [mth(d[k:])]
    return subproof(m - k, d[k:], False) + [mth(d[:k])]


def planned(leaves: list[bytes], ranges: list[tuple[int, int]], sizes=()) -> tuple[list[bytes], RangeHasher]:
    hasher = RangeHasher(ranges, sizes)
    for x in leaves:
        hasher.add(leaf_hash(x))
    return hasher.hashes(ranges), hasher


# --------------------------------------------------------------------------- the published vectors


def test_leaf_hashes_roots_and_compact_ranges_match_the_published_tree():
    assert [x.hex() for x in HASHES] == VECTORS["leafHashes"]
    cr = CompactRange()
    assert cr.root() == ROOTS[0] == EMPTY_ROOT
    assert cr.nodes == []
    for size in range(1, 9):
        cr.append(HASHES[size - 1])
        assert cr.root() == ROOTS[size], size
        assert [n.hex() for n in cr.nodes] == VECTORS["compactRanges"][str(size)], size
        cr = CompactRange()
        for leaf in HASHES[:size]:
            cr.append(leaf)
        assert cr.root() == ROOTS[size]


@pytest.mark.parametrize("vector", VECTORS["inclusion"], ids=lambda v: f"{v['index']}-in-{v['size']}")
def test_audit_paths_match_the_published_ones_and_verify(vector):
    index, size, want = vector["index"], vector["size"], h(vector["path"])
    got, hasher = planned(LEAVES[:size], inclusion_ranges(index, size), [size])
    assert got == want
    assert inclusion_proof_length(index, size) == len(want)
    verify_inclusion(index, size, HASHES[index], want, ROOTS[size])
    assert hasher.roots[size] == ROOTS[size]


@pytest.mark.parametrize("vector", VECTORS["consistency"], ids=lambda v: f"{v['old']}-to-{v['new']}")
def test_consistency_proofs_match_the_published_ones_and_verify(vector):
    old, new, want = vector["old"], vector["new"], h(vector["proof"])
    got, _ = planned(LEAVES[:new], consistency_ranges(old, new))
    assert got == want
    assert consistency_proof_length(old, new) == len(want)
    verify_consistency(old, new, ROOTS[old], ROOTS[new], want)


def _inclusion_probes(index: int, size: int, proof: list[bytes]):
    root, leaf = ROOTS[size], HASHES[index]
    some = bytes.fromhex("abacaba000000000000000000000000000000000000000000060061e00123456")
    yield "index - 1", (index - 1, size, leaf, proof, root)
    yield "index + 1", (index + 1, size, leaf, proof, root)
    yield "index ^ 2", (index ^ 2, size, leaf, proof, root)
    yield "size * 2", (index, size * 2, leaf, proof, root)
    yield "size // 2", (index, size // 2, leaf, proof, root)
    yield "wrong leaf", (index, size, leaf_hash(b"WrongLeaf"), proof, root)
    yield "empty root", (index, size, leaf, proof, EMPTY_ROOT)
    yield "other root", (index, size, leaf, proof, some)
    yield "trailing root", (index, size, leaf, proof + [root], root)
    yield "preceding root", (index, size, leaf, [root] + proof, root)
    yield "trailing garbage", (index, size, leaf, proof + [b""], root)
    for i in range(len(proof)):
        flipped = list(proof)
        flipped[i] = bytes([flipped[i][0] ^ 8]) + flipped[i][1:]
        yield f"proof[{i}] bit 3", (index, size, leaf, flipped, root)
    if proof:
        yield "removed component", (index, size, leaf, proof[:-1], root)
    if len(proof) > 1:
        yield "inserted component", (index, size, leaf, [proof[0], some] + proof[1:], root)


@pytest.mark.parametrize("vector", [v for v in VECTORS["inclusion"] if v["path"]], ids=lambda v: f"{v['index']}-in-{v['size']}")
def test_every_corruption_of_a_published_audit_path_is_refused(vector):
    proof = h(vector["path"])
    probes = dict(_inclusion_probes(vector["index"], vector["size"], proof))
    assert len(probes) >= 11 + len(proof)
    for args in probes.values():
        with pytest.raises(ProofError):
            verify_inclusion(*args)


@pytest.mark.parametrize("vector", [v for v in VECTORS["consistency"] if v["proof"]], ids=lambda v: f"{v['old']}-to-{v['new']}")
def test_every_corruption_of_a_published_consistency_proof_is_refused(vector):
    old, new, proof = vector["old"], vector["new"], h(vector["proof"])
    r1, r2 = ROOTS[old], ROOTS[new]
    probes = [
        (old - 1, new, r1, r2, proof), (old + 1, new, r1, r2, proof), (old ^ 2, new, r1, r2, proof),
        (old, new * 2, r1, r2, proof), (old, new // 2, r1, r2, proof),
        (old, new, leaf_hash(b"WrongRoot"), r2, proof), (old, new, r1, leaf_hash(b"WrongRoot"), proof),
        (old, new, r2, r1, proof), (old, new, r1, r2, []),
        (old, new, r1, r2, proof + [b""]), (old, new, r1, r2, proof + [r1]), (old, new, r1, r2, proof + [r2]),
        (old, new, r1, r2, [b""] + proof), (old, new, r1, r2, [r1] + proof), (old, new, r1, r2, [r2] + proof),
        (old, new, r1, r2, [proof[0]] + proof), (old, new, r1, r2, proof[:-1]),
    ]
    for i in range(len(proof)):
        flipped = list(proof)
        flipped[i] = bytes([flipped[i][0] ^ 16]) + flipped[i][1:]
        probes.append((old, new, r1, r2, flipped))
    for args in probes:
        with pytest.raises(ProofError):
            verify_consistency(*args)


def test_trivial_consistency_cases():
    verify_consistency(0, 0, EMPTY_ROOT, EMPTY_ROOT, [])
    verify_consistency(0, 5, EMPTY_ROOT, ROOTS[5], [])
    verify_consistency(3, 3, ROOTS[3], ROOTS[3], [])
    with pytest.raises(ProofError):
        verify_consistency(3, 3, ROOTS[3], ROOTS[4], [])
    with pytest.raises(ProofError):
        verify_consistency(3, 3, ROOTS[3], ROOTS[3], [ROOTS[3]])
    with pytest.raises(ProofError):
        verify_consistency(2, 1, ROOTS[2], ROOTS[1], [])
    with pytest.raises(ProofError):
        verify_consistency(0, 1, ROOTS[1], ROOTS[1], [])


def test_a_proof_of_the_wrong_length_is_refused_before_anything_is_hashed(monkeypatch):
    calls = []
    real = merkle.node_hash
    monkeypatch.setattr(merkle, "node_hash", lambda a, b: calls.append(1) or real(a, b))
    proof = h(VECTORS["inclusion"][1]["path"])
    with pytest.raises(ProofError, match="has 4 hashes; these sizes need exactly 3"):
        verify_inclusion(0, 8, HASHES[0], proof + [ROOTS[8]], ROOTS[8])
    with pytest.raises(ProofError, match="hash 1 is 31 bytes"):
        verify_inclusion(0, 8, HASHES[0], [proof[0], proof[1][:31], proof[2]], ROOTS[8])
    cproof = h(VECTORS["consistency"][2]["proof"])
    with pytest.raises(ProofError, match="has 2 hashes; these sizes need exactly 3"):
        verify_consistency(6, 8, ROOTS[6], ROOTS[8], cproof[:2])
    assert calls == []
    verify_inclusion(0, 8, HASHES[0], proof, ROOTS[8])
    assert len(calls) == 3


# --------------------------------------------------------------------------- every size, against the RFC


def test_every_root_path_and_consistency_proof_up_to_70_leaves_matches_the_rfc_definitions():
    data = [i.to_bytes(2, "big") * (i % 5) for i in range(70)]
    cr = CompactRange()
    for n in range(1, 71):
        cr.append(leaf_hash(data[n - 1]))
        d = data[:n]
        assert cr.root() == mth(d)
        hasher = RangeHasher([], [n])
        for x in d:
            hasher.add(leaf_hash(x))
        assert hasher.roots[n] == mth(d)
        for m in range(n):
            want = path(m, d)
            got, _ = planned(d, inclusion_ranges(m, n))
            assert got == want, (m, n)
            assert inclusion_proof_length(m, n) == len(want)
            verify_inclusion(m, n, leaf_hash(d[m]), got, mth(d))
        for m in range(1, n):
            want = subproof(m, d, True)
            got, _ = planned(d, consistency_ranges(m, n))
            assert got == want, (m, n)
            assert consistency_proof_length(m, n) == len(want)
            verify_consistency(m, n, mth(d[:m]), mth(d), got)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 3000).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, n - 1), st.integers(1, n))))
def test_proofs_over_larger_trees_verify_and_reject_a_neighbour(case):
    n, m, old = case
    data = [i.to_bytes(4, "big") for i in range(n)]
    ranges = inclusion_ranges(m, n)
    cons = consistency_ranges(old, n)
    hasher = RangeHasher(ranges, [old, n])
    for x in data:
        hasher.add(leaf_hash(x))
    root, old_root = hasher.roots[n], hasher.roots[old]
    verify_inclusion(m, n, leaf_hash(data[m]), hasher.hashes(ranges), root)
    if n > 1:
        with pytest.raises(ProofError):
            verify_inclusion(m, n, leaf_hash(data[(m + 1) % n]), hasher.hashes(ranges), root)
    other = RangeHasher(cons)
    for x in data:
        other.add(leaf_hash(x))
    verify_consistency(old, n, old_root, root, other.hashes(cons))


def test_range_hasher_refuses_overlapping_ranges_and_reports_what_it_has_not_read():
    with pytest.raises(ValueError, match="overlap"):
        RangeHasher([(0, 4), (2, 3)])
    hasher = RangeHasher([(0, 2), (4, 8)], [8])
    for x in HASHES[:5]:
        hasher.add(x)
    assert hasher.needed == 3
    with pytest.raises(ProofError, match="only 5 leaves were read"):
        hasher.hashes([(4, 8)])
    assert hasher.hashes([(0, 2)]) == [bytes.fromhex(VECTORS["compactRanges"]["2"][0])]


def test_a_root_that_does_not_match_is_named_in_base64_as_a_reader_holds_it():
    """Checkpoints, proofs and LEADERBOARD.md write hashes in base64; the refusals named them
    in hex, which a reader cannot find in any file they hold."""
    import base64

    vector = next(v for v in VECTORS["inclusion"] if v["path"])
    size, index = vector["size"], vector["index"]
    wrong = leaf_hash(b"WrongRoot")
    with pytest.raises(ProofError) as refused:
        verify_inclusion(index, size, leaf_hash(LEAVES[index]), h(vector["path"]), wrong)
    assert f"the tree head is {base64.b64encode(wrong).decode()[:16]}…" in str(refused.value), refused.value
    assert wrong.hex()[:16] not in str(refused.value)
