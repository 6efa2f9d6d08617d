"""Where throwaway restores go.

Re-grading, the site's evidence and `show` restore a preserved run into a bare repository that is
deleted a moment later. Such a repository is a few hundred small files (loose objects, their
fan-out directories, git's skeleton), and on a disk mounted with online discard, as cloud disks
often are, each unlink and rmdir costs about a millisecond: measured on the committed ledger
(124 runs), deleting the restores was half of gathering the site's evidence (8.5 of 18.7 s) and
the whole gather took 4.1 s on tmpfs. So a restore goes to a memory-backed directory when the
machine has one with room to spare, and to the usual temporary directory otherwise.

A user's own choice wins: `CBLEDGER_SCRATCH` names the directory outright, and a set `TMPDIR`
keeps Python's default, so a machine whose memory is short can send restores back to disk.
Agent sandboxes never come here: a run's sandbox is written by the harness, can grow without
bound, and is not short-lived.

Each directory is named for the process that made it and that process's pid namespace
(`<prefix><pid>-<namespace>.<random>`), so what a killed process left (SIGKILL runs no `finally`:
restores of 5 to 20 MB each, in memory when under /dev/shm) is removed by the next one made with
the same prefix, once its maker is gone. Only this user's, and only those made in this pid
namespace: a container sharing /dev/shm or /tmp sees another's live pids as dead, and its
directories are left to it.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path

#: the memory-backed directory tried when nothing is chosen
SHARED_MEMORY = Path("/dev/shm")
#: free space it must have, so that one restore (a real board is a few MiB) never fills it
MIN_FREE = 512 * 1024 * 1024


def _memory_backed(path: Path) -> bool:
    try:
        st = os.statvfs(path)
    except OSError:
        return False
    return os.access(path, os.W_OK | os.X_OK) and st.f_bavail * st.f_frsize >= MIN_FREE


def parent(environ: dict[str, str] | None = None, shared: Path = SHARED_MEMORY) -> Path | None:
    """The directory restores are made in; None means Python's default temporary directory."""
    env = os.environ if environ is None else environ
    chosen = env.get("CBLEDGER_SCRATCH")
    if chosen:
        return Path(chosen)
    if env.get("TMPDIR"):
        return None
    return shared if _memory_backed(shared) else None


def mkdtemp(prefix: str, on_disk: bool = False) -> Path:
    """A new private directory for one throwaway restore (the caller removes it); `on_disk` for
    what can grow to gigabytes (the fold's scratch file), in Python's temporary directory."""
    where = None if on_disk else parent()
    base = Path(tempfile.gettempdir()) if where is None else where
    sweep(base, prefix)
    return Path(tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-{_namespace()}.", dir=str(base)))


def _namespace() -> int:
    """This process's pid namespace (0 where /proc does not say)."""
    try:
        return os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return 0


#: what follows the prefix in a directory `mkdtemp` made: ASCII digits, bounded
_MAKER = re.compile(r"([0-9]{1,9})-([0-9]{1,20})\.[^/]+")


def running(pid: int) -> bool:
    """Whether a process of this id runs on this machine (a results directory is written from
    one machine: docs/SCALING.md), this one included."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError):
        return True  # another user's, or no pid at all: not ours to judge
    return True


def sweep(base: Path, prefix: str) -> list[Path]:
    """Removes this user's `prefix` directories under `base` made in this pid namespace whose
    maker is no longer running; returns them. A pid since reused keeps its directory: never a
    live process's. Names `mkdtemp` did not make, or another user's, are not looked into."""
    removed: list[Path] = []
    try:
        entries = list(os.scandir(base))
    except OSError:
        return removed
    uid, here = os.getuid(), _namespace()
    for entry in entries:
        maker = _MAKER.fullmatch(entry.name[len(prefix):]) if entry.name.startswith(prefix) else None
        if maker is None or int(maker[2]) != here:
            continue
        try:
            if not entry.is_dir(follow_symlinks=False) or entry.stat(follow_symlinks=False).st_uid != uid:
                continue
        except OSError:
            continue
        pid = int(maker[1])
        if running(pid):
            continue
        shutil.rmtree(entry.path, ignore_errors=True)
        removed.append(Path(entry.path))
    return removed
