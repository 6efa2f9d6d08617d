"""A campaign's driver holds the campaign on a PostgreSQL ledger, so a second one is refused.

Drivers on several machines share one ledger; each results directory's lock says nothing to the
others. A second driver of a running campaign (started on another machine because the first
looked dead, or twice by a scheduler) would run every slot it sees open, and where both run a
slot the ledger keeps one run and the other was paid for in vain. The holder is a session-level
advisory lock named for the ledger and the campaign, on a session of its own:

* it is refused at once, naming the session that holds it (its machine, process and start, as
  its `application_name` and `pg_stat_activity` say) and how to end that session when its
  driver is gone for good;
* it goes when its session does: a driver killed, or its machine gone (the server's own TCP
  keepalives, set short on that session, notice a silent peer in about 25 s);
* a server restart ends it too. Before each run, the driver checks its session and, if it was
  lost, takes the lock again: if another driver took it meanwhile, no further run starts here.
  A server that cannot be reached then leaves the run to start (its append waits for the server,
  and keeps the run's events beside its bundle past that, as ever).
"""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import psycopg

from cbledger.errors import UserError
from cbledger.ledger.recorder import Lease, StoreUnavailable

if TYPE_CHECKING:
    from cbledger.ledger.postgres import PostgresRecorder

#: the server's keepalives on the lock's session: a driver whose machine went silent lets go in
#: about idle + interval * count seconds
SERVER_KEEPALIVES = {"tcp_keepalives_idle": "10", "tcp_keepalives_interval": "5", "tcp_keepalives_count": "3"}


class CampaignHeld(UserError):
    def __init__(self, message: str, holder: str) -> None:
        super().__init__(message)
        self.holder = holder


class CampaignLease(Lease):
    def __init__(self, recorder: PostgresRecorder, campaign: str, key: int) -> None:
        self.recorder, self.campaign, self.key = recorder, campaign, key
        self._conn: psycopg.Connection | None = None
        self._guard = threading.Lock()  # a campaign's runs start on several threads

    def take(self) -> None:
        """Holds the campaign, or raises UserError naming its holder (StoreUnavailable when the
        server cannot be reached)."""
        conn = self.recorder._connect()
        try:
            name = f"cbledger-driver {socket.gethostname()}:{os.getpid()} {self.campaign}"
            settings = {"application_name": name, **SERVER_KEEPALIVES}
            for setting, value in settings.items():
                conn.execute("SELECT set_config(%s, %s, false)", (setting, value))
            row = conn.execute("SELECT pg_try_advisory_lock(%s)", (self.key,)).fetchone()
            if not (row and row[0]):
                holder = self._holder(conn)
                raise CampaignHeld(
                    f"{self.recorder.location}: campaign {self.campaign} is being run by another driver "
                    f"on this ledger ({holder}); wait for it to end, or run another campaign", holder,
                )
        except psycopg.Error as exc:  # the session lost between connecting and locking
            conn.close()
            raise StoreUnavailable(f"{self.recorder.location}: cannot hold campaign {self.campaign}: "
                                   f"{str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__}") from None
        except BaseException:
            conn.close()
            raise
        self._conn = conn

    def _holder(self, conn: psycopg.Connection) -> str:
        row = conn.execute(
            """SELECT a.pid, a.application_name, a.client_addr::text, a.backend_start
               FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
               WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
                 AND l.classid::bigint = %s AND l.objid::bigint = %s""",
            ((self.key >> 32) & 0xFFFFFFFF, self.key & 0xFFFFFFFF),
        ).fetchone()
        if row is None:  # let go between the two statements, or not ours to see
            return "its session is not visible to this role"
        pid, app, addr, started = row  # another role's session shows its pid alone
        who = app or "a session of another role"
        since = f" since {started:%Y-%m-%d %H:%M:%S %Z}" if started is not None else ""
        return (f"{who}, server process {pid}, from {addr or 'a local socket or hidden'}{since}; if that driver is "
                f"gone for good, end its session with SELECT pg_terminate_backend({pid})")

    def lost(self) -> str | None:
        with self._guard:
            conn = self._conn
            if conn is not None and not conn.closed:
                try:
                    conn.execute("SELECT 1")
                    return None
                except psycopg.OperationalError:
                    conn.close()
            self._conn = None
            try:
                self.take()
                self.retaken = True
            except StoreUnavailable:
                return None  # the server is away: the run's append waits for it (module docstring)
            except CampaignHeld as exc:
                return (f"{self.recorder.location}: this driver lost its hold on campaign {self.campaign} (its "
                        f"session ended) and another driver holds it now ({exc.holder}); the slots left are "
                        "that driver's, and no further run of it starts here")
            return None

    def release(self) -> None:
        with self._guard:
            if self._conn is not None:
                self._conn.close()  # the session's end lets go of its advisory lock
                self._conn = None


@contextmanager
def holding(recorder: PostgresRecorder, campaign: str, key: int) -> Iterator[Lease]:
    lease = CampaignLease(recorder, campaign, key)
    lease.take()
    try:
        yield lease
    finally:
        lease.release()
