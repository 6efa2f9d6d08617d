"""A loopback stand-in for a paid provider, OpenAI-shaped and Anthropic-shaped at once: the real
copperhead's SDKs are pointed at it (`OPENAI_BASE_URL`, `ANTHROPIC_BASE_URL`) with a fake key of
the right shape, and it answers like the provider would — a dated model id it names in every
answer, the usage it bills, and `GET /models` for the credential preflight (401 for any other key).

It never marks its answers as the project's scripted endpoint does: to the runner it is a real
provider. `behaviour` is `finish` (one turn that claims it is done) or `loop` (read a file, forever).
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from cbledger.runner.recorder import SHUTDOWN_POLL_SEC

#: a key of each provider's shape, assembled at run time so no file of the project holds one
OPENAI_KEY = "sk-" + "fakeopenai" * 3
ANTHROPIC_KEY = "sk-ant-" + "fakeanthropic" * 2
NAMED = {"openai": "gpt-test-2026-01-01", "anthropic": "claude-test-20260101"}


class FakeProvider:
    def __init__(self, behaviour: str = "finish", tokens_in: int = 1000, tokens_out: int = 100, delay: float = 0.0,
                 usage: bool = True):
        self.behaviour, self.tokens_in, self.tokens_out = behaviour, tokens_in, tokens_out
        self.usage = usage  # False: answers report no usage, as an OpenAI stream asked without include_usage
        self.delay = delay  # seconds before each model call is answered: a run in flight can be killed
        self.calls: list[tuple[str, str]] = []  # (route, path) of each model call
        self.probes: list[str] = []
        handler = type("Handler", (_Handler,), {"provider": self})
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def openai_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def anthropic_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def env(self) -> dict[str, str]:
        return {"OPENAI_API_KEY": OPENAI_KEY, "OPENAI_BASE_URL": self.openai_url,
                "ANTHROPIC_API_KEY": ANTHROPIC_KEY, "ANTHROPIC_BASE_URL": self.anthropic_url}

    def __enter__(self) -> FakeProvider:
        threading.Thread(target=self._server.serve_forever, args=(SHUTDOWN_POLL_SEC,), daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def tool(self) -> tuple[str, dict]:
        if self.behaviour == "loop":
            return "read_file", {"path": "docs/BOM.md"}
        return "finish", {"outcome": "done", "summary": "No change was needed."}

    def openai(self, n: int) -> dict[str, Any]:
        name, args = self.tool()
        return {
            "id": f"chatcmpl-fake-{n}", "object": "chat.completion", "created": 1767225600, "model": NAMED["openai"],
            "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                "role": "assistant", "content": "Working on it.",
                "tool_calls": [{"id": f"call_{n}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}],
            }}],
            **({"usage": {"prompt_tokens": self.tokens_in, "completion_tokens": self.tokens_out,
                          "total_tokens": self.tokens_in + self.tokens_out}} if self.usage else {}),
        }

    def anthropic(self, n: int) -> dict[str, Any]:
        name, args = self.tool()
        return {
            "id": f"msg_fake_{n}", "type": "message", "role": "assistant", "model": NAMED["anthropic"],
            "content": [{"type": "text", "text": "Working on it."}, {"type": "tool_use", "id": f"toolu_{n}", "name": name, "input": args}],
            "stop_reason": "tool_use", "stop_sequence": None,
            **({"usage": {"input_tokens": self.tokens_in, "output_tokens": self.tokens_out}} if self.usage else {}),
        }


class _Handler(BaseHTTPRequestHandler):
    provider: FakeProvider
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        return

    def _send(self, status: int, value: Any) -> None:
        data = json.dumps(value).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        p = self.provider
        p.probes.append(self.path)
        good = self.headers.get("Authorization") == f"Bearer {OPENAI_KEY}" or self.headers.get("x-api-key") == ANTHROPIC_KEY
        if not self.path.endswith("/models") or not good:
            return self._send(401, {"error": {"message": "invalid api key", "type": "authentication_error"}})
        self._send(200, {"object": "list", "data": [{"id": NAMED["openai"]}, {"id": NAMED["anthropic"]}]})

    def do_POST(self) -> None:
        p = self.provider
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        time.sleep(p.delay)
        if self.path.endswith("/chat/completions"):
            p.calls.append(("openai", self.path))
            return self._send(200, p.openai(len(p.calls)))
        if self.path.endswith("/v1/messages"):
            p.calls.append(("anthropic", self.path))
            return self._send(200, p.anthropic(len(p.calls)))
        self._send(404, {"error": {"message": f"no route {self.path}"}})
