"""Progress of the long commands (`run`, `demo`, `replay --verify`), drawn in one place.

The libraries report through plain callbacks (`run_plan(on_done=...)`, `verify(run_progress=...,
chain_progress=...)`) and never draw: whether a step becomes a bar or a line depends on where the
output goes, which only the command line knows. On a terminal a live bar (rich) is redrawn in
place; anywhere else (a CI log, a pipe) each step is one plain line, because a log keeps every
line and a redrawn bar would be noise there.
"""

from __future__ import annotations

import re
import sys
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, TextIO

from cbledger.reproduce.findings import RunCheck
from cbledger.runner.execute import RunOutput

if TYPE_CHECKING:  # rich is imported only when a bar is drawn; dask only for a cluster's runs
    from rich.progress import Progress, TaskID

    from cbledger.runner.dask_executor import Activity


class Reporter:
    """One bar or one line per step. `keep` leaves the finished bar on screen (a suite run's final
    tally is worth keeping; a verification prints its own summary). `in_bytes` counts bytes and
    draws nothing off a terminal (a line per chunk read would say nothing)."""

    def __init__(
        self, label: str, *, stream: TextIO | None = None, quiet: bool = False, keep: bool = False,
        in_bytes: bool = False,
    ) -> None:
        self.label = label
        self.stream = stream or sys.stderr
        self.quiet = quiet
        self.keep = keep
        self.in_bytes = in_bytes
        self.started = time.monotonic()
        self._bar: Progress | None = None
        self._task: TaskID | None = None

    def start(self, total: int) -> None:
        self.started = time.monotonic()
        if self.quiet or total == 0 or not self.stream.isatty():
            return
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            DownloadColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self._bar = Progress(
            TextColumn(self.label), BarColumn(), DownloadColumn() if self.in_bytes else MofNCompleteColumn(),
            TextColumn("{task.fields[status]}"), TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
            console=Console(file=self.stream), transient=not self.keep,
        )
        self._bar.start()
        self._task = self._bar.add_task(self.label, total=total, status="")

    def step(self, done: int, total: int, what: str = "", tally: str | None = None, error: bool = False) -> None:
        """`what` names the step just done; `tally` is a running count, shown with the time spent
        and left. An `error` step is printed above a live bar, so it stays visible."""
        if self.quiet:
            return
        if self._bar is not None and self._task is not None:
            self._bar.update(self._task, completed=done, status=tally if tally is not None else what)
            if error:
                self._red(what)
            return
        if self.in_bytes:
            return
        line = f"[{done}/{total}] {what}"
        if tally is not None:
            elapsed = time.monotonic() - self.started
            eta = elapsed / done * (total - done) if done else 0.0
            line += f"  | {tally} | elapsed {elapsed:.0f}s eta {eta:.0f}s"
        print(line, file=self.stream, flush=True)

    def note(self, line: str, error: bool = False) -> None:
        """A line of its own: above a live bar (which keeps its place), or a plain line."""
        if self.quiet:
            return
        if self._bar is not None:
            if error:
                self._red(line)
            else:
                self._bar.console.print(line, markup=False, highlight=False)
            return
        print(line, file=self.stream, flush=True)

    def _red(self, line: str) -> None:
        """Above the bar, in red. The text is escaped: it quotes what runs wrote (a regular
        expression, a tool's output, `[seq 3, run …]`), which rich read as markup, dropping
        `[a-z]` and failing on `[/x]` in the middle of a run."""
        from rich.markup import escape

        assert self._bar is not None
        self._bar.console.print(f"[red]{escape(line)}[/red]", highlight=False)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None


class SuiteProgress:
    """`run_plan(on_done=...)` for `run` and `demo`: pass, fail and error counts as runs land."""

    def __init__(self, total: int, stream: TextIO | None = None) -> None:
        self.passed = self.failed = self.errors = 0
        self.reporter = Reporter("runs", stream=stream, keep=True)
        self.reporter.start(total)
        self.busy: dict[str, str] = {}  # worker -> the run it is on
        self.finished: dict[str, int] = {}  # worker -> runs it finished
        self._lock = threading.Lock()  # activity arrives on the cluster client's thread too

    def activity(self, event: Activity) -> None:
        """`run_plan(on_activity=...)`: a line per worker event (a run started, finished or lost,
        a worker accepted or refused); the tally names how many runs each worker finished."""
        with self._lock:
            self._activity(event)

    def _activity(self, event: Activity) -> None:
        if event.kind == "waiting":  # no worker at all: said once, while the driver waits for one
            self.reporter.note(f"  {event.detail}")
            return
        worker = event.worker or "?"
        if event.kind == "started":
            self.busy[worker] = event.label
            line = f"{worker}: started {event.label}" + (f" ({event.detail})" if event.detail else "")
        elif event.kind == "finished":
            self.busy.pop(worker, None)
            self.finished[worker] = self.finished.get(worker, 0) + 1
            line = f"{worker}: finished {event.label}"
        elif event.kind == "lost":
            self.busy.pop(worker, None)
            line = f"{worker}: lost while running {event.label}; {event.detail}"
        elif event.kind == "refused":
            line = f"{worker}: refused: {event.detail}"
        elif event.kind == "accepted":
            line = f"{worker}: accepted"
        else:
            line = f"{event.label}: {event.kind}: {event.detail}"
        self.reporter.note(f"  worker {line}", error=event.kind in ("lost", "refused", "failed"))

    def __call__(self, output: RunOutput | None, error: str | None, done: int, total: int) -> None:
        with self._lock:
            self._step(output, error, done, total)

    def _step(self, output: RunOutput | None, error: str | None, done: int, total: int) -> None:
        if output is None:
            self.errors += 1
            what = f"error: {error}"
        else:
            g = output.grade
            if g.verdict == "pass":
                self.passed += 1
            else:
                self.failed += 1
            what = f"{output.run.task.id} r{output.run.repeat} {g.verdict}" + (f" ({g.failure_category})" if g.failure_category else "")
            passes = getattr(output.run, "passes", None)
            if passes:
                what += f" (pass {passes.index}/{passes.allowed})"
        tally = f"pass {self.passed} fail {self.failed}" + (f" error {self.errors}" if self.errors else "")
        if self.finished:
            tally += " | " + " ".join(f"{w} {n}" for w, n in sorted(self.finished.items()))
        self.reporter.step(done, total, what, tally=tally, error=output is None)
        off_script = _off_script(output)
        if off_script:
            self.reporter.note(off_script, error=True)

    def close(self) -> None:
        self.reporter.close()


#: a session-script note of a fault the script injects on purpose (`endpoint.faults.describe`)
_INJECTED = re.compile(r"turn \d+: injected fault: ")


def _off_script(output: RunOutput | None) -> str | None:
    """A session script the harness did not follow ends the run on a provider error, graded like
    any (`stalled`): the author of the script must see why on the run's own line, not only in
    `show --json`'s runnerNote."""
    from cbledger.inputs import printable
    from cbledger.runner.endpoint.server import SESSION_NOTE

    if output is None:
        return None
    note = output.run.runner_note
    if not note or SESSION_NOTE not in note:
        return None
    # a fault the script injects on purpose is the script doing what it says, not a misfit
    misfits = [part.removesuffix("; ") for part in note.split(SESSION_NOTE)[1:]
               if not _INJECTED.match(part)]
    if not misfits:
        return None
    why = printable("; ".join(misfits), limit=400)
    return f"  {output.run.task.id} r{output.run.repeat}: the session script does not fit what the harness did: {why}"


class VerifyProgress:
    """`verify(run_progress=..., on_runs_planned=...)`: one step per run re-graded."""

    def __init__(self, quiet: bool = False, stream: TextIO | None = None) -> None:
        self.reporter = Reporter("re-grading runs", stream=stream, quiet=quiet)

    def start(self, total: int) -> None:
        self.reporter.start(total)

    def __call__(self, done: int, total: int, check: RunCheck) -> None:
        why = f" ({check.failures[0].kind})" if check.failures else ""
        self.reporter.step(done, total, f"{check.run_id} {check.status}{why}")

    def close(self) -> None:
        self.reporter.close()


def chain_progress(stream: TextIO | None = None) -> Callable[[int, int], None] | None:
    """`verify(chain_progress=...)`: bytes of the ledger hashed, on a terminal only (None
    elsewhere, so the chain check does not even call back)."""
    reporter = Reporter("verifying chain", stream=stream, in_bytes=True)
    if not reporter.stream.isatty():
        return None
    begun = False

    def update(done: int, total: int) -> None:
        nonlocal begun
        if not begun:
            reporter.start(total)
            begun = True
        reporter.step(done, total)
        if done >= total:
            reporter.close()

    return update
