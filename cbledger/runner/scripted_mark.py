"""The mark the project's own scripted endpoint puts on every answer, and the check for it.

A loopback address cannot tell a session script from a self-hosted model (both are `compat:` on
127.0.0.1), and a `--model` flag is whatever the operator typed. So the endpoint says what it is
in every response it sends, and the recording proxy every run passes reads it: a run any of whose
answers carried the mark was answered by a script and is recorded as `scripted`, never as a
model's run, whatever the flags said.
"""

from __future__ import annotations

from collections.abc import Callable

#: the response header the scripted endpoint sends with every answer, errors included
HEADER = "X-Cbledger-Endpoint"
VALUE = "scripted-session"


def marked(get_header: Callable[[str], str | None]) -> bool:
    """Whether an answer carries the mark (`get_header`: the response's header lookup)."""
    return (get_header(HEADER) or "").strip() == VALUE


def note(model_id: str) -> str:
    return (
        f"answered by the project's scripted endpoint (its answers carry {HEADER}: {VALUE}), not by a model: "
        f"recorded as scripted although run as {model_id}"
    )
