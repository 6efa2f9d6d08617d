"""Reading a preserved run's git bundle in-process, in place of `git fetch <bundle>`.

libgit2 reads no bundles and pygit2 exposes no pack indexer, so every restore used to start a
`git fetch` subprocess, a fixed cost paid once per run by `replay --verify`, re-scoring and the
replay agent. A bundle is small and simple enough to read here: a v2 header (prerequisites
`-<sha>`, refs `<sha> <ref>`, a blank line) and a packfile, thin against the seed commit the
restoring side has just rebuilt from the fixture.

A bundle is untrusted input — a committed file anyone can rewrite — so the reader checks before it
trusts: the pack's trailing SHA-1 and object count before any object is read, every declared
size against a bound before anything is allocated, every delta instruction against its base and
target, and every object's references (a commit's tree and parents, a tree's entries) against the
pack and the repository, as git's connectivity check does. Delta chains are walked with an
explicit work list, never by recursion. The objects go into the repository as one new pack of
whole objects with its index (`_PackWriter`), written only once every delta has resolved; refs
are created only once the pack is in, so a bundle refused halfway leaves no ref, and at most a
pack nothing names.
"""

from __future__ import annotations

import hashlib
import os
import re
import struct
import zlib
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pygit2

from cbledger.errors import UserError

#: What the reader refuses before allocating. A preserved run keeps at most 32 MiB per file and
#: 64 MiB in all (runner/preserve.py), plus harness logs, reports, trees and commits, in a bundle
#: of at most 80 MiB; an object or delta result past 128 MiB, or 1 GiB of them in all, is no
#: preserved run but a decompression bomb.
MAX_OBJECT_BYTES = 128 * 1024 * 1024
MAX_INFLATED_BYTES = 1024 * 1024 * 1024

V2_SIGNATURE = b"# v2 git bundle\n"
#: a pack offset from here on goes in the index's 8-byte table
LARGE_OFFSET = 0x80000000
_SHA = re.compile(rb"[0-9a-f]{40}")
_TYPES = {1: pygit2.enums.ObjectType.COMMIT, 2: pygit2.enums.ObjectType.TREE,
          3: pygit2.enums.ObjectType.BLOB, 4: pygit2.enums.ObjectType.TAG}
_TYPE_NAMES = {1: b"commit", 2: b"tree", 3: b"blob", 4: b"tag"}
_OFS_DELTA, _REF_DELTA = 6, 7
_SUBMODULE_MODE = 0o160000


class BundleError(UserError):
    """The bundle is not one this reader can restore; the message says what is wrong."""


@dataclass(frozen=True)
class Header:
    prerequisites: tuple[str, ...]
    #: (sha, ref name), in the bundle's order
    refs: tuple[tuple[str, str], ...]
    #: where the packfile starts in the bundle's bytes
    pack_start: int


def read_header(data: bytes) -> Header:
    """Parses and checks a v2 bundle header; v3 (capabilities, possibly SHA-256) is refused."""
    if not data.startswith(V2_SIGNATURE):
        first = data[:64].split(b"\n", 1)[0]
        if first == b"# v3 git bundle":
            raise BundleError("a v3 git bundle: only v2 bundles are read")
        raise BundleError(f"not a v2 git bundle (it starts {first[:32]!r})")
    pos = len(V2_SIGNATURE)
    prerequisites: list[str] = []
    refs: list[tuple[str, str]] = []
    names: set[str] = set()
    while True:
        end = data.find(b"\n", pos)
        if end < 0:
            raise BundleError("the header is not closed by a blank line (the bundle is truncated)")
        line = data[pos:end]
        pos = end + 1
        if not line:
            break
        if line.startswith(b"-"):
            sha = line[1:41]
            if not _SHA.fullmatch(sha) or line[41:42] not in (b"", b" "):
                raise BundleError(f"header line {line[:80]!r}: a prerequisite is `-<40 hex digits>`")
            prerequisites.append(sha.decode())
            continue
        sha, _, name = line.partition(b" ")
        try:
            ref = name.decode()
        except UnicodeDecodeError:
            ref = ""
        if not _SHA.fullmatch(sha) or not ref or not pygit2.reference_is_valid_name(ref):
            raise BundleError(f"header line {line[:80]!r}: a ref is `<40 hex digits> <valid ref name>`")
        if ref in names:
            raise BundleError(f"header names ref {ref} twice")
        names.add(ref)
        refs.append((sha.decode(), ref))
    return Header(tuple(prerequisites), tuple(refs), pos)


@dataclass
class _Entry:
    offset: int
    kind: int  # 1-4 an object, 6/7 a delta
    data: bytes  # the object's content, or the delta's instructions
    base_offset: int = -1  # OFS_DELTA
    base_id: bytes = b""  # REF_DELTA, the raw 20-byte id


def _inflate(view: memoryview, pos: int, size: int, at: int) -> tuple[bytes, int]:
    """Inflates the zlib stream at `pos`, which must give exactly `size` bytes; returns the bytes
    and the position after the stream. Never produces more than size + 1 bytes."""
    d = zlib.decompressobj()
    parts: list[bytes] = []
    got = 0
    step = size + size // 512 + 64  # a stored (incompressible) stream's overhead included
    try:
        while not d.eof:
            if d.unconsumed_tail:
                buf: bytes | memoryview = d.unconsumed_tail
            else:
                if pos >= len(view):
                    raise BundleError(f"object at pack offset {at}: its zlib stream runs past the end of the pack")
                buf = view[pos:pos + step]
                pos += len(buf)
                step *= 2
            part = d.decompress(buf, size - got + 1)
            got += len(part)
            if got > size:
                raise BundleError(f"object at pack offset {at}: inflates past its declared {size} bytes")
            parts.append(part)
    except zlib.error as exc:
        raise BundleError(f"object at pack offset {at}: corrupt zlib stream ({exc})") from None
    if got != size:
        raise BundleError(f"object at pack offset {at}: inflates to {got} bytes, its header declares {size}")
    return b"".join(parts), pos - len(d.unused_data)


def _parse_pack(pack: bytes) -> list[_Entry]:
    """Every entry of the pack, inflated, after the trailer and the count check out."""
    if len(pack) < 32 or pack[:4] != b"PACK":
        raise BundleError("no packfile after the header (the bundle is truncated or not a bundle)")
    if hashlib.sha1(memoryview(pack)[:-20]).digest() != pack[-20:]:
        raise BundleError("the pack's SHA-1 trailer does not match its contents (the bundle is corrupt or truncated)")
    version = int.from_bytes(pack[4:8], "big")
    if version not in (2, 3):
        raise BundleError(f"pack version {version}: only versions 2 and 3 are read")
    count = int.from_bytes(pack[8:12], "big")
    view = memoryview(pack)[:-20]
    end = len(view)
    pos = 12
    inflated = 0
    entries: list[_Entry] = []
    starts: set[int] = set()
    for _ in range(count):
        if pos >= end:
            raise BundleError(f"the pack declares {count} objects but holds {len(entries)}")
        at = pos
        c = view[pos]
        pos += 1
        kind, size, shift = (c >> 4) & 7, c & 15, 4
        while c & 0x80:
            if pos >= end or shift > 35:
                raise BundleError(f"object at pack offset {at}: malformed size in its header")
            c = view[pos]
            pos += 1
            size |= (c & 0x7F) << shift
            shift += 7
        if kind not in _TYPES and kind not in (_OFS_DELTA, _REF_DELTA):
            raise BundleError(f"object at pack offset {at}: unknown object type {kind}")
        if size > MAX_OBJECT_BYTES:
            raise BundleError(f"object at pack offset {at}: declares {size} bytes, over the bound of {MAX_OBJECT_BYTES}")
        entry = _Entry(at, kind, b"")
        if kind == _OFS_DELTA:
            if pos >= end:
                raise BundleError(f"object at pack offset {at}: truncated delta base offset")
            c = view[pos]
            pos += 1
            back = c & 0x7F
            while c & 0x80:
                if pos >= end or back > end:
                    raise BundleError(f"object at pack offset {at}: malformed delta base offset")
                c = view[pos]
                pos += 1
                back = ((back + 1) << 7) | (c & 0x7F)
            entry.base_offset = at - back
            if entry.base_offset not in starts:
                raise BundleError(f"object at pack offset {at}: its delta base offset {entry.base_offset} starts no earlier object")
        elif kind == _REF_DELTA:
            if pos + 20 > end:
                raise BundleError(f"object at pack offset {at}: truncated delta base id")
            entry.base_id = bytes(view[pos:pos + 20])
            pos += 20
        inflated += size
        if inflated > MAX_INFLATED_BYTES:
            raise BundleError(f"the pack inflates past the bound of {MAX_INFLATED_BYTES} bytes")
        entry.data, pos = _inflate(view, pos, size, at)  # `view` stops at the trailer
        entries.append(entry)
        starts.add(at)
    if pos != end:
        raise BundleError(f"{end - pos} bytes after the pack's {count} objects")
    return entries


def _varint(delta: bytes, i: int, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if i >= len(delta) or shift > 35:
            raise BundleError(f"delta at pack offset {at}: malformed size in its header")
        c = delta[i]
        i += 1
        value |= (c & 0x7F) << shift
        shift += 7
        if not c & 0x80:
            return value, i


def _delta_sizes(delta: bytes, at: int) -> tuple[int, int, int]:
    """(base size, result size, where the instructions start) from a delta's header."""
    source_size, i = _varint(delta, 0, at)
    target_size, i = _varint(delta, i, at)
    return source_size, target_size, i


def apply_delta(base: bytes, delta: bytes, at: int = 0) -> bytes:
    """git's delta format: the base and target sizes, then copy (from the base) and insert
    (literal bytes) instructions; every instruction is checked against both sizes."""
    source_size, target_size, i = _delta_sizes(delta, at)
    if source_size != len(base):
        raise BundleError(f"delta at pack offset {at}: made for a base of {source_size} bytes, its base has {len(base)}")
    if target_size > MAX_OBJECT_BYTES:
        raise BundleError(f"delta at pack offset {at}: its result would be {target_size} bytes, over the bound of {MAX_OBJECT_BYTES}")
    src = memoryview(base)
    out = bytearray()
    n = len(delta)
    try:
        while i < n:
            op = delta[i]
            i += 1
            if op & 0x80:
                offset = size = 0
                for bit, shift in ((0x01, 0), (0x02, 8), (0x04, 16), (0x08, 24)):
                    if op & bit:
                        offset |= delta[i] << shift
                        i += 1
                for bit, shift in ((0x10, 0), (0x20, 8), (0x40, 16)):
                    if op & bit:
                        size |= delta[i] << shift
                        i += 1
                size = size or 0x10000
                if offset + size > len(base):
                    raise BundleError(f"delta at pack offset {at}: copies bytes {offset}-{offset + size} of a {len(base)}-byte base")
                out += src[offset:offset + size]
            elif op:
                if i + op > n:
                    raise BundleError(f"delta at pack offset {at}: an insert runs past the delta's end")
                out += delta[i:i + op]
                i += op
            else:
                raise BundleError(f"delta at pack offset {at}: reserved instruction 0")
            if len(out) > target_size:
                raise BundleError(f"delta at pack offset {at}: produces more than its declared {target_size} bytes")
    except IndexError:
        raise BundleError(f"delta at pack offset {at}: a copy instruction runs past the delta's end") from None
    if len(out) != target_size:
        raise BundleError(f"delta at pack offset {at}: produces {len(out)} bytes, its header declares {target_size}")
    return bytes(out)


def _object_id(kind: int, data: bytes) -> bytes:
    h = hashlib.sha1(_TYPE_NAMES[kind] + b" %d\0" % len(data))
    h.update(data)
    return h.digest()


def _resolve(entries: list[_Entry], odb: pygit2.Odb, emit: Callable[[bytes, int, bytes], None]) -> dict[bytes, int]:
    """Every entry as a whole object handed to `emit(id, type, content)`, deltas applied along an
    explicit work list; returns {raw id: type} of what was emitted. A REF_DELTA whose base the
    pack does not hold (a thin pack) takes it from `odb`."""
    by_offset: dict[int, list[_Entry]] = defaultdict(list)
    by_id: dict[bytes, list[_Entry]] = defaultdict(list)
    work: list[tuple[int, bytes, int]] = []  # (type, content, offset or -1 for a base from odb)
    for e in entries:
        if e.kind == _OFS_DELTA:
            by_offset[e.base_offset].append(e)
        elif e.kind == _REF_DELTA:
            by_id[e.base_id].append(e)
        else:
            work.append((e.kind, e.data, e.offset))
            e.data = b""  # held by the work list alone, dropped once written
    written: dict[bytes, int] = {}
    pending = sum(1 for e in entries if e.kind in (_OFS_DELTA, _REF_DELTA))
    produced = sum(len(data) for _, data, _ in work)
    while True:
        while work:
            kind, data, offset = work.pop()
            oid = _object_id(kind, data)
            if offset >= 0:
                emit(oid, kind, data)
                written[oid] = kind
            children = by_offset.pop(offset, []) if offset >= 0 else []
            children += by_id.pop(oid, [])
            for child in children:
                produced += _delta_sizes(child.data, child.offset)[1]
                if produced > MAX_INFLATED_BYTES:  # a few bytes of copies can ask for 16 MiB each
                    raise BundleError(f"the pack's objects come to more than the bound of {MAX_INFLATED_BYTES} bytes")
                work.append((kind, apply_delta(data, child.data, child.offset), child.offset))
                child.data = b""
                pending -= 1
        if not by_id:
            break
        # a thin pack: bases the repository holds
        found = False
        for base_id in list(by_id):
            try:
                base_type, base_data = odb.read(pygit2.Oid(raw=base_id))
            except KeyError:
                continue
            kind = next(k for k, t in _TYPES.items() if t == base_type)
            work.append((kind, base_data, -1))
            found = True
        if not found:
            break
    if pending:
        # every unresolved chain starts at a REF_DELTA: an OFS_DELTA's base is an earlier entry
        first = min((e for group in by_id.values() for e in group), key=lambda e: e.offset)
        raise BundleError(f"the delta at pack offset {first.offset} names base {first.base_id.hex()}, which neither "
                          f"the pack nor the repository holds ({pending} object(s) unresolved)")
    return written


def object_header(kind: int, size: int) -> bytes:
    """A pack entry's header: the type in bits 4-6 of the first byte, the size little-endian in
    its low 4 bits and 7 bits of each byte after, the top bit saying another byte follows."""
    out = bytearray()
    c = (kind << 4) | (size & 15)
    size >>= 4
    while size:
        out.append(c | 0x80)
        c = size & 0x7F
        size >>= 7
    out.append(c)
    return bytes(out)


class _PackWriter:
    """The resolved objects as one new pack of whole objects and its version 2 index, the layout
    `git index-pack` leaves after a fetch. Measured against a loose object per `odb.write` on
    every committed run (bench/restore.py): the read step's median 1.5 ms against 3.9 ms, one
    pair of files in place of a file and a directory per object."""

    def __init__(self) -> None:
        self.entries: dict[bytes, tuple[bytes, int]] = {}  # id -> (packed entry, its CRC-32)

    def __call__(self, oid: bytes, kind: int, data: bytes) -> None:
        if oid not in self.entries:
            entry = object_header(kind, len(data)) + zlib.compress(data, 1)
            self.entries[oid] = (entry, zlib.crc32(entry))

    def write(self, objects_dir: Path) -> None:
        """Writes `pack-<sha>.pack` and `.idx` under `objects_dir/pack`, each to a temporary name
        first and the index last, so the object database never sees half a pack."""
        if not self.entries:
            return
        ids = sorted(self.entries)
        digest = hashlib.sha1(b"PACK" + struct.pack(">II", 2, len(ids)))
        offsets, pos = [], 12
        for oid in ids:
            entry = self.entries[oid][0]
            digest.update(entry)
            offsets.append(pos)
            pos += len(entry)
        checksum = digest.digest()
        fanout = [0] * 256
        for oid in ids:
            fanout[oid[0]] += 1
        for i in range(1, 256):
            fanout[i] += fanout[i - 1]
        small: list[int] = []
        large: list[int] = []  # offsets past 31 bits, in an 8-byte table the 4-byte one points into
        for o in offsets:
            if o < LARGE_OFFSET:
                small.append(o)
            else:
                small.append(0x80000000 | len(large))
                large.append(o)
        index = b"".join([b"\377tOc", struct.pack(">I", 2), struct.pack(">256I", *fanout), *ids,
                          struct.pack(f">{len(ids)}I", *(self.entries[o][1] for o in ids)),
                          struct.pack(f">{len(ids)}I", *small), struct.pack(f">{len(large)}Q", *large), checksum])
        index += hashlib.sha1(index).digest()
        packs = objects_dir / "pack"
        packs.mkdir(parents=True, exist_ok=True)
        name = packs / f"pack-{checksum.hex()}"
        tmp_pack, tmp_index = packs / f"tmp_pack_{checksum.hex()}", packs / f"tmp_idx_{checksum.hex()}"
        with open(tmp_pack, "wb") as f:
            f.write(b"PACK" + struct.pack(">II", 2, len(ids)))
            for oid in ids:
                f.write(self.entries[oid][0])
            f.write(checksum)
        tmp_index.write_bytes(index)
        os.replace(tmp_pack, name.with_suffix(".pack"))
        os.replace(tmp_index, name.with_suffix(".idx"))


def _check_connected(repo: pygit2.Repository, written: dict[bytes, int]) -> None:
    """Every object a written commit, tree or tag names is in the repository: what git's
    connectivity check after a fetch establishes, given the repository was complete before."""
    odb = repo.odb
    for raw, kind in written.items():
        if kind == 3:
            continue
        try:
            obj = repo[pygit2.Oid(raw=raw)]
            if isinstance(obj, pygit2.Commit):
                named = [(obj.tree_id, "tree"), *((p, "parent") for p in obj.parent_ids)]
            elif isinstance(obj, pygit2.Tree):
                named = [(e.id, f"entry {e.name!r}") for e in obj if e.filemode != _SUBMODULE_MODE]
            elif isinstance(obj, pygit2.Tag):
                named = [(obj.target, "target")]
            else:
                named = []
        except (pygit2.GitError, ValueError) as exc:
            name = _TYPE_NAMES[kind].decode()
            raise BundleError(f"{name} {raw.hex()} does not parse as a {name} ({exc})") from None
        for oid, what in named:
            if oid not in odb:
                raise BundleError(f"{obj.type_str} {obj.id} names {what} {oid}, which neither the pack nor the repository holds")


def unbundle(repo: pygit2.Repository, data: bytes, refs_from: str = "refs/cbledger/",
             refs_to: str | None = "refs/cbledger/") -> dict[str, pygit2.Oid]:
    """Reads the bundle `data` into `repo`, like `git fetch <bundle> '<from>*:<to>*'`: its objects
    into the object database, each of its refs under `refs_from` as the same name under `refs_to`
    (none when `refs_to` is None). Returns {bundle ref: target} of the refs it read. Raises
    BundleError naming what is wrong; a ref is created only once every object is in."""
    header = read_header(data)
    for sha in header.prerequisites:
        try:
            kind, _ = repo.odb.read_header(pygit2.Oid(hex=sha))
        except KeyError:
            raise BundleError(f"prerequisite commit {sha} is not in the repository") from None
        if kind != pygit2.enums.ObjectType.COMMIT:
            raise BundleError(f"prerequisite {sha} is not a commit in the repository")
    entries = _parse_pack(data[header.pack_start:])
    pack = _PackWriter()
    written = _resolve(entries, repo.odb, pack)
    pack.write(Path(repo.path) / "objects")
    _check_connected(repo, written)
    targets = {}
    for sha, name in header.refs:
        oid = pygit2.Oid(hex=sha)
        if oid not in repo.odb:
            raise BundleError(f"ref {name} points at {sha}, which neither the pack nor the repository holds")
        if name.startswith(refs_from):
            targets[name] = oid
    if refs_to is not None:
        for name, oid in targets.items():
            local = refs_to + name[len(refs_from):]
            existing = repo.references.get(local)
            if existing is not None and existing.target != oid:
                raise BundleError(f"ref {name} would move the repository's {local} from {existing.target} to {oid}")
        for name, oid in targets.items():
            repo.references.create(refs_to + name[len(refs_from):], oid, force=True)
    return targets
