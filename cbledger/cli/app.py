"""Root of the `cbledger` command. Each command group lives in its own module (`cbledger kicad
nets` in `cli/kicad_commands.py` and so on) with a `register(app)`; the table below names each
module's top-level commands and the line `cbledger --help` lists (cli/table.py), and a module is
imported only when one of its commands runs (cli/lazy.py). The console script enters through
cli/entry.py, which answers a bare `--help` or `--version` before this module (and typer) is
imported.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from cbledger.cli.common import choose_results
from cbledger.cli.exits import CHECK_FAILED, USAGE
from cbledger.cli.lazy import lazy_group
from cbledger.cli.root_help import version_line
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
from cbledger.errors import UserError
from cbledger.inputs import printable

app = typer.Typer(
    name=PROG,
    cls=lazy_group(COMMANDS),
    help=ROOT_HELP,
    epilog=ROOT_EPILOG,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


def _print_version(value: bool) -> None:
    if value:
        typer.echo(version_line())
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_print_version, is_eager=True, help=VERSION_HELP)
    ] = False,
    results: Annotated[
        Path | None,
        typer.Option(
            "--results", envvar=RESULTS_ENV, metavar=RESULTS_METAVAR, show_default=False, help=RESULTS_HELP,
        ),
    ] = None,
) -> None:
    choose_results(results)


def main() -> None:
    try:
        app(prog_name=PROG)
    except UserError as exc:
        print(f"error: {printable(exc, limit=20000, keep_newlines=True)}", file=sys.stderr)
        sys.exit(exc.exit_code)
    except OSError as exc:
        # A file that cannot be read or written (a missing directory, no permission, a full disk):
        # the file and the reason, never the exception's repr.
        where = exc.filename if exc.filename is not None else "cbledger"
        print(f"error: {printable(where)}: {exc.strerror or exc.__class__.__name__}", file=sys.stderr)
        sys.exit(USAGE)
    except Exception as exc:
        # A ledger that cannot be folded: one line naming where. Its module is loaded only by the
        # commands that fold, so an error raised anywhere else cannot be one.
        fold = sys.modules.get("cbledger.projections.fold")
        if fold is None or not isinstance(exc, fold.ProjectionError):
            raise
        print(f"error: {printable(exc, limit=20000, keep_newlines=True)}", file=sys.stderr)
        sys.exit(CHECK_FAILED)


if __name__ == "__main__":
    main()
