"""`cbledger validate` and `cbledger grade`: tasks as data, and grading one sandbox by hand."""

from __future__ import annotations

import json
import signal
import sys
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Annotated, Any

import typer

from cbledger import invocation
from cbledger.cli.common import JsonFlag, LedgerOption, RootOption, fail, project_root, workspace
from cbledger.errors import UserError
from cbledger.grading import suite_version
from cbledger.grading.evidence.bundle import LIVE_REPORTS_DIR, Evidence, from_sandbox
from cbledger.grading.grader import GRADER_VERSION, Grade, grade
from cbledger.inputs import printable
from cbledger.ledger.events import SuiteBumped
from cbledger.ledger.store import LedgerStore
from cbledger.runner import ledger_view
from cbledger.runner.preserve import captured_another_tree
from cbledger.runner.sandbox import seeded_from
from cbledger.tasks import definitions, suite_archive
from cbledger.tasks.catalog import Catalog, Fixture, Task, load_task
from cbledger.tasks.fixtures.problems import Problem, error
from cbledger.tasks.validate import baseline_netlist, ensure_gradable, validate_project
from cbledger.workspace import Workspace, suite_definitions_name

BASELINE_TYPES = ("erc_no_new_violations", "drc_no_new_violations")


def unbumped(where: Workspace, said: Collection[str] = ()) -> list[Problem]:
    """What differs on disk from the suite version the ledger records last: an edited task,
    fixture or suite that nobody bumped. Runs refuse such a task; validate names it first.
    A ledger that does not exist yet, or records no suite, has nothing to differ from. `said`:
    files already in error, whose failure to load as a bump reads them is not said again."""
    root, ledger = where.root, where.ledger
    if not LedgerStore(ledger).exists():
        return []
    view = ledger_view.read(ledger)
    recorded = view.suite
    if recorded is None:
        return []
    now = _as_far_as_it_loads(Catalog(root), recorded)
    try:
        kept = suite_archive.kept_definitions(where, view.archived) if view.archived is not None else None
    except UserError as exc:  # the kept definitions missing or altered: `run` refuses for it too
        return [error(suite_definitions_name(recorded.suite_version), "", str(exc))]
    problems = []
    files: list[definitions.FileDifference] = []
    if kept is not None:
        try:
            files = definitions.file_differences(kept, suite_archive.on_disk(where))
        except UserError as exc:
            # the tree as a bump and a run read it (a link, a special file, a task that does not
            # load): both refuse for it, so validate does; the hashes below still compare the rest
            file, _, message = str(exc).partition(": ")
            if file not in said:  # a byte-order mark, broken JSON: said once, by the check that says why
                problems.append(error(file, "", message) if message else error("tasks", "", str(exc)))
    hint = f"differs from suite {recorded.suite_version} as recorded; run `{invocation.command('suite', 'bump', '--reason', '...')}`"
    hashed = suite_version.changes(recorded, now)
    for d in hashed:
        if d.kind == "task" and d.key:
            # the file that changed, when the kept definitions say (assertions.json is hashed too)
            named = [f for f in files if f.kind == "task" and f.key == d.key and f.rel in ("task.json", "assertions.json")]
            file = f"tasks/{d.key}/{named[0].rel}" if named else f"tasks/{d.key}/task.json"
        elif d.kind == "fixture" and d.key:
            file = f"fixtures/{d.key}/fixture.json"
        elif d.kind == "suites":
            file = "suites"
        else:
            file = "cbledger"
        why = hint
        if d.kind == "task" and d.key and d.change == "added":
            # a new task is a draft until a bump records it: how to run it before that
            why = (f"a draft until a suite version records it: run it with `{invocation.command('run', d.key, '--draft', workspace=False)}`, "
                   f"capture its gold (`{invocation.command('fixture', 'gold')}`), then "
                   f"`{invocation.command('suite', 'bump', '--reason', '...')}`")
        problems.append(error(file, "", f"{d} since the last bump: {why}"))
    covered = {(d.kind, d.key) for d in hashed}
    for f in files:
        # a gold, rubric, session or baseline report no hash covers: a bump tries the task again
        if f.kind in ("task", "fixture", "check code") and f.rel and (f.kind, f.key) not in covered:
            path = f"{ {'task': 'tasks/', 'fixture': 'fixtures/', 'check code': ''}[f.kind]}{f.key}/{f.rel}"
            problems.append(error(path, "", f"{f.message} since the last bump: {hint}"))
    return problems


def _as_far_as_it_loads(catalog: Catalog, recorded: SuiteBumped) -> suite_version.Definition:
    """The suite on disk with each task, fixture or the named suites that does not load taken as
    recorded: its own errors are already listed, and one broken task must not hide the others
    that changed."""
    def each(ids: list[str], load: Callable[[str], Any], before: dict[str, Any]) -> dict[str, Any]:
        out = {}
        for key in ids:
            try:
                out[key] = load(key)
            except UserError:
                if key in before:
                    out[key] = before[key]
        return out

    tasks = each(catalog.task_ids(), lambda t: catalog.task(t).manifest_hash, recorded.task_manifest_hashes)
    fixtures = each(catalog.fixture_ids(), lambda f: catalog.fixture(f).manifest.sha256, recorded.fixture_hashes)
    suites = each(catalog.suite_names(), lambda s: list(catalog.suite(s).tasks), recorded.suites)
    return suite_version.Definition(tasks, fixtures, suites)


def validate(
    root: RootOption = None,
    ledger: LedgerOption = None,
    as_json: JsonFlag = False,
    require_trees: Annotated[
        bool, typer.Option("--require-trees", help="Treat a real fixture whose tree is not materialized as an error.")
    ] = False,
) -> None:
    """Check every fixture, task and suite as data, and against the suite version the ledger
    records; list every problem.

    Each problem names its file and field. Exits 1 when any error is found; warnings and notes
    (a real board not materialized here) do not fail it unless --require-trees."""
    where = workspace(ledger, root)
    if not any((where.root / part).is_dir() for part in ("tasks", "fixtures", "suites")):
        fail(f"{where.root}: not a copperbench project (no tasks/, fixtures/ or suites/ here or above); pass --root")
    report = validate_project(where.root, require_trees=require_trees)
    report.problems.extend(unbumped(where, {p.file for p in report.errors}))
    if as_json:
        typer.echo(json.dumps(report.to_json(), indent=2))
    else:
        for p in report.problems:
            typer.echo(printable(p, limit=4000), err=p.severity == "error")
        typer.echo(
            f"{report.tasks} task(s), {report.fixtures} fixture(s), {report.suites} suite(s): "
            f"{len(report.errors)} error(s), {len(report.warnings)} warning(s), {len(report.notes)} note(s)"
        )
    if not report.ok:
        raise typer.Exit(1)


def _load(root: Path, task_arg: str) -> tuple[Task, Fixture]:
    catalog = Catalog(root)
    as_path = Path(task_arg)
    task = load_task(as_path) if (as_path / "task.json").is_file() else catalog.task(task_arg)
    ensure_gradable(root, task)  # a pin to another fixture hash included: its baseline is not this task's
    return task, catalog.fixture_for(task)


def _baseline_warning(task: Task, fixture: Fixture) -> str | None:
    used = sorted({a.type for a in task.assertions if a.type in BASELINE_TYPES})
    if not used:
        return None
    missing = [k for k in ("erc", "drc") if fixture.baseline_report(k) is None and any(t.startswith(k) for t in used)]
    for kind in ("erc", "drc"):
        data = fixture.baseline_report(kind) if kind not in missing else None
        if data is not None and any(t.startswith(kind) for t in used):
            try:
                json.loads(data)
            except ValueError as exc:  # a traceback once, from deep in the grader
                entry = fixture.manifest.baseline.erc if kind == "erc" else fixture.manifest.baseline.drc
                name = fixture.dir / entry.report if entry is not None else fixture.dir
                raise UserError(f"{name}: the fixture's baseline {kind.upper()} report is not JSON ({exc}); "
                                f"measure it again: `{invocation.command('fixture', 'baseline', fixture.id)}`") from None
    if not missing:
        return None
    # only the assertions that read a missing report: the others are graded as usual
    blind = [t for t in used if any(t.startswith(k) for k in missing)]
    return (
        f"fixture {fixture.id} has no baseline {'/'.join(m.upper() for m in missing)} report here, so "
        f"{', '.join(blind)} cannot be evaluated (materialize it: `{invocation.command('fixture', 'materialize', fixture.id, '--from', 'DIR')}`)"
    )


def grade_document(task: Task, fixture: Fixture, evidence: Evidence, result: Grade) -> dict[str, Any]:
    t = evidence.transcript
    return {
        "task": task.id,
        "taskManifestHash": task.manifest_hash,
        "fixture": fixture.id,
        "fixtureSha256": fixture.manifest.sha256,
        "graderVersion": GRADER_VERSION,
        "baselineSha": evidence.baseline_sha,
        "headSha": evidence.head_sha,
        "commits": len(evidence.commits),
        "reports": sorted(evidence.reports),
        "transcript": {
            "path": t.path,
            "events": len(t.events),
            "malformedLines": list(t.malformed),
            "candidates": list(t.candidates),
        },
        "exitPath": result.exit_path,
        "verdict": result.verdict,
        "partialCredit": result.partial_credit,
        "firstFailedRequired": result.first_failed_required,
        "failureCategory": result.failure_category,
        "dominantToolError": result.dominant_tool_error,
        "outcomes": [
            {
                "id": o.id,
                "type": o.type,
                "status": o.status,
                "required": o.required,
                "weight": o.weight,
                "evidenceSource": o.evidence_source,
                "detail": o.detail,
            }
            for o in result.outcomes
        ],
    }


def _print_human(doc: dict[str, Any]) -> None:
    t = doc["transcript"]
    typer.echo(f"task {doc['task']} (manifest {doc['taskManifestHash'][:12]}) on fixture {doc['fixture']}")
    typer.echo(
        f"baseline {doc['baselineSha'][:12]} → HEAD {doc['headSha'][:12]}, {doc['commits']} commit(s); "
        f"reports: {', '.join(doc['reports']) or 'none'}"
    )
    if t["path"]:
        bad = f", {len(t['malformedLines'])} malformed line(s) {t['malformedLines'][:10]}" if t["malformedLines"] else ""
        typer.echo(f"transcript {t['path']}: {t['events']} event(s){bad}")
    else:
        typer.echo("transcript: none written by this run")
    width_id = max((len(o["id"]) for o in doc["outcomes"]), default=2)
    width_type = max((len(o["type"]) for o in doc["outcomes"]), default=4)
    for o in doc["outcomes"]:
        mark = "*" if o["required"] else " "
        typer.echo(f"{o['status'].upper():<4}{mark} {o['id']:<{width_id}}  {o['type']:<{width_type}}  {printable(o['detail'], limit=4000)}")
    typer.echo("(* required)")
    typer.echo(f"verdict: {doc['verdict']}")
    typer.echo(f"partial credit: {doc['partialCredit']:.4f}")
    typer.echo(f"exit path: {doc['exitPath'] or 'none (no run-end)'}")
    if doc["verdict"] == "fail":
        first = next((o for o in doc["outcomes"] if o["id"] == doc["firstFailedRequired"]), None)
        typer.echo(f"first failed required: {doc['firstFailedRequired']}" + (f" ({first['type']})" if first else ""))
        typer.echo(f"failure category: {doc['failureCategory']}")
    if doc["dominantToolError"]:
        typer.echo(f"dominant tool error: {doc['dominantToolError']}")


def grade_cmd(
    task: Annotated[str, typer.Argument(help="A task id under tasks/, or a task directory.")],
    sandbox: Annotated[Path, typer.Argument(help="The sandbox: a git repository holding the run's working tree.")],
    baseline: Annotated[
        str | None,
        typer.Option("--baseline", help="Baseline commit. Default: the one recorded in refs/cbledger/baseline."),
    ] = None,
    runner_exit: Annotated[
        str | None,
        typer.Option("--runner-exit", help="The runner's own exit (e.g. cap-exceeded) for a run that wrote no run-end."),
    ] = None,
    kicad: Annotated[
        bool,
        typer.Option("--kicad/--no-kicad", help="Run kicad-cli for the ERC/DRC reports the task's assertions need when the sandbox holds none for its current tree."),
    ] = True,
    as_json: JsonFlag = False,
    root: RootOption = None,
) -> None:
    """Grade one sandbox against a task, offline.

    Prints every assertion's outcome, the verdict, partial credit, the first failed required
    assertion and the failure category. Exits 0 whatever the verdict; a grade that cannot be
    computed exits non-zero. The kicad-cli reports come from the run (a live sandbox's, or a
    restored run's whose tree is unchanged); otherwise kicad-cli makes them now, as the runner does."""
    if runner_exit is not None and runner_exit not in RUNNER_EXITS:
        # a typo would grade as a run that ended on its own, in another failure category
        fail(f"--runner-exit {runner_exit!r}: one of {', '.join(RUNNER_EXITS)}", 2)
    if not sandbox.exists():
        fail(f"{sandbox}: no such directory (the sandbox to grade)", 2)
    task_obj, fixture = _load(project_root(root), task)
    evidence, result = grade_sandbox(task_obj, fixture, sandbox, baseline, runner_exit, kicad=kicad, whole=True)
    doc = grade_document(task_obj, fixture, evidence, result)
    if as_json:
        typer.echo(json.dumps(doc, indent=2, ensure_ascii=False))
    else:
        _print_human(doc)


def grade_sandbox(
    task_obj: Task, fixture: Fixture, sandbox: Path, baseline: str | None = None, runner_exit: str | None = None,
    *, kicad: bool = True, whole: bool = False,
) -> tuple[Evidence, Grade]:
    """A sandbox graded by hand as the runner grades a run, what it lacks said on stderr: for
    `grade`, and for `fixture gold`, which is told whether the run it keeps passed its task.
    `whole`: a fixture baseline missing here refuses the grade (`grade`), rather than grading the
    assertions that read it as failed, which named the model's `constraint-violation` for a clone
    that had not materialized its real boards."""
    note = _baseline_warning(task_obj, fixture)
    if note and whole:
        raise UserError(f"{note}; nothing graded")
    if note:
        print(f"warning: {note}", file=sys.stderr)
    evidence = from_sandbox(sandbox, baseline, runner_exit)
    seeded = seeded_from(evidence.repo, evidence.baseline_sha)
    if seeded is not None and seeded != (fixture.id, fixture.manifest.sha256):
        # graded against another board's baseline, every assertion reads the wrong design
        same = seeded[0] == fixture.id
        raise UserError(
            f"{sandbox}: seeded from fixture {seeded[0]} at {seeded[1][:12]}, but task {task_obj.id} is graded on "
            + (f"its tree at {fixture.manifest.sha256[:12]} (the fixture was frozen again since this run)" if same
               else f"fixture {fixture.id}")
            + "; nothing graded"
        )
    if evidence.reports and captured_another_tree(evidence.repo, evidence.end.tree):
        print(f"warning: the reports the run left in .git/{LIVE_REPORTS_DIR}/ describe the end state it captured, and "
              "this tree has changed since: they are not read", file=sys.stderr)
        evidence.reports.clear()
    if runner_exit is not None and evidence.transcript.exit_path is not None:
        # the runner's own exit stands in only for a run-end the harness never wrote
        print(f"warning: --runner-exit {runner_exit} is ignored: the run wrote a run-end (exit path "
              f"{evidence.transcript.exit_path}), which the grade reads", file=sys.stderr)
    if any(a.type == "check_clean" for a in task_obj.assertions) and "check" not in evidence.reports:
        # the runner captures `copperhead check` when a run ends; a tree graded by hand has none,
        # and the assertion then fails as a model's failure would
        print("warning: no `copperhead check` result in this sandbox (the runner captures one when a run ends): "
              "check_clean cannot pass here", file=sys.stderr)
    missing = sorted({REPORT_OF[a.type] for a in task_obj.assertions if a.type in REPORT_OF} - set(evidence.reports))
    if missing and kicad:
        evidence.reports.update(_fresh_reports(sandbox, fixture, missing))
    elif missing:
        print(f"warning: no {'/'.join(m.upper() for m in missing)} report for this tree (--no-kicad): "
              "the assertions that read it cannot be evaluated", file=sys.stderr)
    return evidence, grade(task_obj, fixture, evidence)


#: what `--runner-exit` may say: the runner's own exits a grade reads (`run.recorded` `runnerExit`)
RUNNER_EXITS = ("cap-exceeded", "agent-error")

#: the verification report each kicad-cli assertion type reads
REPORT_OF = {"erc_clean": "erc", "erc_no_new_violations": "erc", "drc_clean": "drc", "drc_no_new_violations": "drc"}


def _fresh_reports(sandbox: Path, fixture: Fixture, kinds: list[str]) -> dict[str, bytes]:
    """ERC/DRC of the sandbox's working tree now, by the same oracle the runner verifies with.
    Without kicad-cli the grade goes on and names the way to get it."""
    import tempfile

    from cbledger.kicad.oracle import verify_tree

    artifacts = fixture.manifest.artifacts
    with tempfile.TemporaryDirectory(prefix="cbledger-grade-") as out:
        try:
            verify_tree(sandbox, artifacts.schematic, artifacts.board if "drc" in kinds else None, Path(out))
        except UserError as exc:
            # kicad-cli missing, or present and unable to load the design: its own words say which
            print(f"warning: {exc}; the assertions that read {'/'.join(k.upper() for k in kinds)} cannot be evaluated",
                  file=sys.stderr)
            return {}
        made = {k: (Path(out) / f"{k}.json").read_bytes() for k in kinds if (Path(out) / f"{k}.json").is_file()}
    print(f"note: ran kicad-cli on {sandbox} for {', '.join(k.upper() for k in made) or 'nothing'} "
          "(no report of this tree was kept)", file=sys.stderr)
    return made


task_app = typer.Typer(help="Tasks as data: new tasks from a fixture, memorization variants.", no_args_is_help=True)


@task_app.command("variant")
def variant_cmd(
    task: Annotated[str, typer.Argument(help="A synthetic task id under tasks/ (an original, not a variant).")],
    seed: Annotated[int, typer.Option(min=0, max=2**32 - 1, help="The seed of the transform (0 to 2**32 - 1): the same seed gives the same bytes.")] = 1,
    replace: Annotated[bool, typer.Option("--replace", help="Write the variant anew if it exists.")] = False,
    copperhead_cli: Annotated[str | None, typer.Option("--copperhead-cli", envvar="COPPERHEAD_CLI", help="Path to copperhead's cli.js (for setup commands).")] = None,
    root: RootOption = None,
    as_json: JsonFlag = False,
) -> None:
    """Write tasks/<task>-v<seed>/ and fixtures/variant-<task>-v<seed>/ by a seeded transform of the
    task (names renumbered, nets renamed, quantities scaled), measure the new fixture's kicad-cli
    baseline, and keep them only if the transformed gold passes and noop fails (real runs, nothing
    recorded). Then `cbledger suite bump` records the variant like any task."""
    where = project_root(root)
    # `timeout` and a closed terminal send SIGTERM: made an exception, the variant is taken out
    previous = signal.signal(signal.SIGTERM, _terminated)
    try:
        made = _variant(where, task, seed, replace=replace, copperhead_cli=copperhead_cli, as_json=as_json)
    finally:
        signal.signal(signal.SIGTERM, previous)
    if as_json:
        typer.echo(json.dumps({
            "task": made.task_id, "fixture": made.fixture_id, "variantOf": task, "scale": str(made.mapping.k),
            "renamed": dict(sorted(made.mapping.names.items())),
        }, ensure_ascii=False))
        return
    renamed = ", ".join(f"{a}→{b}" for a, b in sorted(made.mapping.names.items()))
    typer.echo(f"wrote tasks/{made.task_id}/ and fixtures/{made.fixture_id}/ (variantOf {task}; scale {made.mapping.k}; {renamed})")


def _variant(where: Path, task: str, seed: int, *, replace: bool, copperhead_cli: str | None, as_json: bool) -> Any:
    """Generates the variant and keeps it only once its trial passed; anything else, an
    interruption included, takes it out again (a SIGKILL leaves it marked incomplete)."""
    from cbledger.runner import trial
    from cbledger.tasks.fixtures import baseline as baseline_mod
    from cbledger.tasks.variant import generate

    made = generate.generate(where, task, seed, replace=replace)
    try:
        measured = baseline_mod.measure(made.fixture_dir)
        typer.echo(f"fixture {made.fixture_id}: baseline ERC {measured.erc['errors']} error(s), {measured.erc['warnings']} warning(s) (kicad-cli {measured.kicad_cli_version})", err=as_json)
        results = trial.run_trials(where, [made.task_id], copperhead_cli=copperhead_cli, on_done=lambda r: typer.echo(f"  trial {r}", err=as_json))
        trial.require_discriminating(results, f"variant {made.task_id} is not solvable as generated")
        generate.finish(made)
    except BaseException:
        generate.remove(made)
        raise
    return made


def _terminated(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


@task_app.command("new")
def new_cmd(
    task_id: Annotated[str, typer.Argument(help="The new task's id (kebab-case; its directory under tasks/).")],
    fixture: Annotated[str, typer.Option("--fixture", help="The fixture id under fixtures/.")],
    tier: Annotated[str, typer.Option(help="simple | medium | hard")],
    outcome: Annotated[str, typer.Option(help="edit | refuse | flag: what a correct run does.")],
    mode: Annotated[str, typer.Option(help="The copperhead surface driven: do | create | sync (a check-mode task measures no model).")] = "do",
    prompt: Annotated[str | None, typer.Option(help="The request copperhead is given (do and sync).")] = None,
    brief: Annotated[str | None, typer.Option("--brief", help="A create task's brief, a path in the fixture tree.")] = None,
    budget: Annotated[list[str] | None, typer.Option("--budget", help="KEY=NUMBER, a budget the task's config records (repeatable).")] = None,
    assertion: Annotated[list[str] | None, typer.Option(
        "--assert", help='TYPE:{json args}, a required assertion that recognises the change (repeatable), e.g. '
                         'net_present:{"net": "SDA"}.')] = None,
    tag: Annotated[list[str] | None, typer.Option("--tag", help="A tag (repeatable; default: the outcome class).")] = None,
    repeats: Annotated[int | None, typer.Option(min=1, max=100, help="Repeats per run (default 3).")] = None,
    init: Annotated[bool | None, typer.Option("--init/--no-init", help="Run copperhead init as setup (default: on a real or local board, never a synthetic one).", show_default=False)] = None,
    root: RootOption = None,
    ledger: LedgerOption = None,
    as_json: JsonFlag = False,
) -> None:
    """Scaffold tasks/<id>/: task.json with every field the standard requires, assertions.json
    started from the vocabulary for the outcome class and the fixture's baseline, and a README
    listing the board's nets, references and budgets to aim the task at (docs/AUTHORING.md)."""
    from cbledger.tasks import scaffold

    made = scaffold.scaffold(
        project_root(root), task_id, fixture_id=fixture, mode=mode, tier=tier, outcome=outcome, prompt=prompt,
        brief_path=brief, budgets=dict(scaffold.parse_budget(b) for b in budget or []),
        targets=[scaffold.parse_assert(a) for a in assertion or []], tags=tag, repeats=repeats, init=init,
    )
    files = scaffold.write(made)
    earlier = _earlier_runs(workspace(ledger, root), task_id)  # the ledger asked of: a warning, never a refusal
    if earlier:
        typer.echo(earlier, err=True)
    if outcome == "edit":
        baseline = baseline_netlist(project_root(root) / "fixtures" / fixture)
        for line in scaffold.finish_gate_conflicts(made.assertions, fixture, baseline, made.symbols):
            typer.echo(line, err=True)
    elif not budget:
        typer.echo(f"note: no --budget: the {'flag' if outcome == 'flag' else 'refusal'} is not graded on citing one (refusal_cites_budget is left out); "
                   "give --budget KEY=NUMBER for a refusal the budget decides", err=True)
    if as_json:
        typer.echo(json.dumps({"task": task_id, "files": [str(f) for f in files], "assertions": [a["id"] for a in made.assertions],
                               "nets": made.nets, "references": made.references}, ensure_ascii=False))
        return
    typer.echo(f"wrote {made.task_dir}/: task.json, assertions.json ({len(made.assertions)} assertions), README.md "
               f"({len(made.nets)} nets, {len(made.references)} references)")
    if not assertion and outcome == "edit":
        typer.echo(f"next: add the assertion that recognises the change (docs/AUTHORING.md), then `{invocation.command('validate')}`")


def _earlier_runs(where: Workspace, task_id: str) -> str | None:
    """A task made under the id of one the ledger holds runs of (a task since removed): every page
    and table by task id would list both tasks' runs as one history. Said, not refused: the same
    task scaffolded again is the same history."""
    try:
        if not LedgerStore(where.ledger).exists():
            return None
        runs = [r for r in ledger_view.read(where.ledger).runs.values() if r.task.id == task_id]
    except (UserError, OSError):
        return None  # a ledger that cannot be read now is `validate`'s and `run`'s to name
    if not runs:
        return None
    fixtures = sorted({r.fixture.id for r in runs})
    return (f"warning: the ledger holds {len(runs)} run(s) of a task {task_id!r} (fixture {', '.join(fixtures)}): a new "
            "task under that id shares their history on every page and table by task; pick another id unless this is "
            "that task again")


def register(app: typer.Typer) -> None:
    """Adds `cbledger validate`, `cbledger grade` and the `task` group to the root app."""
    app.command("validate")(validate)
    app.command("grade")(grade_cmd)
    app.add_typer(task_app, name="task")
