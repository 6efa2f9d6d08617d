"""A task's rubric: criteria written as Markdown, read into data.

A rubric is the file the task's `rubric` field names, else `rubric.md` in the task directory.
Each criterion is one list item of the form

    - `criterion-id` (N points): what the judge is to look for

(N a whole number from 1 to 1000; "point" or "points"); every other line is context the judge
is shown with the criteria. The prompt hash recorded with a score is the SHA-256 of the whole
prompt the judge was sent, so two scores share a hash only when the judge saw the same text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from cbledger.errors import UserError
from cbledger.inputs import read_regular

DEFAULT_FILE = "rubric.md"
MAX_BYTES = 64 * 1024
_ITEM = re.compile(r"^\s*[-*]\s+`(?P<id>[a-z0-9][a-z0-9-]{0,63})`\s*\((?P<n>\d{1,4})\s+points?\)\s*:\s*(?P<text>\S.*)$")
#: a line meant as a criterion that does not read as one: a list item opening with a backtick,
#: or any list item (numbered too) that gives points
_LOOSE = re.compile(r"^\s*(?:[-*]\s+`|(?:[-*+]|\d+[.)])\s+.*\(\s*\d+\s+points?\s*\))")


class RubricError(UserError):
    """A rubric that does not read, with where (the line, when one) and why apart: `validate`
    reports them as a file, a field and a message, `judge` as one line."""

    def __init__(self, path: Path, why: str, line: int | None = None) -> None:
        self.path, self.why, self.line = path, why, line
        super().__init__(f"{path}:{line}: {why}" if line is not None else f"{path}: {why}")


@dataclass(frozen=True)
class Criterion:
    id: str
    max_points: int
    text: str


@dataclass(frozen=True)
class Rubric:
    path: Path
    text: str
    criteria: tuple[Criterion, ...]


def rubric_path(task_dir: Path, named: str | None) -> Path:
    return task_dir / (named or DEFAULT_FILE)


def parse(text: str, path: Path) -> Rubric:
    """The criteria of a rubric; a malformed criterion line or none at all is refused, naming the
    file and the line."""
    criteria: list[Criterion] = []
    for n, line in enumerate(text.splitlines(), 1):
        m = _ITEM.match(line)
        if m is None:
            if _LOOSE.match(line):
                raise RubricError(path, "a criterion reads - `id` (N points): text", n)
            continue
        points = int(m.group("n"))
        if not 1 <= points <= 1000:
            raise RubricError(path, f"criterion {m.group('id')!r} has {points} points (1 to 1000)", n)
        if any(c.id == m.group("id") for c in criteria):
            raise RubricError(path, f"criterion {m.group('id')!r} is given twice", n)
        criteria.append(Criterion(m.group("id"), points, m.group("text").strip()))
    if not criteria:
        raise RubricError(path, "no criterion (a list item - `id` (N points): text)")
    return Rubric(path, text, tuple(criteria))


def load(task_dir: Path, named: str | None) -> Rubric | None:
    """The task's rubric, or None when it has none."""
    path = rubric_path(task_dir, named)
    if named is None and not path.is_file():
        return None
    return parse(text_of(path), path)


def text_of(path: Path, shown: Path | None = None) -> str:
    """The rubric file's text (a regular file, at most MAX_BYTES, UTF-8); `shown` names it in a refusal."""
    try:
        return read_regular(path, MAX_BYTES).decode("utf-8")
    except UnicodeDecodeError:
        raise RubricError(shown or path, "not UTF-8") from None
