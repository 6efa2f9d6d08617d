"""The packed record store: every result record in one SQLite file, `results/records.sqlite`.

Why it exists: the file layout puts each record in a file of its own, so 10^7 events mean
millions of small files (an inode each, a directory entry each, a slow `git status`). The
packed store keeps one row per record, `records(path TEXT PRIMARY KEY, body BLOB)`, where `path`
is the standard record path relative to `results/` and `body` is exactly the bytes the file at
that path would hold. A record therefore stays addressable by its standard path, an export
writes the standard tree back out byte for byte, and every check compares the same bytes.

A workspace keeps its records packed when this file exists (`cbledger project records --layout
packed` makes it); the writers (`writers.sync_records`, `sync_run_records`) then write rows,
each batch in one transaction, instead of files. SQLite's rollback journal makes a batch atomic:
after a crash the store holds every row of it or none.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import sqlite_utils

from cbledger.errors import UserError
from cbledger.ledger.durable import sqlite_naming
from cbledger.workspace import RECORDS_STORE_NAME, Workspace

TABLE = "records"
#: how long a writer waits for another writer's transaction (`cbledger run` beside `watch`)
BUSY_TIMEOUT_S = 30.0
#: a body read as its bytes even when a hand edit stored it as text (`replace()` on a blob gives text)
_BODY = "CAST(body AS BLOB)"


def store_path(results: Path) -> Path:
    """The packed store of the results directory `results`."""
    return results / RECORDS_STORE_NAME


def is_packed(results: Path) -> bool:
    """Does this results directory keep its records packed? Its store's presence says so."""
    return store_path(results).is_file()


def record_shown(workspace: Workspace, name: str) -> str:
    """A record (`results/<date>/…`) as a reader finds it: a packed store holds it by that name
    (`project records --show` reads it), a file store as the file `Workspace.shown` names."""
    return name if is_packed(workspace.results) else workspace.shown(name)


class PackedRecords:
    """An open packed store. `create` makes the file and its table when missing; otherwise a
    missing file is `FileNotFoundError`. A file that is not a store is refused (`UserError`,
    naming it) before anything is read or written."""

    def __init__(self, path: Path, *, create: bool = False) -> None:
        self.path = path
        if not create and not path.is_file():
            raise FileNotFoundError(path)
        try:
            self.conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
        except sqlite3.Error as exc:  # a directory that cannot be written (read-only, not ours)
            raise UserError(f"{path}: cannot be opened ({exc}); nothing written") from None
        try:
            if create:
                db = sqlite_utils.Database(self.conn)
                db.table(TABLE).create({"path": str, "body": bytes}, pk="path", not_null={"body"}, if_not_exists=True)
            # a file that is not a store fails here, before any caller relies on it
            self.conn.execute(f"SELECT path, body FROM {TABLE} LIMIT 0")
        except sqlite3.Error as exc:
            self.conn.close()
            if isinstance(exc, sqlite3.OperationalError) and "readonly" in str(exc):
                raise UserError(f"{path}: cannot be written ({exc}); nothing written") from None
            raise UserError(f"{path}: not a packed record store ({exc})") from None

    def __enter__(self) -> PackedRecords:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Closes the store; a batch not committed (a write that failed part-way) is rolled back."""
        if self.conn.in_transaction:
            self.conn.execute("ROLLBACK")
        self.conn.close()

    def get(self, relpath: str) -> bytes | None:
        row = self.conn.execute(f"SELECT {_BODY} FROM {TABLE} WHERE path = ?", (relpath,)).fetchone()
        return None if row is None else bytes(row[0])

    def paths(self) -> set[str]:
        return {row[0] for row in self.conn.execute(f"SELECT path FROM {TABLE}")}

    def items(self) -> Iterator[tuple[str, bytes]]:
        """Every (path, body), in path order, one row at a time."""
        for path, body in self.conn.execute(f"SELECT path, {_BODY} FROM {TABLE} ORDER BY path"):
            yield path, bytes(body)

    def write(self, relpath: str, body: bytes) -> None:
        """Writes a row (new, or replacing the row at its path) inside the batch's transaction,
        opened by the first write: rows go to SQLite as they come, so a rebuild of millions of
        records holds none of them in memory, and `commit` makes them all visible at once."""
        if not self.conn.in_transaction:
            try:
                self.conn.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError as exc:  # still locked after the busy timeout
                raise UserError(
                    f"{self.path}: another process has been writing the record store for over "
                    f"{BUSY_TIMEOUT_S:.0f} s ({exc}); nothing was written, run the command again when it is done"
                ) from None
        with sqlite_naming(self.path):  # a full disk: one line; `close` rolls the batch back
            self.conn.execute(f"INSERT OR REPLACE INTO {TABLE} (path, body) VALUES (?, ?)", (relpath, body))

    def commit(self) -> None:
        if self.conn.in_transaction:
            with sqlite_naming(self.path):
                self.conn.execute("COMMIT")
