"""`run.recorded` version 2 (batch, providerModels, comparability.os): the committed version-1
runs read as runs that recorded none of them, byte for byte as they were stored."""

from __future__ import annotations

import json

import msgspec
import pytest

from cbledger.errors import UserError
from cbledger.ledger.chain import parse_line
from cbledger.ledger.encoding import decode, encode
from cbledger.ledger.events import RunRecordedEvent
from tests.factories import Stream, draft_json, parse_events


def committed_v1_runs(repo_root) -> list[bytes]:
    lines = (repo_root / "results" / "ledger" / "events.jsonl").read_bytes().splitlines(keepends=True)
    out = []
    for line in lines:
        event = bytes(parse_line(line).event)
        doc = json.loads(event)
        if doc["type"] == "run.recorded" and "version" not in doc:
            out.append(event)
    return out


def test_a_committed_version_1_run_reads_as_version_2_with_nothing_recorded(repo_root):
    stored = committed_v1_runs(repo_root)
    assert stored, "the committed ledger holds version-1 runs"
    for data in stored:
        event = decode(data)
        assert isinstance(event, RunRecordedEvent) and event.version == 2
        body = event.body
        assert (body.batch, body.provider_models, body.comparability.os) == (None, [], None)
        stamp = json.loads(data)["body"]["comparability"]
        assert body.comparability.kicad_cli_version == stamp["kicadCliVersion"]  # the rest is what was stored
    # the bytes on disk are never touched: the chain hashes them as they are
    assert b'"version"' not in stored[0]


def test_a_run_built_now_is_written_at_version_2_and_round_trips():
    s = Stream()
    s.run("t", batch="20261201T000000Z-abc123", os_name="Debian GNU/Linux 12 (bookworm)", provider_models=["m-2026"])
    event = s.events[-1]
    data = encode(event)
    assert json.loads(data)["version"] == 2
    again = decode(data)
    assert isinstance(again, RunRecordedEvent)
    assert (again.body.batch, again.body.provider_models, again.body.comparability.os) == (
        "20261201T000000Z-abc123", ["m-2026"], "Debian GNU/Linux 12 (bookworm)",
    )


def test_a_version_1_draft_carrying_a_version_2_field_is_refused():
    s = Stream()
    s.run("t", batch="b1")
    doc = json.loads(draft_json(s.events[-1]))
    doc.pop("version")  # claims version 1, yet has a batch
    with pytest.raises(UserError, match=r"not a version 1 run\.recorded body"):
        parse_events(msgspec.json.encode(doc), "old-runner.json")


def test_a_bad_batch_id_is_refused():
    s = Stream()
    s.run("t")
    doc = json.loads(draft_json(s.events[-1]))
    doc["body"]["batch"] = "has spaces"
    with pytest.raises(UserError, match="batch"):
        parse_events(msgspec.json.encode(doc), "runner.json")
