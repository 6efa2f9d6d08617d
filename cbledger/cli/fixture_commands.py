"""`cbledger fixture hash | check | freeze | baseline | materialize | gold`: fixtures (and the gold
solutions laid over them) as pinned data."""

from __future__ import annotations

import json
import os
import posixpath
import sys
from pathlib import Path
from typing import Annotated

import typer

from cbledger import invocation
from cbledger.cli.common import JsonFlag, RootOption, fail, project_root, require_project
from cbledger.errors import UserError, did_you_mean
from cbledger.kicad.oracle import require_kicad_cli
from cbledger.ledger.durable import write_atomic
from cbledger.ledger.types import Slug, conforms
from cbledger.tasks.definitions import incomplete
from cbledger.tasks.fixtures import authoring
from cbledger.tasks.fixtures import baseline as baseline_mod
from cbledger.tasks.fixtures import materialize as materialize_mod
from cbledger.tasks.fixtures.check import README_NAME, FixtureCheck, check_fixture
from cbledger.tasks.fixtures.freeze import Frozen, Recipe, freeze_files, holds
from cbledger.tasks.fixtures.hashing import hash_directory
from cbledger.tasks.fixtures.install import install_tree
from cbledger.tasks.fixtures.manifest_file import (
    MANIFEST_NAME,
    is_placeholder,
    read_document,
    write_document,
)
from cbledger.tasks.fixtures.problems import Problem
from cbledger.tasks.fixtures.project_check import ProjectCheck, check_fixtures, repin
from cbledger.tasks.model import KicadRelease

fixture_app = typer.Typer(
    name="fixture",
    help="Fixtures as pinned data: hash a tree, check a fixture, freeze one from git, measure its "
    "kicad-cli baseline, materialize a real board's uncommitted tree.",
    no_args_is_help=True,
)

FixtureId = Annotated[str, typer.Argument(help="Fixture id (its directory under fixtures/).")]


def _fixture_dir(root: Path | None, fixture_id: str, must_exist: bool = True) -> Path:
    d = project_root(root) / "fixtures" / fixture_id
    if must_exist and not (d / MANIFEST_NAME).is_file():
        known = (p.parent.name for p in d.parent.glob(f"*/{MANIFEST_NAME}"))
        fail(f"{d / MANIFEST_NAME}: no such fixture{did_you_mean(fixture_id, known)}")
    if must_exist and incomplete(d):
        # what a killed `task variant` left: no reader takes it for a fixture, and nor does this
        fail(f"{d}: an unfinished variant's fixture (a killed `task variant` left it; the next `task variant` of "
             "its original and seed replaces it), not a fixture")
    return d


@fixture_app.command("hash")
def hash_cmd(
    path: Annotated[Path, typer.Argument(help="A directory, e.g. fixtures/<id>/tree.")],
    as_json: JsonFlag = False,
) -> None:
    """Print the standard tree hash of a directory."""
    digest = hash_directory(path)
    typer.echo(json.dumps({"path": str(path), "sha256": digest}, sort_keys=True) if as_json else digest)


def _problems_json(problems: list[Problem]) -> list[dict]:
    return [{"severity": p.severity, "file": p.file, "field": p.field, "message": p.message} for p in problems]


def _check_json(result: FixtureCheck, more: list[Problem] | None = None) -> dict:
    return {
        "fixture": result.fixture_id,
        "ok": result.ok,
        "treeHash": result.tree_hash,
        "problems": _problems_json([*(more or []), *result.problems]),
    }


def _ok_line(result: FixtureCheck) -> str:
    if result.tree_hash is None:
        return f"{result.fixture_id}: ok (tree not materialized)"
    return f"{result.fixture_id}: ok (tree {result.tree_hash})"


def _report_json(report: ProjectCheck, single: bool) -> dict:
    """One fixture named: its own document, as before; otherwise every fixture's in one."""
    if single:
        return _check_json(report.fixtures[0], report.problems)
    return {
        "ok": report.ok,
        "fixtures": [_check_json(r) for r in report.fixtures],
        "problems": _problems_json(report.problems),
        "reproduced": report.reproduced,
        "goldChecked": report.gold_checked,
    }


def _print_report(report: ProjectCheck, single: bool, kicad: bool) -> None:
    for p in report.problems:
        typer.echo(str(p), err=p.severity == "error")
    for result in report.fixtures:
        for p in result.problems:
            typer.echo(str(p), err=p.severity == "error")
        if result.ok:
            typer.echo(_ok_line(result))
    if single:
        return
    line = f"checked {len(report.fixtures)} fixture(s)"
    if kicad:
        line += f", re-ran kicad-cli on {report.reproduced}, checked {report.gold_checked} gold solution(s)"
    failed = sum(not r.ok for r in report.fixtures)
    typer.echo(line + (": ok" if report.ok else f": {failed} fixture(s) with errors"))


@fixture_app.command("check")
def check_cmd(
    fixture_ids: Annotated[
        list[str] | None, typer.Argument(help="Fixture id(s) (directories under fixtures/); or --all.", show_default=False)
    ] = None,
    all_fixtures: Annotated[
        bool, typer.Option("--all", help="Every fixture under fixtures/; a real board's unmaterialized tree is a note.")
    ] = False,
    kicad: Annotated[
        bool,
        typer.Option(
            "--kicad",
            help="Also run kicad-cli on a copy of each materialized tree: baseline/ must be reproduced, the copy left "
            "untouched, and each gold solution must keep the erc_clean/drc_clean it asserts. BOM/PINOUT drift is noted.",
        ),
    ] = False,
    no_gold: Annotated[bool, typer.Option("--no-gold", help="With --kicad: skip the gold solutions.")] = False,
    root: RootOption = None,
    as_json: JsonFlag = False,
) -> None:
    """Check fixtures against their manifests.

    The manifest decodes with no placeholder left, its id matches, tree/ hashes to sha256, the
    baseline reports agree with the summary and hold no machine path, and every task pinning the
    fixture pins that hash. Exits 1 on any error."""
    if all_fixtures == bool(fixture_ids):
        fail("give one or more fixture ids, or --all")
    base = project_root(root)
    if all_fixtures:
        # with no project, "every fixture" is none, and a CI step in the wrong directory passed
        require_project("fixture check --all checks the fixtures/ of a project")
    if fixture_ids:
        for fixture_id in fixture_ids:
            _fixture_dir(root, fixture_id)
    cli = require_kicad_cli() if kicad else None
    from cbledger.cli.progress import Reporter

    progress = Reporter("fixture check --kicad", quiet=as_json or not kicad)

    def checked(done: int, total: int, fixture: str) -> None:
        if done == 1:
            progress.start(total)
        progress.step(done, total, f"{fixture} checked")

    try:
        report = check_fixtures(
            base, None if all_fixtures else list(fixture_ids or []), kicad=kicad, gold=not no_gold, cli=cli,
            on_fixture=checked,
        )
    finally:
        progress.close()
    single = not all_fixtures and len(report.fixtures) == 1
    if as_json:
        typer.echo(json.dumps(_report_json(report, single), indent=2))
    else:
        _print_report(report, single, kicad)
    if not report.ok:
        raise typer.Exit(1)


def _upstream_unheld(doc: dict, manifest_path: Path, frozen: Frozen, git_dir: Path, url: str | None) -> str | None:
    """A fixture frozen again keeps its upstream URL. From a repository none of whose remotes holds
    the commit, the manifest then says that upstream holds a commit it may never have seen: once
    written without a word from a local copy over a real board's provenance. Said, not refused:
    an author's clone may have no remote and still be the upstream's history."""
    found = doc.get("upstream")
    upstream: dict = found if isinstance(found, dict) else {}
    kept = upstream.get("url")
    if url is not None or not isinstance(kept, str) or kept == "local" or is_placeholder(kept):
        return None
    if frozen.source is None or frozen.source.url is not None or upstream.get("commit") == frozen.commit:
        return None  # the same commit again: what the manifest said of it stands
    return (f"warning: {manifest_path}: upstream.url names {kept}, but no remote of {git_dir} with a web URL holds "
            f"commit {frozen.commit}: "
            f"the manifest now says {kept} holds it. If it does not, freeze from a clone of {kept} that holds it, or "
            "freeze the copy as a fixture of your own under another --id")


def _another_board(doc: dict, manifest_path: Path, git_dir: Path) -> str | None:
    """Why this freeze would put another board's files in place of an existing fixture's, or
    None: freezing again is for the same board at another commit, and it re-pins every task on
    the fixture. A mistyped or clashing --id once replaced an unrelated fixture (a bundled one
    included) and re-pinned its tasks to the new tree, with exit 0."""
    if not doc:
        return None
    if "freeze" not in doc:
        return (f"{manifest_path}: this fixture was not made by `fixture freeze` (it has no freeze recipe); freezing "
                "over it would replace its tree and re-pin every task on it to another board's")
    found = doc.get("upstream")
    old = found.get("commit") if isinstance(found, dict) else None
    if isinstance(old, str) and len(old) == 40 and not holds(git_dir, old):
        return (f"{manifest_path}: frozen at commit {old}, which {git_dir} does not hold: another board's history, "
                "and freezing it here would replace this fixture's tree and re-pin every task on it")
    return None


@fixture_app.command("freeze")
def freeze_cmd(
    git_dir: Annotated[Path, typer.Option("--from", help="A git repository: a clone of the upstream one, or your own.")],
    commit: Annotated[str | None, typer.Option("--commit", help="The full 40-hex commit SHA to freeze at. Default: the repository's HEAD.")] = None,
    paths: Annotated[list[str] | None, typer.Option("--path", help="A file or directory at that commit (repeatable); `.` or none: the whole tree.")] = None,
    fixture_id: Annotated[str, typer.Option("--id", help="The fixture id (kebab-case); required.")] = "",
    dest: Annotated[Path | None, typer.Option("--dest", help="Fixture directory. Default: fixtures/ID.")] = None,
    strip: Annotated[str | None, typer.Option("--strip", help="Remove this leading directory from every path.")] = None,
    into: Annotated[str | None, typer.Option("--into", help="Place the files under this directory of tree/.")] = None,
    name: Annotated[str | None, typer.Option(help="upstream.name")] = None,
    url: Annotated[str | None, typer.Option(help="upstream.url")] = None,
    license: Annotated[str | None, typer.Option(help="upstream.license (SPDX id)")] = None,
    license_file: Annotated[str | None, typer.Option("--license-file", help="upstream.licenseFile")] = None,
    copyright: Annotated[str | None, typer.Option(help="upstream.copyright")] = None,
    modifications: Annotated[str | None, typer.Option(help="upstream.modifications")] = None,
    retrieved: Annotated[str | None, typer.Option(help="upstream.retrieved (YYYY-MM-DD; default today)")] = None,
    complexity: Annotated[str | None, typer.Option(help="simple, medium or hard")] = None,
    authored_version: Annotated[str | None, typer.Option("--authored-version", help="kicad.authoredVersion")] = None,
    replace: Annotated[bool, typer.Option("--replace", help="Freeze over a fixture not made by freeze, or frozen from a history this repository does not hold.")] = False,
    root: RootOption = None,
    as_json: JsonFlag = False,
) -> None:
    """Freeze a fixture tree from a git repository at one exact commit.

    The files are read from git objects (no checkout) and fixture.json is written or updated. The
    upstream URL is the remote whose tracking branch holds the commit; with none the fixture is
    `local`. The license, its file and the copyright line are read from the license file at the
    commit's root. Fields no program can know stay placeholders that `fixture check` and `validate`
    reject until the author fills them in."""
    if not fixture_id:
        fail("--id ID: name the fixture (kebab-case)")
    if not conforms(fixture_id, Slug):
        fail(f"--id {fixture_id!r}: must be kebab-case ([a-z0-9] words joined by '-', at most 100 characters)")
    if complexity is not None and complexity not in ("simple", "medium", "hard"):
        fail(f"--complexity {complexity!r}: one of simple, medium, hard; nothing was written")
    if authored_version is not None and not conforms(authored_version, KicadRelease):
        fail(f"--authored-version {authored_version!r}: a KiCad release as 9.0, 8.x or 6.0.11; nothing was written")
    fixture_dir = dest or _fixture_dir(root, fixture_id, must_exist=False)
    if license_file is not None:  # `./LICENSE` and `/LICENSE` name the root's LICENSE, and are kept as that
        license_file = posixpath.normpath(license_file.strip()).lstrip("/")
    recipe = Recipe(tuple(paths or (".",)), strip, into)
    frozen = freeze_files(git_dir, commit, recipe, license_file)
    manifest_path = fixture_dir / MANIFEST_NAME
    doc = read_document(manifest_path) if manifest_path.is_file() else {}
    # the README freeze wrote last time, untouched by its author: written again for this tree
    untouched = authoring.readme_scaffold(doc) if doc else None
    clash = None if replace else _another_board(doc, manifest_path, git_dir)
    if clash is not None:
        fail(f"{clash}; nothing was written. Choose another --id, or pass --replace to freeze over it")
    unheld = _upstream_unheld(doc, manifest_path, frozen, git_dir, url)
    previous = doc.get("sha256")
    install_tree(frozen.files, fixture_dir / "tree")
    upstream = {
        "name": name,
        "url": url,
        "license": license,
        "licenseFile": license_file,
        "copyright": copyright,
        "modifications": modifications,
        "retrieved": retrieved,
    }
    authoring.apply_freeze(
        doc,
        fixture_id,
        frozen,
        recipe,
        fixture_dir / "tree",
        upstream=upstream,
        complexity=complexity,
        authored_version=authored_version,
    )
    repinned: list[Path] = []
    skipped: list[Path] = []
    if isinstance(previous, str) and previous != frozen.sha256 and dest is None:
        # before the manifest: killed in between, the same freeze again still finds the old hash
        # in fixture.json and the tasks it missed
        repinned, skipped = repin(project_root(root), fixture_id, previous, frozen.sha256)
    write_document(manifest_path, doc)
    readme = fixture_dir / README_NAME
    # an author's README is never touched (nor a link, whatever it points at)
    scaffolded = not os.path.lexists(readme) or (
        readme.is_file() and not readme.is_symlink() and readme.read_bytes() == (untouched or "").encode())
    if scaffolded:
        write_atomic(readme, authoring.readme_scaffold(doc).encode())
    result = check_fixture(fixture_dir, project_root(root), require_tree=True)
    left = [p for p in result.problems if p.severity == "error"]
    if unheld:
        typer.echo(unheld, err=True)
    if as_json:
        typer.echo(json.dumps({
            "fixture": fixture_id, "files": len(frozen.files), "commit": frozen.commit, "sha256": frozen.sha256,
            "previousSha256": previous, "readmeWritten": scaffolded, "repinned": [str(p) for p in repinned], "notRepinned": [str(p) for p in skipped], "left": _problems_json(left),
        }, indent=2))
        return
    typer.echo(f"froze {len(frozen.files)} file(s) at {frozen.commit} into {fixture_dir / 'tree'}")
    typer.echo(f"tree sha256 {frozen.sha256}" + ("" if previous in (None, frozen.sha256) else f" (was {previous})"))
    if scaffolded:
        typer.echo(f"wrote {readme}: its provenance filled in; say what the board is where it says TODO(author)")
    for path in repinned:
        typer.echo(f"re-pinned {path}: fixture.sha256 was the tree this replaced")
    for path in skipped:
        typer.echo(f"not re-pinned {path}: the old hash is in it more than once; set fixture.sha256 by hand", err=True)
    if left:
        typer.echo(f"{manifest_path}: {len(left)} field(s) left for you before this fixture can be used:")
        for p in left:
            typer.echo(f"  {p.field or p.file}: {p.message}")


@fixture_app.command("baseline")
def baseline_cmd(fixture_id: FixtureId, root: RootOption = None, as_json: JsonFlag = False) -> None:
    """Measure the fixture's kicad-cli baseline (on a temporary copy of its tree).

    Writes baseline/erc.json, baseline/drc.json, baseline/netlist.kicad_net and the manifest's
    baseline summary."""
    fixture_dir = _fixture_dir(root, fixture_id)
    result = baseline_mod.measure(fixture_dir)
    if as_json:
        typer.echo(json.dumps({"fixture": fixture_id, "erc": result.erc, "drc": result.drc, "kicadCliVersion": result.kicad_cli_version}, indent=2))
        return
    erc = result.erc
    typer.echo(f"ERC: {erc['errors']} error(s), {erc['warnings']} warning(s)")
    if result.drc is not None:
        drc = result.drc
        typer.echo(
            f"DRC: {drc['errors']} error(s), {drc['warnings']} warning(s), {drc['unconnectedItems']} unconnected, "
            f"{drc['schematicParity']} schematic parity"
        )
    typer.echo(f"wrote {fixture_dir / 'baseline'} and the baseline summary (kicad-cli {result.kicad_cli_version})")


def _no_source(fixture_dir: Path, fixture_id: str) -> str:
    """A reader told to materialize a board (by `replay --verify`, say) may not know where its files
    come from: the refusal names the two sources and the upstream the manifest pins."""
    upstream = read_document(fixture_dir / MANIFEST_NAME).get("upstream")
    url, commit = (upstream.get("url"), upstream.get("commit")) if isinstance(upstream, dict) else (None, None)
    pinned = f" (a clone of {url}; rebuilt at commit {commit})" if url and url != "local" and commit else ""
    return (f"fixture materialize {fixture_id}: no source given: --from DIR (a copy of the board holding tree/ "
            f"and baseline/) or --git CLONE_DIR{pinned}")


@fixture_app.command("materialize")
def materialize_cmd(
    fixture_id: FixtureId,
    source: Annotated[
        Path | None, typer.Option("--from", help="A directory holding tree/ (and baseline/), or the tree itself.")
    ] = None,
    git: Annotated[
        Path | None, typer.Option("--git", help="An upstream clone: rebuild at the manifest's pinned commit.")
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Replace an existing tree that hashes differently.")] = False,
    root: RootOption = None,
    as_json: JsonFlag = False,
) -> None:
    """Build fixtures/ID/tree of a real board whose tree is not committed.

    The files must hash to the manifest's sha256; a mismatch writes nothing."""
    if source is not None and git is not None:
        fail("give exactly one of --from DIR and --git CLONE_DIR")
    fixture_dir = _fixture_dir(root, fixture_id)
    if source is None and git is None:
        fail(_no_source(fixture_dir, fixture_id))
    if source is not None:
        result = materialize_mod.from_directory(fixture_dir, source, force)
    else:
        assert git is not None
        result = materialize_mod.from_git(fixture_dir, git, force)
    if as_json:
        typer.echo(json.dumps({
            "fixture": fixture_id, "already": result.already, "files": result.files, "sha256": result.sha256,
            "baselineCopied": list(result.baseline_copied), "baselineProblems": [str(p) for p in result.baseline_problems],
            "baselineMissing": bool(result.baseline_missing),
        }, indent=2))
        raise typer.Exit(1 if result.baseline_problems else 0)
    if result.already:
        typer.echo(f"{fixture_id}: tree already materialized (sha256 {result.sha256})")
    else:
        typer.echo(f"{fixture_id}: materialized {result.files} file(s), sha256 {result.sha256} verified")
    if result.baseline_copied:
        typer.echo(f"copied baseline/: {', '.join(result.baseline_copied)}")
    for problem in result.baseline_problems:
        typer.echo(f"error: baseline not copied: {problem}", err=True)
    if result.baseline_missing:
        typer.echo(f"no baseline reports yet: run `{invocation.command('fixture', 'baseline', fixture_id)}`")
    if result.baseline_problems:
        raise typer.Exit(1)


@fixture_app.command("gold")
def gold_cmd(
    task_id: Annotated[str, typer.Argument(help="The task whose gold solution to replace.")],
    sandbox: Annotated[Path, typer.Option("--from-sandbox", help="A sandbox kept by `cbledger run --keep-sandboxes`.")],
    root: RootOption = None,
    as_json: JsonFlag = False,
) -> None:
    """Replace a task's gold solution with what a run of the real harness left in its sandbox:
    the files it changed, the files it removed and its transcript (tokens zeroed)."""
    from cbledger.cli.task_commands import grade_sandbox
    from cbledger.runner import gold_capture
    from cbledger.tasks.catalog import Catalog

    catalog = Catalog(project_root(root))
    task = catalog.task(task_id)
    got = gold_capture.capture(task, sandbox)
    # kept all the same (an author may mend it after), but said now rather than at the bump,
    # whose trial refuses a gold that fails its task
    try:
        _, graded = grade_sandbox(task, catalog.fixture_for(task), sandbox)
    except (UserError, OSError) as exc:  # the gold is in place: say why it was not graded, exit 0
        print(f"warning: the gold is kept, but the run in {sandbox} could not be graded: {exc}", file=sys.stderr)
        graded = None
    if graded is not None and graded.verdict != "pass":
        first = next(o for o in graded.outcomes if o.id == graded.first_failed_required)
        print(f"warning: the run in {sandbox} fails {task_id} (first failed: {first.id}: {first.detail}); a gold "
              f"that fails its task is refused by `{invocation.command('suite', 'bump')}`; "
              f"`{invocation.command('grade', task_id, str(sandbox))}` shows every assertion", file=sys.stderr)
    if as_json:
        typer.echo(json.dumps({"task": task_id, "files": len(got.files), "deleted": len(got.deleted),
                               "transcriptEvents": got.transcript_events, "verdict": graded.verdict if graded else None}))
        return
    typer.echo(
        f"{task_id}: gold has {len(got.files)} file(s), {len(got.deleted)} deletion(s), "
        f"a transcript of {got.transcript_events} event(s)"
    )


def register(app: typer.Typer) -> None:
    """Adds `cbledger fixture …` to the root app."""
    app.add_typer(fixture_app, name="fixture")
