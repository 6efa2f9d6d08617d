"""An OpenAI-compatible chat-completions client for the judge lane, routed as the runner routes
copperhead.

A judge model id is read the way the runner reads a model id for the harness: `compat:<id>` goes
to `$COPPERHEAD_BASE_URL` (a loopback endpoint needs no key; a remote one needs
`$COPPERHEAD_API_KEY_ENV` naming the variable that holds its key, exactly as for a run), any
other id goes to OpenAI's API with `$OPENAI_API_KEY`. The key is resolved by the runner's own
`key_variables`, so the judge can never send a credential where a run would not. In the tests the
provider is the project's loopback endpoint (`cbledger.runner.endpoint`) serving a scripted
judge session: no model, no key, no network.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from dataclasses import dataclass

from cbledger.errors import UserError
from cbledger.runner.agents.copperhead import (
    BASE_URL_VARIABLE,
    KEY_ENV_VARIABLE,
    is_loopback,
    key_variables,
)

OPENAI_BASE = "https://api.openai.com/v1"
TIMEOUT_SEC = 300
MAX_ANSWER_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True)
class Answer:
    text: str
    tokens_in: int
    tokens_out: int
    #: the model the provider named in its answer, if any
    model: str | None


@dataclass(frozen=True)
class Route:
    base_url: str
    wire_model: str
    key: str | None


def route(model_id: str, env: dict[str, str], base_url: str | None = None) -> Route:
    """Where a judge model is asked and with which key (the runner's rules)."""
    source = dict(env)
    if base_url is not None:
        source[BASE_URL_VARIABLE] = base_url
    if model_id.startswith("compat:"):
        keys = key_variables(model_id, source)
        named = keys.get(KEY_ENV_VARIABLE)
        return Route(source[BASE_URL_VARIABLE].rstrip("/"), model_id.split(":", 1)[1], keys.get(named) if named else None)
    if model_id.split(":", 1)[0] in ("codex", "cursor", "claude-code") or model_id.startswith("claude"):
        raise UserError(f"judge model {model_id}: only OpenAI-compatible routes can judge (compat:<id>, or an OpenAI model)")
    key = key_variables(model_id, source).get("OPENAI_API_KEY")
    if not key:
        raise UserError(f"judge model {model_id} is OpenAI's: set $OPENAI_API_KEY")
    return Route(OPENAI_BASE, model_id, key)


def chat(r: Route, messages: list[dict[str, str]]) -> Answer:
    """One non-streaming completion at temperature 0."""
    body = json.dumps({"model": r.wire_model, "messages": messages, "temperature": 0, "stream": False}).encode()
    headers = {"Content-Type": "application/json"}
    if r.key is not None:
        headers["Authorization"] = f"Bearer {r.key}"
    elif not is_loopback(r.base_url):
        raise UserError(f"{r.base_url} is not loopback and no key is set for it")
    request = urllib.request.Request(f"{r.base_url}/chat/completions", data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_SEC) as response:
            raw = response.read(MAX_ANSWER_BYTES + 1)
    except urllib.error.HTTPError as exc:
        detail = exc.read(2000).decode("utf-8", "replace")
        raise UserError(f"judge endpoint answered HTTP {exc.code}: {detail}") from None
    except (urllib.error.URLError, OSError) as exc:
        raise UserError(f"judge endpoint {r.base_url} unreachable: {exc}") from None
    if len(raw) > MAX_ANSWER_BYTES:
        raise UserError(f"judge endpoint's answer is over {MAX_ANSWER_BYTES} bytes")
    try:
        data = json.loads(raw)
        text = data["choices"][0]["message"]["content"]
        usage = data.get("usage") or {}
        tin, tout = int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0)
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        raise UserError(f"judge endpoint's answer is not a chat completion ({exc})") from None
    if not isinstance(text, str):
        raise UserError("judge endpoint's answer has no text content")
    model = data.get("model")
    return Answer(text, max(tin, 0), max(tout, 0), model if isinstance(model, str) and model else None)
