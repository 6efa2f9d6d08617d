"""Progress over the runs being re-graded: a live bar on a terminal, one line per run otherwise
(a CI log keeps every line; a bar redrawn in place would be noise there)."""

from __future__ import annotations

import sys
from typing import TextIO

from cbledger.reproduce.findings import RunCheck


class RunProgress:
    def __init__(self, stream: TextIO | None = None, quiet: bool = False) -> None:
        self.stream = stream or sys.stderr
        self.quiet = quiet
        self.tty = self.stream.isatty()
        self._bar = None
        self._task = None

    def start(self, total: int) -> None:
        if self.quiet or not self.tty or total == 0:
            return
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        self._bar = Progress(
            TextColumn("re-grading runs"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
            TextColumn("{task.fields[last]}"), console=Console(file=self.stream), transient=True,
        )
        self._bar.start()
        self._task = self._bar.add_task("runs", total=total, last="")

    def __call__(self, done: int, total: int, check: RunCheck) -> None:
        if self.quiet:
            return
        if self._bar is not None:
            self._bar.update(self._task, completed=done, last=f"{check.run_id} {check.status}")
            return
        why = f" ({check.failures[0].kind})" if check.failures else ""
        print(f"[{done}/{total}] {check.run_id} {check.status}{why}", file=self.stream, flush=True)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None
