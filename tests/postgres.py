"""The PostgreSQL server the tests use: the URL in $CBLEDGER_TEST_POSTGRES (scripts/test starts
one with scripts/start-postgres when it is unset). Without one the PostgreSQL tests skip, and with
CI=true they fail: a green CI run has exercised the database store against a real server.

Each test gets a ledger of its own: a schema named for the test's temporary directory, dropped
afterwards, so tests never see each other's events on a shared server.

A test that stops or restarts the server (a driver surviving a restart, `watch` listening again)
starts a server of its own instead (`own_server`), so the tests sharing the other one are never
disturbed.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlencode, urlsplit, urlunsplit

import pytest

from cbledger.ledger.postgres import PostgresRecorder

SERVER_ENV = "CBLEDGER_TEST_POSTGRES"
START = Path(__file__).resolve().parent.parent / "scripts" / "start-postgres"
IN_CI = os.environ.get("CI", "").lower() in {"1", "true", "yes"}


def server_url() -> str:
    """The test server's URL; fails under CI=true, skips elsewhere, when there is none."""
    url = os.environ.get(SERVER_ENV)
    if not url:
        message = f"a PostgreSQL server (${SERVER_ENV}; scripts/start-postgres starts one)"
        if IN_CI:
            pytest.fail(f"{message} is required when CI=true", pytrace=False)
        pytest.skip(f"{message} not available")
    return url


def ledger_url(tmp: Path, suffix: str = "", server: str | None = None) -> str:
    """A URL naming a ledger of this test's own on the test server (or on `server`)."""
    name = "t_" + hashlib.blake2b(f"{tmp}{suffix}".encode(), digest_size=10).hexdigest()
    parts = urlsplit(server or server_url())
    query = (parts.query + "&" if parts.query else "") + urlencode({"ledger": name})
    return urlunsplit(parts._replace(query=query))


def drop(url: str) -> None:
    recorder = PostgresRecorder(url)
    try:
        recorder.drop()
    finally:
        recorder.close()


@dataclass(frozen=True)
class Server:
    """A throwaway server this test alone uses: its URL and its cluster's directory."""

    url: str
    directory: Path

    def restart(self, down_for: float = 0.0) -> None:
        """A fast shutdown (every session ended, as an operator's restart ends them), `down_for`
        seconds down, then up again on the same port; returns once it accepts connections."""
        subprocess.run([START, "--restart", self.directory, str(down_for)], check=True, timeout=120 + down_for)

    @contextmanager
    def stopped(self) -> Iterator[None]:
        """The server down for as long as the block runs (a fast shutdown, as in `restart`), then
        up again: a test of what a client does while it is gone waits for nothing else."""
        subprocess.run([START, "--down", self.directory], check=True, timeout=120)
        try:
            yield
        finally:
            subprocess.run([START, "--up", self.directory], check=True, timeout=120)

    @contextmanager
    def down(self, seconds: float) -> Iterator[None]:
        """The server restarting in the background, down for `seconds`: inside the block it is
        down (the block runs once it stopped accepting connections); on leaving, it is up again."""
        restart = subprocess.Popen([START, "--restart", self.directory, str(seconds)])
        try:
            deadline = time.monotonic() + 60
            while accepts(self.url) and time.monotonic() < deadline:
                time.sleep(0.05)
            yield
        finally:
            assert restart.wait(120 + seconds) == 0, "the test server did not come back"


def accepts(url: str) -> bool:
    import psycopg

    try:
        psycopg.connect(url, connect_timeout=2).close()
    except psycopg.OperationalError:
        return False
    return True


@contextmanager
def own_server() -> Iterator[Server]:
    """A server of the caller's own, started by scripts/start-postgres and removed afterwards.
    Without the server binaries it skips, and under CI=true it fails."""
    if shutil.which("pg_ctl") is None and not list(Path("/usr/lib/postgresql").glob("*/bin/pg_ctl")):
        message = "PostgreSQL server binaries (scripts/install-system installs them)"
        if IN_CI:
            pytest.fail(f"{message} are required when CI=true", pytrace=False)
        pytest.skip(f"{message} not available")
    started = subprocess.run([START], check=False, capture_output=True, text=True, timeout=180)
    if started.returncode != 0:  # its own words, not a bare CalledProcessError
        pytest.fail(f"scripts/start-postgres exited {started.returncode}: {started.stderr[-2000:]}", pytrace=False)
    env = dict(line.split("=", 1) for line in started.stdout.splitlines() if "=" in line)
    server = Server(env[SERVER_ENV], Path(env[f"{SERVER_ENV}_DIR"]))
    try:
        yield server
    finally:
        subprocess.run([START, "--stop", server.directory], check=False, timeout=120)
