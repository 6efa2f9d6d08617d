"""What the root of `cbledger` is made of, in plain data: each command module with the top-level
names it registers and the line `cbledger --help` lists for each, the root's own help and its
options' help. Kept free of typer and click so that the console entry point can print the root's
`--help` and `--version` without importing either (cli/entry.py); the typer app (cli/app.py) is
built from the same values, so the two cannot say different things. Adding a command module is
one line in `COMMANDS`.
"""

from __future__ import annotations

from cbledger.cli.exits import EXIT_CODES_HELP


class Commands:
    """One command module: its import path and, for each top-level name it registers, the line the
    root's `--help` lists (the command's own `--help` keeps its full text). A plain class rather
    than a dataclass: `dataclasses` imports `inspect`, a tenth of a fast `--help`."""

    __slots__ = ("module", "names")

    def __init__(self, module: str, **names: str) -> None:
        self.module = module
        self.names = {name.rstrip("_").replace("_", "-"): text for name, text in names.items()}

    def __repr__(self) -> str:
        return f"Commands({self.module!r}, {self.names!r})"


PROG = "cbledger"
ROOT_HELP = (
    "The record keeper of copperbench: an append-only, hash-chained ledger of runs and grades, "
    "offline re-grading, and the projections built from it."
)
ROOT_EPILOG = EXIT_CODES_HELP
VERSION_HELP = "Print the version and exit."
RESULTS_ENV = "CBLEDGER_RESULTS"
RESULTS_METAVAR = "DIR"
RESULTS_HELP = (
    "The results directory: ledger, preserved runs, records, read model, LEADERBOARD.md, all in it. "
    "Default: results/ under the project root (LEADERBOARD.md beside it, at the root)."
)

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
             task="Tasks as data: new tasks from a fixture, memorization variants."),
    Commands("cbledger.cli.kicad_commands", kicad="Read KiCad schematics as the grader does: nets, symbols, each sheet's contents, a check against kicad-cli."),
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
    Commands("cbledger.cli.doctor_command", doctor="Check kicad-cli, copperhead, bubblewrap, the model's key and the price table."),
    Commands("cbledger.cli.demo_command", demo="Run the bundled suite with gold and noop into a scratch workspace."),
)
