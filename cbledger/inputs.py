"""Reading input that someone else wrote: bounded, regular files only, strict JSON.

Imported evidence, a ledger batch, a task file and an agent's transcript are all written by
someone cbledger does not trust to be careful or honest. A reader that follows a symlink copies
whatever it points at (a private key, a credentials file) into the published results; one that
opens a FIFO waits forever; one that recurses per nesting level dies on `[[[[…`; one that keeps
the last of two equal keys lets two readers of the same bytes see different values. So every
such input goes through here: a regular file opened without following a link and without
blocking, read up to a stated size, and JSON with bounded nesting and no repeated key. Every
refusal names the file (and the field, where there is one). Domain-free: every layer may use it.
"""

from __future__ import annotations

import codecs
import errno
import json
import os
import re
import stat
from pathlib import Path, PurePosixPath
from typing import Any

from cbledger.errors import UserError

#: Deepest JSON nesting any input may have; every real document here is under 10.
MAX_JSON_DEPTH = 64
MiB = 1024 * 1024
#: A key, checkpoint or proof file: far above any real one (a few kB).
MAX_NOTE_BYTES = 16 * MiB


class InputError(UserError):
    """Input refused before it was used."""


def read_regular(path: Path, limit: int, what: str | None = None, *, follow: bool = False) -> bytes:
    """The bytes of `path`, which must be a regular file (not a symlink, FIFO, device or
    directory) of at most `limit` bytes. Opened with O_NOFOLLOW and O_NONBLOCK, so a link is
    refused by the kernel and a FIFO never blocks. `follow=True` is for a file the user names
    for display only (a schematic to inspect), where a link to a regular file is read."""
    label = f"{printable_path(path)}" + (f" ({what})" if what else "")
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | (0 if follow else getattr(os, "O_NOFOLLOW", 0))
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise InputError(f"{label}: no such file") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise InputError(f"{label}: a symlink; only regular files are read") from None
        raise InputError(f"{label}: cannot be read: {exc.strerror}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise InputError(f"{label}: {kind_of(st.st_mode)}; only regular files are read")
        if st.st_size > limit:
            raise InputError(f"{label}: {st.st_size} bytes, over the limit of {limit} bytes")
        chunks, total = [], 0
        while True:
            chunk = os.read(fd, min(limit + 1 - total, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > limit:
                raise InputError(f"{label}: over the limit of {limit} bytes")
        return b"".join(chunks)
    finally:
        os.close(fd)


def kind_of(mode: int) -> str:
    """What a file that is not a regular one is, for the message refusing it."""
    for test, kind in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISLNK, "a symlink")):
        if test(mode):
            return kind
    return "not a regular file"


def refuse_non_regular(path: Path, what: str | None = None) -> None:
    """Refuses `path` unless it is a regular file, judged from `lstat` without opening it (a FIFO
    opened to be read blocks until a writer comes): for a file read by another library."""
    label = f"{printable_path(path)}" + (f" ({what})" if what else "")
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        raise InputError(f"{label}: no such file") from None
    except OSError as exc:
        raise InputError(f"{label}: cannot be read: {exc.strerror}") from None
    if not stat.S_ISREG(mode):
        raise InputError(f"{label}: {kind_of(mode)}; only regular files are read")


def relative_under(root: Path, value: str, field: str, where: str) -> Path:
    """`value` (a path an input names) as a path under `root`: relative, no `..`, and no
    component of it a symlink. Refuses naming the field and the file that gave the path."""
    if not value or "\0" in value:
        raise InputError(f"{where}: {field}: not a path")
    pure = PurePosixPath(value)
    if pure.is_absolute() or Path(value).is_absolute():
        raise InputError(f"{where}: {field}: {printable_path(value)} is an absolute path; paths must be relative to the import root")
    if ".." in pure.parts:
        raise InputError(f"{where}: {field}: {printable_path(value)} contains '..'; paths must stay under the import root")
    current = root
    for part in pure.parts:
        current = current / part
        try:
            st = os.lstat(current)
        except FileNotFoundError:
            raise InputError(f"{where}: {field}: no such file: {printable_path(value)} (paths are relative to the import root {root})") from None
        if stat.S_ISLNK(st.st_mode):
            raise InputError(f"{where}: {field}: {printable_path(value)} goes through a symlink ({current.name}); only regular files under the import root are read")
    return current


# --------------------------------------------------------------------------- JSON

_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.S)
_BRACKET = re.compile(rb"[\[\]{}]")


def json_depth(data: bytes) -> int:
    """The deepest nesting of arrays and objects in `data`, strings ignored. Linear, no recursion."""
    depth = deepest = 0
    for m in _BRACKET.finditer(_STRING.sub(b'""', data)):
        if m.group() in (b"[", b"{"):
            depth += 1
            deepest = max(deepest, depth)
        else:
            depth -= 1
    return deepest


def json_deeper_than(data: bytes, limit: int) -> bool:
    """Is `data` nested more than `limit` deep? The opening brackets are counted first: text holding
    no more of them than the limit cannot pass it, whatever its strings hold, and that is nearly
    every line a harness writes, so the strings are seldom stripped to measure the depth."""
    return data.count(b"[") + data.count(b"{") > limit and json_depth(data) > limit


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise _DuplicateKey(key)
        seen[key] = value
    return seen


class _DuplicateKey(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def json_problem(data: bytes | str, max_depth: int = MAX_JSON_DEPTH, *, syntax: bool = True) -> str | None:
    """Why `data` is not acceptable JSON (nesting too deep, a repeated key, not JSON), or None.
    `syntax=False` leaves a syntax error to the caller's own decoder, whose message it keeps."""
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    # `json.loads` reads bytes with a byte-order mark, or in UTF-16 or UTF-32, which every other
    # reader here refuses: said here, so a check that passes is one the readers pass too
    if raw.startswith(codecs.BOM_UTF8):
        return "starts with a byte-order mark: save it as UTF-8 without one"
    if b"\x00" in raw:
        return "holds NUL bytes, as UTF-16 or UTF-32 text does: save it as UTF-8"
    if json_deeper_than(raw, max_depth):
        return f"JSON nested {json_depth(raw)} deep, over the limit of {max_depth}"
    try:
        json.loads(raw, object_pairs_hook=_no_duplicates)
    except _DuplicateKey as exc:
        return f"duplicate key {printable(exc.key)!s} in one JSON object"
    except (ValueError, RecursionError) as exc:
        return f"not valid JSON: {exc}" if syntax else None
    return None


def loads(data: bytes | str, where: str, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """Strict JSON: bounded nesting, no repeated key; raises InputError naming `where`."""
    problem = json_problem(data, max_depth)
    if problem is not None:
        raise InputError(f"{where}: {problem}")
    return json.loads(data)


# --------------------------------------------------------------------------- echoing input

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


_CONTROL_BUT_NEWLINE = re.compile(r"[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def printable(value: object, limit: int = 200, keep_newlines: bool = False) -> str:
    """`value` safe to print on a terminal: control characters (ANSI escapes, newlines, bidi
    overrides) shown as escapes, and cut to `limit` characters. `keep_newlines` keeps the line
    structure of a message of several lines (each untrusted part escaped by whoever built it)."""
    text = str(value)
    pattern = _CONTROL_BUT_NEWLINE if keep_newlines else _CONTROL
    out = pattern.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)
    return out if len(out) <= limit else out[: limit - 1] + "…"


#: Linux's PATH_MAX: a path is escaped like any value but never cut, or the error that names a
#: file (or the line that says where one was kept) names one nobody can open
PATH_LIMIT = 4096


def printable_path(path: object) -> str:
    return printable(path, PATH_LIMIT)
