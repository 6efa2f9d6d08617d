"""What two executions of one run may differ in and still be the same run.

A re-execution runs in a sandbox of its own, at another time, so the harness's requests and its
transcript carry another sandbox path, other timestamps and other run ids. Those, and only those,
are replaced by placeholders before anything is compared (docs/REPRODUCE.md lists them):

* the sandbox's absolute path → `<sandbox>`;
* where copperhead is installed (`…/node_modules/copperhead`) → `<copperhead>`;
* ISO-8601 timestamps → `<time>`, copperhead run stamps (`2026-12-01T23-59-59-123Z`) → `<stamp>`;
* durations (`durationMs`, `elapsedMs` and other `…Ms` fields) → 0, and in prose
  (`**Duration:** 9s`) → `<duration>`;
* the ids of the commits the harness made during the run (their committer time differs) →
  `<commit-1>`, `<commit-2>`, … in the order they were made (the seed and baseline commits are
  deterministic and compared as they are);
* in the docs (any file but the KiCad design files), only run stamps, timestamps and calendar
  dates (`<date>`);
* ids the provider mints (`chatcmpl-…`, `call_…`) are not replaced: the cassette serves them.

Everything else — every message, tool call, tool result, file byte — must be equal.
"""

from __future__ import annotations

import re
from typing import Any

ISO_TIME = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:?\d{2})?")
RUN_STAMP = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}-\d{3}Z")
DURATION_KEY = re.compile(r"(?:^|[a-z])Ms$|^duration|^elapsed")
#: a calendar date (a changelog heading the harness dates with the day it ran)
DATE = re.compile(r"\b\d{4}-\d{2}-\d{2}\b")
#: where copperhead was installed (its transcript and summary name it): outside the sandbox, or
#: the read-only mount inside it
INSTALL = re.compile(r"(?:/[^\s\"'`<>]+)?/node_modules/copperhead\b")
#: a duration written out in prose (copperhead's `summary.md`: `**Duration:** 9s`)
DURATION_TEXT = re.compile(r"(?i)(duration\W{0,6}\s*)\d+(?:\.\d+)?\s*(?:ms|s|m|h|min)?\b")


def text(value: str, workdirs: tuple[str, ...] = (), commits: dict[str, str] | None = None) -> str:
    commits = commits or {}
    for w in sorted(workdirs, key=len, reverse=True):
        if w:
            value = value.replace(w, "<sandbox>")
    for old, new in commits.items():
        value = value.replace(old, new)
    value = RUN_STAMP.sub("<stamp>", value)
    value = DURATION_TEXT.sub(r"\1<duration>", value)
    value = INSTALL.sub("<copperhead>", value)
    return ISO_TIME.sub("<time>", value)


def doc_text(value: str) -> str:
    """For the docs the harness writes: run stamps (a recorded decision names its run), ISO
    timestamps and calendar dates (its changelog is dated), and nothing else."""
    return DATE.sub("<date>", ISO_TIME.sub("<time>", RUN_STAMP.sub("<stamp>", value)))


def value(v: Any, workdirs: tuple[str, ...] = (), commits: dict[str, str] | None = None) -> Any:
    """`v` (decoded JSON) with the documented variables replaced."""
    if isinstance(v, str):
        return text(v, workdirs, commits)
    if isinstance(v, list):
        return [value(x, workdirs, commits) for x in v]
    if isinstance(v, dict):
        out = {}
        for k, x in v.items():
            key = text(str(k), workdirs, commits)
            if DURATION_KEY.search(key) and isinstance(x, (int, float)) and not isinstance(x, bool):
                out[key] = 0
            else:
                out[key] = value(x, workdirs, commits)
        return out
    return v


def first_difference(a: Any, b: Any, path: str = "$") -> str | None:
    """The JSON path where `a` and `b` first differ (depth first, in key order), or None."""
    if type(a) is not type(b):
        return path
    if isinstance(a, dict):
        for k in list(a) + [k for k in b if k not in a]:
            if k not in a or k not in b:
                return f"{path}.{k}"
            found = first_difference(a[k], b[k], f"{path}.{k}")
            if found:
                return found
        return None
    if isinstance(a, list):
        for i, (x, y) in enumerate(zip(a, b, strict=False)):
            found = first_difference(x, y, f"{path}[{i}]")
            if found:
                return found
        return None if len(a) == len(b) else f"{path}[{min(len(a), len(b))}]"
    return None if a == b else path
