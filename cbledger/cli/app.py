"""Root of the `cbledger` command. Each command group lives in its own module (`cbledger kicad
nets` in `cli/kicad_commands.py` and so on) with a `register(app)`; the table below names each
module's top-level commands and the line `cbledger --help` lists (cli/table.py), and a module is
imported only when one of its commands runs (cli/lazy.py). The console script enters through
cli/entry.py, which answers a bare `--help` or `--version` before this module (and typer) is
imported.
"""

from __future__ import annotations

import shlex
import sys
import threading
from pathlib import Path
from typing import Annotated

import typer
from typer import _click

from cbledger.cli.common import choose_results, errors_reported, json_errors, report_error
from cbledger.cli.exits import CHECK_FAILED, INTERRUPTED, USAGE
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
from cbledger.inputs import printable, printable_path

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


def _placed_after(exc: _click.exceptions.UsageError, argv: list[str]) -> str:
    """`cbledger --ledger L replay --verify`: `--ledger` and `--root` belong to each command (the
    root takes only `--results`), so the refusal shows the line with them after the command; and
    `cbledger replay --results DIR` the line with `--results` before it."""
    if not isinstance(exc, _click.exceptions.NoSuchOption) or exc.ctx is None:
        return ""
    option = exc.option_name
    allowed: tuple[str, ...] = ("--results",) if exc.ctx.parent is not None else ("--ledger", "--root")
    if exc.ctx.parent is not None and hasattr(exc.ctx.command, "get_command"):
        allowed += ("--ledger", "--root")  # `suite --ledger L bump`: given to the group, not its command
    if option not in allowed:
        return ""
    words = list(argv)
    at = next((i for i, w in enumerate(words) if w == option or w.startswith(option + "=")), None)
    if at is None:
        return ""
    moved = words[at:at + (1 if "=" in words[at] else 2)]
    del words[at:at + len(moved)]
    if option == "--results":  # the root's own option: before the command
        return f" (--results is cbledger's own option, given before the command: `{PROG} {shlex.join(moved + words)}`)"
    command = next((i for i, w in enumerate(words) if not w.startswith("-") and (i == 0 or words[i - 1] != "--results")), None)
    if command is None:
        return f" ({option} is each command's own option: give it after the command)"
    root = exc.ctx.find_root()
    group = root.command
    found = group.get_command(root, words[command]) if hasattr(group, "get_command") else None
    if hasattr(found, "get_command"):  # a group (`suite bump`): after the subcommand, which owns it
        sub = next((i for i in range(command + 1, len(words)) if not words[i].startswith("-")), None)
        command = sub if sub is not None else command
    words[command + 1:command + 1] = moved
    return f" ({option} is each command's own option, given after it: `{PROG} {shlex.join(words)}`)"


#: exit 128 + SIGTERM, as a shell reports a process SIGTERM ended
TERMINATED = 128 + 15


def main() -> None:
    """SIGTERM (a supervisor stopping the command, `kill`) is handled as Ctrl-C is while a command
    runs: its interrupt path runs (a run's sandboxes killed, what was kept said, nothing half
    written) instead of the process ending mid-step, and the exit is 143."""
    import signal

    terminated: list[bool] = []

    def handle(_signum, _frame) -> None:
        terminated.append(True)
        raise KeyboardInterrupt

    # not where an embedding program chose otherwise, nor off the main thread (which cannot)
    ours = signal.getsignal(signal.SIGTERM) is signal.SIG_DFL and threading.current_thread() is threading.main_thread()
    if ours:
        signal.signal(signal.SIGTERM, handle)
    try:
        _main(terminated)
    finally:
        if ours:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _reader_gone() -> bool:
    """Did click end the command because a write met a closed pipe? It then wraps the standard
    streams so that nothing more is written to them; a command that failed a check does not."""
    return type(sys.stdout).__name__ in ("PacifyFlushWrapper", "_PacifyFlushWrapper")


def _main(terminated: list[bool]) -> None:
    as_json = json_errors()
    try:
        # Click's own usage errors (a bad option value, a missing argument, an unknown option) are
        # reported here like every other refusal, one line (one JSON object under --json) naming
        # the command, rather than as click's four lines with its usage; what a command returns or
        # exits with is passed on unchanged.
        code = app(prog_name=PROG, standalone_mode=False)
        if code == INTERRUPTED and not errors_reported():
            # Ctrl-C, which typer turns into exit 130 without a word: a line saying so (a command
            # that writes says what it kept itself; nothing is ever left half written)
            report_error("interrupted" if not terminated else "terminated (SIGTERM)", INTERRUPTED)
        if code == INTERRUPTED and terminated:
            code = TERMINATED
        sys.exit(code if isinstance(code, int) else 0)
    except SystemExit as exc:
        if exc.code == CHECK_FAILED and _reader_gone():
            # `cbledger log | head -1`: click ends a write to a closed pipe with exit 1, which here
            # means a check that failed; the reader having had enough is not one
            sys.exit(0)
        raise
    except _click.exceptions.NoArgsIsHelpError as exc:
        if as_json:
            report_error(exc.format_message(), exc.exit_code)
        else:
            exc.show()  # `cbledger kicad` alone: the group's help, as asked
        sys.exit(exc.exit_code)
    except _click.exceptions.UsageError as exc:
        where = exc.ctx.command_path if exc.ctx is not None else PROG
        message = exc.format_message() + _placed_after(exc, sys.argv[1:])
        report_error(f"{printable(where)}: {printable(message, limit=2000)}", exc.exit_code)
        sys.exit(exc.exit_code)
    except UserError as exc:
        report_error(printable(exc, limit=20000, keep_newlines=True), exc.exit_code)
        sys.exit(exc.exit_code)
    except OSError as exc:
        # A file that cannot be read or written (a missing directory, no permission, a full disk):
        # the file and the reason, never the exception's repr.
        from cbledger.ledger.durable import (
            written_name,  # here: start-up imports only what every command needs
        )

        where = written_name(exc) or "cbledger"
        report_error(f"{printable_path(where)}: {exc.strerror or exc.__class__.__name__}", USAGE)
        sys.exit(USAGE)
    except _click.exceptions.ClickException as exc:
        report_error(printable(exc.format_message(), limit=2000), exc.exit_code)
        sys.exit(exc.exit_code)
    except typer.Abort:
        report_error("aborted", CHECK_FAILED)
        sys.exit(CHECK_FAILED)
    except Exception as exc:
        # A ledger that cannot be folded: one line naming where, and bad input like a line that
        # cannot be read (exit 2, nothing written), whichever command met it. Its module is loaded
        # only by the commands that fold, so an error raised anywhere else cannot be one.
        fold = sys.modules.get("cbledger.projections.fold")
        if fold is None or not isinstance(exc, fold.ProjectionError):
            raise
        report_error(printable(exc, limit=20000, keep_newlines=True), USAGE)
        sys.exit(USAGE)


if __name__ == "__main__":
    main()
