"""Size limits on what one event may hold, whoever wrote it.

The types bound what they can (patterns, ranges, counts); free text and lists are bounded here,
once for every writer, because a ledger line is read whole by every reader, forever: a 10 MB
actor name appended once makes every later `replay`, `log` and projection hold it in memory.
The limits are far above anything a real event holds (the largest committed event is about
5 kB), so only an input that means harm or is broken meets them.
"""

from __future__ import annotations

from typing import Any

import msgspec

#: the canonical bytes of one event
MAX_EVENT_BYTES = 4 * 1024 * 1024
#: the characters of one string, a key or a value
MAX_TEXT_CHARS = 64 * 1024
#: the items of one array or object
MAX_ITEMS = 100_000
#: No JSON text this short can break a limit, so it is not decoded to look: a string (or key)
#: takes at least one byte per character, and an array or object at least two per item.
_TOO_SHORT_TO_BREAK = min(MAX_TEXT_CHARS, 2 * MAX_ITEMS)


def limit_problem(data: bytes) -> str | None:
    """Why the canonical bytes `data` of one event are over a limit (naming the JSON path), or None."""
    if len(data) > MAX_EVENT_BYTES:
        return f"{len(data)} bytes, over the limit of {MAX_EVENT_BYTES} bytes for one event"
    if len(data) <= _TOO_SHORT_TO_BREAK:
        return None  # every event written so far: the largest is about 5 kB
    try:
        doc = msgspec.json.decode(data)
    except msgspec.DecodeError:
        return None  # not JSON: the typed decode names why
    stack: list[tuple[str, Any]] = [("$", doc)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, str):
            if len(value) > MAX_TEXT_CHARS:
                return f"{len(value)} characters, over the limit of {MAX_TEXT_CHARS} - at `{path}`"
        elif isinstance(value, dict | list):
            if len(value) > MAX_ITEMS:
                return f"{len(value)} items, over the limit of {MAX_ITEMS} - at `{path}`"
            if isinstance(value, dict):
                for key, item in value.items():
                    if len(key) > MAX_TEXT_CHARS:
                        return f"a key of {len(key)} characters, over the limit of {MAX_TEXT_CHARS} - at `{path}`"
                    stack.append((f"{path}.{key}", item))
            else:
                stack.extend((f"{path}[{i}]", item) for i, item in enumerate(value))
    return None
