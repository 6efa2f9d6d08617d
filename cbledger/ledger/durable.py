"""Writing a file so that a crash leaves it either as it was or whole and new.

An event may only name a file that will still be there after a power cut: its bytes synced
before it takes its name, and the directory synced after, so the name is durable too. These two
helpers live at the bottom of the stack because every layer that writes beside the ledger needs
them: the ledger's own file, the runner's bundles and cassettes, the projections' outputs.
"""

from __future__ import annotations

import functools
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path

from cbledger.errors import UserError


def write_atomic(path: Path, data: bytes | Iterable[bytes]) -> None:
    """Writes `data` under a temporary name of its own beside `path`, synced, and renames it into
    place; a failure removes the temporary file. The rename is durable only once
    `fsync_directory(path.parent)` has run. The rename replaces a file; over a directory it
    fails half done, and over a device or a FIFO (`-o /dev/stdout`) it would swap that node for
    a regular file, so any target that exists and is not a regular file is refused. The file
    gets the mode a plain `open` would give it under the process's umask (mkstemp's own is
    0600): a published leaderboard or checkpoint must be readable where it is copied to."""
    refuse_non_file(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
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
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
