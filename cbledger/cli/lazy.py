"""Commands named up front, imported when used.

Every command module pulls in what its commands need (the grader, pygit2, sqlite-utils, the
runner), and importing all of them costs several hundred milliseconds that `cbledger kicad nets`
or `cbledger --help` would otherwise pay for nothing. So the root group knows each command only
by its name, the module that defines it and the one line `--help` lists; the module is imported
when a command of it is resolved, and only that module.

The table itself is plain data in cli/table.py, which the console entry point reads too.

A command module keeps its ordinary shape: a `register(app)` that adds its commands and groups to
a Typer app. Help everywhere is click's plain layout: typer's rich panels cost an import of rich
per `--help` and print boolean flags as `--json <bool>`.
"""

from __future__ import annotations

import functools
import importlib
from typing import Any

import typer
import typer.main
from typer import _click
from typer.core import TyperGroup

from cbledger.cli import suggest
from cbledger.cli.table import Commands

__all__ = ["Commands", "LazyGroup", "lazy_group", "module_commands", "plain"]


def plain(command: _click.Command) -> _click.Command:
    """The command, and every command under it, with plain help and one placeholder style, each
    carrying its workspace options into the commands its messages suggest (cli/suggest.py)."""
    if hasattr(command, "rich_markup_mode"):
        command.rich_markup_mode = None
    for param in getattr(command, "params", ()):
        _placeholder(param)
    subcommands = getattr(command, "commands", {})
    for sub in subcommands.values():
        plain(sub)
    if not subcommands:
        suggest.carrying(command)
    return command


def _type_placeholder(param: Any) -> str:
    kind = type(param.type).__name__
    if kind in ("IntRange", "IntParamType"):
        return "INTEGER"
    if kind in ("FloatRange", "FloatParamType"):
        return "NUMBER"
    if kind == "Path":
        return "PATH"
    if kind == "Choice":
        return "[" + "|".join(map(str, param.type.choices)) + "]"
    return "TEXT"


def _placeholder(param: Any) -> None:
    """Every value shown as click shows it, upper case: `--jobs INTEGER`, `RUN...`, `[TASK_IDS]...`,
    instead of typer's mix of `<int range>`, `{key}` and `[task_ids]...`. A metavar a command
    chose itself (`--ledger`'s, `--from`'s) is kept."""
    if getattr(param, "param_type_name", "") == "argument":
        name = (param.metavar or param.name or "").upper().strip("[]").removesuffix("...")
        shown = name if param.required else f"[{name}]"
        if param.nargs != 1:
            shown += "..."
        param.make_metavar = lambda ctx=None, *, usage=False, _shown=shown, _name=name: _shown if usage else _name
    elif not getattr(param, "is_flag", False) and not getattr(param, "count", False) and param.metavar is None:
        param.metavar = _type_placeholder(param)


@functools.cache
def module_commands(module: str) -> dict[str, _click.Command]:
    """What a command module registers, as click commands by name: built once per process.

    typer rebuilds the root group at each call of the app, and building a module's click commands
    from its functions' signatures costs 2–13 ms CPU a call (more than many commands' own work), paid
    by each in-process invocation (an embedding program, each CliRunner call of the tests). The
    commands hold no state of an invocation (that lives in click's context), so one copy serves
    every call; their callbacks are the module's functions, which still read the module's globals
    when they run."""
    target = typer.Typer(rich_markup_mode=None, add_completion=False)
    importlib.import_module(module).register(target)
    group = typer.main.get_group(target)
    return {name: plain(cmd) for name, cmd in group.commands.items()}


class LazyGroup(TyperGroup):
    """The root group: lists the registry, imports a module when one of its commands is resolved."""

    registry: tuple[Commands, ...] = ()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["rich_markup_mode"] = None
        super().__init__(*args, **kwargs)
        self._where = {name: entry for entry in self.registry for name in entry.names}

    def list_commands(self, ctx: _click.Context) -> list[str]:
        return [*self.commands, *self._where]

    def get_command(self, ctx: _click.Context, cmd_name: str) -> _click.Command | None:
        if cmd_name in self.commands:
            return self.commands[cmd_name]
        entry = self._where.get(cmd_name)
        if entry is None:
            return None
        return module_commands(entry.module).get(cmd_name)

    def resolve_command(self, ctx: _click.Context, args: list[str]) -> Any:
        try:
            return super().resolve_command(ctx, args)
        except _click.exceptions.UsageError as exc:
            from difflib import get_close_matches

            matches = get_close_matches(args[0], list(self._where)) if args else []
            if matches and "Did you mean" not in exc.message:
                exc.message = exc.message.rstrip(".") + ". Did you mean " + ", ".join(repr(m) for m in matches) + "?"
            raise

    def format_commands(self, ctx: _click.Context, formatter: _click.HelpFormatter) -> None:
        rows = [(name, entry.names[name]) for name, entry in self._where.items()]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


def lazy_group(registry: tuple[Commands, ...]) -> type[LazyGroup]:
    """A LazyGroup class over this registry (typer instantiates the class itself)."""
    names = [name for entry in registry for name in entry.names]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ValueError(f"command names registered by two modules: {', '.join(twice)}")
    return type("CbledgerGroup", (LazyGroup,), {"registry": registry})
