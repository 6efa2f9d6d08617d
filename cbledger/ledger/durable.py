"""Writing a file so that a crash leaves it either as it was or whole and new.

An event may only name a file that will still be there after a power cut: its bytes synced
before it takes its name, and the directory synced after, so the name is durable too. A killed
writer's temporary files are removed by the next writer (`remove_dead_temps`), and a full or
failing disk is an error naming the file (`naming`, `sqlite_naming`). These helpers live at the
bottom of the stack because every layer that writes beside the ledger needs them: the ledger's
own file, the runner's bundles and cassettes, the projections' outputs (docs/LEDGER.md,
"Interrupted and failing writes").
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import os
import re
import shutil
import sys
import tempfile
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path

from cbledger import scratch
from cbledger.errors import UserError


def write_atomic(path: Path, data: bytes | Iterable[bytes]) -> None:
    """Writes `data` under a temporary name of its own beside `path`, synced, and renames it into
    place; a failure removes the temporary file. The rename is durable only once
    `fsync_directory(path.parent)` has run. The rename replaces a file; over a directory it
    fails half done, and over a device or a FIFO (`-o /dev/stdout`) it would swap that node for
    a regular file, so any target that exists and is not a regular file is refused. The file
    gets the mode a plain `open` would give it under the process's umask (mkstemp's own is
    0600): a published leaderboard or checkpoint must be readable where it is copied to.

    The temporary name carries the process id (`temp_name`), so that what a killed writer left
    is told from what a live one is writing: the next `write_atomic` into the same directory
    removes it (`remove_dead_temps`). A write or sync that fails names `path` (the kernel's own
    error names no file)."""
    refuse_non_file(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_dead_temps(path.parent)
    with naming(path):
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.{os.getpid()}-", suffix=".tmp")
        try:
            os.fchmod(fd, 0o666 & ~_umask())
            with os.fdopen(fd, "wb") as f:
                if isinstance(data, bytes):
                    f.write(data)
                else:  # a file too large to hold whole (a projection snapshot), a piece at a time
                    for piece in data:
                        f.write(piece)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


def temp_name(path: str | Path) -> str:
    """The name a file is staged under beside `path` by this process before it is renamed into
    place (`.<name>.<pid>.tmp`), as `remove_dead_temps` recognises it."""
    directory, name = os.path.split(os.fspath(path))
    return os.path.join(directory, f".{name}.{os.getpid()}.tmp")


#: a staged file: `.<name>.<pid>.tmp` (`temp_name`) or `.<name>.<pid>-<random>.tmp` (`write_atomic`)
_TEMP = re.compile(r"\.(?P<name>.+)\.(?P<pid>\d+)(?:-[a-z0-9_]+)?\.tmp")
#: a tree staged beside the one it replaces, or the old one moved aside (`fixtures.install`)
STAGED_TREE = r"\.(?P<name>{})-(?:new|old)-(?P<pid>\d+)-[a-z0-9_]+"
_STAGED_TREE = re.compile(STAGED_TREE.format(".+"))


def written_name(exc: OSError) -> str | None:
    """The file an OSError is about, as the user knows it: a failed rename names its target, and
    a staged file (`.<name>.<pid>….tmp`, or a file in a staged tree) the file it stands for. The
    staged name is one the user never chose, and it is gone once the failure is handled."""
    name = exc.filename2 if exc.filename2 is not None else exc.filename
    if name is None:
        return None
    parts = (os.fsdecode(name) if isinstance(name, bytes) else str(name)).split(os.sep)
    last = _TEMP.fullmatch(parts[-1])
    parts[-1] = last["name"] if last else parts[-1]
    return os.sep.join((tree["name"] if (tree := _STAGED_TREE.fullmatch(part)) else part) for part in parts)


#: how long a lock is waited for in silence: an append or a write takes about this long at most
#: when its holder is not stopped, and a line each time would drown a busy campaign's output
SAY_WAITING_AFTER = 2.0


def flock_saying(fd: int, operation: int, holder: str) -> None:
    """`flock(fd, operation)`, saying on stderr once it has waited `SAY_WAITING_AFTER` seconds
    that `holder` is in the way: a holder suspended in a terminal (Ctrl-Z) or stopped otherwise
    holds every command after it, which otherwise waited without a word. The wait itself is the
    kernel's (a timer says it), so waiters are woken in turn as ever, with no gap between holders."""
    try:
        fcntl.flock(fd, operation | fcntl.LOCK_NB)
        return
    except BlockingIOError:
        pass
    timer = threading.Timer(SAY_WAITING_AFTER, lambda: print(f"{holder}; waiting for it to finish", file=sys.stderr, flush=True))
    timer.daemon = True
    timer.start()
    try:
        fcntl.flock(fd, operation)
    finally:
        timer.cancel()


def staged_name(name: str) -> bool:
    """Is `name` one a writer stages a file under (`.<name>.<pid>….tmp`)?"""
    return _TEMP.fullmatch(name) is not None


#: the directories cleared, by (process id, directory): a dead writer's files cannot appear in
#: one later, and a forked child (a worker) clears for itself
_cleared: set[tuple[int, str]] = set()


def remove_dead_temps(directory: Path) -> None:
    """Removes the staged files a killed writer left in `directory` (a SIGKILL or a power cut
    runs no cleanup): those named as `temp_name` and `write_atomic` name them, by a process no
    longer running. Once per directory and process, so a batch of writes lists a directory
    once. A live writer's files are left alone, its own among them."""
    key = (os.getpid(), os.fspath(directory))
    if key in _cleared:
        return
    _cleared.add(key)
    remove_dead(directory, _TEMP)


def remove_dead(directory: str | Path, staged: re.Pattern[str], *, trees: bool = False) -> None:
    """Removes the entries of `directory` whose whole name `staged` matches, its group `pid`
    naming a process no longer running: files, or with `trees` directories (what
    `fixtures.install` stages)."""
    try:
        entries = list(os.scandir(directory))
    except OSError:  # not there yet (nothing to clear), or unreadable: the write will say so
        return
    for entry in entries:
        found = staged.fullmatch(entry.name)
        if found is None or scratch.running(int(found["pid"])):
            continue
        if trees and entry.is_dir(follow_symlinks=False):
            shutil.rmtree(entry.path, ignore_errors=True)
        elif not trees and entry.is_file(follow_symlinks=False):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(entry.path)


@contextlib.contextmanager
def naming(path: str | Path) -> Iterator[None]:
    """Makes an OSError raised inside name `path` when it names no file: a write or an fsync
    that fails (ENOSPC, EIO) knows only a descriptor, and the error a user reads must say
    which file was not written."""
    try:
        yield
    except OSError as exc:
        if exc.filename is not None or exc.errno is None:
            raise
        raise OSError(exc.errno, exc.strerror, os.fspath(path)) from exc


@functools.cache
def _umask() -> int:
    """The process's umask. Reading it means setting it, so it is read once (a thread creating a
    file in between would otherwise see the placeholder) and set straight back."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def refuse_non_file(path: Path, *, symlink: bool = True) -> None:
    """Raises UserError when `path` exists and is not a regular file (or, with `symlink=False`,
    is a symlink at all): a file written whole and renamed into place must only ever replace a
    file."""
    if (not symlink and path.is_symlink()) or (path.exists() and not path.is_file()):
        raise UserError(f"{path}: not a regular file; it is written whole and replaced")


def fsync_directory(directory: Path) -> None:
    """Makes the renames into `directory` durable (a file's own fsync does not cover its name)."""
    with naming(directory):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


@contextlib.contextmanager
def sqlite_naming(path: str | Path) -> Iterator[None]:
    """`naming` for an SQLite file: its full or failing disk is an `sqlite3.OperationalError`
    ("database or disk is full", "disk I/O error"), not an OSError, and would otherwise end the
    command in a traceback. The caller rolls back (or drops its temporary file): the old content
    is kept."""
    import sqlite3  # here, not at import: the ledger's fast paths never open a database

    try:
        yield
    except sqlite3.OperationalError as exc:
        raise UserError(f"{os.fspath(path)}: {exc}; not written, the previous content is kept") from None
