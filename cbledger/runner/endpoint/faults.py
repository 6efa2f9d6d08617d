"""Provider faults a session script can declare per exchange, served by the loopback endpoint.

A real provider answers 500s and 429s, drops connections, hangs, and sends bodies that do not
parse or end early. The runner must tell those apart from the model's own failures
(`cbledger.runner.harness_failure`), and that can only be proved against the real harness if the
endpoint can misbehave the same ways on cue. An exchange's `fault` is served instead of its answer
for the first `times` requests of that turn (every request, by default); the harness's own retries
ask for the same turn again, so `times: 1` with a `turn` beside it is a fault the harness may
recover from, and a fault it recovers from is no failure.

Kinds:

* `status`: an HTTP error (`status`, 500 by default) with an OpenAI-style error body and, when
  `retryAfter` is given, a `Retry-After` header (a 429 is `{"kind": "status", "status": 429}`).
* `reset`: the connection is reset (closed with TCP RST) before any byte of an answer.
* `hang`: no answer; the connection is held open until the client gives up or the endpoint closes.
* `malformed-json`: a 200 whose JSON body is cut in the middle of an object.
* `truncated-stream`: the answer ends early: a stream stops after its first chunk with no
  `[DONE]`, a plain answer sends fewer bytes than its `Content-Length` and closes.
"""

from __future__ import annotations

import json
import select
import socket
import struct
import threading
from typing import TYPE_CHECKING, Annotated, Literal

from msgspec import Meta, Struct

if TYPE_CHECKING:
    from http.server import BaseHTTPRequestHandler

Kind = Literal["status", "reset", "hang", "malformed-json", "truncated-stream"]


class Fault(Struct, forbid_unknown_fields=True, rename="camel", frozen=True, kw_only=True):
    kind: Kind
    #: the HTTP status of a `status` fault
    status: Annotated[int, Meta(ge=400, le=599)] = 500
    #: seconds, sent as `Retry-After` with a `status` fault
    retry_after: Annotated[int, Meta(ge=0)] | None = None
    #: how many requests of this turn get the fault before the exchange's answer is served;
    #: `"forever"` (the default) never answers it
    times: Annotated[int, Meta(ge=1)] | Literal["forever"] = "forever"


def applies(fault: Fault, attempt: int) -> bool:
    """Whether the `attempt`-th request (1-based) of a turn gets the fault."""
    return fault.times == "forever" or attempt <= fault.times


def describe(fault: Fault) -> str:
    if fault.kind == "status":
        after = f" (Retry-After {fault.retry_after}s)" if fault.retry_after is not None else ""
        return f"injected fault: HTTP {fault.status}{after}"
    return f"injected fault: {fault.kind}"


def logged_status(fault: Fault) -> int:
    """The status the endpoint's log records: the HTTP status sent, 200 for a body that breaks
    after a 200, 0 for a connection that never got an answer."""
    if fault.kind == "status":
        return fault.status
    return 200 if fault.kind in ("malformed-json", "truncated-stream") else 0


class Attempts:
    """How many requests each turn of one route has had: the harness retries a turn by sending
    the same request again, which the stateless turn index cannot tell from the first."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seen: dict[int, int] = {}

    def next(self, k: int) -> int:
        with self._lock:
            self._seen[k] = self._seen.get(k, 0) + 1
            return self._seen[k]


def serve(handler: BaseHTTPRequestHandler, fault: Fault, stream: bool, closing: threading.Event) -> None:
    """Sends `fault` on the handler's connection instead of an answer."""
    if fault.kind == "status":
        body = json.dumps({"error": {
            "message": f"injected fault: the provider answered {fault.status}", "type": "server_error" if fault.status >= 500 else "rate_limit_error",
            "code": "injected_fault",
        }}).encode()
        handler.send_response(fault.status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(body)))
        if fault.retry_after is not None:
            handler.send_header("Retry-After", str(fault.retry_after))
        handler.end_headers()
        handler.wfile.write(body)
        return
    handler.close_connection = True
    conn = handler.connection
    if fault.kind == "reset":
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        return  # the server closes the socket after the handler: with linger 0 that is a RST
    if fault.kind == "hang":
        _hold(conn, closing)
        return
    if fault.kind == "malformed-json":
        body = b'{"id": "chatcmpl-injected", "object": "chat.completion", "choices": [{"index": 0, "message": {"role": "assist'
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)
        return
    if stream:
        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream")
        handler.send_header("Connection", "close")
        handler.end_headers()
        first = {"id": "chatcmpl-injected", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}
        handler.wfile.write(f"data: {json.dumps(first)}\n\n".encode())
        handler.wfile.flush()
        return
    body = b'{"id": "chatcmpl-injected", "object": "chat.completion", "choices": []}'
    handler.send_response(200)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(body) * 2))
    handler.end_headers()
    handler.wfile.write(body)
    handler.wfile.flush()


def _hold(conn: socket.socket, closing: threading.Event) -> None:
    """Waits, answering nothing, until the client closes its end or the endpoint shuts down."""
    while not closing.is_set():
        readable, _, _ = select.select([conn], [], [], 0.2)
        if readable:
            try:
                if not conn.recv(1, socket.MSG_PEEK):
                    return
            except OSError:
                return
            closing.wait(0.2)  # the client sent more: keep waiting without spinning
