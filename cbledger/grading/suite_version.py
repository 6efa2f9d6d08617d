"""Suite versions: what the suite *is* (task manifests, fixtures, vocabulary, credential patterns,
grader), recorded as `suite.bumped` so that comparability is mechanical, not remembered.

A run is only made against the suite version whose recorded hashes match the tasks on disk;
editing a task without bumping is refused before anything runs.
"""

from __future__ import annotations

from dataclasses import dataclass

from msgspec import UNSET

from cbledger import credentials, inputs
from cbledger.errors import UserError
from cbledger.grading.grader import GRADER_VERSION
from cbledger.ledger.events import SuiteArchived, SuiteBumped
from cbledger.tasks import definitions, suite_archive
from cbledger.tasks.catalog import Catalog
from cbledger.tasks.vocabulary import VOCABULARY_HASH
from cbledger.workspace import Workspace, suite_definitions_name


@dataclass(frozen=True)
class Definition:
    task_manifest_hashes: dict[str, str]
    fixture_hashes: dict[str, str]
    suites: dict[str, list[str]]
    vocabulary_hash: str = VOCABULARY_HASH
    credential_patterns_hash: str = credentials.PATTERN_SET_HASH
    grader_version: str = GRADER_VERSION


def current(catalog: Catalog) -> Definition:
    return Definition(
        task_manifest_hashes={t: catalog.task(t).manifest_hash for t in catalog.task_ids()},
        fixture_hashes={f: catalog.fixture(f).manifest.sha256 for f in catalog.fixture_ids()},
        suites={s: list(catalog.suite(s).tasks) for s in catalog.suite_names()},
    )


@dataclass(frozen=True)
class Difference:
    """One way the suite on disk differs from a recorded version: `kind` is task, fixture,
    suites or a contract hash (vocabulary, credential patterns, grader), `key` the task or
    fixture id where there is one."""

    kind: str
    key: str | None
    change: str  # added | removed | changed

    def __str__(self) -> str:
        if self.kind == "suites":
            return "named suites changed"
        if self.key is None:
            return self.kind
        return f"{self.kind} {self.key} {self.change}"


def changes(recorded: SuiteBumped, now: Definition) -> list[Difference]:
    out: list[Difference] = []
    for field_name in ("vocabulary_hash", "credential_patterns_hash", "grader_version"):
        if getattr(recorded, field_name) != getattr(now, field_name):
            out.append(Difference(field_name.replace("_", " "), None, "changed"))
    for kind, before, after in (
        ("task", recorded.task_manifest_hashes, now.task_manifest_hashes),
        ("fixture", recorded.fixture_hashes, now.fixture_hashes),
    ):
        for key in sorted(set(before) | set(after)):
            if key not in after:
                out.append(Difference(kind, key, "removed"))
            elif key not in before:
                out.append(Difference(kind, key, "added"))
            elif before[key] != after[key]:
                out.append(Difference(kind, key, "changed"))
    if recorded.suites != now.suites:
        out.append(Difference("suites", None, "changed"))
    return out


def differences(recorded: SuiteBumped, now: Definition) -> list[str]:
    return [str(d) for d in changes(recorded, now)]


def changed_tasks(recorded: SuiteBumped | None, catalog: Catalog) -> list[str]:
    """The tasks on disk a bump would record anew: added or edited tasks, and the tasks on a
    fixture that was added or changed. With nothing recorded yet, every task."""
    now = current(catalog)
    if recorded is None:
        return sorted(now.task_manifest_hashes)
    found = changes(recorded, now)
    tasks = {d.key for d in found if d.kind == "task" and d.change != "removed" and d.key}
    fixtures = {d.key for d in found if d.kind == "fixture" and d.change != "removed"}
    if any(d.key is None and d.kind != "suites" for d in found):
        # the vocabulary, the credential patterns or the grader changed: every task is graded anew
        return sorted(now.task_manifest_hashes)
    for task_id in now.task_manifest_hashes:
        if catalog.task(task_id).manifest.fixture.id in fixtures:
            tasks.add(task_id)
    return sorted(tasks)


def next_version(previous: str | None, level: str) -> str:
    if previous is None:
        return "1.0.0"
    major, minor, patch = (int(x) for x in previous.split("."))
    if level == "major":
        return f"{major + 1}.0.0"
    if level == "minor":
        return f"{major}.{minor + 1}.0"
    if level == "patch":
        return f"{major}.{minor}.{patch + 1}"
    raise UserError(f"bump level must be major, minor or patch, not {level!r}")


def bump(
    recorded: SuiteBumped | None, catalog: Catalog, reason: str, level: str = "minor", version: str | None = None,
    *, files_changed: list[str] | None = None,
) -> SuiteBumped:
    """The next suite version's body; refuses when nothing changed, neither what the standard's
    hashes cover nor (`files_changed`) any other definition file kept with the last version (a
    rubric, gold/, a baseline report)."""
    now = current(catalog)
    if recorded is not None:
        changed = differences(recorded, now) + (files_changed or [])
        if not changed:
            raise UserError(
                f"nothing changed since suite {recorded.suite_version}: tasks, fixtures, vocabulary, "
                "credential patterns and grader are as recorded; refusing to bump"
            )
    new_version = version or next_version(recorded.suite_version if recorded else None, level)
    if recorded is not None and tuple(int(x) for x in new_version.split(".")) <= tuple(
        int(x) for x in recorded.suite_version.split(".")
    ):
        raise UserError(f"suite version {new_version} is not above {recorded.suite_version}")
    return SuiteBumped(
        suite_version=new_version,
        previous=recorded.suite_version if recorded else None,
        reason=reason,
        vocabulary_hash=now.vocabulary_hash,
        credential_patterns_hash=now.credential_patterns_hash,
        grader_version=now.grader_version,
        task_manifest_hashes=now.task_manifest_hashes,
        fixture_hashes=now.fixture_hashes,
        suites=now.suites,
    )


def require_current(
    recorded: SuiteBumped | None, catalog: Catalog, task_ids: list[str], archived: SuiteArchived | None = None,
    workspace: Workspace | None = None,
) -> str:
    """The suite version to run under; refuses when the tasks on disk are not the recorded ones.

    With the version's kept definitions recorded (`archived`), every definition file of these
    tasks and their fixtures must be as kept — baselines, fixture.json and gold/ included, which
    the standard's hashes do not cover."""
    if recorded is None:
        raise UserError("no suite version is recorded in the ledger; run `cbledger suite bump --reason \"initial suite\"`")
    now = current(catalog)
    problems = []
    for field_name in ("vocabulary_hash", "credential_patterns_hash", "grader_version"):
        if getattr(recorded, field_name) != getattr(now, field_name):
            problems.append(field_name.replace("_", " "))
    for t in task_ids:
        if recorded.task_manifest_hashes.get(t) != now.task_manifest_hashes.get(t):
            problems.append(f"task {t}")
        fx = catalog.task(t).manifest.fixture.id
        if recorded.fixture_hashes.get(fx) != now.fixture_hashes.get(fx):
            problems.append(f"fixture {fx}")
    if archived is not None and not problems:
        workspace = workspace or Workspace.at(catalog.root)  # the kept definitions are in its results directory
        kept = suite_archive.kept_definitions(workspace, archived)
        problems += definitions.differences(kept, suite_archive.on_disk(workspace), tasks=task_ids)
    if problems:
        raise UserError(
            f"the suite on disk differs from suite {recorded.suite_version} as recorded ({', '.join(sorted(set(problems)))}); "
            "run `cbledger suite bump --reason …` first"
        )
    return recorded.suite_version


def bump_and_keep(
    recorded: SuiteBumped | None,
    workspace: Workspace,
    reason: str,
    level: str = "minor",
    version: str | None = None,
    *,
    kept_versions: set[str] | frozenset[str] = frozenset(),
) -> tuple[SuiteBumped, SuiteArchived]:
    """The two bodies a bump appends in one batch: the new version, and its definitions, kept
    under `results/suites/` before either is appended — a suite version is never recorded
    without what its grades will be re-graded against. `kept_versions` are the versions whose
    definitions the ledger already records (their kept manifest may not be replaced)."""
    files_changed = None
    if recorded is not None and recorded.suite_version in kept_versions:
        name = suite_definitions_name(recorded.suite_version)
        previous = definitions.decode(inputs.read_regular(workspace.suite_definitions(recorded.suite_version),
                                                      definitions.MAX_FILE_BYTES), name)
        files_changed = definitions.differences(previous, suite_archive.on_disk(workspace))
        if previous.checks is UNSET:  # a version before check code was locked: locking it is a change
            files_changed.append("check code: recorded for the first time")
    body = bump(recorded, Catalog(workspace.root), reason, level, version, files_changed=files_changed)
    kept = suite_archive.keep(
        workspace, body.suite_version, definitions.DirectorySource(workspace.root), body,
        "the working tree at the bump", recorded=body.suite_version in kept_versions,
    )
    return body, kept

