"""Projection snapshots: the folded `LedgerState` at a seq, so a fold resumes there instead of at seq 1.

Why: every projection is a fold of the whole ledger, and at millions of events the fold is most of
the time a `project` command or a `watch` start-up takes. A snapshot is a derived local cache, never
evidence: it is trusted only as far as the ledger confirms it. It carries the seq it was taken at and
the chain hash of the event there (and, for a file ledger, the byte offset just after that event's
line, so the fold can seek rather than read from the start); a reader accepts it only when the
ledger's event at that seq has that hash, so a rewritten ledger invalidates it, and only when its
content verifies under this user's snapshot key, so one brought from elsewhere is never folded
on (docs/PROJECTIONS.md, "Snapshots"). It also carries its
own format version and the code's projection version (`projection_version`): a snapshot written by code
that folds differently, or whose state has another shape, is ignored. Anything ignored is said in
one line, and the fold starts at seq 1 — never an error, since the ledger alone is the truth.

Folding from a snapshot and then applying the later events equals folding from seq 1
(tests/test_snapshot.py holds that over random ledgers and split points). The encoding and the
checks are pure; the files are read and written by `writers` and the ledger is asked by `resume`.
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, BinaryIO, TypeVar

import msgspec
from blake3 import blake3
from msgspec import Struct

from cbledger.projections import spill
from cbledger.projections.fold import (
    PER_RUN,
    AttachmentEntry,
    GradeEntry,
    LedgerState,
    PassEntry,
    Projector,
    ReviewEntry,
    RubricEntry,
    RunEntry,
)

#: the file's own layout; a change here makes every older snapshot unreadable, so bump it
#: (3: a trailer frame holds the BLAKE3 of every frame before it, header excepted; 4: that
#: BLAKE3 keyed with this user's snapshot key; 5: rubric scores, reviews and attachments in chunks;
#: 6: a spilled state's tables as a base and the delta since)
FORMAT = 6
#: bump when `Projector` folds the same events into a different state (a new rule, a new anomaly)
FOLD_RULES = 1
SUFFIX = ".msgpack"
MAGIC = b"cbledger-snapshot\n"
#: runs (or grades, or later passes) a frame holds: what is decoded, and held twice, at a time
CHUNK = 10_000


@functools.cache
def projection_version() -> str:
    """The fold rules and the state's shape: a field added to any struct the state holds changes
    its schema, so a snapshot of the old shape is refused without anyone remembering to bump.
    Computed when a snapshot is first read or written, not at import (every command imports this)."""
    schema = msgspec.json.encode(msgspec.json.schema(LedgerState), order="sorted")
    return f"{FOLD_RULES}.{blake3(schema).hexdigest()[:16]}"



#: the file holding the key a snapshot is sealed with, when not the default (`key_path`)
KEY_ENV = "CBLEDGER_SNAPSHOT_KEY"
_KEY_BYTES = 32


def key_path() -> Path | None:
    """This user's snapshot key: outside every results directory, so one handed over (a tarball,
    a clone with its snapshots forced in) brings none that seals its snapshots for this reader.
    None when there is no home to keep it in."""
    named = os.environ.get(KEY_ENV)
    if named:
        return Path(named)
    state = os.environ.get("XDG_STATE_HOME")
    if not state:
        try:
            state = str(Path.home() / ".local" / "state")
        except RuntimeError:  # no $HOME and no passwd entry
            return None
    return Path(state) / "cbledger" / "snapshot.key"


@functools.cache
def _key() -> tuple[bytes, str | None]:
    """(the key, why it is this process's own, or None). Made on first use (32 random bytes,
    readable by this user alone). Where it can be neither read nor made, a process seals with a
    key of its own, and writes no snapshot: none would serve a later process."""
    path = key_path()
    if path is None:
        return os.urandom(_KEY_BYTES), "no home directory to keep the snapshot key in (set $CBLEDGER_SNAPSHOT_KEY)"
    instead = f"set ${KEY_ENV} to a file of your own"
    try:
        key = path.read_bytes()
    except FileNotFoundError:
        try:
            key = _make_key(path)
        except OSError as exc:
            return os.urandom(_KEY_BYTES), f"the snapshot key {path} cannot be made ({exc.strerror}; {instead})"
    except OSError as exc:
        return os.urandom(_KEY_BYTES), f"the snapshot key {path} cannot be read ({exc.strerror}; {instead})"
    if len(key) != _KEY_BYTES:
        return os.urandom(_KEY_BYTES), (f"the snapshot key {path} is {len(key)} bytes, not {_KEY_BYTES} (remove it "
                                        f"and one is made, or {instead})")
    return key, None


def seal_key() -> bytes:
    return _key()[0]


def key_problem() -> str | None:
    """Why no snapshot can serve a later process (the key is this process's own), or None."""
    return _key()[1]


def _make_key(path: Path) -> bytes:
    """Made under a name of its own and linked into place, so two processes making it at once
    both end up reading the one that won; where a file system links nothing, created in place
    (exclusively: a process reading it half written seals with a key of its own, once). An
    OSError says why none can be made."""
    staged = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(staged, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(os.urandom(_KEY_BYTES))
        f.flush()
        os.fsync(f.fileno())
    try:
        os.link(staged, path)
    except FileExistsError:
        pass
    except OSError:  # no hard links here
        with contextlib.suppress(FileExistsError):
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(staged.read_bytes())
                f.flush()
                os.fsync(f.fileno())
    finally:
        staged.unlink(missing_ok=True)
    return path.read_bytes()


def _sealed() -> blake3:
    return blake3(key=seal_key())


class SnapshotError(ValueError):
    """A snapshot that cannot be used (unreadable, another version, another ledger)."""


class Header(Struct, kw_only=True):
    """What a snapshot is checked by before its state is decoded."""

    format: int
    projection: str = ""
    seq: int = 0
    head_hash: str = ""
    #: a file ledger's byte offset just after the line of `seq` (None for a database ledger)
    offset: int | None = None


class Runs(Struct, tag="runs"):
    items: list[tuple[str, RunEntry]]


class Passes(Struct, tag="passes"):
    items: list[tuple[str, PassEntry]]


class Grades(Struct, tag="grades"):
    items: list[tuple[str, dict[str, GradeEntry]]]


class Rubric(Struct, tag="rubric"):
    items: list[tuple[str, list[RubricEntry]]]


class Reviews(Struct, tag="reviews"):
    items: list[tuple[str, list[ReviewEntry]]]


class Attachments(Struct, tag="attachments"):
    items: list[tuple[str, AttachmentEntry]]


#: the chunk frame of each map of `fold.PER_RUN`
_FRAMES: dict[str, type[Runs | Passes | Grades | Rubric | Reviews | Attachments]] = {
    "runs": Runs, "later_passes": Passes, "grades": Grades, "rubric": Rubric, "reviews": Reviews,
    "attachments": Attachments,
}


class Tables(Struct, tag="tables"):
    """A spilled state's maps keyed by run id are not in chunks: they are SQLite files beside this
    one, each table's rows numbered and sealed (`spill.copy_tables`) with a nonce of the file's
    own. `base` holds every row as some snapshot at or before this one stood (`<b>.tables.sqlite`);
    `delta`, when there is one, the rows changed or added since (`<seq>.delta-<b>.sqlite`), so a
    snapshot of a large state writes what changed, not every run again."""

    base: spill.TableFile
    delta: spill.TableFile | None = None


class Aggregates(Struct, tag="aggregates"):
    """The aggregates (`aggregates.Views`) at the snapshot's seq, pickled, and the version of the
    code that made them: a projection resumed from here need not compute them from every record.
    Unpickled only once the seal verified, and only under the same code (`aggregates_version`)."""

    version: str
    data: bytes


class End(Struct, tag="end"):
    """The last frame: the BLAKE3 of the state's frames, each with its length, keyed with this
    user's snapshot key (`seal_key`). The header ties a snapshot to the ledger; this ties its
    content to what this user's cbledger wrote, so a damaged byte that still decodes (a tier, a
    model id) is refused rather than projected, and so is a state someone else folded, forged or
    not: `--since-checkpoint` and every `project --check` would compare the outputs with it."""

    blake3: str


Chunk = Runs | Passes | Grades | Rubric | Reviews | Attachments | Tables | Aggregates | End

_HEADER = msgspec.msgpack.Decoder(Header)
_REST = msgspec.msgpack.Decoder(LedgerState)
_CHUNK = msgspec.msgpack.Decoder(Chunk)
_ENCODER = msgspec.msgpack.Encoder()
_LENGTH = 8
_V = TypeVar("_V")


def file_name(seq: int) -> str:
    return f"{seq}{SUFFIX}"


def tables_name(seq: int) -> str:
    """The SQLite file beside a spilled state's snapshot holding every row (`Tables.base`)."""
    return f"{seq}.tables.sqlite"


def delta_name(seq: int, base_seq: int) -> str:
    """The SQLite file beside a snapshot at `seq` holding the rows changed since the tables of the
    snapshot at `base_seq` (`Tables.delta`): the name says which base it needs."""
    return f"{seq}.delta-{base_seq}.sqlite"


def table_file_seqs(name: str) -> tuple[int, int] | None:
    """(seq, the seq of the base it needs) of a tables or delta file's name; None for any other."""
    for suffix in (".tables.sqlite", ".sqlite"):
        if name.endswith(suffix):
            stem = name[: -len(suffix)]
            seq, _, base = stem.partition(".delta-") if suffix == ".sqlite" else (stem, "", stem)
            if seq.isascii() and seq.isdigit() and base.isascii() and base.isdigit():
                return int(seq), int(base)
    return None


@functools.cache
def aggregates_version() -> str:
    """The code the aggregates are tallied by, hashed: every module and data file of the package
    (a tally added to a group changes no schema, and they read the surfaces' catalog, the
    categories, the price rules), so a snapshot's aggregates of any other build are computed again."""
    package = Path(__file__).parent.parent
    digest = blake3()
    for path in sorted(package.rglob("*")):
        if path.suffix in (".py", ".json", ".toml") and "__pycache__" not in path.parts:
            digest.update(str(path.relative_to(package)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def sealer(nonce: str) -> spill.Sealer:
    return spill.Sealer(seal_key(), nonce)


def seq_of(name: str) -> int | None:
    """The seq a snapshot file's name states, or None for any other file."""
    stem = name[: -len(SUFFIX)] if name.endswith(SUFFIX) else ""
    return int(stem) if stem.isascii() and stem.isdigit() else None


# --------------------------------------------------------------------------- writing
#
# The file: MAGIC, then frames (an 8-byte little-endian length and that many bytes of MessagePack):
# the header, the state without its runs, later passes and grades, then those in chunks of CHUNK,
# in the state's own order. Chunks, so that neither writing nor reading ever holds the whole
# state twice (a decoded run holds its own copy of every value until `Projector` shares them).


def _frame(value: object) -> bytes:
    data = _ENCODER.encode(value)
    return len(data).to_bytes(_LENGTH, "little") + data


def _chunks(items: Mapping[str, _V]) -> Iterator[list[tuple[str, _V]]]:
    batch: list[tuple[str, _V]] = []
    for item in items.items():
        batch.append(item)
        if len(batch) == CHUNK:
            yield batch
            batch = []
    if batch:
        yield batch


def encode(state: LedgerState, offset: int | None = None, tables: Tables | None = None,
           aggregates: bytes | None = None) -> Iterator[bytes]:
    """The snapshot file's bytes, a frame at a time. `tables`: the maps keyed by run id were
    written beside it (a spilled state's, `spill.copy_tables`) and are not framed here."""
    if state.head_seq == 0 or state.head_hash is None:
        raise SnapshotError("an empty state, or one folded without chain hashes, is no snapshot")
    yield MAGIC
    yield _frame(Header(format=FORMAT, projection=projection_version(), seq=state.head_seq, head_hash=state.head_hash,
                        offset=offset))
    digest = _sealed()
    for frame in _state_frames(state, tables, aggregates):
        digest.update(frame)
        yield frame
    yield _frame(End(digest.hexdigest()))


def _state_frames(state: LedgerState, tables: Tables | None, aggregates: bytes | None) -> Iterator[bytes]:
    yield _frame(msgspec.structs.replace(state, **{name: {} for name, _ in PER_RUN}))
    if tables is not None:
        yield _frame(tables)
    else:
        for name, _ in PER_RUN:
            for items in _chunks(getattr(state, name)):
                yield _frame(_FRAMES[name](items))
    if aggregates is not None:
        yield _frame(Aggregates(aggregates_version(), aggregates))


# --------------------------------------------------------------------------- reading


def _frames(f: BinaryIO, source: str) -> Iterator[bytes]:
    while True:
        size = f.read(_LENGTH)
        if not size:
            return
        length = int.from_bytes(size, "little")
        data = f.read(length) if len(size) == _LENGTH else b""
        if len(data) != length or not length:
            raise SnapshotError(f"{source}: cut short (a frame of {length} bytes is not all there)")
        yield data


def header(f: BinaryIO, source: str) -> Header:
    """The header, checked against this code's versions; raises SnapshotError saying why not.
    `f` is left at the state's first frame."""
    if f.read(len(MAGIC)) != MAGIC:
        raise SnapshotError(f"{source}: not a snapshot (no {MAGIC.strip().decode()} line)")
    try:
        head = _HEADER.decode(next(_frames(f, source)))
    except (msgspec.MsgspecError, StopIteration) as exc:
        raise SnapshotError(f"{source}: not a snapshot ({exc or 'no header'})") from None
    if head.format != FORMAT:
        raise SnapshotError(f"{source}: snapshot format {head.format}, this code reads {FORMAT}")
    if head.projection != projection_version():
        raise SnapshotError(f"{source}: written by a fold of projection version {head.projection or 'none'}, "
                            f"this code's is {projection_version()}")
    return head


class Loaded(Struct):
    state: LedgerState
    #: the pickled aggregates at the snapshot's seq, when it holds some made by this code
    aggregates: bytes | None = None


def read(f: BinaryIO, head: Header, source: str, directory: Path | None = None) -> Loaded:
    """The state after the header, each chunk's runs and grades given the sharing a fold gives
    as it is decoded (`Projector.shared_*`); a spilled state's tables opened beside it, in
    `directory`, once the seal verified."""
    digest = _sealed()
    end: End | None = None
    tables: Tables | None = None
    aggregates: Aggregates | None = None
    try:
        frames = _frames(f, source)
        first = next(frames)
        digest.update(len(first).to_bytes(_LENGTH, "little") + first)
        state = _REST.decode(first)
        projector = Projector(state)
        for data in frames:
            if end is not None:
                raise SnapshotError(f"{source}: a frame after the last one")
            chunk = _CHUNK.decode(data)
            if isinstance(chunk, End):
                end = chunk
                continue
            digest.update(len(data).to_bytes(_LENGTH, "little") + data)
            if isinstance(chunk, Tables):
                tables = chunk
            elif isinstance(chunk, Aggregates):
                aggregates = chunk
            else:
                _add(state, projector, chunk)
    except (msgspec.MsgspecError, StopIteration) as exc:
        raise SnapshotError(f"{source}: the state does not decode ({exc or 'no state'})") from None
    if end is None:
        raise SnapshotError(f"{source}: cut short (no closing frame)")
    if end.blake3 != digest.hexdigest():
        raise SnapshotError(f"{source}: its seal does not verify with this user's snapshot key ({key_path() or 'none'}): "
                            "written on another machine or by another user, or damaged since")
    if state.head_seq != head.seq or state.head_hash != head.head_hash:
        raise SnapshotError(f"{source}: its state is at seq {state.head_seq}, its header says {head.seq}")
    if tables is not None:
        for name, mapping in _open_tables(tables, head.seq, directory, source).items():
            setattr(state, name, mapping)
    kept = aggregates.data if aggregates is not None and aggregates.version == aggregates_version() else None
    return Loaded(state, kept)


def _open_tables(tables: Tables, seq: int, directory: Path | None, source: str) -> dict[str, Any]:
    """The maps over a snapshot's tables beside it, once their names say they are this snapshot's:
    its own tables, or an earlier snapshot's and the delta from them to this one."""
    base, delta = tables.base, tables.delta
    named = table_file_seqs(base.file)
    base_seq = named[0] if named is not None and base.file == tables_name(named[0]) else -1
    fits = base_seq == seq if delta is None else (0 < base_seq < seq and delta.file == delta_name(seq, base_seq))
    for part in (base,) if delta is None else (base, delta):
        if directory is None or os.sep in part.file or not fits:
            raise SnapshotError(f"{source}: its tables ({part.file}) are not beside it")
        if not (directory / part.file).is_file():
            raise SnapshotError(f"{source}: its tables {directory / part.file} are missing")
    assert directory is not None
    path = str(directory / base.file)
    extra = None if delta is None else (str(directory / delta.file), delta, sealer(delta.nonce), str(directory / delta.file))
    try:
        return spill.over_tables(path, dict(PER_RUN), base, sealer(base.nonce), path, extra)
    except spill.TableDamaged as exc:
        raise SnapshotError(str(exc)) from None


def _add(state: LedgerState, projector: Projector, chunk: Runs | Passes | Grades | Rubric | Reviews | Attachments) -> None:
    if isinstance(chunk, Runs):
        state.runs.update((rid, projector.shared_run(entry)) for rid, entry in chunk.items)
    elif isinstance(chunk, Passes):
        state.later_passes.update((rid, projector.shared_pass(entry)) for rid, entry in chunk.items)
    elif isinstance(chunk, Grades):
        state.grades.update((rid, projector.shared_grades(per_run)) for rid, per_run in chunk.items)
    elif isinstance(chunk, Rubric):
        state.rubric.update(chunk.items)
    elif isinstance(chunk, Reviews):
        state.reviews.update(chunk.items)
    else:
        state.attachments.update(chunk.items)
    projector.grow()  # a large state goes to disk as it is read (`spill.py`), as a fold's would


def anchor_problem(head: Header, found_seq: int | None, found_hash: str | None, source: str) -> str | None:
    """Why the ledger does not confirm a snapshot: its event at the snapshot's seq must have the
    snapshot's hash (None: it does)."""
    if found_seq is None:
        return f"{source}: the ledger has no event at seq {head.seq} (shorter, or another ledger)"
    if found_hash != head.head_hash:
        return (f"{source}: the ledger's event at seq {head.seq} hashes to {(found_hash or '')[:16]}…, "
                f"the snapshot was taken at {head.head_hash[:16]}… (the ledger was rewritten, or is another)")
    return None

