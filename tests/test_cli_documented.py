"""What `--help` offers is what the docs say: every command is in README.md's command table, and
every option of every command is named in README.md or docs/. The other direction (every command
and option a document names exists) is tests/test_docs_commands.py's."""

from __future__ import annotations

import itertools
import re
import sys
from pathlib import Path

import typer.main
from typer import _click as click

from cbledger.cli.app import app

REPO = Path(__file__).resolve().parent.parent
README = (REPO / "README.md").read_text(encoding="utf-8")
DOCS = README + "".join(p.read_text(encoding="utf-8") for p in sorted((REPO / "docs").glob("*.md")))
#: options every command takes the same way, documented once (README.md, "One command line")
EVERYWHERE = {"--help", "--json", "--ledger", "--root"}


def leaves() -> dict[str, click.Command]:
    """Every command the CLI runs, by its path under `cbledger`."""
    root = typer.main.get_command(app)
    ctx = click.Context(root)
    out: dict[str, click.Command] = {}

    def walk(command: click.Command, path: list[str]) -> None:
        if hasattr(command, "get_command"):
            for name in command.list_commands(ctx):  # type: ignore[attr-defined]
                walk(command.get_command(ctx, name), [*path, name])  # type: ignore[attr-defined]
        else:
            out[" ".join(path)] = command

    walk(root, [])
    return out


def table_commands() -> set[str]:
    """The command paths README.md's command table names, `fixture hash|check|…` expanded."""
    section = README.split("## What a user types", 1)[1].split("\n## ", 1)[0]
    named: set[str] = set()
    for span in re.findall(r"`([^`]+)`", section):
        words = span.replace("\\|", "|").removeprefix("cbledger ").split()
        alternatives = [w.split("|") for w in words[:2]]
        named.update(alternatives[0])
        if len(alternatives) == 2:
            named.update(" ".join(p) for p in itertools.product(*alternatives))
    return named


def test_every_command_is_in_the_readme_table():
    missing = sorted(set(leaves()) - table_commands())
    assert missing == [], f"commands README.md's table does not name: {missing}"


def test_every_option_is_documented():
    missing = []
    for path, command in leaves().items():
        for param in command.params:
            names = [o for o in (*param.opts, *param.secondary_opts) if o.startswith("--")]
            if names and not set(names) & EVERYWHERE and not any(re.search(rf"{re.escape(n)}\b(?!-)", DOCS) for n in names):
                missing.append(f"cbledger {path} {'/'.join(names)}")
    assert missing == [], "options no document names:\n" + "\n".join(missing)


def test_the_checks_see_what_is_missing(monkeypatch):
    monkeypatch.setattr(sys.modules[__name__], "README", "## What a user types\n\n| `cbledger run` | x |\n")
    assert "init" not in table_commands() and "run" in table_commands()
