"""The console script answers a bare `--help` or `--version` without typer (cli/entry.py): its
page must be the one the typer app prints, byte for byte, at every width click lays help out in."""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
from pathlib import Path

import pytest

import cbledger.cli.root_help as root_help_module
from cbledger.cli import table
from cbledger.cli.root_help import root_help

REPO = Path(__file__).resolve().parent.parent
ENTRY = [sys.executable, "-c", "from cbledger.cli.entry import main; main()"]
TYPER_APP = [sys.executable, "-m", "cbledger.cli.app"]


def _run(cmd: list[str], columns: int) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CBLEDGER_")}
    env["COLUMNS"] = str(columns)
    return subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, env=env, check=False)


@pytest.mark.parametrize("columns", [30, 52, 64, 79, 80, 200])
@pytest.mark.parametrize("flag", ["--help", "--version"])
def test_the_fast_path_prints_what_typer_prints(flag: str, columns: int) -> None:
    fast = _run([*ENTRY, flag], columns)
    slow = _run([*TYPER_APP, flag], columns)
    assert (fast.returncode, slow.returncode) == (0, 0), (fast.stderr, slow.stderr)
    assert fast.stdout == slow.stdout
    assert fast.stderr == slow.stderr == ""


def test_the_fast_path_imports_neither_typer_nor_click() -> None:
    probe = (
        "import sys\nsys.argv = ['cbledger', '--help']\nfrom cbledger.cli.entry import main\nmain()\n"
        "print('loaded:', *sorted(m for m in sys.modules if m.split('.')[0] in ('typer', 'click', 'rich')))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=REPO, check=True)
    assert done.stdout.splitlines()[0].startswith("Usage: cbledger ")
    assert done.stdout.splitlines()[-1] == "loaded:"


def test_every_other_command_line_goes_to_the_app() -> None:
    for argv in (["kicad", "--help"], ["--help", "kicad"], ["--version", "--help"]):
        done = _run([*ENTRY, *argv], 80)
        expected = _run([*TYPER_APP, *argv], 80)
        assert (done.returncode, done.stdout, done.stderr) == (expected.returncode, expected.stdout, expected.stderr), argv
    assert _run([*ENTRY, "kicad", "--help"], 80).stdout.startswith("Usage: cbledger kicad ")


def test_the_version_is_the_installed_distributions() -> None:
    done = _run([*ENTRY, "--version"], 80)
    assert done.stdout == f"cbledger {importlib.metadata.version('cbledger')}\n"


def test_the_page_is_made_from_the_table(monkeypatch: pytest.MonkeyPatch) -> None:
    """The probe can fail: a command added to the table appears on the page."""
    assert "frobnicate" not in root_help(78)
    monkeypatch.setattr(root_help_module, "COMMANDS", (*table.COMMANDS, table.Commands("x", frobnicate="Frobnicate it.")))
    assert "  frobnicate    Frobnicate it.\n" in root_help(78)


def test_an_interrupt_while_the_app_loads_is_one_line_and_exit_130(monkeypatch, capsys):
    """Ctrl-C in the first fraction of a second printed a traceback from inside an import."""
    import builtins

    from cbledger.cli import entry

    real = builtins.__import__

    def interrupted(name, *args, **kwargs):
        if name == "cbledger.cli.app":
            raise KeyboardInterrupt
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", interrupted)
    monkeypatch.setattr(sys, "argv", ["cbledger", "log"])
    with pytest.raises(SystemExit) as ended:
        entry.main()
    assert ended.value.code == 130
    assert capsys.readouterr().err == "interrupted before the command started: nothing was done\n"
