"""The root's `--help` page and `--version` line, made without typer or click.

Importing typer costs more than the rest of a `cbledger --help` together (some 60 ms quietly,
several times that on a loaded machine), and the root's help is fixed text: the command table,
the root's help and its three options (cli/table.py). So the console entry point prints it from
here, laid out as click lays out a group's help (usage, help text, options, commands, epilog;
definition lists with a first column of at most 30 and two spaces; text wrapped to the terminal's
width less two, between 50 and 78 columns). tests/test_cli_fast_path.py compares this page with
the one the typer app renders, at several widths, so a change to either shows.
"""

from __future__ import annotations

import os
import sys
import textwrap

import cbledger
from cbledger.cli.table import (
    COMMANDS,
    PROG,
    RESULTS_ENV,
    RESULTS_HELP,
    RESULTS_METAVAR,
    ROOT_EPILOG,
    ROOT_HELP,
    VERSION_HELP,
)

_INDENT = 2
_COL_MAX = 30
_COL_SPACING = 2


def version_line() -> str:
    """What `--version` prints: the package's version, which the build also reads (pyproject.toml)."""
    return f"{PROG} {cbledger.__version__}"


def terminal_width() -> int:
    """The width click gives a help page: the terminal's columns (COLUMNS, else the tty, else 80),
    at most 80, less two, and never under 50. `shutil.get_terminal_size`, without importing shutil
    (a tenth of a fast `--help`)."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns if sys.__stdout__ else 0
        except (AttributeError, ValueError, OSError):
            columns = 0
        columns = columns or 80
    return max(min(columns, 80) - 2, 50)


def _wrap_one(text: str, width: int, first: str, rest: str) -> str:
    """click's `wrap_text` of one paragraph."""
    return textwrap.TextWrapper(width, initial_indent=first, subsequent_indent=rest, replace_whitespace=False).fill(text)


def _wrap(text: str, width: int, indent: str = "") -> str:
    """click's `wrap_text` with paragraphs kept, for text without escape sequences."""
    wrapper = textwrap.TextWrapper(width, initial_indent=indent, subsequent_indent=indent, replace_whitespace=False)
    paragraphs: list[tuple[int, bool, str]] = []
    buf: list[str] = []
    par_indent: int | None = None

    def flush() -> None:
        if buf:
            if buf[0].strip() == "\b":
                paragraphs.append((par_indent or 0, True, "\n".join(buf[1:])))
            else:
                paragraphs.append((par_indent or 0, False, " ".join(buf)))
            buf.clear()

    for line in text.expandtabs().splitlines():
        if not line:
            flush()
            par_indent = None
        else:
            if par_indent is None:
                stripped = line.lstrip()
                par_indent = len(line) - len(stripped)
                line = stripped
            buf.append(line)
    flush()
    out = []
    for extra, raw, body in paragraphs:
        lead = indent + " " * extra
        if raw:
            out.append("\n".join(lead + line for line in body.splitlines()))
        else:
            wrapper.initial_indent = wrapper.subsequent_indent = lead
            out.append(wrapper.fill(body))
    return "\n\n".join(out)


def _definitions(rows: list[tuple[str, str]], width: int, indent: int) -> list[str]:
    """click's `write_dl`."""
    first_col = min(max(len(term) for term, _ in rows), _COL_MAX) + _COL_SPACING
    out: list[str] = []
    for term, text in rows:
        line = " " * indent + term
        if not text:
            out.append(line + "\n")
            continue
        if len(term) <= first_col - _COL_SPACING:
            line += " " * (first_col - len(term))
        else:
            line += "\n" + " " * (first_col + indent)
        lines = _wrap(text, max(width - first_col - 2, 10)).splitlines()
        out.append(line + (lines[0] if lines else "") + "\n")
        out.extend(" " * (first_col + indent) + rest + "\n" for rest in lines[1:])
    return out


def root_help(width: int | None = None) -> str:
    """The page `cbledger --help` prints (without its final newline, as click's `get_help`), at
    `width` columns of text (default: the terminal's)."""
    width = terminal_width() if width is None else width
    usage_prefix = f"Usage: {PROG} "
    args = "[OPTIONS] COMMAND [ARGS]..."
    if width >= len(usage_prefix) + 20:
        usage = _wrap_one(args, width, usage_prefix, " " * len(usage_prefix))
    else:
        usage = usage_prefix + "\n" + _wrap_one(args, width, " " * (len("Usage: ") + 4), " " * (len("Usage: ") + 4))
    pad = " " * _INDENT
    options = [
        ("--version", VERSION_HELP),
        (f"--results {RESULTS_METAVAR}", f"{RESULTS_HELP}  [env var: {RESULTS_ENV}]"),
        ("--help", "Show this message and exit."),
    ]
    commands = [(name, text) for entry in COMMANDS for name, text in entry.names.items()]
    parts = [
        usage, "\n",
        "\n", _wrap(ROOT_HELP, width, pad), "\n",
        "\n", "Options:\n", *_definitions(options, width, _INDENT),
        "\n", "Commands:\n", *_definitions(commands, width, _INDENT),
        "\n", _wrap(ROOT_EPILOG, width, pad), "\n",
    ]
    return "".join(parts).rstrip("\n")
