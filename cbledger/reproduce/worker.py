"""A `replay --verify --jobs N` worker process: what it imports and what it keeps.

A worker is a fresh interpreter (spawned, see `cbledger.reproduce.verify`), so what it imports
is start-up time paid once per worker before its first run: a worker imports only the re-grade
(`cbledger.reproduce.runs`), never the command line, and it is started before the parent has
runs to hand out, so that start-up overlaps the parent's own work. A worker's parse caches then
serve every run of the same board it checks.
"""

from __future__ import annotations

import importlib.util
import multiprocessing
import os
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from contextlib import contextmanager

from cbledger.ledger.events import CassetteRef, GradeRecorded, RunRecorded
from cbledger.reproduce.findings import RunCheck
from cbledger.reproduce.runs import Suites, check_run
from cbledger.workspace import Workspace


class WorkerPool(ProcessPoolExecutor):
    """A process pool whose workers may wind down while the parent finishes its own work, and
    which is still joined whole before the command exits.

    `shutdown(wait=False)` alone would let the workers exit early, but it also drops the pool's
    handle on its manager thread, so a later `shutdown()` joins nothing: the thread and the
    result pipe were left to the interpreter's exit, whose hook races the pool's own teardown
    and printed an `OSError` traceback after a successful `--jobs 2`."""

    _winding: threading.Thread | None = None

    def wind_down(self) -> None:
        """Every run is back: the workers exit on a thread of their own; `shutdown` joins it."""
        if self._winding is None:
            self._winding = threading.Thread(target=super().shutdown, name="cbledger-pool-wind-down")
            self._winding.start()

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        if self._winding is not None:
            self._winding.join()
            return
        super().shutdown(wait=wait, cancel_futures=cancel_futures)


def start_pool(workers: int) -> WorkerPool:
    """A pool whose workers are already starting: their start-up (a fresh interpreter importing
    the re-grade) overlaps the parent's own work before the first run is handed out (the chain,
    the kept suites laid out)."""
    pool = WorkerPool(max_workers=workers, mp_context=multiprocessing.get_context("spawn"))
    with as_main():
        # a spawn pool starts one worker per submit until none is idle and it has them all
        for _ in range(workers):
            pool.submit(os.getpid)
    return pool


def check(
    pool: WorkerPool, workspace: Workspace, run: RunRecorded, seq: int,
    grades: list[tuple[int, GradeRecorded]], suites: Suites, attached: tuple[int, CassetteRef] | None = None,
    evidence: bool = False,
) -> Future[RunCheck]:
    """`check_run` in a worker (the kept suites pickle to their roots: cheap to send each time)."""
    with as_main():
        return pool.submit(check_run, workspace, run, seq, grades, suites, attached, evidence)


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
