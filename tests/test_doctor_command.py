"""`cbledger doctor`: each line says what a run would meet, so a line that passes a route the run
would refuse sends a reader into a campaign that stops at once."""

from __future__ import annotations

import json

import pytest

from tests.conftest import REPO
from tests.factories import run_cli


def test_a_compat_model_without_its_endpoint_fails_the_credential_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COPPERHEAD_BASE_URL", raising=False)
    monkeypatch.delenv("COPPERHEAD_API_KEY_ENV", raising=False)
    r = run_cli(["doctor", "--model", "compat:local-7b", "--no-key-check", "--json", "--root", REPO])
    assert r.exit_code == 1, r.output
    cred = json.loads(r.stdout)["checks"]["credential"]
    assert cred == {"ok": False, "detail": "model compat:local-7b is an OpenAI-compatible route: set $COPPERHEAD_BASE_URL"}


def test_a_compat_model_on_loopback_needs_no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COPPERHEAD_BASE_URL", "http://127.0.0.1:8765/v1")
    monkeypatch.delenv("COPPERHEAD_API_KEY_ENV", raising=False)
    r = run_cli(["doctor", "--model", "compat:local-7b", "--no-key-check", "--json", "--root", REPO])
    cred = json.loads(r.stdout)["checks"]["credential"]
    assert cred == {"ok": True, "detail": "compat:local-7b: loopback endpoint http://127.0.0.1:8765/v1, no key needed"}


def test_a_model_the_price_table_does_not_list_passes_with_the_segment_its_run_names(
    monkeypatch: pytest.MonkeyPatch, tmp_path,
) -> None:
    """`run --segment` runs an unpriced model (cost null); doctor failed it all the same."""
    monkeypatch.setenv("COPPERHEAD_BASE_URL", "http://127.0.0.1:8765/v1")
    ledger = tmp_path / "ledger.jsonl"
    assert run_cli(["init", "--name", "doctor", "--root", REPO, "--ledger", ledger]).exit_code == 0
    args = ["doctor", "--model", "compat:local-7b", "--no-key-check", "--json", "--root", REPO, "--ledger", ledger]
    without = json.loads(run_cli(args).stdout)["checks"]["price table"]
    publish = f"`cbledger pricing publish FILE --ledger {ledger} --root {REPO}`"  # runnable as printed
    assert without["ok"] is False and f"runs cost null unless {publish} records one" in without["detail"]
    named = json.loads(run_cli([*args, "--segment", "open-weight-self-hosted"]).stdout)["checks"]["price table"]
    assert named == {"ok": True, "detail": f"no pricing.published in the ledger: runs cost null unless {publish} records "
                                           "one; --segment open-weight-self-hosted: compat:local-7b's runs cost null"}
    wrong = run_cli([*args, "--segment", "cheap"])
    assert wrong.exit_code == 2 and "--segment 'cheap' is not a cost segment" in wrong.stderr
