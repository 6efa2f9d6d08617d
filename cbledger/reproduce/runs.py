"""One preserved run, checked end to end: restored, its digests recomputed, every grade re-graded.

A pure function of (the workspace, the run's event, its recorded grades, the suite definitions
to grade under) so it can run in a worker process for `--jobs`. Every recorded grade of the run
is re-graded — a duplicate or a conflicting second grade for the same suite version included —
under the definitions of the grade's own suite version, kept under `results/suites/`
(`tasks/suite_archive.py`), never under whatever the working tree holds today. A grade whose
suite version's definitions are not available is not reproduced: it is reported as skipped,
with the reason, and fails verification unless the maintainer allows it (`--allow-skipped`).
"""

from __future__ import annotations

import shutil
import time

from blake3 import blake3
from msgspec import UnsetType

from cbledger import scratch as scratch_dir
from cbledger.errors import UserError
from cbledger.grading.grader import Grade, grade_preserved
from cbledger.ledger.events import CassetteRef, GradeRecorded, RunRecorded
from cbledger.reproduce.attribution import attribution_findings, stored_cassette
from cbledger.reproduce.compare import compare_grade
from cbledger.reproduce.figures import figures_findings
from cbledger.reproduce.findings import Finding, GradeCheck, RunCheck
from cbledger.reproduce.restore import check_digests, restore_run
from cbledger.tasks.catalog import Catalog, Fixture, Task
from cbledger.workspace import Workspace

#: suite version -> the catalog of its kept definitions, or why there is none
Suites = dict[str, "Catalog | str"]


def _note(run: RunRecorded, seq: int, kind: str, message: str, **extra) -> Finding:
    return Finding(check="run", kind=kind, message=message, seq=seq, run_id=run.run_id, **extra)


def restore_catalog(workspace: Workspace, run: RunRecorded, suites: Suites) -> Catalog:
    """The run is restored from the fixture of the suite version it was made under; without its
    kept definitions (or with that fixture's damaged), from the working tree (a seed mismatch
    then says the fixture moved)."""
    kept = suites.get(run.comparability.suite_version)
    if isinstance(kept, Catalog) and kept.fixture_damage(run.fixture.id) is None:
        return kept
    return Catalog(workspace.root)


def check_run(
    workspace: Workspace, run: RunRecorded, seq: int, grades: list[tuple[int, GradeRecorded]], suites: Suites,
    attached: tuple[int, CassetteRef] | None = None, evidence: bool = False,
) -> RunCheck:
    """`attached`: the seq and reference of the `cassette.attached` that gave the run a cassette
    later, when it recorded none of its own. `evidence`: also read what the run's site page
    shows from this restore (`RunCheck.evidence`), for the site check that follows."""
    started = time.perf_counter()
    result = RunCheck(run.run_id, seq, run.task.id, run.model.id, run.run_mode)
    if not grades:
        result.note(_note(run, seq, "ungraded", "no grade is recorded for this run; its preserved sandbox is still checked"))
    scratch = scratch_dir.mkdtemp("cbledger-verify-")
    try:
        restored = restore_run(workspace, restore_catalog(workspace, run, suites), run, seq, scratch / "repo")
        for f in restored.failures:
            result.fail(f)
        if restored.repo is not None and not any(f.kind in ("seed-mismatch", "bundle-unreadable") for f in restored.failures):
            for f in check_digests(restored.repo, run, seq, restored.complete):
                result.fail(f)
            intact, cassette = stored_cassette(workspace, run)
            for f in figures_findings(restored.repo, run, seq, restored.complete, cassette):
                result.fail(f)
            if intact:  # else `cassette_findings` names it, and no attribution is derived without it
                for f in attribution_findings(restored.repo, run, seq, restored.complete, cassette):
                    result.fail(f)
        for f in cassette_findings(workspace, run, seq, attached):
            result.fail(f)
        _regrade_all(result, run, restored, grades, suites)
        if evidence:
            # imported here: the site's gatherer imports `verify`, which imports this module
            from cbledger.reproduce.site_evidence import from_restored

            result.evidence = from_restored(restored, run)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    result.grades.sort(key=lambda g: g.seq)
    result.seconds = time.perf_counter() - started
    return result


def cassette_findings(
    workspace: Workspace, run: RunRecorded, seq: int, attached: tuple[int, CassetteRef] | None = None,
) -> list[Finding]:
    """A run that names a cassette, or was given one later, must have it, hashing to the recorded
    digest: it is what a re-execution serves, so an altered one is caught here already, without
    re-executing. The finding names the event that recorded the digest."""
    if not isinstance(run.cassette, UnsetType):
        ref, whose = run.cassette, "the run's cassette"
    elif attached is not None:
        (seq, ref), whose = attached, f"the cassette attached at seq {attached[0]}"
    else:
        return []
    path = workspace.stored(ref.path)
    if path is None or not path.is_file():
        return [_note(run, seq, "cassette-missing", f"{ref.path}: {whose} is missing", file=ref.path)]
    data = path.read_bytes()
    if blake3(data).hexdigest() != ref.blake3 or len(data) != ref.bytes:
        return [_note(run, seq, "cassette-digest", f"{ref.path}: {whose} does not have the BLAKE3 or size recorded for it",
                      file=ref.path, expected=ref.blake3, actual=blake3(data).hexdigest())]
    return []


def _definitions(catalog: Catalog, task_id: str) -> tuple[Task, Fixture] | str:
    try:
        task = catalog.task(task_id)
        return task, catalog.fixture_for(task)
    except UserError as exc:
        return str(exc)


def _regrade_all(result: RunCheck, run: RunRecorded, restored, grades: list[tuple[int, GradeRecorded]], suites: Suites) -> None:
    today: dict[str, Grade | None] = {}  # suite version -> the re-grade (None: grading raised)
    for gseq, g in grades:
        version = g.suite_version
        kept = suites.get(version, f"suite {version} was never recorded (no suite.bumped)")
        if isinstance(kept, Catalog) and (why := kept.damage_of(run.task.id)) is not None:
            kept = f"suite {version}'s kept definitions of task {run.task.id} or its board do not verify: {why}"
        if not isinstance(kept, Catalog):
            result.grades.append(GradeCheck(version, gseq, "not-regradable"))
            result.skip(_note(run, gseq, "not-regradable", f"not re-graded: {kept}", suite_version=version))
            continue
        found = _definitions(kept, run.task.id)
        if isinstance(found, str):
            result.grades.append(GradeCheck(version, gseq, "mismatch"))
            result.fail(_note(run, gseq, "grade-manifest", f"suite {version} has no task {run.task.id}: {found}",
                              suite_version=version, field="taskManifestHash"))
            continue
        task, fixture = found
        if g.task_manifest_hash != task.manifest_hash:
            result.grades.append(GradeCheck(version, gseq, "mismatch"))
            result.fail(_note(run, gseq, "grade-manifest",
                              f"graded against task manifest {g.task_manifest_hash[:12]}, but suite {version} "
                              f"recorded tasks/{run.task.id} as {task.manifest_hash[:12]}",
                              suite_version=version, field="taskManifestHash",
                              expected=task.manifest_hash, actual=g.task_manifest_hash))
            continue
        if not restored.complete or restored.repo is None:
            result.grades.append(GradeCheck(version, gseq, "not-regraded"))
            continue  # the restore's failure already fails the run
        if version not in today:
            try:
                today[version] = grade_preserved(task, fixture, restored.repo, run, g.grader_version)
            except Exception as exc:  # a grader that crashes on recorded evidence does not reproduce it
                today[version] = None
                result.fail(_note(run, gseq, "regrade-error", f"grading raised {type(exc).__name__}: {exc}",
                                  suite_version=version))
        graded = today[version]
        if graded is None:
            result.grades.append(GradeCheck(version, gseq, "not-regraded"))
            continue
        diffs = compare_grade(g, graded, gseq)
        result.grades.append(GradeCheck(version, gseq, "mismatch" if diffs else "reproduced"))
        for f in diffs:
            result.fail(f)
