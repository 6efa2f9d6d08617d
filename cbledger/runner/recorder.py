"""The recording proxy: a loopback HTTP server in front of a run's provider that forwards every
request unchanged and writes down what passed (`cbledger.runner.cassette`).

The harness is pointed at the proxy instead of its provider (the compat route's base URL, or the
OpenAI and Anthropic SDKs' base-URL variables), so its behaviour is untouched: its cache, its
retries, its streaming are all its own; only the wire is observed. The proxy changes nothing a
provider or the harness could tell, with two transport-level exceptions: it asks the provider
for an uncompressed answer (`Accept-Encoding: identity`, so the recording is the bytes the
harness reads), and it frames what it relays itself (hop-by-hop headers are not passed on).

Headers are forwarded but never recorded: the keys are in them. Bodies are recorded after the
credential backstop has redacted them (`Recorded.redacted` says when it did). A streamed answer
is relayed event by event as it arrives and recorded the same way.

A proxy serves one run. It answers only below its upstream's own path (a run's socket into a
shared loopback endpoint reaches that run's session and no other), on a TCP port of the host's
loopback and, for a sandbox without a network, on a Unix socket relayed inside it.
"""

from __future__ import annotations

import http.client
import json
import os
import socketserver
import sys
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from msgspec import UNSET

from cbledger.runner import budget, scripted_mark
from cbledger.runner import cassette as cassette_mod
from cbledger.runner.cassette import Cassette, Recorded, Route, SseEvent

LOOPBACK = "127.0.0.1"
#: not passed on in either direction: they describe one connection, not the message
HOP_BY_HOP = frozenset({
    "connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer",
    "transfer-encoding", "upgrade", "host", "content-length", "accept-encoding",
})
UPSTREAM_TIMEOUT_SEC = 600


#: how long `shutdown()` waits, at most, for a serving thread to notice it. socketserver's own
#: half a second was paid at the end of every run, once per server (the proxy, its socket into
#: the sandbox, the scripted endpoint's session socket): a second or more per run, idle.
SHUTDOWN_POLL_SEC = 0.02


class PromptShutdown:
    """A socketserver that stops within `SHUTDOWN_POLL_SEC` of being told to."""

    def serve_forever(self, poll_interval: float = SHUTDOWN_POLL_SEC) -> None:
        super().serve_forever(poll_interval)  # type: ignore[misc]


class QuietServer(PromptShutdown, ThreadingHTTPServer):
    """A loopback server (this proxy, the scripted endpoint) whose client goes away mid-answer (a
    harness killed at its cap, or a hostile one) closes its end: that is the run's business,
    recorded with it, not a traceback on the runner's console."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            return
        super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    recorder: Recorder
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        return

    def do_GET(self) -> None:
        self._relay("GET")

    def do_POST(self) -> None:
        self._relay("POST")

    def _relay(self, method: str) -> None:
        rec = self.recorder
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if not (self.path == rec.prefix or self.path.startswith(rec.prefix + "/")):
            return self._refuse(404, f"the recording proxy forwards only below {rec.prefix}")
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
        headers["Accept-Encoding"] = "identity"
        started = time.monotonic()
        if method == "POST" and rec.meter is not None and rec.meter.stop_reason():
            # a money limit is reached: this call is not sent, and the refusal is on the cassette
            refusal = rec.meter.refuse()
            rec.add(method, self.path, raw, budget.REFUSAL_STATUS, json.dumps(refusal).encode(), None, started)
            return self._send_json(budget.REFUSAL_STATUS, refusal)
        conn = rec.connection()
        ticket = rec.pending(method, self.path, raw, started)
        try:
            conn.request(method, self.path, body=raw if method == "POST" else None, headers=headers)
            resp = conn.getresponse()
        except OSError as exc:
            conn.close()
            rec.add(method, self.path, raw, 502, f"upstream unreachable: {exc}".encode(), None, started,
                    failure=f"no answer: {exc or type(exc).__name__}")
            try:
                return self._refuse(502, f"the recording proxy could not reach the provider: {exc}")
            except OSError:  # the harness has gone too (killed while it waited)
                self.close_connection = True
                return None
        finally:
            rec.answered(ticket)
        marked = scripted_mark.marked(resp.getheader)
        rec.scripted = rec.scripted or marked
        try:
            stream = (resp.getheader("Content-Type") or "").startswith("text/event-stream")
            self.send_response(resp.status)
            for k, v in resp.getheaders():
                if k.lower() not in HOP_BY_HOP:
                    self.send_header(k, v)
            # Each answer is recorded before the harness has the whole of it: it may end the run on
            # that answer, and the runner then takes the cassette, which must already hold it (under
            # load the exchange was added after the harness had exited, and a rerun ran out of it).
            if stream:
                self.send_header("Connection", "close")
                self.end_headers()
                self._relay_stream(resp, lambda events: rec.add(
                    method, self.path, raw, resp.status, None, events, started, metered=not marked))
                self.close_connection = True
            else:
                try:
                    data = resp.read()
                except (OSError, http.client.HTTPException) as exc:
                    # the answer broke off: the harness gets what it would have got from the
                    # provider, a connection closed without a whole answer
                    rec.add(method, self.path, raw, 502, None, None, started,
                            failure=f"answer cut short: {type(exc).__name__}")
                    self.close_connection = True
                    return
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                rec.add(method, self.path, raw, resp.status, data, None, started, metered=not marked)
                self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            # the harness went away while its answer was relayed (Ctrl-C, a kill): nobody is left
            # to answer, and a traceback from this thread would bury the run's own last line
            self.close_connection = True
        finally:
            conn.close()

    def _relay_stream(self, resp: http.client.HTTPResponse, recorded: Callable[[list[SseEvent]], None]) -> None:
        """Passes each line on as it arrives, one line behind, and parses the server-sent events it
        makes up; `recorded` is given them all before the last line goes (see `_relay`)."""
        events: list[SseEvent] = []
        name: str | None = None
        data: list[str] = []
        held = b""
        while True:
            line = resp.readline()
            if not line:
                break
            if held:
                self.wfile.write(held)
                self.wfile.flush()
            held = line
            text = line.decode("utf-8", "replace").rstrip("\r\n")
            if text == "":
                if data:
                    events.append(SseEvent(data="\n".join(data), event=name))
                name, data = None, []
            elif text.startswith("event:"):
                name = text[6:].strip()
            elif text.startswith("data:"):
                data.append(text[5:].lstrip(" ") if text[5:6] == " " else text[5:])
        if data:
            events.append(SseEvent(data="\n".join(data), event=name))
        recorded(events)
        if held:
            self.wfile.write(held)
            self.wfile.flush()

    def _refuse(self, status: int, message: str) -> None:
        self._send_json(status, {"error": {"message": message, "type": "proxy_error", "code": "recording_proxy"}})

    def _send_json(self, status: int, value: Any) -> None:
        data = json.dumps(value).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class UnixServer(PromptShutdown, socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    """The way into a loopback server from a sandbox that has no network of its own."""

    daemon_threads = True


def _decoded(data: bytes) -> Any:
    try:
        return json.loads(data)
    except ValueError:
        return data.decode("utf-8", "replace")


class Recorder:
    """A running proxy to `upstream` (a base URL). Use as a context manager; `cassette()` is
    what it recorded so far, `base_url` where to point the harness."""

    def __init__(self, upstream: str, route: Route, model_id: str, workdir: Path | None = None):
        parts = urlsplit(upstream)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) base URL: {upstream!r}")
        self.upstream = parts
        self.prefix = parts.path.rstrip("/")
        self.route, self.model_id = route, model_id
        self.workdir = str(workdir) if workdir is not None else None
        self._lock = threading.Lock()
        self._exchanges: list[Recorded] = []
        self._in_flight: dict[int, tuple[str, str, bytes, float]] = {}
        #: whether any answer carried the project's scripted endpoint's mark
        self.scripted = False
        #: the run's spend against its money limits (`cbledger.runner.budget`), when it has any
        self.meter: budget.Meter | None = None
        self._handler = type("Handler", (_Handler,), {"recorder": self})
        self._server = QuietServer((LOOPBACK, 0), self._handler)
        self._server.daemon_threads = True
        self._unix: UnixServer | None = None
        self._threads: list[threading.Thread] = []

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}{self.prefix}"

    def connection(self) -> http.client.HTTPConnection:
        host, port = self.upstream.hostname or "", self.upstream.port
        if self.upstream.scheme == "https":
            return http.client.HTTPSConnection(host, port, timeout=UPSTREAM_TIMEOUT_SEC)
        return http.client.HTTPConnection(host, port, timeout=UPSTREAM_TIMEOUT_SEC)

    def serve_socket(self, path: Path) -> Path:
        """Also answers on a Unix socket at `path`: the way in from a sandbox with no network."""
        self._unix = UnixServer(str(path), self._handler)
        os.chmod(path, 0o666)  # a sandbox's processes run under an id of their own
        self._start(self._unix)
        return path

    def _start(self, server: socketserver.BaseServer) -> None:
        t = threading.Thread(target=server.serve_forever, name="cbledger-recorder", daemon=True)
        t.start()
        self._threads.append(t)

    def pending(self, method: str, path: str, raw: bytes, started: float) -> object:
        """Notes a request in flight: one still unanswered when the cassette is taken (a hung
        provider, a run killed mid-call) is recorded as such."""
        ticket = object()
        with self._lock:
            self._in_flight[id(ticket)] = (method, path, raw, started)
        return ticket

    def answered(self, ticket: object) -> None:
        with self._lock:
            self._in_flight.pop(id(ticket), None)

    def add(self, method: str, path: str, raw: bytes, status: int, body: bytes | None,
            events: list[SseEvent] | None, started: float, failure: str | None = None, *, metered: bool = True) -> None:
        entry = self.recorded(method, path, raw, status, body, events, started, failure)
        with self._lock:
            self._exchanges.append(entry)
        # an answer of the project's own endpoint costs nothing by rule (docs/RUNNER.md, section 10);
        # decided per answer, so a marked answer never switches the metering of the others off
        if self.meter is not None and method == "POST" and status < 400 and failure is None and metered:
            self.meter.answer(budget.usage(entry.body, entry.events))

    def recorded(self, method: str, path: str, raw: bytes, status: int, body: bytes | None,
                 events: list[SseEvent] | None, started: float, failure: str | None = None) -> Recorded:
        request, r1 = cassette_mod.clean(_decoded(raw)) if raw else (None, False)
        answer, r2 = cassette_mod.clean(_decoded(body)) if body is not None else (None, False)
        kept_events = None
        r3 = False
        if events is not None:
            kept_events = []
            for e in events:
                data, changed = cassette_mod.clean(e.data)
                kept_events.append(SseEvent(data=data, event=e.event))
                r3 = r3 or changed
        below = path[len(self.prefix):] or "/"
        entry = Recorded(
            method="POST" if method == "POST" else "GET", path=below, request=request, status=status, body=answer,
            events=kept_events, elapsed_ms=round((time.monotonic() - started) * 1000),
            model=cassette_mod.named_model(answer, kept_events), redacted=r1 or r2 or r3,
            failure=UNSET if failure is None else failure,
        )
        return entry

    def cassette(self) -> Cassette:
        with self._lock:
            exchanges = list(self._exchanges)
            in_flight = sorted(self._in_flight.values(), key=lambda p: p[3])
        for method, path, raw, started in in_flight:
            exchanges.append(self.recorded(method, path, raw, 504, None, None, started, "no answer before the run ended"))
        return Cassette(format=cassette_mod.FORMAT, route=self.route, model_id=self.model_id,
                        exchanges=exchanges, workdir=self.workdir)

    def __enter__(self) -> Recorder:
        self._start(self._server)
        return self

    def close(self) -> None:
        for server in (self._unix, self._server):
            if server is not None:
                server.shutdown()
                server.server_close()
        if self._unix is not None:
            Path(str(self._unix.server_address)).unlink(missing_ok=True)

    def __exit__(self, *exc: object) -> None:
        self.close()
