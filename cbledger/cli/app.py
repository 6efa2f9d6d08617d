"""Root of the `cbledger` command. Each command group lives in its own module and registers
itself here, so a reader finds `cbledger kicad nets` in `cli/kicad_commands.py` and so on."""

from __future__ import annotations

import sys

import typer

from cbledger.cli import (
    demo_command,
    endpoint_commands,
    fixture_commands,
    kicad_commands,
    ledger_commands,
    project_commands,
    reproduce_commands,
    rerun_command,
    run_commands,
    task_commands,
    tlog_commands,
)
from cbledger.errors import UserError
from cbledger.inputs import printable
from cbledger.projections.fold import ProjectionError

app = typer.Typer(
    name="cbledger",
    help="The record keeper of copperbench: an append-only, hash-chained ledger of runs and grades, "
    "offline re-grading, and the projections built from it.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

for module in (
    ledger_commands,
    fixture_commands,
    task_commands,
    kicad_commands,
    run_commands,
    endpoint_commands,
    project_commands,
    reproduce_commands,
    rerun_command,
    tlog_commands,
    demo_command,
):
    module.register(app)


def main() -> None:
    try:
        app()
    except UserError as exc:
        print(f"error: {printable(exc, limit=20000, keep_newlines=True)}", file=sys.stderr)
        sys.exit(exc.exit_code)
    except ProjectionError as exc:  # a ledger that cannot be folded: one line naming where
        print(f"error: {printable(exc, limit=20000, keep_newlines=True)}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
