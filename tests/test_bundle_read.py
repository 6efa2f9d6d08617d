"""The in-process bundle reader (`runner/bundle_read.py`) against git's own `git fetch <bundle>`.

Two kinds of bundle: every committed preserved run (real git output: thin packs with OFS and
REF deltas against the seed), and packs written here object by object, so each delta layout and
each way a hostile file can be wrong is exercised on purpose. A valid crafted bundle is also
fetched by git, so both readers are held to the same answer.
"""

from __future__ import annotations

import dataclasses
import hashlib
import shutil
import subprocess
import zlib
from pathlib import Path

import msgspec
import pygit2
import pytest
from blake3 import blake3

from cbledger.errors import UserError
from cbledger.projections.writers import load_state
from cbledger.reproduce.restore import restore_run
from cbledger.reproduce.runs import restore_catalog
from cbledger.reproduce.verify import _every_run, prepare_suites
from cbledger.runner import bundle_read, preserve
from cbledger.runner import sandbox as sandbox_mod
from cbledger.runner.bundle_read import (
    BundleError,
    apply_delta,
    object_header,
    read_header,
    unbundle,
)
from cbledger.workspace import Workspace

REPO = Path(__file__).resolve().parent.parent
REAL_BOARDS = ("antmicro-microphone-board", "openlighting-dmxsun-baseboard")

# --------------------------------------------------------------------------- writing packs by hand

COMMIT, TREE, BLOB, OFS, REF = 1, 2, 3, 6, 7
NAMES = {COMMIT: b"commit", TREE: b"tree", BLOB: b"blob"}


def oid(kind: int, data: bytes) -> bytes:
    return hashlib.sha1(NAMES[kind] + b" %d\0" % len(data) + data).digest()


def varint(n: int) -> bytes:
    out = bytearray()
    while True:
        out.append((n & 0x7F) | (0x80 if n > 0x7F else 0))
        n >>= 7
        if not n:
            return bytes(out)


def ofs(back: int) -> bytes:
    out = [back & 0x7F]
    back >>= 7
    while back:
        back -= 1
        out.insert(0, 0x80 | (back & 0x7F))
        back >>= 7
    return bytes(out)


def copy(offset: int, size: int) -> bytes:
    op, args = 0x80, bytearray()
    for i in range(4):
        if (offset >> (8 * i)) & 0xFF:
            op |= 1 << i
            args.append((offset >> (8 * i)) & 0xFF)
    for i in range(3):
        if (size >> (8 * i)) & 0xFF:
            op |= 0x10 << i
            args.append((size >> (8 * i)) & 0xFF)
    return bytes([op]) + bytes(args)


def insert(data: bytes) -> bytes:
    assert 0 < len(data) < 128
    return bytes([len(data)]) + data


def delta(base: bytes, target_size: int, *ops: bytes) -> bytes:
    return varint(len(base)) + varint(target_size) + b"".join(ops)


class Pack:
    """Entries appended one by one; `offset` of each kept for OFS_DELTA."""

    def __init__(self) -> None:
        self.body = bytearray()
        self.count = 0

    def add(self, kind: int, payload: bytes, *, base: bytes | int | None = None, size: int | None = None) -> int:
        at = 12 + len(self.body)
        self.body += object_header(kind, len(payload) if size is None else size)
        if kind == OFS:
            assert isinstance(base, int)
            self.body += ofs(at - base)
        elif kind == REF:
            assert isinstance(base, bytes)
            self.body += base
        self.body += zlib.compress(payload)
        self.count += 1
        return at

    def bytes(self, count: int | None = None) -> bytes:
        data = b"PACK" + (2).to_bytes(4, "big") + (self.count if count is None else count).to_bytes(4, "big") + self.body
        return data + hashlib.sha1(data).digest()


def bundle(pack: bytes, refs: dict[str, bytes], prerequisites: tuple[bytes, ...] = ()) -> bytes:
    head = b"# v2 git bundle\n"
    head += b"".join(b"-" + p.hex().encode() + b"\n" for p in prerequisites)
    head += b"".join(sha.hex().encode() + b" " + name.encode() + b"\n" for name, sha in refs.items())
    return head + b"\n" + pack


def tree(*entries: tuple[str, bytes]) -> bytes:
    return b"".join(b"100644 " + name.encode() + b"\0" + sha for name, sha in sorted(entries))


def commit(tree_id: bytes, *parents: bytes, message: bytes = b"m") -> bytes:
    lines = [b"tree " + tree_id.hex().encode()]
    lines += [b"parent " + p.hex().encode() for p in parents]
    lines += [b"author A <a@example.invalid> 0 +0000", b"committer A <a@example.invalid> 0 +0000"]
    return b"\n".join(lines) + b"\n\n" + message + b"\n"


BOARD = b"".join(b"(symbol R%d (value 10k) (footprint R_0603))\n" % i for i in range(200))


@pytest.fixture
def seeded(tmp_path):
    """A bare repository holding a seed commit (one file, BOARD), as a restore has it."""
    repo = pygit2.init_repository(str(tmp_path / "repo"), bare=True)
    blob = repo.create_blob(BOARD)
    tb = repo.TreeBuilder()
    tb.insert("board.kicad_sch", blob, pygit2.enums.FileMode.BLOB)
    sig = pygit2.Signature("A", "a@example.invalid", 0, 0)
    seed = repo.create_commit("refs/cbledger/seed", sig, sig, "seed\n", tb.write(), [])
    return repo, seed.raw, blob.raw


def git_fetch(repo_path: Path, data: bytes, tmp: Path) -> subprocess.CompletedProcess:
    f = tmp / "fetched.bundle"
    f.write_bytes(data)
    return subprocess.run(["git", "fetch", "--quiet", "--no-tags", str(f), "refs/cbledger/*:refs/cbledger/*"],
                          cwd=repo_path, capture_output=True, text=True)


def stored_ids(repo_dir: Path) -> set[str]:
    """Every object id a repository's own object directory holds, packed (as git's index lists
    it) or loose."""
    ids = {p.parent.name + p.name for p in (repo_dir / "objects").glob("??/*")}
    for idx in (repo_dir / "objects" / "pack").glob("*.idx"):
        listing = subprocess.run(["git", "show-index"], stdin=idx.open("rb"), capture_output=True, check=True)
        ids |= {line.split()[1] for line in listing.stdout.decode().splitlines()}
    return ids


def cbledger_refs(repo: pygit2.Repository) -> dict[str, str]:
    return {r: str(repo.references[r].target) for r in repo.references if r.startswith("refs/cbledger/")}


def same_as_git(repo: pygit2.Repository, data: bytes, tmp: Path, ids: list[bytes]) -> None:
    """Reads `data` into a copy of `repo` with git and into `repo` with the reader: the same refs,
    and every id in `ids` readable with the same content on both sides."""
    mirror = tmp / "mirror"
    shutil.copytree(repo.path, mirror)
    fetched = git_fetch(mirror, data, tmp)
    assert fetched.returncode == 0, fetched.stderr
    unbundle(repo, data)
    theirs = pygit2.Repository(str(mirror))
    assert cbledger_refs(repo) == cbledger_refs(theirs)
    for raw in ids:
        o = pygit2.Oid(raw=raw)
        assert repo.odb.read(o) == theirs.odb.read(o)


def chain(repo: pygit2.Repository, seed: bytes, blob_ids: list[bytes]) -> tuple[list[tuple[int, bytes]], bytes]:
    """A tree and commit per version of the board on top of the seed: (objects, tip)."""
    objs, parent = [], seed
    for i, b in enumerate(blob_ids):
        t = tree(("board.kicad_sch", b))
        c = commit(oid(TREE, t), parent, message=b"v%d" % i)
        objs += [(TREE, t), (COMMIT, c)]
        parent = oid(COMMIT, c)
    return objs, parent


# --------------------------------------------------------------------------- valid packs


def test_a_thin_pack_of_ref_deltas_against_the_seed_reads_as_git_reads_it(seeded, tmp_path):
    repo, seed, board = seeded
    v1 = BOARD.replace(b"R7 (value 10k)", b"R7 (value 4k7)")
    d = delta(BOARD, len(v1), copy(0, BOARD.index(b"R7 (value ") + 10), insert(b"4k7"),
              copy(BOARD.index(b"R7 (value 10k)") + 13, len(BOARD) - BOARD.index(b"R7 (value 10k)") - 13))
    assert apply_delta(BOARD, d) == v1
    pack = Pack()
    pack.add(REF, d, base=board)  # the base is the seed's blob: not in the pack
    objs, tip = chain(repo, seed, [oid(BLOB, v1)])
    for kind, payload in objs:
        pack.add(kind, payload)
    data = bundle(pack.bytes(), {"refs/cbledger/evidence": tip}, (seed,))
    same_as_git(repo, data, tmp_path, [oid(BLOB, v1), tip])
    assert repo[pygit2.Oid(raw=oid(BLOB, v1))].data == v1


def test_ofs_and_ref_delta_chains_in_any_order_read_as_git_reads_them(seeded, tmp_path):
    """v1 full, v2 an OFS_DELTA of v1, v3 an OFS_DELTA of v2, v4 a REF_DELTA of v5, which comes
    after it in the pack and is itself a REF_DELTA of the seed's blob."""
    repo, seed, board = seeded
    v1 = BOARD + b"(one)\n"
    v2, v3 = v1 + b"(two)\n", v1 + b"(two)\n(three)\n"
    v5 = BOARD[:1000]
    v4 = v5 + b"(four)\n"
    pack = Pack()
    at1 = pack.add(BLOB, v1)
    at2 = pack.add(OFS, delta(v1, len(v2), copy(0, len(v1)), insert(b"(two)\n")), base=at1)
    pack.add(OFS, delta(v2, len(v3), copy(0, len(v2)), insert(b"(three)\n")), base=at2)
    pack.add(REF, delta(v5, len(v4), copy(0, len(v5)), insert(b"(four)\n")), base=oid(BLOB, v5))
    pack.add(REF, delta(BOARD, len(v5), copy(0, 1000)), base=board)
    blobs = [oid(BLOB, v) for v in (v1, v2, v3, v4, v5)]
    objs, tip = chain(repo, seed, blobs)
    for kind, payload in objs:
        pack.add(kind, payload)
    data = bundle(pack.bytes(), {"refs/cbledger/evidence": tip}, (seed,))
    same_as_git(repo, data, tmp_path, [*blobs, tip])


def test_a_copy_of_size_zero_means_64_kib():
    base = bytes(range(256)) * 512  # 128 KiB
    assert apply_delta(base, delta(base, 0x10000, b"\x80")) == base[:0x10000]
    assert apply_delta(base, delta(base, 0x10000, copy(5, 0x10000))) == base[5:5 + 0x10000]


def test_a_long_delta_chain_is_walked_without_recursion(seeded):
    repo, seed, _ = seeded
    pack = Pack()
    value = b"x"
    at = pack.add(BLOB, value)
    for _ in range(3000):  # far past Python's recursion limit
        new = value + b"y"
        at = pack.add(OFS, delta(value, len(new), copy(0, len(value)), insert(b"y")), base=at)
        value = new
    t = tree(("board.kicad_sch", oid(BLOB, value)))
    c = commit(oid(TREE, t), seed)
    pack.add(TREE, t)
    pack.add(COMMIT, c)
    refs = unbundle(repo, bundle(pack.bytes(), {"refs/cbledger/evidence": oid(COMMIT, c)}, (seed,)))
    assert refs == {"refs/cbledger/evidence": pygit2.Oid(raw=oid(COMMIT, c))}
    assert repo[pygit2.Oid(raw=oid(BLOB, value))].data == b"x" + b"y" * 3000


def test_refs_map_like_a_refspec_and_the_objects_alone_can_be_read(seeded):
    repo, seed, _ = seeded
    pack = Pack()
    t = tree(("a", oid(BLOB, b"a")))
    c = commit(oid(TREE, t), seed)
    for kind, payload in ((BLOB, b"a"), (TREE, t), (COMMIT, c)):
        pack.add(kind, payload)
    data = bundle(pack.bytes(), {"refs/cbledger/evidence": oid(COMMIT, c), "refs/heads/other": oid(COMMIT, c)}, (seed,))
    assert unbundle(repo, data, refs_to=None) == {"refs/cbledger/evidence": pygit2.Oid(raw=oid(COMMIT, c))}
    assert cbledger_refs(repo) == {"refs/cbledger/seed": str(pygit2.Oid(raw=seed))}  # no ref made
    assert pygit2.Oid(raw=oid(COMMIT, c)) in repo.odb
    unbundle(repo, data, refs_to="refs/cbledger-replay/")
    assert str(repo.references["refs/cbledger-replay/evidence"].target) == oid(COMMIT, c).hex()
    assert "refs/heads/other" not in repo.references  # outside refs_from: not taken, as git's refspec


@pytest.mark.parametrize("large_from", [bundle_read.LARGE_OFFSET, 13])
def test_the_written_pack_and_index_are_what_git_writes_and_checks(seeded, tmp_path, monkeypatch, large_from):
    """One pack of whole objects and a version 2 index that git verifies, its 8-byte offset
    table included (every offset but the first put there, the bound lowered to 13); `git fsck`
    finds the repository whole."""
    monkeypatch.setattr(bundle_read, "LARGE_OFFSET", large_from)
    repo, seed, board = seeded
    v1 = BOARD + b"(one)\n"
    pack = Pack()
    at = pack.add(BLOB, v1)
    pack.add(OFS, delta(v1, len(v1) + 4, copy(0, len(v1)), insert(b"two\n")), base=at)
    pack.add(REF, delta(BOARD, 10, copy(0, 10)), base=board)
    objs, tip = chain(repo, seed, [oid(BLOB, v) for v in (v1, v1 + b"two\n", BOARD[:10])])
    for kind, payload in objs:
        pack.add(kind, payload)
    unbundle(repo, bundle(pack.bytes(), {"refs/cbledger/evidence": tip}, (seed,)))
    (idx,) = (Path(repo.path) / "objects" / "pack").glob("pack-*.idx")
    assert not list((Path(repo.path) / "objects" / "pack").glob("tmp_*"))
    verified = subprocess.run(["git", "verify-pack", "-v", str(idx)], capture_output=True, text=True)
    assert verified.returncode == 0, verified.stderr
    listed = [line.split()[0] for line in verified.stdout.splitlines() if line[:40].isalnum() and len(line.split()) >= 5]
    assert len(listed) == 9 and oid(BLOB, BOARD[:10]).hex() in listed and tip.hex() in listed
    assert "chain length" not in verified.stdout  # whole objects, no deltas
    fsck = subprocess.run(["git", "fsck", "--full", "--strict", "--no-dangling"], cwd=repo.path, capture_output=True, text=True)
    assert fsck.returncode == 0 and not fsck.stdout, fsck.stdout + fsck.stderr


def test_a_bundle_adding_nothing_writes_no_pack(seeded):
    repo, seed, _ = seeded
    unbundle(repo, bundle(Pack().bytes(), {"refs/cbledger/again": seed}, (seed,)))
    assert str(repo.references["refs/cbledger/again"].target) == seed.hex()
    assert not list((Path(repo.path) / "objects" / "pack").glob("*.pack"))


# --------------------------------------------------------------------------- refused, with the reason


def one_commit(seed: bytes) -> tuple[Pack, bytes]:
    pack = Pack()
    t = tree(("a", oid(BLOB, b"a")))
    c = commit(oid(TREE, t), seed)
    for kind, payload in ((BLOB, b"a"), (TREE, t), (COMMIT, c)):
        pack.add(kind, payload)
    return pack, oid(COMMIT, c)


def refused(repo: pygit2.Repository, data: bytes, tmp: Path, *, git_too: bool = True) -> str:
    """The reader's message; git refuses the same bytes (git reads a pack only for a ref whose
    target it lacks, so such a bundle names one); and no ref was made."""
    before = cbledger_refs(repo)
    with pytest.raises(BundleError) as exc:
        unbundle(repo, data)
    assert cbledger_refs(repo) == before
    if git_too:
        mirror = tmp / "git-mirror"
        shutil.rmtree(mirror, ignore_errors=True)
        shutil.copytree(repo.path, mirror)
        assert git_fetch(mirror, data, tmp).returncode != 0
    return str(exc.value)


def test_a_truncated_pack_is_refused(seeded, tmp_path):
    repo, seed, _ = seeded
    pack, tip = one_commit(seed)
    data = bundle(pack.bytes(), {"refs/cbledger/evidence": tip}, (seed,))
    for cut in (1, 21, len(data) // 2):
        assert "SHA-1 trailer" in refused(repo, data[:-cut], tmp_path)
    assert "no packfile" in refused(repo, data[: data.index(b"PACK") + 10], tmp_path)


def test_a_flipped_byte_is_a_trailer_mismatch(seeded, tmp_path):
    repo, seed, _ = seeded
    pack, tip = one_commit(seed)
    data = bytearray(bundle(pack.bytes(), {"refs/cbledger/evidence": tip}, (seed,)))
    data[len(data) - 30] ^= 0x01
    assert "SHA-1 trailer does not match" in refused(repo, bytes(data), tmp_path)


def test_a_corrupt_object_under_a_good_trailer_is_named_by_its_offset(seeded, tmp_path):
    repo, seed, _ = seeded
    pack = Pack()
    at = pack.add(BLOB, b"hello")
    body = bytearray(pack.bytes()[:-20])
    body[at + 1 + 2] ^= 0xFF  # inside the zlib stream
    fixed = bytes(body) + hashlib.sha1(body).digest()
    message = refused(repo, bundle(fixed, {"refs/cbledger/x": oid(BLOB, b"hello")}, (seed,)), tmp_path)
    assert f"object at pack offset {at}" in message


def test_the_object_count_must_match(seeded, tmp_path):
    repo, seed, _ = seeded
    pack, tip = one_commit(seed)
    more = bundle(pack.bytes(count=4), {"refs/cbledger/evidence": tip}, (seed,))
    assert "declares 4 objects but holds 3" in refused(repo, more, tmp_path)
    fewer = bundle(pack.bytes(count=2), {"refs/cbledger/evidence": tip}, (seed,))
    assert "bytes after the pack's 2 objects" in refused(repo, fewer, tmp_path)


def test_a_missing_prerequisite_is_refused_before_the_pack_is_read(seeded, tmp_path):
    repo, seed, _ = seeded
    pack, tip = one_commit(seed)
    absent = hashlib.sha1(b"no such commit").digest()
    message = refused(repo, bundle(pack.bytes(), {"refs/cbledger/evidence": tip}, (seed, absent)), tmp_path)
    assert message == f"prerequisite commit {absent.hex()} is not in the repository"
    assert pygit2.Oid(raw=tip) not in repo.odb


def test_a_v3_bundle_is_refused(seeded, tmp_path):
    repo, _, _ = seeded
    work = tmp_path / "w"
    subprocess.run(["git", "init", "-q", str(work)], check=True)
    (work / "f").write_text("x")
    subprocess.run(["git", "-C", str(work), "add", "f"], check=True)
    subprocess.run(["git", "-C", str(work), "-c", "user.name=A", "-c", "user.email=a@example.invalid",
                    "commit", "-qm", "x"], check=True)
    v3 = tmp_path / "v3.bundle"
    subprocess.run(["git", "-C", str(work), "bundle", "create", "-q", "--version=3", str(v3), "HEAD"], check=True,
                   capture_output=True)
    assert v3.read_bytes().startswith(b"# v3 git bundle\n")
    with pytest.raises(BundleError, match="a v3 git bundle: only v2 bundles are read"):
        unbundle(repo, v3.read_bytes())
    with pytest.raises(BundleError, match="not a v2 git bundle"):
        unbundle(repo, b"PK\x03\x04 a zip file\n")


def test_header_lines_that_are_not_refs_or_prerequisites_are_refused():
    for bad in (b"-abc\n", b"zz" * 20 + b" refs/cbledger/x\n", b"a" * 40 + b" refs/cbledger/../../../x\n",
                b"a" * 40 + b" refs/cbledger/\xff\n", b"a" * 40 + b"\n",
                b"a" * 40 + b" refs/cbledger/x\n" + b"a" * 40 + b" refs/cbledger/x\n"):
        with pytest.raises(BundleError, match="header"):
            read_header(b"# v2 git bundle\n" + bad + b"\nPACK")
    with pytest.raises(BundleError, match="not closed by a blank line"):
        read_header(b"# v2 git bundle\n" + b"a" * 40 + b" refs/cbledger/x\n")


def test_an_object_declared_past_the_bound_is_refused_before_inflating(seeded, tmp_path, monkeypatch):
    repo, seed, _ = seeded
    pack = Pack()
    pack.add(BLOB, b"tiny", size=bundle_read.MAX_OBJECT_BYTES + 1)
    message = refused(repo, bundle(pack.bytes(), {}, (seed,)), tmp_path, git_too=False)
    assert f"declares {bundle_read.MAX_OBJECT_BYTES + 1} bytes, over the bound" in message

    def no_inflate(*args):
        raise AssertionError("inflated an object declared over the bound")

    monkeypatch.setattr(bundle_read, "_inflate", no_inflate)
    refused(repo, bundle(pack.bytes(), {}, (seed,)), tmp_path, git_too=False)


def test_an_object_inflating_past_its_declared_size_stops_there(seeded, tmp_path):
    repo, seed, _ = seeded
    pack = Pack()
    pack.add(BLOB, b"z" * 1_000_000, size=10)  # a bomb declaring 10 bytes
    message = refused(repo, bundle(pack.bytes(), {"refs/cbledger/x": oid(BLOB, b"z" * 10)}, (seed,)), tmp_path)
    assert "inflates past its declared 10 bytes" in message


def test_the_inflated_total_is_bounded(seeded, tmp_path, monkeypatch):
    repo, seed, _ = seeded
    monkeypatch.setattr(bundle_read, "MAX_INFLATED_BYTES", 1000)
    pack = Pack()
    for i in range(3):
        pack.add(BLOB, bytes([i]) * 400)
    assert "inflates past the bound of 1000 bytes" in refused(repo, bundle(pack.bytes(), {}, (seed,)), tmp_path, git_too=False)


def test_delta_results_in_all_are_bounded(seeded, tmp_path, monkeypatch):
    """Each delta below is 7 bytes asking for a copy of its 1,000-byte base: what the pack holds
    inflated stays small, what its deltas make is counted too."""
    repo, seed, _ = seeded
    monkeypatch.setattr(bundle_read, "MAX_INFLATED_BYTES", 3500)
    base = bytes(range(250)) * 4
    pack = Pack()
    at = pack.add(BLOB, base)
    for i in range(5):
        pack.add(OFS, delta(base, 1001, copy(0, 1000), insert(bytes([i]))), base=at)
    message = refused(repo, bundle(pack.bytes(), {}, (seed,)), tmp_path, git_too=False)
    assert message == "the pack's objects come to more than the bound of 3500 bytes"


def test_a_delta_result_past_the_bound_is_refused_before_allocating(seeded, tmp_path):
    repo, seed, board = seeded
    huge = bundle_read.MAX_OBJECT_BYTES + 1
    with pytest.raises(BundleError, match=f"its result would be {huge} bytes, over the bound"):
        apply_delta(BOARD, delta(BOARD, huge, copy(0, 10)))
    pack = Pack()
    pack.add(REF, delta(BOARD, huge, *[copy(0, 0xFFFFFF)] * 9), base=board)
    assert "over the bound" in refused(repo, bundle(pack.bytes(), {}, (seed,)), tmp_path, git_too=False)


@pytest.mark.parametrize(("ops", "target", "why"), [
    ((copy(0, len(BOARD) + 1),), len(BOARD) + 1, "copies bytes 0-"),
    ((insert(b"abc"),), 2, "produces more than its declared 2 bytes"),
    ((insert(b"abc"),), 4, "produces 3 bytes, its header declares 4"),
    ((b"\x00",), 0, "reserved instruction 0"),
    ((b"\x05ab",), 5, "an insert runs past the delta's end"),
    ((b"\x91\x01",), 1, "a copy instruction runs past the delta's end"),
])
def test_a_bad_delta_instruction_is_named(ops, target, why):
    with pytest.raises(BundleError, match=why):
        apply_delta(BOARD, delta(BOARD, target, *ops), at=77)


def test_a_delta_for_another_base_is_refused():
    with pytest.raises(BundleError, match="made for a base of 3 bytes, its base has"):
        apply_delta(BOARD, varint(3) + varint(1) + insert(b"a"))


def test_a_delta_whose_base_nobody_holds_is_refused(seeded, tmp_path):
    repo, seed, _ = seeded
    pack = Pack()
    ghost = oid(BLOB, b"never stored")
    at = pack.add(REF, delta(b"never stored", 1, insert(b"a")), base=ghost)
    message = refused(repo, bundle(pack.bytes(), {"refs/cbledger/x": oid(BLOB, b"a")}, (seed,)), tmp_path)
    assert f"the delta at pack offset {at} names base {ghost.hex()}" in message


def test_an_ofs_delta_pointing_nowhere_is_refused(seeded, tmp_path):
    repo, seed, _ = seeded
    pack = Pack()
    pack.add(BLOB, b"base")
    at = pack.add(OFS, delta(b"base", 1, insert(b"a")), base=13)  # inside the first entry
    assert f"object at pack offset {at}: its delta base offset 13 starts no earlier object" in refused(
        repo, bundle(pack.bytes(), {"refs/cbledger/x": oid(BLOB, b"a")}, (seed,)), tmp_path)


def test_a_commit_naming_an_object_nobody_holds_is_refused(seeded, tmp_path):
    """What git's connectivity check catches: a pack that is well formed but incomplete."""
    repo, seed, _ = seeded
    pack = Pack()
    t = tree(("a", oid(BLOB, b"left out")))
    c = commit(oid(TREE, t), seed)
    pack.add(TREE, t)
    pack.add(COMMIT, c)
    message = refused(repo, bundle(pack.bytes(), {"refs/cbledger/evidence": oid(COMMIT, c)}, (seed,)), tmp_path)
    assert f"names entry 'a' {oid(BLOB, b'left out').hex()}, which neither the pack nor the repository holds" in message


@pytest.mark.parametrize(("kind", "payload"), [(COMMIT, b"not a commit\n"), (TREE, b"100644 no-id\0ab")])
def test_an_object_that_does_not_parse_is_refused(seeded, tmp_path, kind, payload):
    repo, seed, _ = seeded
    pack = Pack()
    pack.add(kind, payload)
    message = refused(repo, bundle(pack.bytes(), {"refs/cbledger/x": oid(kind, payload)}, (seed,)), tmp_path)
    assert f"{oid(kind, payload).hex()} does not parse as a {NAMES[kind].decode()}" in message


def test_a_ref_would_not_move_an_existing_one(seeded, tmp_path):
    repo, seed, _ = seeded
    pack, tip = one_commit(seed)
    message = refused(repo, bundle(pack.bytes(), {"refs/cbledger/seed": tip}, (seed,)), tmp_path, git_too=False)
    assert "would move the repository's refs/cbledger/seed" in message


def test_nothing_is_written_outside_the_repository(seeded, tmp_path):
    repo, seed, _ = seeded
    pack, tip = one_commit(seed)
    outside = {p for p in tmp_path.rglob("*") if not p.is_relative_to(Path(repo.path))}
    unbundle(repo, bundle(pack.bytes(), {"refs/cbledger/evidence": tip}, (seed,)))
    assert {p for p in tmp_path.rglob("*") if not p.is_relative_to(Path(repo.path))} == outside


# --------------------------------------------------------------------------- the committed runs


def _committed() -> tuple[Workspace, object, dict]:
    ws = Workspace.at(REPO)
    state = load_state(ws.ledger)
    return ws, state, _every_run(state)


def _fixture(catalog, run, shared_real):
    """The run's fixture; a real board's tree from the shared data when it is not materialized."""
    fixture = catalog.fixture(run.fixture.id)
    if run.fixture.id in REAL_BOARDS and not fixture.tree.is_dir():
        fixture = dataclasses.replace(fixture, tree_dir=shared_real / "fixtures" / run.fixture.id / "tree")
    return fixture


@pytest.mark.slow
@pytest.mark.shared
def test_every_committed_bundle_reads_as_git_fetch_reads_it(tmp_path, shared_real):
    """Same refs and same objects as `git fetch` for a committed run's bundle of every kind (board,
    run mode, suite version, harness version, a kept stash, a later pass), and every retracted
    run's, whose seed no longer rebuilds, refused by both for its missing prerequisite. Every kind
    rather than every run: the reader is one code path, `replay --verify` (CI's last step) reads
    every bundle with it and holds what it restores to the recorded digests, and fetching all of
    them had grown past half a minute of CI with each suite bump's 86 runs."""
    ws, state, every = _committed()
    kinds: dict[tuple, str] = {}
    for rid, entry in sorted(every.items()):
        run = entry.run
        kinds.setdefault((run.fixture.id, run.run_mode, run.comparability.suite_version, run.comparability.copperhead_version,
                          bool(run.sandbox.stash_sha), rid in state.later_passes), rid)
    chosen = {rid: every[rid] for rid in sorted(set(kinds.values()) | set(state.retracted))}
    versions = {e.run.comparability.suite_version for e in chosen.values()}
    suites, _ = prepare_suites(ws, state, versions, tmp_path / "suites")
    seeds: dict[str, Path] = {}
    checked = retracted = 0
    for rid, entry in chosen.items():
        run = entry.run
        ref = run.sandbox
        data = (REPO / ref.store).read_bytes()
        assert blake3(data).hexdigest() == ref.store_blake3
        a, b = tmp_path / "git" / rid, tmp_path / "reader" / rid
        if rid in state.retracted:
            header = read_header(data)
            assert ref.seed_sha in header.prerequisites
            for x in (a, b):
                pygit2.init_repository(str(x), bare=True)
            assert git_fetch(a, data, tmp_path).returncode != 0
            with pytest.raises(BundleError, match=f"prerequisite commit {ref.seed_sha} is not in the repository"):
                unbundle(pygit2.Repository(str(b)), data)
            retracted += 1
            continue
        if ref.seed_sha not in seeds:  # one seed repository per seed, shared as an alternate
            path = tmp_path / "seeds" / ref.seed_sha
            seed_repo = pygit2.init_repository(str(path), bare=True)
            fixture = _fixture(restore_catalog(ws, run, suites), run, shared_real)
            assert str(sandbox_mod.seed_commit(seed_repo, fixture, ref.seed_config.encode())) == ref.seed_sha, rid
            seed_repo.references.create("refs/cbledger/seed", pygit2.Oid(hex=ref.seed_sha))
            seeds[ref.seed_sha] = path
        for x in (a, b):
            pygit2.init_repository(str(x), bare=True)
            (x / "objects" / "info" / "alternates").write_text(f"{seeds[ref.seed_sha] / 'objects'}\n")
        fetched = git_fetch(a, data, tmp_path)
        assert fetched.returncode == 0, (rid, fetched.stderr)
        ours = pygit2.Repository(str(b))
        refs = unbundle(ours, data)
        theirs = pygit2.Repository(str(a))
        assert cbledger_refs(ours) == cbledger_refs(theirs) == {k: str(v) for k, v in refs.items()}, rid
        # git keeps the thin pack completed with the seed objects it used; the reader's pack
        # holds what the bundle adds
        seed_ids = {str(o) for o in pygit2.Repository(str(seeds[ref.seed_sha])).odb}
        written = stored_ids(b)
        assert written == stored_ids(a) - seed_ids, rid
        for sha in written:
            assert ours.odb.read(pygit2.Oid(hex=sha)) == theirs.odb.read(pygit2.Oid(hex=sha))
        for name in ("baseline", "head", "capture", "evidence", "stash"):
            sha = getattr(ref, f"{name}_sha")
            assert sha is None or pygit2.Oid(hex=sha) in ours.odb, (rid, name)
        checked += 1
    assert checked >= 40 and retracted >= 15 and checked == len(set(kinds.values()) - set(state.retracted))
    assert len(every) == len(list((REPO / "results" / "runs").glob("*.bundle")))  # a bundle per run, no other


# --------------------------------------------------------------------------- the findings kept


def _synthetic_run():
    ws, state, every = _committed()
    rid = next(r for r, e in sorted(every.items())
               if e.run.fixture.id == "synthetic-led-resistor" and r not in state.retracted)
    return ws, state, every[rid]


@pytest.fixture(scope="module")
def one_run(tmp_path_factory):
    """A committed synthetic run, its catalog of kept definitions, and its bundle's bytes."""
    ws, state, entry = _synthetic_run()
    suites, _ = prepare_suites(ws, state, {entry.run.comparability.suite_version}, tmp_path_factory.mktemp("suites"))
    return entry, restore_catalog(ws, entry.run, suites), (REPO / entry.run.sandbox.store).read_bytes()


def _restore_with(tmp_path, one_run, data: bytes):
    entry, catalog, _ = one_run
    results = tmp_path / "results"
    store = results / Path(entry.run.sandbox.store).relative_to("results")
    store.parent.mkdir(parents=True)
    store.write_bytes(data)
    ws = Workspace.at(REPO, results=results)
    return restore_run(ws, catalog, entry.run, entry.seq, tmp_path / "repo")


def test_an_intact_bundle_restores_complete(tmp_path, one_run):
    restored = _restore_with(tmp_path, one_run, one_run[2])
    assert restored.failures == [] and restored.complete


@pytest.mark.parametrize(("damage", "why"), [
    (lambda d: d[:-7], "SHA-1 trailer does not match"),
    (lambda d: d[:-30] + bytes([d[-30] ^ 1]) + d[-29:], "SHA-1 trailer does not match"),
    (lambda d: d.replace(b"# v2 git bundle", b"# v3 git bundle", 1), "a v3 git bundle"),
])
def test_a_damaged_bundle_is_unreadable_and_named(tmp_path, one_run, damage, why):
    entry, _, data = one_run
    restored = _restore_with(tmp_path, one_run, damage(data))
    kinds = {f.kind: f for f in restored.failures}
    assert set(kinds) == {"bundle-digest", "bundle-unreadable"}
    assert why in kinds["bundle-unreadable"].message
    assert kinds["bundle-unreadable"].message.startswith("the bundle could not be read: ")
    assert kinds["bundle-unreadable"].file == entry.run.sandbox.store
    assert not restored.complete


def test_preserve_restore_names_an_unreadable_bundle(tmp_path, one_run):
    """`preserve.restore` (re-scoring, judging) stops with the reader's reason."""
    entry, catalog, data = one_run
    cut = data[:-7]
    bad = tmp_path / "cut.bundle"
    bad.write_bytes(cut)
    ref = msgspec.structs.replace(entry.run.sandbox, store_blake3=blake3(cut).hexdigest())
    with pytest.raises(UserError, match=r"cut\.bundle: the pack's SHA-1 trailer does not match"):
        preserve.restore(bad, ref, catalog.fixture(entry.run.fixture.id), into=tmp_path / "r")
    good = preserve.restore(REPO / entry.run.sandbox.store, entry.run.sandbox, catalog.fixture(entry.run.fixture.id),
                            into=tmp_path / "ok")
    assert str(good.repo.references["refs/cbledger/evidence"].target) == entry.run.sandbox.evidence_sha
