"""The loopback model endpoint and its session scripts, spoken to over HTTP as a client would."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from cbledger.errors import UserError
from cbledger.runner.endpoint import script, sessions
from cbledger.runner.endpoint.server import Endpoint, problems
from cbledger.tasks.catalog import Catalog

REPO = Path(__file__).resolve().parent.parent


def session(exchanges: list[dict], **extra) -> script.Session:
    import msgspec

    raw = {"format": "cbledger-session/1", "name": "t", "exchanges": exchanges, **extra}
    return msgspec.json.decode(json.dumps(raw).encode(), type=script.Session)


def turn(text=None, calls=(), tokens=(10, 2)):
    return {"turn": {"text": text, "toolCalls": [{"name": n, "args": a} for n, a in calls], "usage": {"in": tokens[0], "out": tokens[1]}}}


def post(url: str, body: dict) -> tuple[int, bytes, str]:
    req = urllib.request.Request(url + "/chat/completions", data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, resp.read(), resp.headers.get("Content-Type", "")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read(), exc.headers.get("Content-Type", "")


def history(n_assistant: int, tool_results: list[str] | None = None) -> list[dict]:
    msgs = [{"role": "system", "content": "s"}, {"role": "user", "content": "do it"}]
    for i in range(n_assistant):
        msgs.append({"role": "assistant", "content": None, "tool_calls": [{"id": f"c{i}", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}]})
        msgs.append({"role": "tool", "tool_call_id": f"c{i}", "content": "ok"})
    for j, r in enumerate(tool_results or []):
        msgs.append({"role": "tool", "tool_call_id": f"x{j}", "content": r})
    return msgs


def test_each_request_gets_the_turn_its_history_asks_for_and_the_script_end_is_an_error():
    s = session([turn("first", [("read_file", {"path": "docs/SPEC.md"})], (100, 5)), turn("second", [("finish", {"outcome": "done", "summary": "ok"})])])
    with Endpoint() as ep:
        url = ep.serve("run-1", s)
        assert url.startswith("http://127.0.0.1:") and url.endswith("/sessions/run-1/v1")
        status, body, _ = post(url, {"model": "scripted", "messages": history(0)})
        data = json.loads(body)
        assert status == 200 and data["object"] == "chat.completion"
        msg = data["choices"][0]["message"]
        assert msg["content"] == "first" and data["choices"][0]["finish_reason"] == "tool_calls"
        (call,) = msg["tool_calls"]
        assert call["function"]["name"] == "read_file" and json.loads(call["function"]["arguments"]) == {"path": "docs/SPEC.md"}
        assert data["usage"] == {"prompt_tokens": 100, "completion_tokens": 5, "total_tokens": 105}
        # stateless: the same history gets the same turn again (a retried request)
        assert json.loads(post(url, {"messages": history(0)})[1])["choices"][0]["message"]["content"] == "first"
        assert json.loads(post(url, {"messages": history(1)})[1])["choices"][0]["message"]["content"] == "second"
        status, body, _ = post(url, {"messages": history(2)})
        assert status == 400
        err = json.loads(body)["error"]
        assert err["code"] == "session_script_exhausted"
        assert err["message"] == "session script 't' has 2 turn(s); the harness asked for turn 3"
        assert problems(ep.served("run-1")) == ["turn 3: session script 't' has 2 turn(s); the harness asked for turn 3"]
        # an unknown route is not served any session
        assert post(url.replace("run-1", "run-2"), {"messages": history(0)})[0] == 404


def test_expected_tool_results_stop_a_script_that_assumed_success():
    s = session([turn("a", [("validate_change", {})]), {**turn("b"), "expect": {"toolResults": ["^validation passed"]}}])
    with Endpoint() as ep:
        url = ep.serve("k", s)
        ok = post(url, {"messages": history(1)[:-1] + [{"role": "tool", "tool_call_id": "c0", "content": "validation passed; edit tools are now unlocked"}]})
        assert ok[0] == 200
        status, body, _ = post(url, {"messages": history(1)[:-1] + [{"role": "tool", "tool_call_id": "c0", "content": "validation FAILED:\nproposal files missing"}]})
        assert status == 400
        assert "tool result 1 does not match '^validation passed' (it begins 'validation FAILED:')" in json.loads(body)["error"]["message"]


def test_a_stream_is_served_when_one_is_asked_for():
    s = session([turn("thinking", [("search", {"pattern": "R1"}), ("read_file", {"path": "a"})], (7, 3))])
    with Endpoint() as ep:
        url = ep.serve("k", s)
        status, body, ctype = post(url, {"messages": history(0), "stream": True, "stream_options": {"include_usage": True}})
    assert status == 200 and ctype.startswith("text/event-stream")
    payloads = [line[len("data: "):] for line in body.decode().split("\n\n") if line.startswith("data: ")]
    assert payloads[-1] == "[DONE]"
    chunks = [json.loads(p) for p in payloads[:-1]]
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    text = "".join(ch["choices"][0]["delta"].get("content") or "" for ch in chunks if ch["choices"])
    calls = [tc for ch in chunks if ch["choices"] for tc in ch["choices"][0]["delta"].get("tool_calls", [])]
    assert text == "thinking" and [(c["index"], c["function"]["name"]) for c in calls] == [(0, "search"), (1, "read_file")]
    finishes = [ch["choices"][0]["finish_reason"] for ch in chunks if ch["choices"] and ch["choices"][0]["finish_reason"]]
    assert finishes == ["tool_calls"] and chunks[-1]["usage"]["total_tokens"] == 10


def test_recorded_responses_are_served_as_they_were_and_loops_repeat():
    s = session([
        {"response": {"status": 200, "body": {"id": "x", "choices": [{"message": {"role": "assistant", "content": "recorded"}}]}}},
        {**turn("again", [("read_file", {"path": "docs/SPEC.md"})]), "repeat": "forever"},
    ])
    assert script.length(s) is None
    with Endpoint() as ep:
        url = ep.serve("k", s)
        assert json.loads(post(url, {"messages": history(0)})[1])["choices"][0]["message"]["content"] == "recorded"
        for n in (1, 5, 40):
            assert json.loads(post(url, {"messages": history(n)})[1])["choices"][0]["message"]["content"] == "again"


def test_bad_session_files_are_refused_naming_the_file_and_field(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"format": "cbledger-session/1", "name": "b", "exchanges": [{"turn": {"text": "x"}, "response": {"status": 200}}]}))
    with pytest.raises(UserError, match=r"bad.json: \$.exchanges\[0\]: give exactly one of `turn` and `response`"):
        script.load(bad)
    bad.write_text(json.dumps({"format": "cbledger-session/1", "name": "b", "exchanges": [{"turn": {"txt": "x"}}]}))
    with pytest.raises(UserError, match=r"bad.json: not a session script: .*txt"):
        script.load(bad)
    bad.write_text(json.dumps({"format": "cbledger-session/1", "name": "b", "exchanges": [
        {"turn": {"text": "x"}, "repeat": "forever"}, {"turn": {"text": "y"}}]}))
    with pytest.raises(UserError, match=r"only the last exchange may repeat forever"):
        script.load(bad)
    bad.write_text(json.dumps({"format": "cbledger-session/1", "name": "b", "exchanges": [{"turn": {}, "expect": {"toolResults": ["("]}}]}))
    with pytest.raises(UserError, match=r"expect.toolResults\[0\]: not a regex"):
        script.load(bad)


def test_every_bundled_session_loads_and_every_task_has_a_solve_session():
    catalog = Catalog(REPO)
    found = sessions.for_plan(catalog, catalog.task_ids(), "solve")
    assert sorted(found) == catalog.task_ids() and all(s.task == t for t, s in found.items())
    for p in sorted((REPO / "sessions").glob("*.json")):
        s = script.load(p)
        # the task-agnostic sessions serve any run; a session here that names its task is a
        # scenario for it with later feedback passes, kept out of the task's definitions
        assert s.task is None or (s.task in catalog.task_ids() and s.passes), p
    with pytest.raises(UserError, match=r"no session script 'nope' for: led-resistor-swap"):
        sessions.for_plan(catalog, ["led-resistor-swap"], "nope")


def test_cbledger_endpoint_serve_answers_until_interrupted(tmp_path):
    f = tmp_path / "s.json"
    f.write_text(json.dumps({"format": "cbledger-session/1", "name": "by-hand", "exchanges": [turn("hello")]}))
    proc = subprocess.Popen([str(Path(sys.executable).parent / "cbledger"), "endpoint", "serve", str(f)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        first = proc.stdout.readline()
        assert first.startswith("serving session 'by-hand' (1 turn(s)) at http://127.0.0.1:")
        url = first.rsplit(" at ", 1)[1].strip()
        deadline = time.monotonic() + 10
        while True:
            try:
                status, body, _ = post(url, {"messages": history(0)})
                break
            except urllib.error.URLError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        assert status == 200 and json.loads(body)["choices"][0]["message"]["content"] == "hello"
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert "served 1 request(s)" in out


def test_an_answer_names_the_requested_model_unless_the_session_names_one_and_the_log_keeps_it():
    from cbledger.runner.endpoint.server import answered_models

    with Endpoint() as ep:
        echo = ep.serve("echo", session([turn("a"), turn("b")]))
        assert json.loads(post(echo, {"model": "qwen2.5-coder:7b", "messages": history(0)})[1])["model"] == "qwen2.5-coder:7b"
        assert json.loads(post(echo, {"messages": history(1)})[1])["model"] == "scripted"  # a request naming none
        assert answered_models(ep.served("echo")) == ("qwen2.5-coder:7b", "scripted")
        dated = ep.serve("dated", session([turn("a")], model="model-a-2026-08-01"))
        assert json.loads(post(dated, {"model": "model-a", "messages": history(0)})[1])["model"] == "model-a-2026-08-01"
        post(dated, {"model": "model-a", "messages": history(5)})  # past the script: a 400 names no model
        assert answered_models(ep.served("dated")) == ("model-a-2026-08-01",)


def _raw_post(url: str, body: dict, timeout: float = 5) -> tuple[int | None, bytes, dict, str | None]:
    """(status, body, headers, transport error) of one request, read the way an SDK reads it."""
    import http.client
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
    try:
        conn.request("POST", parts.path + "/chat/completions", body=json.dumps(body), headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        return resp.status, resp.read(), dict(resp.getheaders()), None
    except (OSError, http.client.HTTPException) as exc:
        return None, b"", {}, type(exc).__name__
    finally:
        conn.close()


def test_declared_faults_are_served_for_their_turn_and_then_the_answer():
    s = session([
        turn("one"),
        {**turn("two"), "fault": {"kind": "status", "status": 429, "retryAfter": 2, "times": 1}},
        {"fault": {"kind": "status"}},
    ])
    with Endpoint() as ep:
        url = ep.serve("f", s)
        assert _raw_post(url, {"messages": history(0)})[0] == 200
        status, body, headers, _ = _raw_post(url, {"messages": history(1)})
        assert status == 429 and headers.get("Retry-After") == "2" and json.loads(body)["error"]["code"] == "injected_fault"
        status, body, _, _ = _raw_post(url, {"messages": history(1)})  # the retry is answered
        assert status == 200 and json.loads(body)["choices"][0]["message"]["content"] == "two"
        for _ in range(2):  # a fault without `times` never ends
            assert _raw_post(url, {"messages": history(2)})[0] == 500
        log = ep.forget("f")
    assert [(x.turn, x.status, x.code) for x in log] == [
        (1, 200, None), (2, 429, "injected_fault"), (2, 200, None), (3, 500, "injected_fault"), (3, 500, "injected_fault"),
    ]
    assert problems(log)[0] == "turn 2: injected fault: HTTP 429 (Retry-After 2s)"


def test_transport_faults_break_the_wire_the_way_a_provider_does():
    s = session([
        {"fault": {"kind": "reset"}}, {"fault": {"kind": "malformed-json"}}, {"fault": {"kind": "truncated-stream"}},
        {"fault": {"kind": "hang"}},
    ])
    with Endpoint() as ep:
        url = ep.serve("w", s)
        status, _, _, error = _raw_post(url, {"messages": history(0)})
        assert status is None and error in ("RemoteDisconnected", "ConnectionResetError")
        status, body, _, _ = _raw_post(url, {"messages": history(1)})
        assert status == 200
        with pytest.raises(ValueError):
            json.loads(body)
        status, _, _, error = _raw_post(url, {"messages": history(2)})
        assert error == "IncompleteRead"
        status, _, _, error = _raw_post(url, {"messages": history(2), "stream": True})
        assert status == 200  # a stream that stops after its first chunk, with no [DONE]
        started = time.monotonic()
        status, _, _, error = _raw_post(url, {"messages": history(3)}, timeout=1.5)
        assert status is None and error in ("TimeoutError", "timeout") and time.monotonic() - started >= 1.4


def test_a_fault_that_ends_needs_an_answer_after_it(tmp_path):
    bad = tmp_path / "s.json"
    bad.write_text(json.dumps({"format": "cbledger-session/1", "name": "x", "exchanges": [{"fault": {"kind": "reset", "times": 2}}]}))
    with pytest.raises(UserError, match=r"exchanges\[0\]\.fault\.times"):
        script.load(bad)
    bad.write_text(json.dumps({"format": "cbledger-session/1", "name": "x", "exchanges": [{"fault": {"kind": "fire"}}]}))
    with pytest.raises(UserError, match="not a session script"):
        script.load(bad)
