"""The `cbledger …` commands that messages suggest, rendered so they run as printed.

A hint such as "retry with `cbledger run --resume ID`" is only worth printing if it works when
pasted: a user who chose a workspace with `cbledger --results DIR` (or `--ledger`, `--root`)
would otherwise be sent back to the project's own ledger. Every layer builds such a command
through `command`, and the command line, which alone knows what the user typed, installs the
renderer that carries those options (cli/suggest.py). Outside the command line (a library call,
a Dask worker) nothing is carried and the command is printed as written.

Domain-free and import-free, so every layer may use it.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Sequence

PROG = "cbledger"

#: (words after `cbledger`, whether the command works in the user's workspace) -> the whole
#: command line, as argv
Renderer = Callable[[Sequence[str], bool], list[str]]


def _as_written(words: Sequence[str], workspace: bool) -> list[str]:
    return [PROG, *words]


_renderer: Renderer = _as_written


def use(renderer: Renderer | None) -> None:
    """The renderer of this process's suggestions from now on; None restores the plain one."""
    global _renderer
    _renderer = renderer or _as_written


def in_results(results: str) -> None:
    """From now on, suggestions name `results` as their workspace (`cbledger --results DIR …`),
    keeping only the project root of what the user typed: a draft's runs are recorded in a
    scratch workspace (`run --draft`), and only that workspace can resume them."""
    outer = _renderer

    def render(words: Sequence[str], workspace: bool) -> list[str]:
        if not workspace:  # the project's own (what `validate` compares with, a new draft)
            return outer(words, False)
        return [PROG, "--results", results, *outer(words, False)[1:]]

    use(render)


def argv(*words: str, workspace: bool = True) -> list[str]:
    """The suggested command as argv: `cbledger`, the workspace options the user gave, `words`.
    `workspace=False` for a command that makes a workspace of its own (`run --draft`) or reads the
    project's (`validate`): only the project root is carried to it."""
    return _renderer(words, workspace)


def command(*words: str, workspace: bool = True) -> str:
    """The suggested command as one shell line, quoted where a word needs it (a path with a
    space); placeholders such as `DIR` or `...` are left as they are."""
    return shlex.join(argv(*words, workspace=workspace))
