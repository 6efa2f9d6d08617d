"""The loopback model endpoint: an OpenAI-compatible chat-completions server on 127.0.0.1 that
answers each request from a session script (`script.py`).

copperhead reaches it through its `compat:<id>` route with `COPPERHEAD_BASE_URL` set to one of
its base URLs; a loopback endpoint needs no key. One server holds any number of sessions, each
under its own path (`/sessions/<key>/v1`), so concurrent runs never share one; `/v1` serves the
session registered under the empty key (the standalone `cbledger endpoint serve`).

Every request is logged with the turn it asked for and how it was answered, so a caller can say
after the run what went wrong on the model's side (a turn the script does not have, a tool result
the script did not expect) without reading the harness's output.
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from cbledger.runner import normalise, scripted_mark
from cbledger.runner.endpoint import faults
from cbledger.runner.endpoint import script as script_mod
from cbledger.runner.endpoint.script import Exchange, Session, Turn
from cbledger.runner.recorder import QuietServer, UnixServer

LOOPBACK = "127.0.0.1"
#: chat completions, and Anthropic's messages (a native route's cassette served back)
_ROUTE = re.compile(r"^(?:/sessions/(?P<key>[^/]+))?/v1/(?:chat/completions|messages)/?$")
_MODELS = re.compile(r"^(?:/sessions/(?P<key>[^/]+))?/v1/models/?$")


@dataclass(frozen=True)
class Served:
    """One request as the endpoint answered it."""

    turn: int  # 1-based: the harness's n-th model call of the run
    status: int
    problem: str | None = None
    #: the model id the answer named (`model` of the completion or of its chunks)
    model: str | None = None
    #: replaying a cassette: where this request first differs from the one recorded (JSON path)
    differs: str | None = None
    #: the error code of a refused request (`cassette_diverged`, `cassette_exhausted`, ...)
    code: str | None = None


@dataclass(frozen=True)
class Replay:
    """How a cassette is served: the k-th recorded answer to the k-th request. `strict` refuses
    a request that differs from the recorded one (after normalisation, `cbledger.runner.normalise`);
    lenient serves it anyway and notes where it differs. The two sandbox paths are the recording
    run's and this run's, both replaced by `<sandbox>` before comparing."""

    strict: bool
    workdirs: tuple[str, ...] = ()


@dataclass
class _Route:
    session: Session
    log: list[Served] = field(default_factory=list)
    replay: Replay | None = None
    #: requests answered so far (a replayed cassette counts them instead of reading the turn)
    count: int = 0
    #: requests per turn, for faults served to the first few of them
    attempts: faults.Attempts = field(default_factory=faults.Attempts)


class ScriptProblem(Exception):
    """The harness asked for something the script cannot answer."""


def turn_index(body: dict) -> int:
    """Which request of the run this is (0-based): the assistant messages it already carries."""
    messages = body.get("messages")
    if not isinstance(messages, list):
        raise ScriptProblem("the request has no `messages` list")
    return sum(1 for m in messages if isinstance(m, dict) and m.get("role") == "assistant")


def _tool_results_since_last_turn(body: dict) -> list[str]:
    out: list[str] = []
    for m in body.get("messages") or []:
        if not isinstance(m, dict):
            continue
        if m.get("role") == "assistant":
            out = []
        elif m.get("role") == "tool":
            content = m.get("content")
            out.append(content if isinstance(content, str) else json.dumps(content))
    return out


def check_expectations(session: Session, k: int, ex: Exchange, body: dict) -> None:
    if ex.expect is None or not ex.expect.tool_results:
        return
    results = _tool_results_since_last_turn(body)
    for j, pattern in enumerate(ex.expect.tool_results):
        if j >= len(results):
            raise ScriptProblem(
                f"session {session.name!r} turn {k + 1} expects {len(ex.expect.tool_results)} tool result(s) "
                f"since the previous turn; the harness sent {len(results)}"
            )
        if not re.search(pattern, results[j]):
            first = results[j].splitlines()[0] if results[j] else ""
            raise ScriptProblem(
                f"session {session.name!r} turn {k + 1}: tool result {j + 1} does not match {pattern!r} "
                f"(it begins {first[:160]!r})"
            )


def _call_id(k: int, i: int, call_id: str | None) -> str:
    return call_id or f"call_{k + 1}_{i + 1}"


#: what the endpoint names itself when neither the session nor the request names a model
DEFAULT_MODEL = "scripted"


def answering_model(session: Session, body: dict) -> str:
    """The model id an answer names: the session's, else the one the request asked for."""
    if session.model:
        return session.model
    asked = body.get("model")
    return asked if isinstance(asked, str) and asked else DEFAULT_MODEL


def named_model(value: Any) -> str | None:
    """The `model` a canned response body (or its first chunk) names, if any."""
    items = value if isinstance(value, list) else [value]
    for item in items:
        if isinstance(item, dict) and isinstance(item.get("model"), str) and item["model"]:
            return item["model"]
    return None


def completion(session: Session, k: int, turn: Turn, model: str | None = None) -> dict:
    """A turn as a `chat.completion` object."""
    message: dict[str, Any] = {"role": "assistant", "content": turn.text}
    if turn.tool_calls:
        message["tool_calls"] = [
            {"id": _call_id(k, i, c.id), "type": "function", "function": {"name": c.name, "arguments": json.dumps(c.args)}}
            for i, c in enumerate(turn.tool_calls)
        ]
    return {
        "id": f"chatcmpl-{session.name}-{k + 1}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model or session.model or DEFAULT_MODEL,
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if turn.tool_calls else "stop"}],
        "usage": _usage(turn),
    }


def _usage(turn: Turn) -> dict:
    return {"prompt_tokens": turn.usage.in_, "completion_tokens": turn.usage.out, "total_tokens": turn.usage.in_ + turn.usage.out}


def chunks(session: Session, k: int, turn: Turn, include_usage: bool, model: str | None = None) -> list[dict]:
    """The same turn as `chat.completion.chunk` objects, the way a streaming endpoint sends it."""
    head = {
        "id": f"chatcmpl-{session.name}-{k + 1}", "object": "chat.completion.chunk", "created": int(time.time()),
        "model": model or session.model or DEFAULT_MODEL,
    }

    def chunk(delta: dict, finish: str | None = None) -> dict:
        return {**head, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    out = [chunk({"role": "assistant", "content": ""})]
    if turn.text:
        out.append(chunk({"content": turn.text}))
    for i, c in enumerate(turn.tool_calls):
        out.append(chunk({"tool_calls": [{
            "index": i, "id": _call_id(k, i, c.id), "type": "function",
            "function": {"name": c.name, "arguments": json.dumps(c.args)},
        }]}))
    out.append(chunk({}, "tool_calls" if turn.tool_calls else "stop"))
    if include_usage:
        out.append({**head, "choices": [], "usage": _usage(turn)})
    return out


class _Handler(BaseHTTPRequestHandler):
    """One request to an endpoint; `endpoint` is set on the subclass each endpoint makes."""

    endpoint: Endpoint
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        return

    def send_response(self, code: int, message: str | None = None) -> None:
        super().send_response(code, message)
        # every answer names its source: the runner records a run it answered as scripted
        self.send_header(scripted_mark.HEADER, scripted_mark.VALUE)

    def do_GET(self) -> None:
        m = _MODELS.match(self.path)
        route = self._lookup(unquote(m.group("key") or "")) if m else None
        if route is None:
            return self._json(404, _error(f"no such route {self.path}", "not_found"))
        listed = route.session.model or DEFAULT_MODEL
        self._json(200, {"object": "list", "data": [{"id": listed, "object": "model", "owned_by": "cbledger"}]})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        m = _ROUTE.match(self.path)
        key = unquote(m.group("key") or "") if m else None
        route = self._lookup(key) if key is not None else None
        if route is None:
            return self._json(404, _error(f"no session is served at {self.path}", "not_found"))
        try:
            body = json.loads(raw or b"{}")
            if not isinstance(body, dict):
                raise ScriptProblem("the request body is not a JSON object")
            k = self.endpoint._next(route) if route.replay is not None else turn_index(body)
        except (ValueError, ScriptProblem) as exc:
            return self._problem(route, 0, f"bad request: {exc}")
        session = route.session if route.replay is not None else script_mod.stage_session(route.session, body)
        ex = script_mod.exchange_at(session, k)
        if ex is None:
            n = script_mod.length(session)
            if route.replay is not None:
                return self._problem(
                    route, k + 1, f"the cassette holds {n} model call(s); the harness made request {k + 1}",
                    code="cassette_exhausted",
                )
            return self._problem(
                route, k + 1,
                f"session script {session.name!r} has {n} turn(s); the harness asked for turn {k + 1}",
                code="session_script_exhausted",
            )
        differs = None
        if route.replay is not None and ex.request is not None:  # a request not recorded is not compared
            where = normalise.first_difference(
                normalise.value(ex.request, route.replay.workdirs), normalise.value(body, route.replay.workdirs),
            )
            if where is not None:
                differs = where
                if route.replay.strict:
                    return self._problem(
                        route, k + 1, f"request {k + 1} differs from the recorded one at {where}", code="cassette_diverged",
                        differs=where,
                    )
        try:
            check_expectations(session, k, ex, body)
        except ScriptProblem as exc:
            return self._problem(route, k + 1, str(exc), code="session_script_mismatch")
        if ex.delay_ms:
            time.sleep(ex.delay_ms / 1000)
        stream = body.get("stream") is True
        if ex.fault is not None and faults.applies(ex.fault, route.attempts.next(k)):
            self.endpoint._log(route, Served(
                turn=k + 1, status=faults.logged_status(ex.fault), problem=faults.describe(ex.fault), code="injected_fault",
            ))
            return faults.serve(self, ex.fault, stream, self.endpoint._closing)
        if ex.response is not None:
            canned = ex.response.chunks if ex.response.chunks is not None else ex.response.body
            if ex.response.events is not None:
                canned = [_payload(e.data) for e in ex.response.events]
            model, status = named_model(canned), ex.response.status
        else:
            model, status = answering_model(route.session, body), 200
        # logged before the answer goes out: whoever reads the log after the harness got
        # its answer must find it there
        self.endpoint._log(route, Served(turn=k + 1, status=status, model=model, differs=differs))
        if ex.response is not None:
            if ex.response.events is not None:
                self._events(ex.response.status, ex.response.events)
            elif ex.response.chunks is not None:
                self._stream(ex.response.status, ex.response.chunks)
            else:
                self._json(ex.response.status, ex.response.body)
        else:
            assert ex.turn is not None
            if stream:
                opts = body.get("stream_options") or {}
                self._stream(200, chunks(route.session, k, ex.turn, bool(opts.get("include_usage")), model))
            else:
                self._json(200, completion(route.session, k, ex.turn, model))

    def _lookup(self, key: str) -> _Route | None:
        # A run's own socket serves that run's session and no other.
        only = getattr(self.server, "only_key", None)
        if only is not None and key != only:
            return None
        return self.endpoint._route(key)

    def _problem(self, route: _Route, turn: int, message: str, code: str = "bad_request", differs: str | None = None) -> None:
        self.endpoint._log(route, Served(turn=turn, status=400, problem=message, differs=differs, code=code))
        self._json(400, _error(message, code))

    def _json(self, status: int, value: Any) -> None:
        data = json.dumps(value).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _stream(self, status: int, items: list[Any]) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        for item in items:
            payload = item if isinstance(item, str) else json.dumps(item)
            self.wfile.write(f"data: {payload}\n\n".encode())
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()
        self.close_connection = True

    def _events(self, status: int, events: list[script_mod.SseEvent]) -> None:
        """A recorded stream, event by event as it was sent (no `[DONE]` added)."""
        self.send_response(status)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        for e in events:
            head = f"event: {e.event}\n" if e.event else ""
            data = "".join(f"data: {line}\n" for line in e.data.split("\n"))
            self.wfile.write(f"{head}{data}\n".encode())
        self.wfile.flush()
        self.close_connection = True


class Endpoint:
    """A running loopback endpoint. Use as a context manager, or `start()` and `close()`."""

    def __init__(self, host: str = LOOPBACK, port: int = 0):
        self._routes: dict[str, _Route] = {}
        self._lock = threading.Lock()
        Handler = type("Handler", (_Handler,), {"endpoint": self})
        self._handler = Handler
        self._server = QuietServer((host, port), Handler)
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None
        self._sockets: dict[str, _UnixServer] = {}
        #: set when the endpoint closes: a hanging fault lets go of its connection
        self._closing = threading.Event()

    # -- sessions

    def serve(self, key: str, session: Session, replay: Replay | None = None) -> str:
        """Serves `session` under `key` (replacing any before it); returns its base URL. With
        `replay` it is a cassette, answered in request order and compared as `replay` says."""
        if "/" in key:
            raise ValueError(f"route key {key!r} may not contain '/'")
        with self._lock:
            self._routes[key] = _Route(session, replay=replay)
        return self.base_url(key)

    def _next(self, route: _Route) -> int:
        with self._lock:
            route.count += 1
            return route.count - 1

    def serve_socket(self, key: str, path: Path) -> Path:
        """Also answers `key`'s session on a Unix socket at `path`, and only that session: the
        way into the endpoint from a sandbox that has no network of its own. The socket goes
        when `forget(key)` is called."""
        server = _UnixServer(str(path), self._handler)
        server.only_key = key
        os.chmod(path, 0o666)  # a sandbox's processes run under an id of their own
        threading.Thread(target=server.serve_forever, name=f"cbledger-endpoint-{key}", daemon=True).start()
        with self._lock:
            self._sockets[key] = server
        return path

    def forget(self, key: str) -> list[Served]:
        """Stops serving `key`; returns what it served."""
        with self._lock:
            route = self._routes.pop(key, None)
            server = self._sockets.pop(key, None)
        if server is not None:
            server.shutdown()
            server.server_close()
            Path(str(server.server_address)).unlink(missing_ok=True)
        return list(route.log) if route else []

    def served(self, key: str) -> list[Served]:
        with self._lock:
            route = self._routes.get(key)
            return list(route.log) if route else []

    def _route(self, key: str) -> _Route | None:
        with self._lock:
            return self._routes.get(key)

    def _log(self, route: _Route, entry: Served) -> None:
        with self._lock:
            route.log.append(entry)

    # -- lifecycle

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def base_url(self, key: str = "") -> str:
        prefix = f"/sessions/{key}" if key else ""
        return f"http://{LOOPBACK}:{self.port}{prefix}/v1"

    def start(self) -> Endpoint:
        if self._thread is None:
            self._thread = threading.Thread(target=self._server.serve_forever, name="cbledger-endpoint", daemon=True)
            self._thread.start()
        return self

    def serve_forever(self) -> None:
        self._server.serve_forever()

    def close(self) -> None:
        self._closing.set()
        for key in list(self._sockets):
            self.forget(key)
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join()
            self._thread = None
        self._server.server_close()

    def __enter__(self) -> Endpoint:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


class _UnixServer(UnixServer):
    only_key: str | None = None


def _payload(data: str) -> Any:
    try:
        return json.loads(data)
    except ValueError:
        return data


def _error(message: str, code: str) -> dict:
    return {"error": {"message": message, "type": "invalid_request_error", "code": code}}


#: how a run's note names what the endpoint refused of its session script (read back by the
#: progress line, `cli/progress.py`)
SESSION_NOTE = "session script: "


def problems(log: list[Served]) -> list[str]:
    return [f"turn {s.turn}: {s.problem}" for s in log if s.problem]


def answered_models(log: list[Served]) -> tuple[str, ...]:
    """The model ids the endpoint's answers named, distinct, in the order they were first sent."""
    out: list[str] = []
    for s in log:
        if s.model is not None and s.status < 400 and s.model not in out:
            out.append(s.model)
    return tuple(out)

