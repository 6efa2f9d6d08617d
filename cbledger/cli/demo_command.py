"""`cbledger demo`: the main job on embedded defaults.

Validates the bundled suite, records a suite version if the tasks on disk are not yet recorded,
runs the full suite with the scripted agents (gold, then noop, each task for its own repeat
count) into a fresh scratch workspace (a new results directory under the system's temporary
directory, printed first; `cbledger --results DIR demo` or `--ledger` choose one instead),
regenerates every projection (records, LEADERBOARD.md, the SQLite read model) and verifies the
chain. The project's own ledger and every tracked file are left alone. Gold passing everything and noop passing nothing
is the suite's own proof that its assertions discriminate.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import Annotated

import typer

from cbledger.cli.common import (
    JsonFlag,
    LedgerOption,
    RootOption,
    chosen_results,
    fail,
    project_root,
    workspace,
)
from cbledger.cli.progress import SuiteProgress
from cbledger.grading import suite_version
from cbledger.ledger.events import Ablations, Actor, make_event
from cbledger.ledger.store import LedgerStore
from cbledger.ledger.verify import verify_chain
from cbledger.projections import writers
from cbledger.reproduce import site_evidence
from cbledger.runner import ledger_view
from cbledger.runner.plan import make_plan
from cbledger.runner.suite_run import run_plan
from cbledger.tasks import suite_archive
from cbledger.tasks.catalog import Catalog
from cbledger.tasks.validate import validate_project
from cbledger.workspace import RESULTS, Workspace


def demo(
    suite: Annotated[str, typer.Option(help="Which named suite to run.")] = "full",
    jobs: Annotated[int, typer.Option(min=1, help="Sandboxes run concurrently.")] = 2,
    unsandboxed: Annotated[bool, typer.Option(
        "--unsandboxed", help="Run setup commands without the bubblewrap sandbox (recorded on every run).",
    )] = False,
    ledger: LedgerOption = None,
    root: RootOption = None,
    as_json: JsonFlag = False,
) -> None:
    """Run the bundled suite with the gold and noop agents into a scratch workspace (printed), then
    regenerate every projection there. With --json the progress lines go to stderr and one JSON
    summary to stdout."""

    def say(line: str) -> None:
        typer.echo(line, err=as_json)

    if ledger is None and chosen_results() is None:
        where = Workspace.at(project_root(root), results=Path(tempfile.mkdtemp(prefix="cbledger-demo-")) / RESULTS)
    else:
        where = workspace(ledger, root)
    root_dir, path = where.root, where.ledger
    say(f"workspace: {where.results} (ledger {path}; LEADERBOARD.md {where.leaderboard})")
    actor = Actor(kind="maintainer", name="cbledger-demo")

    report = validate_project(root_dir)
    if not report.ok:
        for p in report.errors:
            typer.echo(f"  {p.file}: {p.field}: {p.message}", err=True)
        fail(f"the suite under {root_dir} does not validate ({len(report.errors)} error(s))", 1)
    say(f"validated {report.tasks} task(s), {report.fixtures} fixture(s), {report.suites} suite(s)")

    store = LedgerStore(path)
    if not store.exists():
        created = store.init("copperbench", actor, "copperbench runs, grades, suite versions and price tables")
        say(f"initialised {store.location} (seq {created.seq})")
    catalog = Catalog(root_dir)
    view = ledger_view.read(path)
    changes = suite_version.differences(view.suite, suite_version.current(catalog)) if view.suite else ["initial suite"]
    if changes:
        body, kept = suite_version.bump_and_keep(view.suite, where, "demo: " + ", ".join(changes), kept_versions=set(view.archives))
        r, _ = store.append([
            make_event(body, id=f"suite:{body.suite_version}", actor=actor),
            make_event(kept, id=suite_archive.event_id(kept), actor=actor),
        ])
        say(f"recorded suite {body.suite_version} (seq {r.seq}), its definitions kept: {', '.join(changes)}")

    totals: dict[str, tuple[int, int]] = {}
    sandboxes = Path(tempfile.mkdtemp(prefix="cbledger-demo-"))
    failures = 0
    for agent in ("gold", "noop"):
        plan = make_plan(catalog, agent=agent, model=None, suite=suite, task_ids=[], repeats=None, ablations=Ablations())
        say(f"{agent}: {len(plan.runs)} run(s) over {len(plan.tasks)} task(s)")
        progress = SuiteProgress(len(plan.runs))
        try:
            result = run_plan(
                where, plan, jobs=jobs, sandbox_root=sandboxes / agent, on_done=progress, unsandboxed=unsandboxed,
            )
        finally:
            progress.close()
        totals[agent] = (result.passed, len(result.outputs))
        failures += len(result.failures)
        for label, error in result.failures:
            typer.echo(f"  not recorded: {label}: {error}", err=True)

    shutil.rmtree(sandboxes, ignore_errors=True)
    outputs = writers.regenerate_all(writers.load_state(path), where, site_evidence=site_evidence.source(where))
    chain = verify_chain(path)

    gold_pass, gold_n = totals["gold"]
    noop_pass, noop_n = totals["noop"]
    say(f"gold passed {gold_pass}/{gold_n}; noop passed {noop_pass}/{noop_n}")
    say(
        f"records: {len(outputs.records.created)} new; {where.leaderboard}, {where.read_model} and the site "
        f"{where.site / 'index.html'} regenerated; "
        f"chain {'ok' if chain.ok else 'BROKEN'}: head seq {chain.head.seq} {chain.head.hash}"
    )
    if as_json:
        typer.echo(json.dumps({
            "workspace": str(where.results), "ledger": str(path), "leaderboard": str(where.leaderboard),
            "readModel": str(where.read_model), "site": str(where.site / "index.html"),
            "gold": {"passed": gold_pass, "runs": gold_n}, "noop": {"passed": noop_pass, "runs": noop_n},
            "notRecorded": failures, "chainOk": chain.ok, "headSeq": chain.head.seq, "headHash": chain.head.hash,
        }, sort_keys=True))
    if failures or not chain.ok or gold_pass != gold_n or noop_pass != 0:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.command()(demo)
