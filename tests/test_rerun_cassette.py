"""Cassettes and the recording proxy, spoken to over HTTP as the harness would: what passes the
proxy is forwarded unchanged and recorded without headers or credentials, and a cassette served
back by the loopback endpoint answers in request order, strictly or leniently."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path

import msgspec
import pytest

from cbledger import credentials
from cbledger.errors import UserError
from cbledger.ledger.events import RunRecorded
from cbledger.runner import cassette as cassette_mod
from cbledger.runner import normalise
from cbledger.runner.agents.copperhead import not_recordable_note, recording_route
from cbledger.runner.endpoint import script
from cbledger.runner.endpoint.server import Endpoint, Replay
from cbledger.runner.recorder import Recorder

REPO = Path(__file__).resolve().parent.parent
#: shaped like an OpenAI key, assembled here so no file of the project holds one
KEY = "sk-" + "planted" + "0123456789" * 3


def session(exchanges: list[dict], **extra) -> script.Session:
    raw = {"format": "cbledger-session/1", "name": "t", "exchanges": exchanges, **extra}
    return msgspec.json.decode(json.dumps(raw).encode(), type=script.Session)


def post(url: str, body: dict, headers: dict | None = None) -> tuple[int, bytes, str]:
    req = urllib.request.Request(
        url + "/chat/completions", data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", **(headers or {})},
    )
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, resp.read(), resp.headers.get("Content-Type", "")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read(), exc.headers.get("Content-Type", "")


def request(text: str, assistant: int = 0, stream: bool = False) -> dict:
    messages = [{"role": "user", "content": text}] + [{"role": "assistant", "content": "ok"}] * assistant
    return {"model": "m", "messages": messages, **({"stream": True} if stream else {})}


def test_the_proxy_forwards_unchanged_and_records_no_header_and_no_credential(tmp_path):
    served = session([{"turn": {"text": f"the key is {KEY}"}}], model="echoed-model")
    with Endpoint() as endpoint:
        upstream = endpoint.serve("run-1", served)
        with Recorder(upstream, "openai-compat", "compat:m", tmp_path) as rec:
            assert rec.base_url.endswith("/sessions/run-1/v1") and str(rec.port) in rec.base_url
            status, body, _ = post(rec.base_url, request(f"my key {KEY}"),
                                   {"Authorization": f"Bearer {KEY}", "X-Api-Key": KEY, "X-Trace": "trace-header-value"})
            # forwarded and answered unchanged: the harness gets the provider's own bytes
            assert status == 200 and json.loads(body)["choices"][0]["message"]["content"] == f"the key is {KEY}"
            # a run's proxy reaches its own session and nothing else of the endpoint
            assert post(f"http://127.0.0.1:{rec.port}/sessions/other/v1", request("x"))[0] == 404
        recorded = rec.cassette()
    data = cassette_mod.encode(recorded)
    assert KEY.encode() not in data and credentials.scan_bytes(data, "cassette") == []
    assert b"trace-header-value" not in data and b"Bearer" not in data and b"X-Api-Key" not in data
    (ex,) = recorded.exchanges
    assert ex.redacted and ex.status == 200 and ex.path == "/chat/completions" and ex.method == "POST"
    assert ex.model == "echoed-model" and ex.request["messages"][0]["content"] == "my key <openai-or-anthropic-key>"
    assert ex.body["choices"][0]["message"]["content"] == "the key is <openai-or-anthropic-key>"
    assert recorded.workdir == str(tmp_path) and recorded.route == "openai-compat"
    # content-addressed: the digest is of the canonical bytes, and a load checks it
    path = tmp_path / "c.json"
    path.write_bytes(data)
    assert cassette_mod.load(path, expect=cassette_mod.digest(data)) == recorded
    with pytest.raises(UserError, match="its BLAKE3 is not"):
        cassette_mod.load(path, expect="0" * 64)


def test_a_stream_is_relayed_and_recorded_event_by_event_and_replayed_as_a_stream(tmp_path):
    served = session([{"turn": {"text": "streamed words", "usage": {"in": 5, "out": 2}}}], model="s-model")
    with Endpoint() as endpoint:
        upstream = endpoint.serve("r", served)
        with Recorder(upstream, "openai-compat", "compat:m") as rec:
            status, live, kind = post(rec.base_url, request("go", stream=True))
        recorded = rec.cassette()
        assert status == 200 and kind.startswith("text/event-stream") and live.endswith(b"data: [DONE]\n\n")
        (ex,) = recorded.exchanges
        assert ex.body is None and ex.events is not None and ex.events[-1].data == "[DONE]" and ex.model == "s-model"
        assert "streamed words" in "".join(e.data for e in ex.events)
        # served back from the cassette: the same stream, byte for byte but the creation time
        endpoint.serve("again", cassette_mod.as_session(recorded, "again"), Replay(strict=True))
        status, replayed, kind = post(endpoint.base_url("again"), request("go", stream=True))
    assert status == 200 and kind.startswith("text/event-stream")
    assert replayed == live


def _two_call_cassette() -> cassette_mod.Cassette:
    calls = [
        cassette_mod.Recorded(method="POST", path="/chat/completions", request=request("first"), status=200,
                              body={"id": "a", "model": "m", "choices": [{"index": 0, "message": {"role": "assistant", "content": "one"}}]}),
        cassette_mod.Recorded(method="POST", path="/chat/completions", request=request("first", assistant=1), status=200,
                              body={"id": "b", "model": "m", "choices": [{"index": 0, "message": {"role": "assistant", "content": "two"}}]}),
    ]
    return cassette_mod.Cassette(format=cassette_mod.FORMAT, route="openai-compat", model_id="compat:m", exchanges=calls)


def test_a_cassette_is_served_in_request_order_strictly_or_leniently_until_it_runs_out():
    recorded = _two_call_cassette()
    with Endpoint() as endpoint:
        url = endpoint.serve("strict", cassette_mod.as_session(recorded, "c"), Replay(strict=True))
        assert json.loads(post(url, request("first"))[1])["id"] == "a"
        status, body, _ = post(url, request("something else", assistant=1))
        assert status == 400 and json.loads(body)["error"]["code"] == "cassette_diverged"
        assert "request 2 differs from the recorded one at $.messages[0].content" in json.loads(body)["error"]["message"]
        strict_log = endpoint.forget("strict")
        assert [(s.turn, s.differs, s.code) for s in strict_log] == [(1, None, None), (2, "$.messages[0].content", "cassette_diverged")]

        url = endpoint.serve("lenient", cassette_mod.as_session(recorded, "c"), Replay(strict=False))
        assert json.loads(post(url, request("changed prompt"))[1])["id"] == "a"  # served all the same
        assert json.loads(post(url, request("first", assistant=1))[1])["id"] == "b"
        status, body, _ = post(url, request("first", assistant=2))
        assert status == 400 and json.loads(body)["error"]["code"] == "cassette_exhausted"
        log = endpoint.forget("lenient")
    assert [s.differs for s in log[:2]] == ["$.messages[0].content", None] and log[2].code == "cassette_exhausted"


def test_the_sandbox_path_and_timestamps_are_normalised_and_nothing_else():
    a = {"messages": [{"content": "read /tmp/a/run-1/x.kicad_sch at 2026-12-01T23:59:59.123Z, took 12 ms", "durationMs": 9}]}
    b = {"messages": [{"content": "read /tmp/b/run-2/x.kicad_sch at 2026-12-02T00:00:01Z, took 12 ms", "durationMs": 14}]}
    dirs = ("/tmp/a/run-1", "/tmp/b/run-2")
    assert normalise.first_difference(normalise.value(a, dirs), normalise.value(b, dirs)) is None
    c = {"messages": [{"content": "read /tmp/b/run-2/y.kicad_sch at 2026-12-02T00:00:01Z, took 12 ms", "durationMs": 1}]}
    assert normalise.first_difference(normalise.value(a, dirs), normalise.value(c, dirs)) == "$.messages[0].content"
    assert normalise.first_difference([1, 2], [1, 2, 3]) == "$[2]" and normalise.first_difference({"a": 1}, {"b": 1}) == "$.a"
    assert normalise.text("**Duration:** 9s and .copperhead/runs/2026-12-01T23-51-05-123Z/") == "**Duration:** <duration> and .copperhead/runs/<stamp>/"
    # in the docs only stamps and dates: a decision names its run, a changelog its day; a value stays
    assert normalise.doc_text("- 2026-12-01 [run 2026-12-01T20-55-33-617Z] R1 at 2k, 9 s") == "- <date> [run <stamp>] R1 at 2k, 9 s"
    # KiCad's exports are stamped with the day and time they were made; a create report with wall times
    assert normalise.doc_text("G04 Created by KiCad date 2026-12-03 13:53:59*") == "G04 Created by KiCad date <date> <clock>*"
    assert normalise.text("created as board.svg date 2026/12/03 13:54:04") == "created as board.svg date <date> <clock>"
    report = "| outputs | 6s | 1 | 2.5k |\n| spec-seed | — | — |\n| **Total** | 1m05s | 2 |\nSlowest stage: **firmware** (3s). Most"
    assert normalise.text(report) == (
        "| outputs | <duration> | 1 | 2.5k |\n| spec-seed | — | — |\n| **Total** | <duration> | 2 |\nSlowest stage: <timing>. Most"
    )
    assert normalise.value({"slowestStage": {"name": "firmware"}, "turns": 3}) == {"slowestStage": "<timing>", "turns": 3}
    assert normalise.text("R1 at 2k, pin 12:34") == "R1 at 2k, pin 12:34"  # not a time of day


def test_a_session_script_is_a_cassette_of_the_same_format_and_serves_the_same_answers():
    solve = script.load(REPO / "tasks" / "led-resistor-swap" / "sessions" / "solve.json")
    converted = cassette_mod.from_session(solve, "compat:scripted-solve")
    assert len(converted.exchanges) == script.length(solve) and all(e.status == 200 for e in converted.exchanges)
    again = msgspec.json.decode(cassette_mod.encode(converted), type=cassette_mod.Cassette)
    assert again == converted
    written = session([
        {"turn": {"text": "reading", "toolCalls": [{"name": "read_file", "args": {"path": "a.kicad_sch"}}], "usage": {"in": 7, "out": 1}}},
        {"turn": {"text": "done", "usage": {"in": 9, "out": 2}}, "repeat": 1},
    ], model="w")
    converted = cassette_mod.from_session(written, "compat:w")
    assert len(converted.exchanges) == 3
    with Endpoint() as endpoint:
        scripted = endpoint.serve("scripted", written)
        # a session records no request, so even a strict replay has nothing to compare it with
        replayed = endpoint.serve("cassette", cassette_mod.as_session(converted, "c"), Replay(strict=True))
        for k in range(3):
            body = request("do it", assistant=k)
            want, got = (json.loads(post(u, body)[1]) for u in (scripted, replayed))
            assert want["choices"] == got["choices"] and want["usage"] == got["usage"]


def test_saved_login_routes_are_stated_not_recordable_and_old_runs_read_without_a_cassette():
    assert [recording_route(m) for m in ("compat:x", "gpt-5", "claude-sonnet-4", "codex", "cursor:y", "claude-code")] == [
        "openai-compat", "openai", "anthropic", None, None, None]
    assert "cannot be re-executed" in not_recordable_note("codex")
    # a run recorded before cassettes re-encodes exactly as stored: the field is absent, not null
    ledger = REPO / "results" / "ledger" / "events.jsonl"
    line = next(json.loads(x) for x in ledger.open() if '"run.recorded"' in x)  # the ledger's first run
    body = msgspec.json.decode(json.dumps(line["event"]["body"]).encode(), type=RunRecorded)
    assert "cassette" not in line["event"]["body"]
    assert body.cassette is msgspec.UNSET and "cassette" not in msgspec.to_builtins(body)


@pytest.mark.parametrize("stream", [False, True])
def test_an_answer_is_on_the_cassette_before_the_harness_has_it(monkeypatch, stream):
    """The proxy relayed an answer and recorded it after: a harness that ended the run on that
    answer exited, the runner took the cassette, and under load the last exchange was not on it
    yet (a rerun then ran out of the cassette: "the harness made more requests")."""
    import time as time_mod

    served = session([{"turn": {"text": "done"}}], model="m")
    slow = Recorder.add

    def add_slowly(self, *args, **kwargs):
        time_mod.sleep(0.5)  # a busy machine: the recording thread is late
        return slow(self, *args, **kwargs)

    monkeypatch.setattr(Recorder, "add", add_slowly)
    with Endpoint() as endpoint:
        upstream = endpoint.serve("r", served)
        with Recorder(upstream, "openai-compat", "compat:m") as rec:
            status, _, _ = post(rec.base_url, request("go", stream=stream))
            held = rec.cassette()  # the moment the harness has its whole answer
    assert status == 200 and len(held.exchanges) == 1 and held.exchanges[0].status == 200
