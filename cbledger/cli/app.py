"""Root of the `cbledger` command. Each command group lives in its own module (`cbledger kicad
nets` in `cli/kicad_commands.py` and so on) with a `register(app)`; the table below names each
module's top-level commands and the line `cbledger --help` lists, and a module is imported only
when one of its commands runs (cli/lazy.py). Adding a command module is one line in `COMMANDS`.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from cbledger.cli.common import RESULTS_ENV, choose_results
from cbledger.cli.exits import CHECK_FAILED, EXIT_CODES_HELP, USAGE
from cbledger.cli.lazy import Commands, lazy_group
from cbledger.errors import UserError
from cbledger.inputs import printable

COMMANDS = (
    Commands("cbledger.cli.ledger_commands", init="Create a ledger (ledger.created as seq 1).",
             append="Validate events and append them as one durable batch.",
             log="List events, filtered by type, seq, task, model, run or verdict.",
             repair="Repair a ledger after a crash (a torn tail).",
             schema="Write (or check) schema/*.json from the types.",
             export="Write the ledger, from any store, as its JSON Lines file."),
    Commands("cbledger.cli.inspect_commands", show="Show one run (summary, assertions, cost; --transcript, --diff), or one event by seq or id.",
             restore="Restore a preserved run's end state as a git repository (baseline and run branches)."),
    Commands("cbledger.cli.fixture_commands", fixture="Fixtures as pinned data: hash, check, freeze, baseline, materialize, gold."),
    Commands("cbledger.cli.task_commands", validate="Check every fixture, task and suite; name what changed since the last bump.",
             grade="Grade one sandbox against a task, offline.",
             task="Tasks as data: memorization variants."),
    Commands("cbledger.cli.kicad_commands", kicad="Read KiCad schematics as the grader does: nets, symbols, a check against kicad-cli."),
    Commands("cbledger.cli.run_commands", run="Run tasks with an agent; preserve, grade and record every run.",
             rescore="Re-grade every preserved run under the current suite version.",
             pricing="Price tables.", suite="Suite versions: bump, archive, status."),
    Commands("cbledger.cli.endpoint_commands", endpoint="The loopback model endpoint that serves session scripts."),
    Commands("cbledger.cli.project_commands", project="Regenerate or check the projections: records, LEADERBOARD.md, site, gate, work queue, read model."),
    Commands("cbledger.cli.reproduce_commands", replay="Verify the ledger end to end, offline (--verify).",
             watch="Keep the projections current as events land.",
             import_="Import outside evidence, kept apart from project-owned runs."),
    Commands("cbledger.cli.rerun_command", rerun="Re-execute recorded runs through the real harness from their cassettes, offline."),
    Commands("cbledger.cli.tlog_commands", key="Signing keys for checkpoints.",
             checkpoint="Sign the ledger's tree head and record it.",
             prove="Inclusion and consistency proofs, from the ledger.",
             verify_proof="Check a proof with only signed checkpoints and public keys.",
             witness="Accept a checkpoint only if it extends the last one accepted."),
    Commands("cbledger.cli.judge_commands", judge="Score selected runs against their task's rubric with a judge model (model-judged, never a headline)."),
    Commands("cbledger.cli.demo_command", demo="Run the bundled suite with gold and noop into a scratch workspace."),
)

app = typer.Typer(
    name="cbledger",
    cls=lazy_group(COMMANDS),
    help="The record keeper of copperbench: an append-only, hash-chained ledger of runs and grades, "
    "offline re-grading, and the projections built from it.",
    epilog=EXIT_CODES_HELP,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


def _print_version(value: bool) -> None:
    if value:
        from importlib.metadata import (
            version,  # the installed distribution's, as pyproject.toml states it
        )

        typer.echo(f"cbledger {version('cbledger')}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_print_version, is_eager=True, help="Print the version and exit.")
    ] = False,
    results: Annotated[
        Path | None,
        typer.Option(
            "--results", envvar=RESULTS_ENV, metavar="DIR", show_default=False,
            help="The results directory: ledger, preserved runs, records, read model, LEADERBOARD.md, all in it. "
            "Default: results/ under the project root (LEADERBOARD.md beside it, at the root).",
        ),
    ] = None,
) -> None:
    choose_results(results)


def main() -> None:
    try:
        app(prog_name="cbledger")
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
