"""`./scripts/demo` takes the command line `cbledger --results DIR demo` takes: the root's
`--results` given after the script's name still goes before the subcommand, and a relative path
is the caller's. Run against stand-ins for the installers and the command, so what it passes on
is seen without installing anything."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
STUB = """#!/usr/bin/env bash
printf '%s\\n' "$(basename "$0")" >> "{log}"
"""
COMMAND = """#!/usr/bin/env bash
printf '%s\\0' "$@" > "{argv}"
"""


@pytest.fixture
def demo(tmp_path: Path):
    """A copy of the script in a project whose installers and `cbledger` only write what they were given."""
    project = tmp_path / "project"
    (project / "scripts").mkdir(parents=True)
    (project / ".venv" / "bin").mkdir(parents=True)
    shutil.copy2(REPO / "scripts" / "demo", project / "scripts" / "demo")
    log, argv = tmp_path / "installed", tmp_path / "argv"
    for name in ("install-system", "bootstrap"):
        (project / "scripts" / name).write_text(STUB.format(log=log))
    (project / ".venv" / "bin" / "cbledger").write_text(COMMAND.format(argv=argv))
    for path in [*(project / "scripts").iterdir(), project / ".venv" / "bin" / "cbledger"]:
        path.chmod(0o755)
    caller = tmp_path / "elsewhere"
    caller.mkdir()

    def run(*args: str) -> tuple[subprocess.CompletedProcess[str], list[str] | None, list[str]]:
        done = subprocess.run([str(project / "scripts" / "demo"), *args], cwd=caller, capture_output=True, text=True,
                              timeout=60)
        passed = argv.read_text().split("\0")[:-1] if argv.exists() else None
        installed = log.read_text().split() if log.exists() else []
        return done, passed, installed

    run.caller = caller  # type: ignore[attr-defined]
    return run


def test_results_after_the_script_goes_before_the_subcommand(demo):
    done, passed, installed = demo("--suite", "smoke", "--results", "kept", "--jobs", "1")
    assert done.returncode == 0, done.stderr
    assert installed == ["install-system", "bootstrap"]
    assert passed == ["--results", str(demo.caller / "kept"), "demo", "--suite", "smoke", "--jobs", "1"]


def test_paths_are_the_callers_and_the_demos_own_options_stay_after_it(demo):
    done, passed, _ = demo("--results=/abs/r", "--ledger", "l.jsonl", "--root=proj")
    assert done.returncode == 0, done.stderr
    assert passed == ["--results", "/abs/r", "demo", "--ledger", str(demo.caller / "l.jsonl"), "--root", str(demo.caller / "proj")]
    done, passed, _ = demo("--ledger", "postgresql://me@db/bench")
    assert passed == ["demo", "--ledger", "postgresql://me@db/bench"]


def test_an_option_without_its_value_is_refused_before_anything_is_installed(demo):
    done, passed, installed = demo("--results")
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "error: scripts/demo: --results needs a value (usage: scripts/demo [--results DIR] [cbledger demo's options])"
    ]
    assert passed is None and installed == []
