"""A `replay --verify --jobs N` worker process: what it imports and what it keeps.

A worker is a fresh interpreter (spawned, see `cbledger.reproduce.verify`), so what it imports
is start-up time paid once per worker before its first run: this module imports only the re-grade
(`cbledger.reproduce.runs`), never the command line. The workspace and the kept suites are handed
over once, when the worker starts, rather than pickled again with every run, and the worker's
parse caches then serve every run of the same board it checks.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from cbledger.ledger.events import GradeRecorded, RunRecorded
from cbledger.reproduce.findings import RunCheck
from cbledger.reproduce.runs import Suites, check_run
from cbledger.workspace import Workspace

_context: tuple[Workspace, Suites] | None = None


def start(workspace: Workspace, suites: Suites) -> None:
    """The pool's initializer: what every run this worker checks shares."""
    global _context
    _context = (workspace, suites)


def check(run: RunRecorded, seq: int, grades: list[tuple[int, GradeRecorded]]) -> RunCheck:
    if _context is None:
        raise RuntimeError("a verification worker was not started with its workspace")
    workspace, suites = _context
    return check_run(workspace, run, seq, grades, suites)


@contextmanager
def as_main() -> Iterator[None]:
    """While workers are spawned, this module stands for the parent's `__main__`.

    A spawned child first imports the parent's main module again (for a console script, the
    whole command line and everything it imports) so that functions defined there can be
    unpickled; none of a worker's are. Pointing `__main__`'s spec at this module for the time the
    workers start makes each import only this, and the parent's main module is left as it was.
    """
    main = sys.modules["__main__"]
    had_spec = "__spec__" in vars(main)
    spec = vars(main).get("__spec__")
    main.__spec__ = importlib.util.find_spec(__name__)
    try:
        yield
    finally:
        if had_spec:
            main.__spec__ = spec
        else:
            del main.__spec__
