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


class Base(NamedTuple):
    """A snapshot's table a map reads beneath its own writes: attached read-only as `base`, its
    rows numbered 1..rows in the order they were added, each sealed (`Sealer`)."""

    rows: int
    sealer: Sealer
    source: str


class SpilledMap(MutableMapping[str, _V], Generic[_V]):
    """A dict of str to one struct type, kept in a table of a `SpillFile`, over a snapshot's table
    of the same name (`base`) when the state was read from one."""

    def __init__(self, file: SpillFile, table: str, type_: Any, items: Any = (), base: Base | None = None) -> None:
        self._file = file  # held, so the file outlives every map reading it
        self._conn = file.conn
        self._table = table
        self._base = base
        self._conn.execute(f"CREATE TABLE {table} (k TEXT PRIMARY KEY, v BLOB NOT NULL)")
        self._encode = msgspec.msgpack.Encoder().encode
        self._decode = msgspec.msgpack.Decoder(type_).decode
        self._pending: dict[str, _V] = {}
        self._len: int | None = 0
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
        if self._base is None:
            return None
        with self._damage():
            row = self._conn.execute(f"SELECT n, v, m FROM base.{self._table} WHERE k = ?", (key,)).fetchone()
        if row is None:
            return None
        return self._verified(row[0], key, row[1], row[2])

    @contextlib.contextmanager
    def _damage(self) -> Iterator[None]:
        """A snapshot's table SQLite cannot read (truncated, overwritten, a text where bytes were)
        is damage to refuse, said as such, not a traceback."""
        try:
            yield
        except sqlite3.DatabaseError as exc:
            source = self._base.source if self._base is not None else "the fold's scratch file"
            raise TableDamaged(f"{source}: {self._table} cannot be read ({exc}); remove the snapshot and fold again") from None

    def _verified(self, n: int, k: str, v: bytes, m: bytes) -> bytes:
        base = self._base
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
        if len(self._pending) >= _FLUSH:
            self.flush()

    def __delitem__(self, key: str) -> None:
        if self._base is not None:
            raise NotImplementedError("a map over a snapshot's table is only ever added to")
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
                self._len = self._base.rows + self._conn.execute(
                    f"SELECT count(*) FROM main.{t} o WHERE NOT EXISTS (SELECT 1 FROM base.{t} b WHERE b.k = o.k)"
                ).fetchone()[0]
        return self._len

    def __iter__(self) -> Iterator[str]:
        return (key for key, _ in self.raw())

    def _rows(self) -> Iterator[tuple[str, _V]]:
        decode = self._decode
        return ((key, decode(data)) for key, data in self.raw())

    def raw(self) -> Iterator[tuple[str, bytes]]:
        """(key, encoded entry) in the order the keys were first added: a snapshot's rows first
        (each checked, and every one there), then what was added since."""
        self.flush()
        t = self._table
        if self._base is None:
            yield from self._conn.execute(f"SELECT k, v FROM {t} ORDER BY rowid")
            return
        expected = 0
        rows = self._conn.execute(
            f"SELECT b.n, b.k, b.v, b.m, o.v FROM base.{t} b LEFT JOIN main.{t} o ON o.k = b.k ORDER BY b.n"
        )
        while True:
            with self._damage():
                row = next(rows, None)
            if row is None:
                break
            n, k, v, m, over = row
            expected += 1
            if n != expected:
                self._verified(expected, k, b"", b"")  # a row dropped before this one: raises
            yield k, (self._verified(n, k, v, m) if over is None else over)
        if expected != self._base.rows:
            self._verified(expected + 1, "", b"", b"")  # rows dropped at the end: raises
        yield from self._conn.execute(
            f"SELECT k, v FROM main.{t} o WHERE NOT EXISTS (SELECT 1 FROM base.{t} b WHERE b.k = o.k) ORDER BY rowid"
        )

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


def copy_tables(maps: dict[str, SpilledMap[Any]], path: str, sealer: Sealer) -> dict[str, int]:
    """Writes `maps` into a new SQLite file at `path` as a snapshot's tables (rows numbered in
    order and sealed, `Base`); returns how many rows each holds. The caller puts it in place."""
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
            for k, v in mapping.raw():
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


def over_tables(path: str, types: dict[str, Any], rows: dict[str, int], sealer: Sealer,
                source: str) -> dict[str, SpilledMap[Any]]:
    """Maps reading a snapshot's tables at `path` beneath a scratch file of their own. Refused
    (TableDamaged) when a table is missing or does not end at the row the snapshot sealed."""
    file = SpillFile()
    try:  # read-only: nothing of it is ever written, nor a journal beside it rolled back into it
        file.conn.execute("ATTACH DATABASE ? AS base", (pathlib.Path(path).absolute().as_uri() + "?mode=ro",))
    except sqlite3.Error as exc:
        raise TableDamaged(f"{source}: cannot be opened ({exc})") from None
    maps: dict[str, SpilledMap[Any]] = {}
    for table, type_ in types.items():
        try:
            last = file.conn.execute(f"SELECT max(n) FROM base.{table}").fetchone()[0] or 0
        except sqlite3.Error as exc:
            raise TableDamaged(f"{source}: {table} cannot be read ({exc})") from None
        if last != rows.get(table, -1):
            raise TableDamaged(f"{source}: {table} ends at row {last}, the snapshot sealed {rows.get(table)}")
        maps[table] = SpilledMap(file, table, type_, base=Base(rows[table], sealer, source))
    return maps


def file_of(mapping: object) -> SpillFile | None:
    """The scratch file a spilled map is kept in (None: a map in memory)."""
    return mapping._file if isinstance(mapping, SpilledMap) else None


def enc_hook(obj: object) -> object:
    """For `msgspec` encoders of a whole state: a spilled map encodes as the dict it stands for."""
    if isinstance(obj, SpilledMap):
        return dict(obj.items())
    raise NotImplementedError(f"cannot encode {type(obj).__name__}")
