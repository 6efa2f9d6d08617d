"""`cbledger project ...`: regenerate (or check) the projections of the ledger.

Thin by design: each command folds the ledger, calls one library function and prints. Exit codes:
0 ok; 1 a `--check` found a difference, or `compare` found a regression; 2 bad usage, a missing
ledger, or snapshots that are not comparable.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import msgspec
import typer

from cbledger.cli.common import JsonFlag, LedgerOption, RootOption, fail, workspace
from cbledger.ledger.store import LedgerStore
from cbledger.projections import gate, leaderboard, readmodel, workqueue, writers
from cbledger.projections.fold import LedgerState
from cbledger.workspace import READ_MODEL, Workspace, record_name

project_app = typer.Typer(
    name="project",
    help="Regenerate or check the projections of the ledger: records, LEADERBOARD.md, the work "
    "queue, regression snapshots and the SQLite read model.",
    no_args_is_help=True,
)

CheckFlag = Annotated[
    bool, typer.Option("--check", help="Write nothing; exit 1 with a diff if the committed output differs.")
]
SuiteOption = Annotated[
    str | None, typer.Option("--suite", help="Suite version (default: the current one).")
]


def _state(where: Workspace) -> LedgerState:
    store = LedgerStore(where.ledger)
    if not store.exists():
        fail(f"{store.location}: no ledger here (run `cbledger init` first)", 2)
    return writers.load_state(store)


def _known_suite(state: LedgerState, suite: str | None) -> str | None:
    """`--suite`, refused unless the ledger recorded that version: an unknown one would render
    an empty table that looks like a result."""
    if suite is None:
        return None
    recorded = [entry.body.suite_version for entry in state.suites]
    if suite not in recorded:
        fail(f"--suite {suite}: the ledger records no such suite version (recorded: {', '.join(recorded) or 'none'})", 2)
    return suite


def _written(target: Path, changed: bool, hint: str = "") -> None:
    typer.echo(f"{target}: {'written' if changed else 'unchanged'}{hint}")


def _browse(db: Path) -> str:
    return f" (browse: datasette serve --immutable {db})"


def _leaderboard(state: LedgerState, target: Path, check: bool, suite: str | None) -> int:
    text = leaderboard.render(state, suite)
    if check:
        result = writers.check_text(target, text, target.name)
        if not result.matches:
            typer.echo(result.diff, nl=False)
            typer.echo(f"{target}: differs from a regeneration (run `cbledger project leaderboard`)", err=True)
            return 1
        typer.echo(f"{target}: up to date")
        return 0
    _written(target, writers.write_text_if_changed(target, text))
    return 0


def _records_report(report: writers.RecordsReport, check: bool) -> int:
    verb = "would be" if check else ""
    for label, items in (("created", report.created), ("updated", report.updated), ("removed", report.removed)):
        for p in items:
            typer.echo(f"{label:<8} {record_name(p)}" + (f" ({verb} {label})" if check else ""))
    typer.echo(
        f"records: {len(report.created)} new, {len(report.updated)} changed, "
        f"{len(report.removed)} removed (retracted), {report.unchanged} unchanged"
    )
    return 1 if check and not report.clean else 0


@project_app.command("leaderboard")
def leaderboard_cmd(
    ledger: LedgerOption = None,
    root: RootOption = None,
    check: CheckFlag = False,
    out: Annotated[Path | None, typer.Option("--out", help="Output file (default: LEADERBOARD.md under the root).")] = None,
    suite: SuiteOption = None,
) -> None:
    """Write LEADERBOARD.md (or check the committed one)."""
    where = workspace(ledger, root)
    state = _state(where)
    raise typer.Exit(_leaderboard(state, out or where.leaderboard, check, _known_suite(state, suite)))


@project_app.command("records")
def records_cmd(ledger: LedgerOption = None, root: RootOption = None, check: CheckFlag = False) -> None:
    """Write results/<date>/<model>/<task>/run-<n>.json for every graded run."""
    where = workspace(ledger, root)
    raise typer.Exit(_records_report(writers.sync_records(_state(where), where.results, check=check), check))


@project_app.command("workqueue")
def workqueue_cmd(
    ledger: LedgerOption = None, root: RootOption = None, suite: SuiteOption = None, as_json: JsonFlag = False
) -> None:
    """Failure categories ranked by frequency x mean run cost, with their tasks and models."""
    from cbledger.projections.fold import current_suite

    state = _state(workspace(ledger, root))
    queue = workqueue.work_queue(state, _known_suite(state, suite) or current_suite(state))
    if as_json:
        typer.echo(msgspec.json.format(msgspec.json.encode(queue), indent=2).decode())
    else:
        typer.echo(workqueue.render_text(queue), nl=False)


@project_app.command("snapshot")
def snapshot_cmd(
    ledger: LedgerOption = None,
    root: RootOption = None,
    out: Annotated[Path | None, typer.Option("-o", "--out", help="Write here instead of stdout.")] = None,
) -> None:
    """A JSON summary of the headline numbers per suite, tier and model (a gate baseline)."""
    data = gate.render_snapshot(gate.build_snapshot(_state(workspace(ledger, root))))
    if out is None:
        typer.echo(data.decode(), nl=False)
    else:
        writers.write_atomic(out, data)
        typer.echo(f"{out}: written")


@project_app.command("compare")
def compare_cmd(
    baseline: Annotated[Path, typer.Option("--baseline", help="Baseline snapshot (from `project snapshot`).")],
    current: Annotated[Path | None, typer.Option("--current", help="Current snapshot (default: the ledger now).")] = None,
    ledger: LedgerOption = None,
    root: RootOption = None,
    suite: SuiteOption = None,
    rate_floor: Annotated[float, typer.Option(min=0.0, max=1.0, help="Minimum pass-rate drop that can fire (fraction).")] = gate.Thresholds().rate_floor,
    z: Annotated[float, typer.Option(min=0.0, help="Standard errors a pass-rate drop must exceed.")] = gate.Thresholds().z,
    cost_floor: Annotated[float, typer.Option(min=0.0, help="Minimum relative cost-per-pass rise that can fire.")] = gate.Thresholds().cost_floor,
    as_json: JsonFlag = False,
) -> None:
    """Exit 1 when any tier's strict pass rate falls, or cost per passing task rises, beyond the threshold."""
    try:
        base = gate.parse_snapshot(baseline.read_bytes(), str(baseline))
        if current is not None:
            cur = gate.parse_snapshot(current.read_bytes(), str(current))
        else:
            cur = gate.build_snapshot(_state(workspace(ledger, root)))
    except (OSError, ValueError) as exc:
        fail(str(exc), 2)
    result = gate.compare(base, cur, suite, gate.Thresholds(rate_floor=rate_floor, z=z, cost_floor=cost_floor))
    if as_json:
        doc = msgspec.to_builtins(result)
        doc["regressions"] = len(result.regressions)
        typer.echo(json.dumps(doc, indent=2, sort_keys=True))
    else:
        typer.echo(gate.render_comparison(result), nl=False)
    if not result.comparable:
        raise typer.Exit(2)
    raise typer.Exit(1 if result.regressions else 0)


@project_app.command("readmodel")
def readmodel_cmd(
    ledger: LedgerOption = None,
    root: RootOption = None,
    out: Annotated[Path | None, typer.Option("-o", "--out", help=f"Database file (default: {READ_MODEL}).")] = None,
) -> None:
    """Rebuild the SQLite read model atomically."""
    where = workspace(ledger, root)
    target = out or where.read_model
    readmodel.write(readmodel.build_tables(_state(where)), target)
    _written(target, True, _browse(target))


@project_app.command("all")
def all_cmd(ledger: LedgerOption = None, root: RootOption = None, check: CheckFlag = False) -> None:
    """Regenerate every output: records, LEADERBOARD.md and the read model (`--check`: the first two)."""
    where = workspace(ledger, root)
    state = _state(where)
    if check:
        code = _records_report(writers.sync_records(state, where.results, check=True), True)
        raise typer.Exit(max(code, _leaderboard(state, where.leaderboard, True, None)))
    done = writers.regenerate_all(state, where)
    _records_report(done.records, False)
    _written(where.leaderboard, done.leaderboard)
    _written(where.read_model, done.read_model, _browse(where.read_model))


def register(app: typer.Typer) -> None:
    """Adds the `project` group to the root app."""
    app.add_typer(project_app, name="project")
