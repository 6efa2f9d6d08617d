"""Options and error handling shared by every command group.

Errors that a user can fix (bad input, a refused precondition) are raised as `UserError` by the
library and turned into one clear line on stderr and a non-zero exit here, never a traceback.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, NoReturn

import typer

from cbledger.workspace import LEDGER, Workspace

LEDGER_ENV = "CBLEDGER_LEDGER"
ROOT_ENV = "CBLEDGER_ROOT"

LedgerOption = Annotated[
    str | None,
    typer.Option(
        "--ledger",
        envvar=LEDGER_ENV,
        help=f"Ledger: a JSON Lines file, or a PostgreSQL URL (postgresql://…[?ledger=NAME]). Default: {LEDGER} under the project root.",
        show_default=False,
    ),
]
RootOption = Annotated[
    Path | None,
    typer.Option(
        "--root",
        envvar=ROOT_ENV,
        help="Project root holding tasks/, fixtures/ and results/. Default: the current directory.",
        show_default=False,
    ),
]
JsonFlag = Annotated[bool, typer.Option("--json", help="Machine-readable output.")]


def project_root(root: Path | None) -> Path:
    return (root or Path(os.environ.get(ROOT_ENV) or Path.cwd())).resolve()


def workspace(ledger: str | Path | None, root: Path | None) -> Workspace:
    """The workspace the `--ledger` and `--root` options (or their environment variables) name."""
    return Workspace.at(project_root(root), ledger)


def ledger_path(ledger: str | Path | None, root: Path | None = None) -> Path | str:
    """The ledger's file, or its database URL."""
    return workspace(ledger, root).ledger


def fail(message: str, code: int = 1) -> NoReturn:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)
