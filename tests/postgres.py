"""The PostgreSQL server the tests use: the URL in $CBLEDGER_TEST_POSTGRES (scripts/test starts
one with scripts/start-postgres when it is unset). Without one the PostgreSQL tests skip, and with
CI=true they fail: a green CI run has exercised the database store against a real server.

Each test gets a ledger of its own: a schema named for the test's temporary directory, dropped
afterwards, so tests never see each other's events on a shared server.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from urllib.parse import urlencode, urlsplit, urlunsplit

import pytest

from cbledger.ledger.postgres import PostgresRecorder

SERVER_ENV = "CBLEDGER_TEST_POSTGRES"
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


def ledger_url(tmp: Path, suffix: str = "") -> str:
    """A URL naming a ledger of this test's own on the test server."""
    name = "t_" + hashlib.blake2b(f"{tmp}{suffix}".encode(), digest_size=10).hexdigest()
    parts = urlsplit(server_url())
    query = (parts.query + "&" if parts.query else "") + urlencode({"ledger": name})
    return urlunsplit(parts._replace(query=query))


def drop(url: str) -> None:
    recorder = PostgresRecorder(url)
    try:
        recorder.drop()
    finally:
        recorder.close()
