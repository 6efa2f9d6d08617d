"""What a run's answered model requests used, read off its cassette.

copperhead sums its tokens into `run-end`, and only there: a run killed at the cap, killed from
outside or crashed writes none, yet the provider billed every request it answered. The recording
proxy kept each answer as the provider sent it, usage included, so the spend of such a run is
the sum over its cassette's answered model calls — what a provider's invoice would say, never
an estimate.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from cbledger.runner.cassette import Cassette, Recorded, model_calls


@dataclass(frozen=True)
class Usage:
    tokens_in: int
    tokens_out: int
    #: how many model calls were answered with a usage block
    calls: int


def from_cassette(cassette: Cassette | None) -> Usage | None:
    """The usage the cassette's answered model calls state; None when none states any."""
    if cassette is None:
        return None
    tin = tout = calls = 0
    for ex in model_calls(cassette):
        counted = _usage(ex)
        if counted is None:
            continue
        tin, tout, calls = tin + counted[0], tout + counted[1], calls + 1
    return Usage(tin, tout, calls) if calls else None


def _usage(ex: Recorded) -> tuple[int, int] | None:
    if ex.status >= 300:
        return None
    if ex.events is not None:
        found = [u for u in (_of(_json(e.data)) for e in ex.events) if u is not None]
        if not found:
            return None
        # OpenAI sends one usage chunk; Anthropic input on message_start, output on message_delta
        return max(u[0] for u in found), max(u[1] for u in found)
    return _of(ex.body)


def _json(data: str) -> Any:
    try:
        return json.loads(data)
    except ValueError:
        return None


def _of(body: Any) -> tuple[int, int] | None:
    if not isinstance(body, dict):
        return None
    usage = body.get("usage")
    if not isinstance(usage, dict) and isinstance(body.get("message"), dict):
        usage = body["message"].get("usage")  # Anthropic's message_start
    if not isinstance(usage, dict):
        return None
    tin = _count(usage.get("prompt_tokens", usage.get("input_tokens")))
    tout = _count(usage.get("completion_tokens", usage.get("output_tokens")))
    if tin is None and tout is None:
        return None
    return tin or 0, tout or 0


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None
