"""The fold's maps keyed by run id (runs, grades, rubric scores, ...) on disk once a ledger is large.

Why: the fold holds every run and grade decoded, about 1.9 KB an event, so a state of 10^7 events
needs about 18 GiB, nine times what a full rebuild may take (issue 30). Past `spill_at()` entries
the `Projector` moves those maps (`fold.PER_RUN`) into one SQLite file of its own (rows as MessagePack,
keyed by run id) and keeps only the short lists and indexes in memory; every view reads them
through the same mapping interface, a row decoded when it is asked for. Below that size nothing
changes: the maps stay plain dicts, as fast as before.

The file is a scratch file, not a store: it lives in a private directory under the system's
temporary directory (`$TMPDIR`), is written without a journal or syncs (a crash loses nothing
the ledger does not hold), and is removed when the state is dropped or the process exits; one a
killed process left is removed by the next process that spills (`scratch.sweep`: this user's,
made in this pid namespace, whose maker is gone). At 10^7 events it takes about
as much disk as the ledger does.

The mapping keeps a dict's semantics where views depend on them: iteration in insertion order
(SQLite's rowid; an overwrite keeps its row, as a dict keeps its key's place), `len`, `in`,
`get`. Entries are written in batches (`_FLUSH`), so a read first looks at the batch not yet
written. Values are returned decoded afresh on every read: they are frozen structs, and nothing
but the `Projector` writes.
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import shutil
import sqlite3
import weakref
from collections.abc import ItemsView, Iterator, MutableMapping, ValuesView
from typing import Any, Generic, NamedTuple, TypeVar

import msgspec
from blake3 import blake3

from cbledger import scratch
from cbledger.errors import UserError

#: how many runs (or graded runs) a state holds before it moves them to disk; `$CBLEDGER_FOLD_SPILL`
#: sets another (the tests set a handful, so the disk path runs on every fold rule)
SPILL_AT = 150_000
ENV = "CBLEDGER_FOLD_SPILL"
#: entries held in memory before they are written in one statement
_FLUSH = 5_000
#: keys a map remembers as changed since its rows were last copied whole into a snapshot's tables;
#: past it the next snapshot copies every row again (`delta_base`)
DELTA_KEYS = 250_000
#: changes a delta may hold whatever the size of its base (past a quarter of the base, and this,
#: the rows are copied whole again)
DELTA_FLOOR = 5_000
_V = TypeVar("_V")


def spill_at() -> int:
    named = os.environ.get(ENV, "")
    return int(named) if named.isdigit() and int(named) > 0 else SPILL_AT


class SpillFile:
    """One scratch SQLite file, shared by a state's spilled maps; gone when they are all dropped."""

    def __init__(self) -> None:
        # on disk, never in memory (`/dev/shm`): at 10^7 events it holds gigabytes
        self.directory = str(scratch.mkdtemp("cbledger-fold-", on_disk=True))
        self.conn = sqlite3.connect(pathlib.Path(self.directory, "state.sqlite").as_uri(), isolation_level=None,
                                    check_same_thread=False, uri=True)  # a URI, so a snapshot's tables attach read-only
        for pragma in ("journal_mode=OFF", "synchronous=OFF", "temp_store=MEMORY", "cache_size=-32768"):
            self.conn.execute(f"PRAGMA {pragma}")
        #: the snapshot tables this state's rows were last copied into whole, or read from: a later
        #: snapshot need only write what changed since (`delta_base`)
        self.copied: TableFile | None = None
        weakref.finalize(self, _remove, self.conn, self.directory)


def _remove(conn: sqlite3.Connection, directory: str) -> None:
    conn.close()
    shutil.rmtree(directory, ignore_errors=True)


class TableDamaged(UserError):
    """A row of a snapshot's table that does not verify: changed, moved or dropped since this
    user's cbledger wrote it, or written with another key."""


class Sealer:
    """The keyed hash each row of a snapshot's table carries: of the snapshot's own nonce, its
    table, its position, its key and its bytes, so a row changed, moved to another position, put
    in another table or taken from another snapshot's tables (an older grade of the same run at
    the same position) is refused when it is read (`projections/snapshot.py` seals the nonce and
    how many rows each table holds)."""

    def __init__(self, key: bytes, nonce: str) -> None:
        self._key = key
        self._prefix = f"{nonce}\0"

    def seal(self, table: str, n: int, k: str, v: bytes) -> bytes:
        if not isinstance(v, bytes) or not isinstance(k, str):  # a row rewritten with another type
            return b""
        h = blake3(f"{self._prefix}{table}\0{n}\0{k}\0".encode(), key=self._key)
        h.update(v)
        return h.digest(length=16)


class TableFile(msgspec.Struct, frozen=True):
    """A snapshot's tables file as the snapshot names it: its name beside the snapshot, how many
    rows each table holds, and the nonce its rows are sealed with."""

    file: str
    rows: dict[str, int]
    nonce: str


class Base(NamedTuple):
    """A snapshot's table a map reads beneath its own writes: attached read-only as `base`, its
    rows numbered 1..rows in the order they were added, each sealed (`Sealer`)."""

    rows: int
    sealer: Sealer
    source: str


class SpilledMap(MutableMapping[str, _V], Generic[_V]):
    """A dict of str to one struct type, kept in a table of a `SpillFile`, over a snapshot's table
    of the same name (`base`) when the state was read from one, and over the rows that snapshot
    changed since its base was written (`delta`: a key there stands for the base's)."""

    def __init__(self, file: SpillFile, table: str, type_: Any, items: Any = (), base: Base | None = None,
                 delta: Base | None = None) -> None:
        self._file = file  # held, so the file outlives every map reading it
        self._conn = file.conn
        self._table = table
        self._base = base
        self._delta = delta
        #: keys written since the rows were last copied whole (`SpillFile.copied`), in the order
        #: first written; None: not known (never copied, or too many), so the next copy is whole
        self._dirty: dict[str, None] | None = {} if base is not None else None
        #: the delta's rows are changes since `SpillFile.copied` (true until another whole copy)
        self._delta_current = delta is not None
        self._delta_new: int | None = None  # the delta's keys the base does not hold, counted once
        self._conn.execute(f"CREATE TABLE {table} (k TEXT PRIMARY KEY, v BLOB NOT NULL)")
        self._encode = msgspec.msgpack.Encoder().encode
        self._decode = msgspec.msgpack.Decoder(type_).decode
        self._pending: dict[str, _V] = {}
        self._len: int | None = None if base is not None else 0  # over a snapshot's rows: counted when asked
        self._get_sql = f"SELECT v FROM {table} WHERE k = ?"
        self._put_sql = f"INSERT INTO {table} (k, v) VALUES (?, ?) ON CONFLICT (k) DO UPDATE SET v = excluded.v"
        for key, value in items:
            self[key] = value

    def flush(self) -> None:
        if self._pending:
            encode = self._encode
            self._conn.execute("BEGIN")  # one transaction: without it each row is a commit of its own (4x slower)
            try:
                self._conn.executemany(self._put_sql, [(k, encode(v)) for k, v in self._pending.items()])
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")
            self._pending.clear()

    def _stored(self, key: str) -> bytes | None:
        row = self._conn.execute(self._get_sql, (key,)).fetchone()
        if row is not None:
            return row[0]  # type: ignore[no-any-return]
        for layer, schema in ((self._delta, "delta"), (self._base, "base")):
            if layer is None:
                continue
            with self._damage(layer):
                row = self._conn.execute(f"SELECT n, v, m FROM {schema}.{self._table} WHERE k = ?", (key,)).fetchone()
            if row is not None:
                return self._verified(row[0], key, row[1], row[2], layer)
        return None

    @contextlib.contextmanager
    def _damage(self, layer: Base | None = None) -> Iterator[None]:
        """A snapshot's table SQLite cannot read (truncated, overwritten, a text where bytes were)
        is damage to refuse, said as such, not a traceback."""
        try:
            yield
        except sqlite3.DatabaseError as exc:
            layer = layer or self._base
            source = layer.source if layer is not None else "the fold's scratch file"
            raise TableDamaged(f"{source}: {self._table} cannot be read ({exc}); remove the snapshot and fold again") from None

    def _verified(self, n: int, k: str, v: bytes, m: bytes, layer: Base | None = None) -> bytes:
        base = layer or self._base
        assert base is not None
        if not isinstance(n, int) or not 1 <= n <= base.rows or m != base.sealer.seal(self._table, n, k, v) or not m:
            raise TableDamaged(f"{base.source}: row {n} of {self._table} ({k}) does not verify with this user's snapshot "
                               "key: changed since it was written, or written elsewhere; remove the snapshot and fold again")
        return v

    def __getitem__(self, key: str) -> _V:
        value = self._pending.get(key)
        if value is not None:
            return value
        data = self._stored(key)
        if data is None:
            raise KeyError(key)
        return self._decode(data)  # type: ignore[no-any-return]

    def get(self, key: str, default: Any = None) -> Any:
        try:
            return self[key]
        except KeyError:
            return default

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and (key in self._pending or self._stored(key) is not None)

    def __setitem__(self, key: str, value: _V) -> None:
        self._len = None  # counted when asked: a lookup per write would cost what the write does
        self._pending[key] = value
        dirty = self._dirty
        if dirty is not None:
            dirty[key] = None
            if len(dirty) > DELTA_KEYS:
                self._dirty = None
        if len(self._pending) >= _FLUSH:
            self.flush()

    def __delitem__(self, key: str) -> None:
        if self._base is not None:
            raise NotImplementedError("a map over a snapshot's table is only ever added to")
        self._dirty = None  # a delta says what changed, not what went: the next copy is whole
        self.flush()
        if self._conn.execute(f"DELETE FROM {self._table} WHERE k = ?", (key,)).rowcount == 0:
            raise KeyError(key)
        self._len = None

    def __len__(self) -> int:
        if self._len is None:
            self.flush()
            t = self._table
            if self._base is None:
                self._len = self._conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
            else:
                self._len = self._base.rows + self._count_delta_new() + self._conn.execute(
                    f"SELECT count(*) FROM main.{t} o WHERE NOT EXISTS (SELECT 1 FROM base.{t} b WHERE b.k = o.k)"
                    + (f" AND NOT EXISTS (SELECT 1 FROM delta.{t} d WHERE d.k = o.k)" if self._delta else "")
                ).fetchone()[0]
        return self._len

    def _count_delta_new(self) -> int:
        if self._delta is None:
            return 0
        if self._delta_new is None:
            t = self._table
            with self._damage(self._delta):
                self._delta_new = self._conn.execute(
                    f"SELECT count(*) FROM delta.{t} d WHERE NOT EXISTS (SELECT 1 FROM base.{t} b WHERE b.k = d.k)"
                ).fetchone()[0]
        return self._delta_new

    def __iter__(self) -> Iterator[str]:
        return (key for key, _ in self.raw())

    def _rows(self) -> Iterator[tuple[str, _V]]:
        decode = self._decode
        return ((key, decode(data)) for key, data in self.raw())

    def raw(self) -> Iterator[tuple[str, bytes]]:
        """(key, encoded entry) in the order the keys were first added: a snapshot's base rows
        first (each checked, and every one there; a key its delta or this map wrote since reads
        as written there), then the delta's new keys, then what was added since."""
        self.flush()
        t = self._table
        base, delta = self._base, self._delta
        if base is None:
            yield from self._conn.execute(f"SELECT k, v FROM {t} ORDER BY rowid")
            return
        if delta is None:
            rows = self._conn.execute(f"SELECT b.n, b.k, b.v, b.m, NULL, NULL, NULL, o.v FROM base.{t} b "
                                      f"LEFT JOIN main.{t} o ON o.k = b.k ORDER BY b.n")
        else:
            rows = self._conn.execute(f"SELECT b.n, b.k, b.v, b.m, d.n, d.v, d.m, o.v FROM base.{t} b "
                                      f"LEFT JOIN delta.{t} d ON d.k = b.k LEFT JOIN main.{t} o ON o.k = b.k ORDER BY b.n")
        yield from self._in_order(rows, base)
        if delta is not None:
            rows = self._conn.execute(f"SELECT d.n, d.k, d.v, d.m, NULL, NULL, NULL, o.v FROM delta.{t} d "
                                      f"LEFT JOIN main.{t} o ON o.k = d.k "
                                      f"WHERE NOT EXISTS (SELECT 1 FROM base.{t} b WHERE b.k = d.k) ORDER BY d.n")
            yield from self._layer_rows(rows, delta)
        yield from self._conn.execute(
            f"SELECT k, v FROM main.{t} o WHERE NOT EXISTS (SELECT 1 FROM base.{t} b WHERE b.k = o.k)"
            + (f" AND NOT EXISTS (SELECT 1 FROM delta.{t} d WHERE d.k = o.k)" if delta else "") + " ORDER BY rowid"
        )

    def _in_order(self, rows: Any, base: Base) -> Iterator[tuple[str, bytes]]:
        """A base table's rows read in order, each there (a gap is a row dropped), each as the
        delta or this map wrote it since, else checked against its seal."""
        expected = 0
        for n, k, v, m, dn, dv, dm, over in self._layer_rows(rows, None):
            expected += 1
            if n != expected:
                self._verified(expected, k, b"", b"", base)  # a row dropped before this one: raises
            if over is not None:
                yield k, over
            elif dn is not None:
                yield k, self._verified(dn, k, dv, dm, self._delta)
            else:
                yield k, self._verified(n, k, v, m, base)
        if expected != base.rows:
            self._verified(expected + 1, "", b"", b"", base)  # rows dropped at the end: raises

    def _layer_rows(self, rows: Any, layer: Base | None) -> Iterator[Any]:
        """`rows` read with SQLite's errors as damage; with `layer`, as (key, bytes) checked
        against its seal (a row of the delta: its completeness was checked on load)."""
        while True:
            with self._damage(layer):
                row = next(rows, None)
            if row is None:
                return
            if layer is None:
                yield row
            else:
                n, k, v, m, _, _, _, over = row
                yield k, (self._verified(n, k, v, m, layer) if over is None else over)

    def changed_raw(self) -> Iterator[tuple[str, bytes]]:
        """(key, encoded entry) of every key changed since the rows were last copied whole
        (`SpillFile.copied`): the delta's, if it counts from there, in its order, then the keys
        written since, in the order first written (so a new key keeps its place after the
        base's). Only when `delta_base` allows a delta."""
        assert self._dirty is not None
        self.flush()
        t = self._table
        delta = self._delta if self._delta_current else None
        if delta is not None:
            rows = self._conn.execute(f"SELECT d.n, d.k, d.v, d.m, NULL, NULL, NULL, o.v FROM delta.{t} d "
                                      f"LEFT JOIN main.{t} o ON o.k = d.k ORDER BY d.n")
            yield from self._layer_rows(rows, delta)
        for key in self._dirty:
            if delta is not None and self._conn.execute(f"SELECT 1 FROM delta.{t} WHERE k = ?", (key,)).fetchone():
                continue
            row = self._conn.execute(self._get_sql, (key,)).fetchone()
            yield key, row[0]

    def changed(self) -> int | None:
        """At most how many rows `changed_raw` gives; None when not known (the next copy is whole)."""
        if self._dirty is None:
            return None
        return len(self._dirty) + (self._delta.rows if self._delta is not None and self._delta_current else 0)

    def items(self) -> ItemsView[str, _V]:
        return _Items(self)

    def values(self) -> ValuesView[_V]:
        return _Values(self)


class _Items(ItemsView[str, _V]):
    """One read of the table, not a lookup per key."""

    _mapping: SpilledMap[_V]

    def __iter__(self) -> Iterator[tuple[str, _V]]:
        return self._mapping._rows()


class _Values(ValuesView[_V]):
    _mapping: SpilledMap[_V]

    def __iter__(self) -> Iterator[_V]:
        return (value for _, value in self._mapping._rows())


def copy_tables(maps: dict[str, SpilledMap[Any]], path: str, sealer: Sealer, *, delta: bool = False) -> dict[str, int]:
    """Writes `maps` into a new SQLite file at `path` as a snapshot's tables (rows numbered in
    order and sealed, `Base`); returns how many rows each holds. The caller puts it in place.
    `delta`: only the rows changed since the last whole copy (`changed_raw`, `delta_base`)."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode=OFF")
        conn.execute("PRAGMA synchronous=OFF")
        rows: dict[str, int] = {}
        conn.execute("BEGIN")
        for table, mapping in maps.items():
            conn.execute(f"CREATE TABLE {table} (n INTEGER PRIMARY KEY, k TEXT NOT NULL UNIQUE, v BLOB NOT NULL, "
                         "m BLOB NOT NULL)")
            n = 0
            batch = []
            for k, v in mapping.changed_raw() if delta else mapping.raw():
                n += 1
                batch.append((n, k, v, sealer.seal(table, n, k, v)))
                if len(batch) == _FLUSH:
                    conn.executemany(f"INSERT INTO {table} VALUES (?, ?, ?, ?)", batch)
                    batch = []
            conn.executemany(f"INSERT INTO {table} VALUES (?, ?, ?, ?)", batch)
            rows[table] = n
        conn.execute("COMMIT")
    finally:
        conn.close()
    with open(path, "rb+") as f:  # durable before the snapshot naming it is
        os.fsync(f.fileno())
    return rows


def delta_base(maps: dict[str, SpilledMap[Any]]) -> TableFile | None:
    """The tables a snapshot of `maps` can name as its base and write only a delta beside (what
    changed since they were copied): None when the next copy must be whole (never copied, a
    count lost, or the changes past a quarter of it)."""
    files = {id(m._file) for m in maps.values()}
    first = next(iter(maps.values()))
    copied = first._file.copied
    if copied is None or len(files) != 1:
        return None
    counts = [m.changed() for m in maps.values()]
    if any(c is None for c in counts):
        return None
    if sum(c or 0 for c in counts) > max(DELTA_FLOOR, sum(copied.rows.values()) // 4):
        return None
    return copied


def mark_copied(maps: dict[str, SpilledMap[Any]], copied: TableFile) -> None:
    """The rows of `maps` are in `copied` as they stand: later deltas count from there."""
    for m in maps.values():
        m._file.copied = copied
        m._dirty = {}
        m._delta_current = False


def over_tables(path: str, types: dict[str, Any], base: TableFile, sealer: Sealer, source: str,
                delta: tuple[str, TableFile, Sealer, str] | None = None) -> dict[str, SpilledMap[Any]]:
    """Maps reading a snapshot's tables at `path` (and the delta beside it: its path, names,
    sealer and source) beneath a scratch file of their own. Refused (TableDamaged) when a table
    is missing, does not end at the row the snapshot sealed or its last row is not this
    snapshot's (another process's tables of the same seq), or a delta's row does not verify."""
    file = SpillFile()
    layers = [("base", path, source)] + ([("delta", delta[0], delta[3])] if delta else [])
    for schema, where, named in layers:
        try:  # read-only: nothing of it is ever written, nor a journal beside it rolled back into it
            file.conn.execute(f"ATTACH DATABASE ? AS {schema}", (pathlib.Path(where).absolute().as_uri() + "?mode=ro",))
        except sqlite3.Error as exc:
            raise TableDamaged(f"{named}: cannot be opened ({exc})") from None
    maps: dict[str, SpilledMap[Any]] = {}
    for table, type_ in types.items():
        problem = _base_problem(file.conn, "base", table, base.rows.get(table, -1), sealer)
        if problem is not None:
            raise TableDamaged(f"{source}: {problem}")
        if delta is not None:
            _check_delta(file.conn, table, delta[1].rows.get(table, -1), delta[2], delta[3])
        maps[table] = SpilledMap(file, table, type_, base=Base(base.rows[table], sealer, source),
                                 delta=None if delta is None else Base(delta[1].rows[table], delta[2], delta[3]))
    file.copied = base
    return maps


def _base_problem(conn: sqlite3.Connection, schema: str, table: str, rows: int, sealer: Sealer) -> str | None:
    """Why a base table is not the one sealed as `rows` rows with `sealer`: it ends elsewhere, or
    its last row is not sealed with this nonce (two lookups, whatever its size: every full pass
    checks each row in turn)."""
    try:
        row = conn.execute(f"SELECT n, k, v, m FROM {schema}.{table} ORDER BY n DESC LIMIT 1").fetchone()
    except sqlite3.Error as exc:
        return f"{table} cannot be read ({exc})"
    last = row[0] if row is not None else 0
    if last != rows:
        return f"{table} ends at row {last}, the snapshot sealed {rows}"
    if row is not None and row[3] != sealer.seal(table, *row[:3]):
        return f"row {last} of {table} does not verify with this snapshot (tables of another process put in place?)"
    return None


def _check_delta(conn: sqlite3.Connection, table: str, rows: int, sealer: Sealer, source: str) -> None:
    """Every row of a delta checked on load: one dropped or swapped for another snapshot's would
    let the base's older value of its run stand, with nothing of the delta read to say so. A
    delta holds what changed since its base (at most a quarter of it), so this is its size."""
    n = 0
    try:
        for n_, k, v, m in conn.execute(f"SELECT n, k, v, m FROM delta.{table} ORDER BY n"):
            n += 1
            if n_ != n or m != sealer.seal(table, n, k, v) or not m:
                raise TableDamaged(f"{source}: row {n} of {table} ({k}) does not verify with this user's snapshot key: "
                                   "changed since it was written, or written elsewhere; remove the snapshot and fold again")
    except sqlite3.Error as exc:
        raise TableDamaged(f"{source}: {table} cannot be read ({exc})") from None
    if n != rows:
        raise TableDamaged(f"{source}: {table} ends at row {n}, the snapshot sealed {rows}")


def base_holds(path: str, copied: TableFile, sealer: Sealer) -> bool:
    """Whether the tables file at `path` is still `copied` (its tables end where it sealed them,
    each last row with its nonce): another process folding to the same seq puts its own in place."""
    try:
        conn = sqlite3.connect(pathlib.Path(path).absolute().as_uri() + "?mode=ro", uri=True)
    except sqlite3.Error:
        return False
    try:
        return all(_base_problem(conn, "main", table, rows, sealer) is None for table, rows in copied.rows.items())
    finally:
        conn.close()


def file_of(mapping: object) -> SpillFile | None:
    """The scratch file a spilled map is kept in (None: a map in memory)."""
    return mapping._file if isinstance(mapping, SpilledMap) else None


def enc_hook(obj: object) -> object:
    """For `msgspec` encoders of a whole state: a spilled map encodes as the dict it stands for."""
    if isinstance(obj, SpilledMap):
        return dict(obj.items())
    raise NotImplementedError(f"cannot encode {type(obj).__name__}")
