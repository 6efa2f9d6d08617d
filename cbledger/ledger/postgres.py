"""The PostgreSQL recorder: the ledger as rows of one table, for drivers on several machines.

A ledger is a schema of its own in a database (`cbledger` unless the URL's `ledger=NAME` says
otherwise), holding one table, `events`: the seq, the event id, its type, the event bytes exactly
as the service encoded them (`bytea`, never a re-encoding or a `jsonb` that would reorder keys),
the hash and the prev. So an export is the JSON Lines file byte for byte, and verifies as one.

* An append is one statement, so one transaction and one round trip: a function in the ledger's
  schema takes a transaction-level advisory lock named for the ledger, reads the head (in a
  snapshot taken after the lock), compares it with the one the batch was built on, inserts the
  rows and notifies the ledger's channel; the commit makes it durable and visible all at once.
  A reader never sees part of a batch, and a batch cannot tear.
* The table keeps itself honest whoever writes to it: seq is the primary key, the id is unique,
  a trigger refuses a row whose seq or prev does not continue the last one, and another refuses
  every UPDATE, DELETE and TRUNCATE. The lock serves liveness; those and the expected head serve
  correctness.
* `exclusive()` takes no lock: the statement above is the whole critical section, so no lock is
  ever held across a round trip and a stalled writer (a stopped process, a lost network) holds
  none. A writer overtaken between reading the head and appending gets `HeadMoved` with the new
  head and rebuilds its batch on it (`cbledger.ledger.store`).
* Every session sets `lock_timeout`, `statement_timeout` and TCP keepalives, so a wait on the lock
  or a statement ends with a clear error instead of hanging, and a dead peer is noticed.
* A connection lost mid-use (a server restart, `AdminShutdown`, a dropped network) is opened again
  and the statement tried again, for up to `reconnect_within` seconds; an append that landed just
  before the loss is recognised by its head (appends are idempotent by event id besides), so a
  retried batch is never written twice. A server still gone after that is one `StoreUnavailable` line
  naming it. The first connection of a recorder is not retried: a command against a server that
  is down says so at once.
* A campaign's driver holds the campaign for as long as it runs it (`driving`), so a second
  driver of it on another machine is refused rather than paying for the same slots.
* Watchers LISTEN on the ledger's channel (`wait_for_append`) instead of polling a file, and
  LISTEN again on a new connection after losing one.

A connection belongs to the process that opened it: a forked child opens its own, and leaves the
parent's alone (closing an inherited connection would end the parent's session).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar
from urllib.parse import SplitResult, parse_qsl, urlencode, urlsplit, urlunsplit

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from cbledger import invocation
from cbledger.errors import UserError
from cbledger.ledger.chain import GENESIS
from cbledger.ledger.postgres_campaign import holding
from cbledger.ledger.recorder import (
    EMPTY,
    Head,
    HeadMoved,
    Lease,
    LedgerMissing,
    Recorder,
    StoredEvent,
    StoreUnavailable,
    check_continues,
)
from cbledger.workspace import DATABASE_SCHEMES

DEFAULT_LEDGER = "cbledger"
#: the URL query parameter that names the ledger (a schema) inside the database
LEDGER_PARAMETER = "ledger"
_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,47}$")
#: rows fetched per query when reading: a keyset page, so no cursor stays open between pages
PAGE = 5000

#: how long a recorder that lost its connection keeps trying to open a new one (a restart, a
#: failover) before the command fails naming the server
RECONNECT_SECONDS = 30.0
#: the longest wait for a lock (the append's advisory lock, a catalog lock while creating)
LOCK_TIMEOUT_MS = 30_000
#: the longest any one statement may run: a page of a read, one append
STATEMENT_TIMEOUT_MS = 120_000
#: TCP keepalives, unless the URL sets its own: a peer gone without a word is noticed in ~1 min
KEEPALIVES = {"keepalives": "1", "keepalives_idle": "30", "keepalives_interval": "10", "keepalives_count": "3"}

T = TypeVar("T")


# Connections inherited across a fork: kept referenced, so the child never finalizes them.
_INHERITED: list[psycopg.Connection] = []


def split_url(url: str) -> tuple[str, str, str]:
    """(the DSN to connect with, the ledger name, the URL as messages show it: no password)."""
    parts = urlsplit(url)
    if parts.scheme.lower() not in DATABASE_SCHEMES:
        raise UserError(f"{url}: not a PostgreSQL URL (postgresql://…)")
    query = parse_qsl(parts.query, keep_blank_values=True)
    names = [v for k, v in query if k == LEDGER_PARAMETER]
    rest = [(k, v) for k, v in query if k != LEDGER_PARAMETER]
    if len(set(names)) > 1:  # which one was meant is a guess, and a wrong one writes another ledger
        raise UserError(f"{_shown(parts, rest)}: {LEDGER_PARAMETER}= given {len(names)} times "
                        f"({', '.join(map(repr, names))}); name one ledger")
    name = names[-1] if names else DEFAULT_LEDGER
    if not _NAME.match(name):
        raise UserError(
            f"{_shown(parts, rest)}: ledger name {name!r} is not a plain lower-case identifier "
            "(letters, digits and _, starting with a letter or _, at most 48 characters)"
        )
    dsn = _unsplit(parts._replace(query=urlencode(rest)))
    shown = _shown(parts, [*rest, (LEDGER_PARAMETER, name)] if names else rest)
    return dsn, name, shown


def _shown(parts: SplitResult, query: list[tuple[str, str]]) -> str:
    netloc = parts.netloc
    if "@" in netloc:
        user, host = netloc.rsplit("@", 1)
        netloc = f"{user.split(':', 1)[0]}@{host}"
    kept = [(k, v) for k, v in query if k != "password"]
    return _unsplit(parts._replace(netloc=netloc, query=urlencode(kept)))


def _unsplit(parts: SplitResult) -> str:
    """`urlunsplit`, keeping the `//` of a URL with no host (`postgresql://` is libpq's "all
    defaults"; `postgresql:` is no URL at all)."""
    joined: str = urlunsplit(parts)
    if not parts.netloc and not joined.startswith(f"{parts.scheme}://"):
        joined = f"{parts.scheme}://" + joined[len(parts.scheme) + 1 :]
    return joined


def _lock_key(name: str) -> int:
    digest = hashlib.blake2b(f"cbledger-ledger:{name}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


class PostgresRecorder(Recorder):
    def __init__(
        self,
        url: str,
        *,
        connect_timeout: float = 10.0,
        reconnect_within: float = RECONNECT_SECONDS,
        lock_timeout_ms: int = LOCK_TIMEOUT_MS,
        statement_timeout_ms: int = STATEMENT_TIMEOUT_MS,
    ) -> None:
        self.url = url
        self.dsn, self.name, self._location = split_url(url)
        self.connect_timeout = connect_timeout
        self.reconnect_within = reconnect_within
        self.lock_timeout_ms = lock_timeout_ms
        self.statement_timeout_ms = statement_timeout_ms
        self._key = _lock_key(self.name)
        self._schema = sql.Identifier(self.name)
        self._table = sql.Identifier(self.name, "events")
        self.channel = f"cbledger_{self.name}"
        self._conn: psycopg.Connection | None = None
        self._pid = 0
        self._patient = 0  # appends in progress (`appending`), on any thread
        self._listener: psycopg.Connection | None = None

    @property
    def location(self) -> str:
        return self._location

    # ------------------------------------------------------------------ connections

    def _open(self) -> psycopg.Connection:
        """A new session with this recorder's timeouts; raises psycopg's OperationalError."""
        try:
            given = conninfo_to_dict(self.dsn)
        except psycopg.ProgrammingError as exc:
            raise UserError(f"{self.location}: not a usable PostgreSQL URL: {_first_line(exc)}") from None
        dsn = make_conninfo(self.dsn, **{k: v for k, v in KEEPALIVES.items() if k not in given})
        conn = psycopg.Connection.connect(dsn, autocommit=True, connect_timeout=max(1, round(self.connect_timeout)))
        try:
            conn.execute(
                "SELECT set_config('lock_timeout', %s, false), set_config('statement_timeout', %s, false)",
                (f"{self.lock_timeout_ms}ms", f"{self.statement_timeout_ms}ms"),
            )
        except BaseException:
            conn.close()
            raise
        return conn

    def _connect(self) -> psycopg.Connection:
        try:
            return self._open()
        except psycopg.OperationalError as exc:
            raise StoreUnavailable(f"{self.location}: cannot connect to PostgreSQL: {_first_line(exc)}") from None

    def _reconnect(self, lost: str, deadline: float) -> psycopg.Connection:
        """A new session after `lost`, tried until `deadline` with a growing pause."""
        pause = 0.1
        while True:
            try:
                return self._open()
            except psycopg.OperationalError as exc:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise StoreUnavailable(
                        f"{self.location}: lost the connection to PostgreSQL ({lost}) and could not "
                        f"connect again within {self.reconnect_within:g} s: {_first_line(exc)}"
                    ) from None
                time.sleep(min(pause, remaining))
                pause = min(pause * 2, 2.0)

    @property
    def conn(self) -> psycopg.Connection:
        if self._conn is not None and self._pid != os.getpid():
            _INHERITED.append(self._conn)  # the parent's; never ours to close
            if self._listener is not None:
                _INHERITED.append(self._listener)
                self._listener = None
            self._conn = None
        if self._conn is not None and self._conn.closed and self._patient:
            # a session lost and not replaced within an earlier window: an append waits its own
            # window for the server too, rather than failing at once (a 45 s outage under a
            # campaign then costs one run's wait, not the record of every run after it); a read
            # is told at once, so a watch stays responsive and a Ctrl-C's cleanup does not wait
            self._conn = self._reconnect("its session was closed", time.monotonic() + self.reconnect_within)
            self._pid = os.getpid()
        if self._conn is None or self._conn.closed:
            self._conn = self._connect()
            self._pid = os.getpid()
        return self._conn

    def _call(self, op: Callable[[psycopg.Connection, int], T]) -> T:
        """`op(connection, attempt)` on this recorder's session; on a lost session, again on a
        new one (attempt 1, 2, …) until `reconnect_within` has passed. A timeout on a live
        session is not retried: it is one clear error."""
        attempt = 0
        deadline: float | None = None
        while True:
            conn = self.conn
            try:
                return op(conn, attempt)
            except psycopg.OperationalError as exc:
                if not (conn.closed or conn.broken):
                    raise self._refused(exc) from None
                conn.close()
                if deadline is None:
                    deadline = time.monotonic() + self.reconnect_within
                self._conn = self._reconnect(_first_line(exc), deadline)
                self._pid = os.getpid()
                attempt += 1

    def _refused(self, exc: psycopg.OperationalError) -> UserError:
        if isinstance(exc, psycopg.errors.LockNotAvailable):
            return UserError(
                f"{self.location}: waited {self.lock_timeout_ms / 1000:g} s for the ledger's lock "
                "(lock_timeout); another writer holds it: nothing written"
            )
        if isinstance(exc, psycopg.errors.QueryCanceled):
            return UserError(
                f"{self.location}: a statement ran past statement_timeout "
                f"({self.statement_timeout_ms / 1000:g} s): {_first_line(exc)}"
            )
        return UserError(f"{self.location}: PostgreSQL: {_first_line(exc)}")

    @contextlib.contextmanager
    def appending(self) -> Iterator[None]:
        self._patient += 1
        try:
            yield
        finally:
            self._patient -= 1

    def driving(self, campaign: str) -> contextlib.AbstractContextManager[Lease]:
        """A session-level advisory lock on a session of its own (`ledger/postgres_campaign.py`)."""
        return holding(self, campaign, _lock_key(f"{self.name}:campaign:{campaign}"))

    def close(self) -> None:
        if self._pid == os.getpid():
            for c in (self._conn, self._listener):
                if c is not None:
                    c.close()
        self._conn = self._listener = None

    # ------------------------------------------------------------------ creation

    def exists(self) -> bool:
        try:
            row = self._call(
                lambda conn, _: conn.execute(sql.SQL("SELECT 1 FROM {} LIMIT 1").format(self._table)).fetchone()
            )
        except psycopg.errors.UndefinedTable:
            return False
        return row is not None

    def create(self) -> None:
        ident = {
            "schema": self._schema,
            "table": self._table,
            "guard": sql.Identifier(self.name, "continues_chain"),
            "refuse": sql.Identifier(self.name, "refuse_change"),
            "append": sql.Identifier(self.name, "append_batch"),
            "genesis": sql.Literal(GENESIS),
        }
        statements = [
            "CREATE SCHEMA IF NOT EXISTS {schema}",
            """CREATE TABLE IF NOT EXISTS {table} (
                 seq bigint PRIMARY KEY CHECK (seq > 0),
                 id text NOT NULL UNIQUE,
                 type text NOT NULL,
                 raw bytea NOT NULL,
                 hash text NOT NULL CHECK (hash ~ '^[0-9a-f]{{64}}$'),
                 prev text NOT NULL CHECK (prev ~ '^[0-9a-f]{{64}}$'))""",
            "CREATE INDEX IF NOT EXISTS events_type_seq ON {table} (type, seq)",
            # A row continues the last one or is refused, whoever inserts it.
            """CREATE OR REPLACE FUNCTION {guard}() RETURNS trigger LANGUAGE plpgsql AS $$
               DECLARE last_seq bigint; last_hash text;
               BEGIN
                 SELECT seq, hash INTO last_seq, last_hash FROM {table} ORDER BY seq DESC LIMIT 1;
                 IF NEW.seq <> COALESCE(last_seq, 0) + 1
                    OR NEW.prev <> COALESCE(last_hash, {genesis}) THEN
                   RAISE EXCEPTION 'seq % (prev %) does not continue the chain at seq %',
                     NEW.seq, left(NEW.prev, 16), COALESCE(last_seq, 0)
                     USING ERRCODE = 'integrity_constraint_violation';
                 END IF;
                 RETURN NEW;
               END $$""",
            """CREATE OR REPLACE FUNCTION {refuse}() RETURNS trigger LANGUAGE plpgsql AS $$
               BEGIN
                 RAISE EXCEPTION 'the ledger is append-only: % refused', TG_OP
                   USING ERRCODE = 'insufficient_privilege';
               END $$""",
            # The whole append in one statement (one round trip, its own transaction): the lock,
            # then the head read in a snapshot taken after it, the compare, the rows, the notice.
            """CREATE OR REPLACE FUNCTION {append}(
                 lock_key bigint, channel text, expected_seq bigint, expected_hash text,
                 seqs bigint[], ids text[], types text[], raws bytea[], hashes text[], prevs text[])
               RETURNS TABLE (head_seq bigint, head_hash text, written boolean)
               LANGUAGE plpgsql VOLATILE AS $$
               DECLARE last_seq bigint; last_hash text;
               BEGIN
                 PERFORM pg_advisory_xact_lock(lock_key);
                 SELECT e.seq, e.hash INTO last_seq, last_hash FROM {table} e ORDER BY e.seq DESC LIMIT 1;
                 last_seq := COALESCE(last_seq, 0);
                 last_hash := COALESCE(last_hash, {genesis});
                 IF last_seq <> expected_seq OR last_hash <> expected_hash THEN
                   RETURN QUERY SELECT last_seq, last_hash, false;
                   RETURN;
                 END IF;
                 IF cardinality(seqs) > 0 THEN
                   INSERT INTO {table} (seq, id, type, raw, hash, prev)
                     SELECT * FROM unnest(seqs, ids, types, raws, hashes, prevs) ORDER BY 1;
                   PERFORM pg_notify(channel, seqs[cardinality(seqs)]::text);
                   RETURN QUERY SELECT seqs[cardinality(seqs)], hashes[cardinality(hashes)], true;
                 ELSE
                   RETURN QUERY SELECT last_seq, last_hash, true;
                 END IF;
               END $$""",
            "DROP TRIGGER IF EXISTS continues_chain ON {table}",
            "CREATE TRIGGER continues_chain BEFORE INSERT ON {table} FOR EACH ROW EXECUTE FUNCTION {guard}()",
            "DROP TRIGGER IF EXISTS refuse_change ON {table}",
            "CREATE TRIGGER refuse_change BEFORE UPDATE OR DELETE ON {table} FOR EACH ROW EXECUTE FUNCTION {refuse}()",
            "DROP TRIGGER IF EXISTS refuse_truncate ON {table}",
            "CREATE TRIGGER refuse_truncate BEFORE TRUNCATE ON {table} FOR EACH STATEMENT EXECUTE FUNCTION {refuse}()",
        ]

        def create(conn: psycopg.Connection, _attempt: int) -> None:
            with conn.transaction():
                # Two processes creating the same ledger at once would race on the catalog.
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (self._key,))
                exists = conn.execute("SELECT to_regclass(%s)", (f'"{self.name}".events',)).fetchone()
                if exists is not None and exists[0] is not None:
                    return
                for statement in statements:
                    conn.execute(sql.SQL(statement).format(**ident))

        self._call(create)

    # ------------------------------------------------------------------ appending

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        """No lock: the append's own statement is the critical section (see the module's doc)."""
        yield

    def append(self, records: Sequence[StoredEvent], expected: Head) -> None:
        check_continues(self.location, records, expected)
        landed = Head(records[-1].seq, records[-1].hash) if records else expected
        call = sql.SQL("SELECT * FROM {}(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)").format(
            sql.Identifier(self.name, "append_batch")
        )
        params = (
            self._key, self.channel, expected.seq, expected.hash,
            [r.seq for r in records], [r.id for r in records], [r.type for r in records],
            [r.raw for r in records], [r.hash for r in records], [r.prev for r in records],
        )  # fmt: skip

        def append(conn: psycopg.Connection, attempt: int) -> None:
            try:
                row = conn.execute(call, params).fetchone()
            except (psycopg.errors.UniqueViolation, psycopg.errors.IntegrityConstraintViolation):
                # Only a writer that skipped the lock gets here: someone appended under it.
                raise HeadMoved(self.location, expected, self._head(conn)) from None
            except (psycopg.errors.UndefinedTable, psycopg.errors.UndefinedFunction):
                raise self._missing() from None
            assert row is not None
            if not row[2]:
                actual = Head(row[0], row[1])
                if attempt and actual == landed:
                    return  # this batch committed before the connection was lost
                raise HeadMoved(self.location, expected, actual)

        self._call(append)

    # ------------------------------------------------------------------ reading

    def _missing(self) -> LedgerMissing:
        return LedgerMissing(f"{self.location}: no ledger here (run `{invocation.command('init')}` first)")

    def _head(self, conn: psycopg.Connection) -> Head:
        row = conn.execute(
            sql.SQL("SELECT seq, hash FROM {} ORDER BY seq DESC LIMIT 1").format(self._table)
        ).fetchone()
        return EMPTY if row is None else Head(row[0], row[1])

    def _rows(self, query: sql.Composed, params: tuple[object, ...]) -> list[tuple[Any, ...]]:
        return self._call(lambda conn, _: conn.execute(query, params).fetchall())

    def head(self) -> Head:
        try:
            return self._call(lambda conn, _: self._head(conn))
        except psycopg.errors.UndefinedTable:
            raise self._missing() from None

    def read(
        self, since: int = 0, until: int | None = None, types: set[str] | None = None
    ) -> Iterator[StoredEvent]:
        # What is committed when the read starts, like the file's committed size.
        last = self.head().seq if until is None else until
        select = sql.SQL("SELECT seq, id, type, raw, hash, prev FROM {} WHERE seq > %s AND seq <= %s").format(self._table)
        if types is not None:
            select += sql.SQL(" AND type = ANY(%s)")
        select += sql.SQL(" ORDER BY seq LIMIT %s")
        after = since
        while after < last:
            params: tuple[object, ...] = (after, last)
            if types is not None:
                params += (sorted(types),)
            rows = self._rows(select, (*params, PAGE))
            if not rows:
                return
            for seq, event_id, type_, raw, hash_, prev in rows:
                yield StoredEvent(seq, event_id, type_, bytes(raw), hash_, prev)
            after = rows[-1][0]

    def lookup(self, event_id: str) -> StoredEvent | None:
        return self.lookup_many([event_id]).get(event_id)

    def lookup_many(self, event_ids: Iterable[str]) -> dict[str, StoredEvent]:
        wanted = sorted(set(event_ids))
        if not wanted:
            return {}
        try:
            select = sql.SQL("SELECT seq, id, type, raw, hash, prev FROM {} WHERE id = ANY(%s)").format(self._table)
            rows = self._rows(select, (wanted,))
        except psycopg.errors.UndefinedTable:
            raise self._missing() from None
        return {r[1]: StoredEvent(r[0], r[1], r[2], bytes(r[3]), r[4], r[5]) for r in rows}

    # ------------------------------------------------------------------ following

    def wait_for_append(self, timeout: float) -> bool:
        """Blocks until an append is notified on the ledger's channel or `timeout` seconds pass;
        True if one was. The first call starts listening (appends before it are not notified:
        a follower reads the head once after its first call). A lost listening connection returns
        True at once (appends may have landed unheard) and the next call listens on a new one;
        while the server stays gone that call raises `StoreUnavailable`."""
        if self._listener is not None and self._pid != os.getpid():
            _INHERITED.append(self._listener)
            self._listener = None
        if self._listener is None or self._listener.closed:
            listener = self._connect()
            self._pid = os.getpid()
            try:
                listener.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self.channel)))
            except psycopg.OperationalError as exc:
                listener.close()
                raise StoreUnavailable(f"{self.location}: cannot LISTEN: {_first_line(exc)}") from None
            self._listener = listener
        got = False
        try:
            for _ in self._listener.notifies(timeout=timeout, stop_after=1):
                got = True
        except psycopg.OperationalError:
            self._listener.close()
            self._listener = None
            return True
        return got

    # ------------------------------------------------------------------ repair

    def torn_tail(self) -> bytes | None:
        return None  # a transaction commits whole or not at all

    def truncate_torn_tail(self) -> bytes | None:
        return None

    def drop(self) -> None:
        """Removes the whole ledger (its schema). For test servers: the CLI never calls it."""
        drop = sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(self._schema)
        self._call(lambda conn, _: conn.execute(drop))


def _first_line(exc: BaseException, limit: int = 600) -> str:
    """psycopg's message on one line. Its first line alone can be a heading with the cause below
    it (`Multiple connection attempts failed. All failures were:`, then one line per address), so
    the lines are joined, not cut."""
    text = " ".join(part for part in (line.strip(" \t-") for line in str(exc).splitlines()) if part)
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return text or type(exc).__name__
