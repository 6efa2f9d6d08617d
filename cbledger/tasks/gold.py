"""The rules a task's gold solution keeps: it acts only inside the sandbox it is applied to.

`gold/files/` holds regular files only (a symbolic link would copy whatever it points at, from
anywhere on the machine, into a run's bundle), and `gold/delete.txt` names relative paths inside
the tree only (an absolute path or a `..` would delete a file outside the sandbox; `.git/` is
the runner's). `cbledger validate`, the runner's preflight and the gold agent itself apply the
same rules, so a gold solution that breaks one is refused before anything is touched.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from cbledger.credentials import printable

FILES = "files"
DELETIONS = "delete.txt"
TRANSCRIPT = "transcript.jsonl"


@dataclass(frozen=True)
class GoldProblem:
    file: str  # relative to the gold directory
    message: str


def problems(gold: Path) -> list[GoldProblem]:
    """Every way `gold` could act outside a sandbox; empty when it cannot."""
    if not os.path.lexists(gold):
        return []
    if gold.is_symlink() or not gold.is_dir():
        return [GoldProblem(".", "gold/ must be a directory of the task, not a link or a file")]
    found: list[GoldProblem] = []
    for name in (FILES, DELETIONS, TRANSCRIPT):
        if (gold / name).is_symlink():
            found.append(GoldProblem(name, "a symbolic link: gold solutions hold their own files, never links"))
    files = gold / FILES
    if files.is_dir() and not files.is_symlink():
        found.extend(_file_problems(files))
    deletions = gold / DELETIONS
    if deletions.is_file() and not deletions.is_symlink():
        found.extend(_deletion_problems(deletions))
    return found


def _file_problems(files: Path) -> list[GoldProblem]:
    found = []
    for dirpath, dirnames, filenames in os.walk(files):
        for name in (*dirnames, *filenames):
            full = Path(dirpath, name)
            rel = f"{FILES}/{full.relative_to(files).as_posix()}"
            mode = os.lstat(full).st_mode
            if stat.S_ISLNK(mode):
                found.append(GoldProblem(printable(rel), "a symbolic link: gold files must be regular files (it would copy what it points at)"))
            elif not (stat.S_ISDIR(mode) or stat.S_ISREG(mode)):
                found.append(GoldProblem(printable(rel), "not a regular file"))
            elif rel == f"{FILES}/.git" or rel.startswith(f"{FILES}/.git/"):
                found.append(GoldProblem(printable(rel), "a gold solution never writes the sandbox's .git/"))
    return found


def _deletion_problems(deletions: Path) -> list[GoldProblem]:
    found = []
    for lineno, line in enumerate(deletions.read_text(encoding="utf-8", errors="replace").splitlines(), start=1):
        rel = line.strip()
        if not rel or rel.startswith("#"):
            continue
        where = f"{DELETIONS}:{lineno}"
        why = outside(rel)
        if why:
            found.append(GoldProblem(where, f"{printable(rel)!r} {why}"))
    return found


def outside(rel: str) -> str | None:
    """Why a path named by a gold solution would leave the sandbox's tree, or None."""
    pure = PurePosixPath(rel)
    if pure.is_absolute() or rel.startswith("~"):
        return "is an absolute path; name paths relative to the tree"
    if ".." in pure.parts:
        return "leaves the tree through `..`"
    if "\\" in rel or "\0" in rel:
        return "holds a backslash or NUL"
    if pure.parts and pure.parts[0] == ".git":
        return "is inside .git/, which is the runner's"
    return None


def deletions(gold: Path) -> list[str]:
    """The paths `delete.txt` names, in order (after `problems` found none)."""
    path = gold / DELETIONS
    if not path.is_file():
        return []
    lines = (line.strip() for line in path.read_text(encoding="utf-8", errors="replace").splitlines())
    return [line for line in lines if line and not line.startswith("#")]
