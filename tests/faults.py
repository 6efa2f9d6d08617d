"""A command run in a forked child whose Nth write step dies or fails, to see what it leaves.

A write step is every call through which a command changes the disk: a file opened for writing,
each write to it, each `fsync`/`fdatasync`, `os.write`, every `os.replace`/`os.rename` and an
SQLite `COMMIT`. The child counts them as it goes and, at step N, either ends at once with
`os._exit(137)` (a SIGKILL as the process sees it: no `finally`, no `atexit`, nothing flushed)
or raises `OSError` (ENOSPC, EIO) from that call, as a full or failing disk would. Forking from
the test process keeps every import warm, so a sweep over every N of a command costs the
command's own work, not an interpreter's start each time.
"""

from __future__ import annotations

import errno
import io
import os
import sqlite3
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

KILLED = 137

#: what a step N does: "kill", or an errno name raised as OSError
ACTIONS = ("kill", "ENOSPC", "EIO")


@dataclass(frozen=True)
class Outcome:
    """How the child ended: its exit code (137: killed at the step), its output, and how many
    write steps it reached (all of them when it was not stopped)."""

    exit_code: int
    stdout: str
    stderr: str
    steps: int

    @property
    def killed(self) -> bool:
        return self.exit_code == KILLED


class _Counter:
    def __init__(self, at: int, action: str, report_fd: int) -> None:
        self.at = at
        self.action = action
        self.report_fd = report_fd
        self.seen = 0
        self.where = ""

    def step(self, what: str, filename: str | None = None, filename2: str | None = None, *, sqlite: bool = False) -> None:
        """Counts one step; `filename` (and a rename's `filename2`) is what the real call's
        OSError would name (None for a write or an fsync, which know only their descriptor).
        SQLite reports a failing disk as its own error, not an OSError."""
        self.seen += 1
        os.ftruncate(self.report_fd, 0)
        os.pwrite(self.report_fd, str(self.seen).encode(), 0)
        if self.seen != self.at:
            return
        if self.action == "kill":
            os._exit(KILLED)
        code = getattr(errno, self.action)
        if sqlite:
            raise sqlite3.OperationalError("database or disk is full" if code == errno.ENOSPC else "disk I/O error")
        if filename is None:
            raise OSError(code, os.strerror(code))
        raise OSError(code, os.strerror(code), filename, None, filename2)


class _CountedFile:
    """A file opened for writing whose writes are steps; everything else is the file's own."""

    def __init__(self, f: Any, counter: _Counter, name: str) -> None:
        self._f = f
        self._counter = counter
        self._name = name

    def write(self, data: Any) -> int:
        self._counter.step(self._name)
        n: int = self._f.write(data)
        return n

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def __enter__(self) -> _CountedFile:
        self._f.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._f.__exit__(*exc)

    def __iter__(self) -> Iterator[Any]:
        return iter(self._f)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._f, name)


def _install(counter: _Counter) -> None:
    """Patches this (child) process's os, io and sqlite3 so that each write step is counted."""
    real_open = io.open

    def counted_open(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        writing = any(c in mode for c in "wax+")
        name = os.fspath(file) if not isinstance(file, int) else f"fd {file}"
        if writing and not isinstance(file, int):  # wrapping a descriptor opens nothing
            counter.step(str(name), str(name))
        f = real_open(file, mode, *args, **kwargs)
        return _CountedFile(f, counter, str(name)) if writing else f

    io.open = counted_open  # type: ignore[assignment]
    import builtins

    builtins.open = counted_open

    def wrap(fn: Callable[..., Any], label: str, name_of: Callable[..., str], named: bool, renamed: bool = False) -> Callable[..., Any]:
        def counted(*args: Any, **kwargs: Any) -> Any:
            name = name_of(*args)
            counter.step(f"{label} {name}", name if named else None, os.fspath(args[1]) if renamed else None)
            return fn(*args, **kwargs)

        return counted

    def fd_name(fd: int, *_: Any) -> str:
        try:
            return os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            return f"fd {fd}"

    for name in ("fsync", "fdatasync"):
        if hasattr(os, name):
            setattr(os, name, wrap(getattr(os, name), name, fd_name, named=False))
    jsonl = sys.modules.get("cbledger.ledger.jsonl")
    if jsonl is not None:  # it binds its sync at import
        jsonl._datasync = getattr(os, "fdatasync", os.fsync)  # type: ignore[attr-defined]
    real_write = os.write
    report_fd = counter.report_fd

    def counted_write(fd: int, data: Any) -> int:
        if fd != report_fd:
            counter.step(fd_name(fd))
        return real_write(fd, data)

    os.write = counted_write
    os.replace = wrap(os.replace, "replace", lambda src, dst, *a, **k: os.fspath(src), named=True, renamed=True)  # type: ignore[assignment]
    os.rename = wrap(os.rename, "rename", lambda src, dst, *a, **k: os.fspath(src), named=True, renamed=True)  # type: ignore[assignment]

    real_connect = sqlite3.connect

    class CountedConnection(sqlite3.Connection):
        def commit(self) -> None:
            counter.step("sqlite commit", sqlite=True)
            super().commit()

        def execute(self, sql: str, *args: Any) -> sqlite3.Cursor:
            if sql.lstrip().upper().startswith(("COMMIT", "END")):
                counter.step("sqlite COMMIT", sqlite=True)
            return super().execute(sql, *args)

    def counted_connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        kwargs.setdefault("factory", CountedConnection)
        return real_connect(*args, **kwargs)

    sqlite3.connect = counted_connect  # type: ignore[assignment]


def run(args: Sequence[str | Path], at: int = 0, action: str = "kill", *, cwd: Path | None = None,
        env: dict[str, str] | None = None, stdin: bytes = b"") -> Outcome:
    """Runs `cbledger ARGS` in a forked child that dies (or fails with `action`) at its write step
    `at` (0: never). Returns how it ended."""
    from cbledger.cli.app import main  # imported here, in the parent, so the child starts warm

    assert action in ACTIONS
    with tempfile.TemporaryDirectory(prefix="cbfault") as scratch:
        out_path, err_path, count_path, in_path = (Path(scratch) / n for n in ("out", "err", "count", "in"))
        in_path.write_bytes(stdin)
        count_path.write_bytes(b"0")
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:  # the child: never returns
            code = 70
            try:
                fd_in = os.open(in_path, os.O_RDONLY)
                fd_out = os.open(out_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                fd_err = os.open(err_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                os.dup2(fd_in, 0)
                os.dup2(fd_out, 1)
                os.dup2(fd_err, 2)
                sys.stdin = open(0, closefd=False)  # noqa: SIM115 - the child's own stdio
                sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115
                sys.stderr = open(2, "w", closefd=False)  # noqa: SIM115
                if cwd is not None:
                    os.chdir(cwd)
                if env:
                    os.environ.update(env)
                counter = _Counter(at, action, os.open(count_path, os.O_RDWR))
                _install(counter)
                sys.argv = ["cbledger", *map(str, args)]
                try:
                    main()
                    code = 0
                except SystemExit as exc:
                    code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            except BaseException:
                import traceback

                traceback.print_exc()
                code = 70
            finally:
                try:
                    sys.stdout.flush()
                    sys.stderr.flush()
                finally:
                    os._exit(code)
        _, status = os.waitpid(pid, 0)
        code = os.waitstatus_to_exitcode(status)
        return Outcome(code, out_path.read_text(errors="replace"), err_path.read_text(errors="replace"),
                       int(count_path.read_bytes() or b"0"))


def sweep(args: Sequence[str | Path], reset: Callable[[], None], check: Callable[[int, Outcome], None], *,
          action: str = "kill", cwd: Path | None = None, limit: int = 2000) -> int:
    """Runs the command dying at step 1, 2, … until it completes untouched, calling `reset()`
    before each and `check(n, outcome)` after; returns how many steps a whole run takes."""
    for n in range(1, limit + 1):
        reset()
        outcome = run(args, n, action, cwd=cwd)
        if outcome.steps < n:  # it finished before reaching step n
            return outcome.steps
        check(n, outcome)
    raise AssertionError(f"{args}: still writing after {limit} steps")
