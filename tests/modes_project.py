"""A scratch project holding some of the repository's own tasks (with their fixtures), every named
suite narrowed to them, a ledger of its own and a first suite version: the runs of one test
never touch the repository's results, and a task under test is run exactly as bundled."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

from tests.factories import run_cli

REPO = Path(__file__).resolve().parent.parent


class Project:
    def __init__(self, tmp_path: Path, tasks: list[str], edit: Callable[[Path], None] | None = None):
        self.root = tmp_path / "project"
        self.sandboxes = tmp_path / "sandboxes"
        self.tasks = tasks
        (self.root / "tasks").mkdir(parents=True)
        for part in ("suites", "sessions"):
            shutil.copytree(REPO / part, self.root / part)
        for task in tasks:
            shutil.copytree(REPO / "tasks" / task, self.root / "tasks" / task)
            fixture = json.loads((REPO / "tasks" / task / "task.json").read_text())["fixture"]["path"]
            if not (self.root / fixture).exists():
                shutil.copytree(REPO / fixture, self.root / fixture)
        for suite in (self.root / "suites").iterdir():
            suite.write_text(json.dumps({"name": suite.stem, "tasks": tasks}) + "\n")
        if edit is not None:
            edit(self.root)
        assert self.cli("init").exit_code == 0
        self.bump("the tasks under test")

    def cli(self, *args):
        return run_cli([*args, "--root", self.root])

    def bump(self, reason: str) -> None:
        result = self.cli("suite", "bump", "--reason", reason, "--skip-trial")
        assert result.exit_code == 0, result.output

    def run(self, task: str, *args):
        """One run of `task`; returns its run.recorded and {assertion id: (status, detail)}."""
        result = self.cli("run", task, "--repeats", "1", "--sandbox-root", self.sandboxes, *args)
        assert result.exit_code == 0, result.output
        grade = self.events("grade.recorded")[-1]
        return self.events("run.recorded")[-1], grade, {a.id: (a.status, a.detail) for a in grade.assertions}

    def events(self, type_: str) -> list:
        from cbledger.ledger.store import LedgerStore

        return [s.event.body for s in LedgerStore(self.root / "results" / "ledger" / "events.jsonl").read(types={type_})]
