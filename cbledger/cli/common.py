"""Options and error handling shared by every command group.

Errors that a user can fix (bad input, a refused precondition) are raised as `UserError` by the
library and turned into one clear line on stderr and a non-zero exit here, never a traceback.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Annotated, NoReturn

import typer

from cbledger import invocation
from cbledger.cli.exits import INTERRUPTED, USAGE
from cbledger.cli.table import RESULTS_ENV
from cbledger.workspace import LEDGER, Workspace, is_database_url

LEDGER_ENV = "CBLEDGER_LEDGER"
ROOT_ENV = "CBLEDGER_ROOT"

#: `cbledger --results DIR`, as the root command parsed it for the command it runs
_chosen_results: Path | None = None


def choose_results(directory: Path | None) -> None:
    """The results directory every command of this invocation works in (the root's `--results`)."""
    global _chosen_results
    _chosen_results = directory
    _said.no_project, _said.error = None, False  # each invocation's own (the tests run many in one process)
    if directory is not None and directory.exists() and not directory.is_dir():
        # else every command says "no ledger here (run init first)", and init then fails on it
        fail(f"--results {directory}: not a directory (it names the directory a workspace's ledger and outputs go in)")


def chosen_results() -> Path | None:
    """`--results DIR` or `$CBLEDGER_RESULTS`: the one choice of where a workspace's outputs live."""
    if _chosen_results is not None:
        return _chosen_results
    env = os.environ.get(RESULTS_ENV)
    return Path(env) if env else None


LedgerOption = Annotated[
    str | None,
    typer.Option(
        "--ledger",
        envvar=LEDGER_ENV,
        help="Ledger: a JSON Lines file, or a PostgreSQL URL (postgresql://…[?ledger=NAME]). Default: "
        f"the ledger of the results directory (`cbledger --results DIR`; {LEDGER} under the project root). "
        "A file elsewhere keeps its records and runs in its own results directory, never beside another ledger's.",
        show_default=False,
    ),
]
RootOption = Annotated[
    Path | None,
    typer.Option(
        "--root",
        envvar=ROOT_ENV,
        help="Project root holding tasks/, fixtures/ and results/. Default: the nearest directory, from the "
        "current one up, that holds tasks/ and fixtures/ (or a ledger under results/), as git finds its repository.",
        show_default=False,
    ),
]
JsonFlag = Annotated[bool, typer.Option("--json", help="Machine-readable output.")]


def is_project(directory: Path) -> bool:
    return ((directory / "tasks").is_dir() and (directory / "fixtures").is_dir()) or (directory / LEDGER).is_file()


def find_root(start: Path) -> Path:
    """The nearest project at or above `start`, else `start`: a command run in a subdirectory
    (tasks/led-resistor/) works on the project, not on an empty one of its own."""
    start = start.resolve()
    return next((d for d in (start, *start.parents) if is_project(d)), start)


class _Said:
    """What this invocation's error line has to know: the directory a command fell back to when
    no project was found at or above it and no --root named one (`init` makes a project there,
    but any other refusal is most likely that), and whether an error was reported already."""

    no_project: Path | None = None
    error: bool = False


_said = _Said()


def project_root(root: Path | None) -> Path:
    given = root or os.environ.get(ROOT_ENV)
    if given:
        return Path(given).resolve()
    found = find_root(Path.cwd())
    if not is_project(found):
        _said.no_project = found
    return found


def errors_reported() -> bool:
    return _said.error


def no_project_note() -> str:
    """What an error adds when the command found no project: said first, a stranger typing in the
    wrong directory reads "no ledger here" or "unknown task" and looks for the wrong fault."""
    if _said.no_project is None:
        return ""
    return (f" (no cbledger project at or above {_said.no_project}, a directory holding tasks/ and fixtures/: "
            "run from the project, or pass --root DIR)")


def no_project_found() -> Path | None:
    """The directory this invocation fell back to when no project was found (else None)."""
    return _said.no_project


def require_project(why: str) -> None:
    """Refuses, before anything is read or sent, a command that needs the project's task files
    when none was found: outside it every run would be skipped as "not in the catalog", which
    reads as success."""
    if _said.no_project is not None:
        fail(why, 2)


def workspace(ledger: str | Path | None, root: Path | None) -> Workspace:
    """The workspace the `--ledger`, `--root` and root `--results` options (or their environment
    variables) name: one results directory holding the ledger and everything made from it."""
    base = project_root(root)
    if _said.no_project is not None and ledger is not None and not is_database_url(str(ledger)):
        # a ledger file named from outside its project: the project is the one it lies in, as
        # the working directory's would be (a laptop verifying a copied clone)
        beside = find_root(Path(ledger).absolute().parent)
        if is_project(beside):
            _said.no_project, base = None, beside
    return Workspace.at(base, ledger, results=chosen_results())


def ledger_path(ledger: str | Path | None, root: Path | None = None) -> Path | str:
    """The ledger's file, or its database URL."""
    return workspace(ledger, root).ledger


def json_errors() -> bool:
    """Whether this command line asked for `--json` (before any `--`): its errors are then one
    JSON object on stderr too, so a script reading JSON never has to parse prose."""
    argv = sys.argv[1:]
    return "--json" in (argv[: argv.index("--")] if "--" in argv else argv)


def report_error(message: str, code: int) -> None:
    """An error as the user sees it: `error: …` on one line (an interrupt's message alone), or under `--json` the object
    `{"error": {"message": …, "exitCode": …}}` on one line of stderr (README.md, "One command line")."""
    if _said.no_project is not None:
        # "run init first" in the wrong directory makes a stray ledger there: the note says where to go instead
        message = message.replace(f" (run `{invocation.command('init')}` first)", "")
    message += no_project_note()
    # Every refusal may quote what the user typed (a path, a run id, an option), and what was
    # typed may be a pasted key: no error message repeats one (docs/SECURITY.md).
    from cbledger.credentials import redact

    message = redact(message)
    _said.error = True
    if json_errors():
        print(json.dumps({"error": {"message": message, "exitCode": code}}, sort_keys=True), file=sys.stderr)
    elif code == INTERRUPTED:
        # the user's Ctrl-C (or a SIGTERM) is not a failure of the command: the message says what
        # stands, and `error:` in front of "every run that finished is recorded" reads as a loss
        print(message, file=sys.stderr)
    else:
        print(f"error: {message}", file=sys.stderr)


def into_existing_directory(path: Path | None) -> Path | None:
    """The callback of every option naming a file to write (`-o/--out`, `--vkey`): its directory
    must exist. A mistyped directory created silently leaves the output where nobody looks, so
    it is refused before anything is read or written, naming the directory."""
    if path is not None and not path.parent.is_dir():
        fail(f"{path.parent}: no such directory (for {path}); create it first, nothing was written")
    return path


def fail(message: str, code: int = USAGE) -> NoReturn:
    """One line on stderr and the exit: bad usage or input (2) unless the caller names a failed
    check (1) or another code of cli/exits.py."""
    sys.stdout.flush()
    report_error(message, code)
    raise typer.Exit(code)
