"""`cbledger project ...`: regenerate (or check) the projections of the ledger.

Thin by design: each command folds the ledger, calls one library function and prints. Exit codes:
0 ok; 1 a `--check` found a difference, or `compare` found a regression; 2 bad usage, a missing
ledger, or snapshots that are not comparable.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path
from typing import Annotated

import msgspec
import typer

from cbledger import invocation
from cbledger.cli.common import (
    JsonFlag,
    LedgerOption,
    RootOption,
    fail,
    into_existing_directory,
    workspace,
)
from cbledger.cli.progress import Reporter
from cbledger.errors import UserError
from cbledger.ledger import durable
from cbledger.projections import gate, leaderboard, paths, readmodel, workqueue, writers
from cbledger.projections import packed as packed_mod
from cbledger.projections import selection as selection_mod
from cbledger.projections.aggregates import Views
from cbledger.projections.conditions import DEFAULT
from cbledger.projections.fold import LedgerState
from cbledger.projections.selection import Selection
from cbledger.projections.site import render as site_render
from cbledger.reproduce import site_evidence
from cbledger.reproduce.outputs import OutputsCheck, check_site
from cbledger.workspace import READ_MODEL, RESULTS, Workspace, record_name

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


def _note(line: str) -> None:
    typer.echo(line, err=True)


def _follower(where: Workspace) -> writers.LedgerFollower:
    """The ledger folded to its head, resumed from the latest snapshot the ledger confirms. A
    torn tail is not read, and said: the outputs then stop at the last whole event, which a
    check would otherwise call up to date without a word."""
    follower = writers.follow(where.ledger, where.snapshots, _note)
    try:
        torn = follower.store.recorder.torn_tail()
    except (UserError, OSError):
        torn = None
    if torn:
        _note(f"note: {where.shown_path(where.ledger) if isinstance(where.ledger, Path) else where.ledger}: "
              f"{len(torn)} byte(s) after seq {follower.state.head_seq} are no whole event (an append still "
              f"being written, or one interrupted): read up to seq {follower.state.head_seq}; if no append is "
              f"running, `{invocation.command('repair', '--truncate-torn-tail')}` removes them")
    return follower


def _state(where: Workspace) -> LedgerState:
    return _follower(where).state


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


def _site_source(where: Workspace, as_json: bool) -> tuple[site_evidence.SiteEvidenceSource, Reporter]:
    """The site's evidence source with a progress line per preserved run it reads: restoring every
    bundle is most of a first build (seconds to minutes), the rest takes a moment."""
    progress = Reporter("reading preserved runs for the site", quiet=as_json and not sys.stderr.isatty())

    def step(done: int, total: int, run_id: str) -> None:
        if done == 1:
            progress.start(total)
        progress.step(done, total, run_id)

    return site_evidence.source(where, on_step=step), progress


def _browse(db: Path) -> str:
    return f" (browse: datasette serve --immutable {db} -m {readmodel.metadata_path(db)})"


def _leaderboard(state: LedgerState, target: Path, check: bool, suite: str | None, report: dict | None = None,
                 views: Views | None = None) -> int:
    """Writes (or checks) LEADERBOARD.md; with `report`, fills it in and prints nothing. `views`:
    the follower's aggregates (a snapshot's, brought up to date), else computed from the state."""
    text = leaderboard.render(state, suite, views)
    if check:
        result = writers.check_text(target, text, target.name)
        if report is not None:
            report["leaderboard"] = {"path": str(target), "matches": result.matches, "diff": result.diff or None}
            return 0 if result.matches else 1
        if not result.matches:
            typer.echo(result.diff, nl=False)
            what = "not there" if result.missing else "differs from a regeneration"
            typer.echo(f"{target}: {what} (run `{invocation.command('project', 'leaderboard')}`)", err=True)
            return 1
        typer.echo(f"{target}: up to date")
        return 0
    changed = writers.write_text_if_changed(target, text)
    if report is not None:
        report["leaderboard"] = {"path": str(target), "written": changed}
    else:
        _written(target, changed)
    return 0


def _records_json(report: writers.RecordsReport, check: bool, into: Callable[[str], str]) -> dict:
    return {
        "created": [into(p) for p in report.created], "updated": [into(p) for p in report.updated],
        "unchanged": report.unchanged, "retractionMarks": report.marks, "clean": report.clean if check else None,
    }


def _emit(doc: dict) -> None:
    typer.echo(json.dumps(doc, indent=2, sort_keys=True))


def _in(where: Workspace, base: Path | None = None) -> Callable[[str], str]:
    """A record as a reader finds it (`packed.record_shown`): `results/…` in the project's own
    layout, its own path under `--results DIR`, its name in a packed store; or the file `--export`
    wrote into `base`."""
    if base is not None:
        return lambda rel: str(base / rel)
    return lambda rel: packed_mod.record_shown(where, record_name(rel))


def _records_report(report: writers.RecordsReport, check: bool, into: Callable[[str], str]) -> int:
    verb = "would be" if check else ""
    for label, items in (("created", report.created), ("updated", report.updated)):
        for p in items:
            typer.echo(f"{label:<8} {into(p)}" + (f" ({verb} {label})" if check else ""))
    # the marks are files among the three counts, not records: counted apart
    new_marks, changed_marks = (sum(map(paths.is_retraction_path, ps)) for ps in (report.created, report.updated))
    unchanged = report.unchanged - max(0, report.marks - new_marks - changed_marks)
    typer.echo(
        f"records: {len(report.created) - new_marks} new, {len(report.updated) - changed_marks} changed, {unchanged} "
        f"unchanged; {report.marks} retracted run(s) marked (their records kept)"
    )
    return 1 if check and not report.clean else 0


@project_app.command("leaderboard")
def leaderboard_cmd(
    ledger: LedgerOption = None,
    root: RootOption = None,
    check: CheckFlag = False,
    out: Annotated[Path | None, typer.Option("--out", callback=into_existing_directory, help="Output file (default: LEADERBOARD.md in the results directory).")] = None,
    suite: SuiteOption = None,
    as_json: JsonFlag = False,
) -> None:
    """Write LEADERBOARD.md (or check the committed one)."""
    from cbledger.projections.fold import current_suite

    where = workspace(ledger, root)
    follower = _follower(where)
    state = follower.state
    report: dict | None = {} if as_json else None
    chosen = _known_suite(state, suite)
    if chosen is not None and out is None and not check and chosen != current_suite(state):
        # the published board is the current version's, which `project all` and `watch` keep
        fail(f"--suite {chosen}: another version's tables than the current {current_suite(state)}'s would replace "
             f"{where.leaderboard}; give --out FILE", 2)
    code = _leaderboard(state, out or where.leaderboard, check, chosen, report, follower.views)
    if report is not None:
        _emit(report["leaderboard"])
    raise typer.Exit(code)


LayoutOption = Annotated[
    str | None,
    typer.Option(
        "--layout",
        help="Write every record in this layout and keep them there: `packed` (one SQLite file, "
        "results/records.sqlite, read and written by every command from then on) or `files` (one "
        "file per record; the store is then removed). Default: the layout the workspace has.",
    ),
]


def _record_path(name: str) -> str:
    """A record's path relative to `results/`, given as that or as `results/...` (as printed)."""
    prefix = f"{RESULTS}/"
    rel = name.removeprefix(prefix) if name.startswith(prefix) else name
    if not (paths.is_record_path(rel) or paths.is_retraction_path(rel)):
        fail(f"--show {name}: not a record path (results/<date>/<model>/<task>/run-<n>[.suite-<v>].json)", 2)
    return rel


@project_app.command("records")
def records_cmd(
    ledger: LedgerOption = None,
    root: RootOption = None,
    check: CheckFlag = False,
    layout: LayoutOption = None,
    show: Annotated[str | None, typer.Option("--show", help="Print the record at this path (results/<date>/<model>/<task>/run-<n>.json), from either layout.")] = None,
    export: Annotated[Path | None, typer.Option("--export", help="Write every record into this existing directory as the standard file tree, the same bytes.")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Write results/<date>/<model>/<task>/run-<n>.json for every graded run (or its row of the packed store)."""
    chosen = [flag for flag, given in (("--check", check), ("--layout", layout), ("--show", show), ("--export", export)) if given]
    if len(chosen) > 1:
        fail(f"{' and '.join(chosen)}: give one of them", 2)
    if layout not in (None, "files", "packed"):
        fail(f"--layout {layout}: not a layout (files or packed)", 2)
    where = workspace(ledger, root)
    if show is not None:
        rel = _record_path(show)
        with writers.RecordStore(where.results) as store:
            data = store.read(rel)
            if data is None:
                fail(f"{record_name(rel)}: no such record in this workspace ({store.layout} layout)", 2)
        sys.stdout.buffer.write(data)
        return
    if export is not None:
        if not export.is_dir():
            fail(f"--export {export}: no such directory; create it first, nothing was written", 2)
        report = writers.export_records(where.results, export)
    elif layout is not None:
        report = writers.use_layout(_state(where), where.results, layout == "packed")
    else:
        report = writers.sync_records(_state(where), where.results, check=check)
    into = _in(where, export)
    if as_json:
        _emit(_records_json(report, check, into))
        raise typer.Exit(1 if check and not report.clean else 0)
    raise typer.Exit(_records_report(report, check, into))


ConditionOption = Annotated[
    str, typer.Option("--condition", help="Ablation condition (`default`: no runner flag; else its key as the leaderboard prints it).")
]


@project_app.command("workqueue")
def workqueue_cmd(
    ledger: LedgerOption = None, root: RootOption = None, suite: SuiteOption = None, as_json: JsonFlag = False,
    condition: ConditionOption = DEFAULT,
) -> None:
    """Failure categories ranked by frequency x mean run cost, with their tasks and models."""
    from cbledger.projections.fold import current_suite

    state = _state(workspace(ledger, root))
    version = _known_suite(state, suite) or current_suite(state)
    known = workqueue.conditions(state, version)
    if condition not in known:
        fail(f"--condition {condition!r}: no agent run of suite {version} was made under it (known: {'; '.join(repr(k) for k in known)})", 2)
    queue = workqueue.work_queue(state, version, condition)
    if as_json:
        typer.echo(msgspec.json.format(msgspec.json.encode(queue), indent=2).decode())
    else:
        typer.echo(workqueue.render_text(queue), nl=False)


SelectOption = Annotated[
    list[str] | None,
    typer.Option(
        help="Terms naming a run set: copperhead=V commit=SHA model=ID runs=ID,ID|@FILE batch=ID "
        "since=DATE until=DATE, or all (repeatable; every term must match).",
    ),
]


def _selection(terms: list[str] | None, what: str) -> Selection:
    """The selection the terms name; `runs=@FILE` reads one run id a line from FILE."""
    words: list[str] = []
    for term in terms or []:
        for word in term.split():
            if word.startswith("runs=@"):
                source = Path(word[len("runs=@"):])
                try:
                    ids = [line.strip() for line in source.read_text(encoding="utf-8").splitlines()]
                except OSError as exc:
                    fail(f"{what}: {source}: cannot read the run list ({exc.strerror})", 2)
                ids = [i for i in ids if i and not i.startswith("#")]
                if not ids:
                    fail(f"{what}: {source}: names no run id", 2)
                word = "runs=" + ",".join(ids)
            words.append(word)
    try:
        return selection_mod.parse(words)
    except selection_mod.SelectionError as exc:
        fail(f"{what}: {exc}", 2)


@project_app.command("snapshot")
def snapshot_cmd(
    ledger: LedgerOption = None,
    root: RootOption = None,
    select: SelectOption = None,
    out: Annotated[Path | None, typer.Option("-o", "--out", callback=into_existing_directory, help="Write here instead of stdout.")] = None,
    as_json: JsonFlag = False,
) -> None:
    """A JSON snapshot of a run set (default: every run), per suite, condition, tier, model and task: a gate baseline.
    The snapshot is JSON already; with -o, --json reports where it went."""
    chosen = _selection(select, "--select") if select else None
    where = workspace(ledger, root)
    snapshot = gate.build_snapshot(_state(where), chosen)
    if chosen is not None and not any(suite.selected_runs for suite in snapshot.suites):
        # a mistyped batch id made an empty baseline, refused only later by `compare`; a batch of
        # scripted runs is not mistyped, and is told why it counts for nothing
        latest = next((suite for suite in reversed(snapshot.suites) if suite.left_out), None)
        what = ("no agent run of a main group is selected (suite "
                f"{latest.suite_version}{gate.left_out_note(latest)})" if latest is not None else "no run in it is selected")
        fail(f"--select {' '.join(select or [])}: {where.ledger}: {what}; nothing written", 2)
    data = gate.render_snapshot(snapshot)
    if out is None:
        typer.echo(data.decode(), nl=False)
    else:
        durable.write_atomic(out, data)
        typer.echo(json.dumps({"written": str(out), "bytes": len(data)}, sort_keys=True) if as_json else f"{out}: written")


def _side(
    name: str, snapshot: Path | None, terms: list[str] | None, state: LedgerState | None
) -> gate.Snapshot:
    if snapshot is not None and terms:
        fail(f"--{name} and --{name}-select name the {name} twice: give one", 2)
    if snapshot is not None:
        try:
            return gate.parse_snapshot(snapshot.read_bytes(), str(snapshot))
        except OSError as exc:
            fail(f"{snapshot}: cannot read the {name} snapshot ({exc.strerror})", 2)
        except ValueError as exc:
            fail(str(exc), 2)
    if not terms:
        fail(
            f"name the {name} runs: --{name}-select TERMS (for instance batch=ID, since=DATE, "
            f"copperhead=V, or all) or --{name} SNAPSHOT; the whole ledger is never assumed, since "
            "old runs would dilute what the new ones did",
            2,
        )
    assert state is not None
    chosen = _selection(terms, f"--{name}-select")
    if chosen.empty:
        fail(f"--{name}-select names no run set", 2)
    return gate.build_snapshot(state, chosen)


@project_app.command("compare")
def compare_cmd(
    baseline: Annotated[Path | None, typer.Option("--baseline", help="Baseline snapshot (from `project snapshot`).")] = None,
    baseline_select: SelectOption = None,
    candidate: Annotated[Path | None, typer.Option("--candidate", help="Candidate snapshot.")] = None,
    candidate_select: SelectOption = None,
    ledger: LedgerOption = None,
    root: RootOption = None,
    suite: SuiteOption = None,
    condition: ConditionOption = DEFAULT,
    rate_floor: Annotated[float, typer.Option(min=0.0, max=1.0, help="Smallest pass-rate drop that can fire (fraction).")] = 0.10,
    cost_floor: Annotated[float, typer.Option(min=0.0, help="Smallest relative cost-per-passing-task rise that can fire.")] = 0.25,
    alpha: Annotated[float, typer.Option(min=0.0, max=1.0, help="Largest p-value that fires (one-sided, paired by task).")] = 0.10,
    as_json: JsonFlag = False,
) -> None:
    """Exit 1 when, paired by task, any tier's strict pass rate falls or cost per passing task rises past the floor and the test."""
    needs_ledger = (baseline is None and baseline_select) or (candidate is None and candidate_select)
    state = _state(workspace(ledger, root)) if needs_ledger else None
    base = _side("baseline", baseline, baseline_select, state)
    cand = _side("candidate", candidate, candidate_select, state)
    thresholds = gate.Thresholds(
        rate_floor=Fraction(str(rate_floor)), cost_floor=Fraction(str(cost_floor)), alpha=Fraction(str(alpha))
    )
    result = gate.compare(base, cand, suite, thresholds, condition)
    if as_json:
        doc = msgspec.to_builtins(result)
        doc["regressions"] = len(result.regressions)
        doc["notGated"] = len(result.not_gated)
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
    out: Annotated[Path | None, typer.Option("-o", "--out", callback=into_existing_directory, help=f"Database file (default: {READ_MODEL}).")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Rebuild the SQLite read model atomically."""
    where = workspace(ledger, root)
    target = out or where.read_model
    readmodel.write(readmodel.stream_tables(_state(where)), target)
    writers.write_text_if_changed(readmodel.metadata_path(target), readmodel.metadata(target.stem))
    if as_json:
        _emit({"readModel": {"path": str(target), "written": True}})
        return
    _written(target, True, _browse(target))


@project_app.command("all")
def all_cmd(ledger: LedgerOption = None, root: RootOption = None, check: CheckFlag = False, as_json: JsonFlag = False) -> None:
    """Regenerate every output: records, LEADERBOARD.md, the read model and the HTML site (`--check`: the first two);
    then keep a snapshot of the fold beside the ledger, where the next fold resumes."""
    where = workspace(ledger, root)
    if check:
        checked = _follower(where)
        state = checked.state
        records = writers.sync_records(state, where.results, check=True)
        if as_json:
            doc: dict = {"records": _records_json(records, True, _in(where))}
            code = _leaderboard(state, where.leaderboard, True, None, doc, checked.views)
            _emit(doc)
            raise typer.Exit(max(code, 0 if records.clean else 1))
        code = max(_records_report(records, True, _in(where)), _leaderboard(state, where.leaderboard, True, None,
                                                                           views=checked.views))
        # said, so that a clean check is not read as the whole of what `replay --verify` checks
        typer.echo(f"not checked: the read model and the site (`{invocation.command('replay', '--verify')}` checks "
                   "every output)")
        raise typer.Exit(code)
    source, progress = _site_source(where, as_json)
    with writers.one_projector(where):
        follower = _follower(where)
        state = follower.state
        try:
            done = writers.regenerate_all(state, where, site_evidence=source, views=follower.views)
        finally:
            progress.close()
    kept = writers.keep_snapshot(follower, where.snapshots, _note)
    if as_json:
        _emit({
            "records": _records_json(done.records, False, _in(where)),
            "leaderboard": {"path": str(where.leaderboard), "written": done.leaderboard},
            "readModel": {"path": str(where.read_model), "written": done.read_model},
            "site": {"path": str(where.site), "pagesWritten": len(done.site), "pagesKept": len(done.site_kept)},
            "snapshot": {"path": None if kept is None else str(kept), "seq": state.head_seq, "resumedFrom": follower.base_seq},
        })
        return
    _records_report(done.records, False, _in(where))
    _written(where.leaderboard, done.leaderboard)
    _written(where.read_model, done.read_model, _browse(where.read_model))
    typer.echo(f"{where.site}/: {len(done.site)} page(s) written, open {where.site / site_render.INDEX}")
    _kept_pages(done.site_kept)
    _snapshot_line(where, follower, kept)


def _kept_pages(kept: list[tuple[str, str]]) -> None:
    if kept:
        typer.echo(f"note: {len(kept)} run page(s) left as they were: their preserved runs cannot be read here to "
                   f"render them whole (first: {kept[0][1]})", err=True)


def _not_compared(out: OutputsCheck) -> str:
    return (f"; {out.site_not_compared} run page(s) not compared: their preserved runs cannot be read here "
            f"(first: {out.site_not_compared_why})") if out.site_not_compared else ""


def _snapshot_line(where: Workspace, follower: writers.LedgerFollower, kept: Path | None) -> None:
    resumed = f", the fold resumed from seq {follower.base_seq}" if follower.base_seq else ""
    if kept is not None:
        typer.echo(f"{kept}: snapshot at seq {follower.state.head_seq}{resumed}")
    elif follower.base_seq and follower.base_seq == follower.state.head_seq:
        typer.echo(f"{where.snapshots}/: the snapshot at seq {follower.base_seq} is the head's already")


@project_app.command("site")
def site_cmd(ledger: LedgerOption = None, root: RootOption = None, check: CheckFlag = False, as_json: JsonFlag = False) -> None:
    """Regenerate the static HTML site under results/site/ (`--check`: compare only)."""
    where = workspace(ledger, root)
    if check:
        state = _state(where)
        out = OutputsCheck()
        found = check_site(state, where, out)
        if as_json:
            _emit({"site": {"path": str(where.site), "notCompared": out.site_not_compared,
                            "differences": [{"file": f.file, "message": f.message} for f in found]}})
        else:
            for f in found:
                typer.echo(f"{f.file}: {f.message}", err=True)
            if not found:
                typer.echo(f"{where.site}/: up to date{_not_compared(out)}")
            elif out.site_not_compared:
                typer.echo(_not_compared(out).lstrip("; "), err=True)
        raise typer.Exit(1 if found else 0)
    source, progress = _site_source(where, as_json)
    try:
        # folded under the results lock, as `run` and `project all` fold: a command that folded
        # earlier never writes its pages after this one's (cli/run_commands.py, regenerate_after)
        with writers.one_projector(where):
            state = _state(where)
            kept: list[tuple[str, str]] = []
            written = writers.sync_site(state, where.site, source, kept=kept)
    finally:
        progress.close()
    if as_json:
        _emit({"site": {"path": str(where.site), "pagesWritten": len(written), "pagesKept": len(kept)}})
        return
    typer.echo(f"{where.site}/: {len(written)} page(s) written, open {where.site / site_render.INDEX}")
    _kept_pages(kept)


def register(app: typer.Typer) -> None:
    """Adds the `project` group to the root app."""
    app.add_typer(project_app, name="project")
