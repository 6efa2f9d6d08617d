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

import os
import shutil
import sqlite3
import weakref
from collections.abc import ItemsView, Iterator, MutableMapping, ValuesView
from typing import Any, Generic, TypeVar

import msgspec

from cbledger import scratch

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
        self.conn = sqlite3.connect(os.path.join(self.directory, "state.sqlite"), isolation_level=None,
                                    check_same_thread=False)
        for pragma in ("journal_mode=OFF", "synchronous=OFF", "temp_store=MEMORY", "cache_size=-32768"):
            self.conn.execute(f"PRAGMA {pragma}")
        weakref.finalize(self, _remove, self.conn, self.directory)


def _remove(conn: sqlite3.Connection, directory: str) -> None:
    conn.close()
    shutil.rmtree(directory, ignore_errors=True)


class SpilledMap(MutableMapping[str, _V], Generic[_V]):
    """A dict of str to one struct type, kept in a table of a `SpillFile`."""

    def __init__(self, file: SpillFile, table: str, type_: Any, items: Any = ()) -> None:
        self._file = file  # held, so the file outlives every map reading it
        self._conn = file.conn
        self._table = table
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
        return None if row is None else row[0]

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
        self.flush()
        if self._conn.execute(f"DELETE FROM {self._table} WHERE k = ?", (key,)).rowcount == 0:
            raise KeyError(key)
        self._len = None

    def __len__(self) -> int:
        if self._len is None:
            self.flush()
            self._len = self._conn.execute(f"SELECT count(*) FROM {self._table}").fetchone()[0]
        return self._len

    def __iter__(self) -> Iterator[str]:
        self.flush()
        for (key,) in self._conn.execute(f"SELECT k FROM {self._table} ORDER BY rowid"):
            yield key

    def _rows(self) -> Iterator[tuple[str, _V]]:
        self.flush()
        decode = self._decode
        for key, data in self._conn.execute(f"SELECT k, v FROM {self._table} ORDER BY rowid"):
            yield key, decode(data)

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


def file_of(mapping: object) -> SpillFile | None:
    """The scratch file a spilled map is kept in (None: a map in memory)."""
    return mapping._file if isinstance(mapping, SpilledMap) else None


def enc_hook(obj: object) -> object:
    """For `msgspec` encoders of a whole state: a spilled map encodes as the dict it stands for."""
    if isinstance(obj, SpilledMap):
        return dict(obj.items())
    raise NotImplementedError(f"cannot encode {type(obj).__name__}")
