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
* calendar dates (`2026-12-03`, `2026/12/03`: `<date>`) and times of day (`13:52:45`:
  `<clock>`), which KiCad's exports (gerbers, drill files, SVGs) and copperhead's changelog carry;
* in a create run's report (`.copperhead/runs/REPORT.md`, `report.json`), each stage's wall time
  and which stage was the slowest (`<duration>`, `<timing>`);
* in the docs and outputs (any file but the KiCad design files), only run stamps, timestamps,
  calendar dates and times of day;
* ids the provider mints (`chatcmpl-…`, `call_…`) are not replaced: the cassette serves them.

Everything else — every message, tool call, tool result, file byte — must be equal.
"""

from __future__ import annotations

import re
from typing import Any

ISO_TIME = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:?\d{2})?")
RUN_STAMP = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}-\d{3}Z")
DURATION_KEY = re.compile(r"(?:^|[a-z])Ms$|^duration|^elapsed")
#: a calendar date (a changelog heading the harness dates with the day it ran; KiCad's SVG
#: exports write it with slashes)
DATE = re.compile(r"\b\d{4}([-/])\d{2}\1\d{2}\b")
#: a time of day (KiCad's gerber and drill headers: `date 2026-12-03 13:52:45`)
CLOCK = re.compile(r"\b\d{2}:\d{2}:\d{2}\b")
#: copperhead's `fmtDuration` (`6s`, `1m03s`, `2h05m`)
_FMT_DURATION = r"\d+(?:h\d{2}m|m\d{2}s|s)"
#: the create report's Wall column (`| outputs | 6s | 1 | …`) and its slowest-stage line
REPORT_WALL = re.compile(rf"(?m)^(\| [^|\n]+ \| ){_FMT_DURATION}( \|)")
REPORT_SLOWEST = re.compile(rf"Slowest stage: \*\*[\w-]+\*\* \({_FMT_DURATION}\)")
#: report.json's slowest stage: which one is a matter of timing
TIMING_KEYS = {"slowestStage"}
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
    value = REPORT_SLOWEST.sub("Slowest stage: <timing>", REPORT_WALL.sub(r"\1<duration>\2", value))
    return _dates(ISO_TIME.sub("<time>", value))


def _dates(value: str) -> str:
    return CLOCK.sub("<clock>", DATE.sub("<date>", value))


def doc_text(value: str) -> str:
    """For the docs and outputs the harness writes: run stamps (a recorded decision names its
    run), ISO timestamps, calendar dates and times of day (its changelog is dated, KiCad's
    exports are stamped), and nothing else."""
    return _dates(ISO_TIME.sub("<time>", RUN_STAMP.sub("<stamp>", value)))


def value(v: Any, workdirs: tuple[str, ...] = (), commits: dict[str, str] | None = None) -> Any:
    """`v` (decoded JSON) with the documented variables replaced."""
    if isinstance(v, str):
        return text(v, workdirs, commits)
    if isinstance(v, list):
        return [value(x, workdirs, commits) for x in v]
    if isinstance(v, dict):
        out: dict[str, Any] = {}
        for k, x in v.items():
            key = text(str(k), workdirs, commits)
            if DURATION_KEY.search(key) and isinstance(x, (int, float)) and not isinstance(x, bool):
                out[key] = 0
            elif key in TIMING_KEYS:
                out[key] = "<timing>"
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
