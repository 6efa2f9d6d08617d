"""The workspace a command line chose, carried into every `cbledger …` command a message suggests.

`cbledger --results DIR run … --ledger L --root R` ends, say, with "retry with `cbledger run
--resume ID`"; pasted as printed, that would resume in the project's own results directory and
find no such campaign. So while a command runs, the suggestions of every layer
(cbledger/invocation.py) are rendered with the options that chose its workspace and that the
user typed: the root's `--results` before the subcommand, `--ledger` and `--root` after it, each
only where the suggested command takes it (`fixture materialize` has no `--ledger`), and only
`--root` to a command that makes a workspace of its own (`run --draft`). An option
given by its environment variable is not repeated: the environment still gives it. A database
URL is shown without its password, as every message shows it.

The options are read once, when the command starts, on the thread that parsed them: a run
finishing on a worker thread renders its suggestions with them too.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

from typer import _click
from typer._click.core import ParameterSource

from cbledger import invocation
from cbledger.errors import UserError
from cbledger.workspace import is_database_url

#: the root's options that choose the workspace: (parameter name, option)
BEFORE = (("results", "--results"),)
#: each command's own: (parameter name, option)
AFTER = (("ledger", "--ledger"), ("root", "--root"))


def carrying(command: _click.Command) -> None:
    """Makes the command, while it runs, render suggestions with the workspace options it was given."""
    callback = command.callback
    if callback is None or getattr(callback, "_carries_workspace", False):
        return

    @functools.wraps(callback)
    def run(*args: Any, **kwargs: Any) -> Any:
        invocation.use(renderer(_click.globals.get_current_context()))
        try:
            return callback(*args, **kwargs)
        finally:
            invocation.use(None)

    run._carries_workspace = True  # type: ignore[attr-defined]
    command.callback = run


def renderer(ctx: _click.Context) -> invocation.Renderer:
    """How this command's suggestions are written: its workspace options around the words."""
    root = ctx.find_root()
    before = [word for name, option in BEFORE for word in _given(root, name, option)]
    after = dict(given for name, option in AFTER if (given := _given(ctx, name, option)))

    def render(words: Sequence[str], workspace: bool) -> list[str]:
        takes = options_of(root, words) - (set() if workspace else {"--ledger"}) if after else frozenset()
        return [invocation.PROG, *(before if workspace else ()), *words,
                *(w for option, value in after.items() if option in takes for w in (option, value))]

    return render


def _given(ctx: _click.Context, name: str, option: str) -> tuple[str, str] | tuple[()]:
    """(option, value) when the user typed it on this command line, else ()."""
    if ctx.get_parameter_source(name) is not ParameterSource.COMMANDLINE or ctx.params.get(name) is None:
        return ()
    value = str(ctx.params[name])
    if is_database_url(value):
        from cbledger.ledger.postgres import split_url

        try:
            value = split_url(value)[2]  # as messages show it: no password
        except UserError:
            return ()
    return (option, value)


@functools.lru_cache(maxsize=64)
def _options(command: _click.Command) -> frozenset[str]:
    return frozenset(opt for param in command.params for opt in param.opts if opt.startswith("--"))


def options_of(root: _click.Context, words: Sequence[str]) -> frozenset[str]:
    """The long options of the command `words` names (its subcommand path, up to the first word
    that is not one); none when the words name no command."""
    command: _click.Command | None = root.command
    named = False
    for word in words:
        get: Callable[[_click.Context, str], _click.Command | None] | None = getattr(command, "get_command", None)
        if get is None or word.startswith("-"):
            break
        sub = get(root, word)
        if sub is None:
            break
        command, named = sub, True
    return _options(command) if named and command is not None else frozenset()
