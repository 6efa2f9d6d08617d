"""Each suite version's definitions, kept content-addressed under `results/suites/`.

A grade is only reproducible under the task, fixture and baseline it was made against. Tasks
change (that is what suite versions are for), so the working tree can re-grade only the runs of
the current suite; every older published grade would become "not re-gradable". Keeping each
version's definitions — `results/suites/<version>.json`, the manifest of `tasks/definitions.py`,
and each file once under `results/suites/objects/<sha256>` — lets verification re-grade every
grade under its own version. The manifest's SHA-256 is recorded in the ledger (`suite.archived`),
so an edited kept file is caught as surely as an edited event; a real board's third-party files
are never kept, only referenced by hash, and checked where they are materialized.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from cbledger.errors import UserError
from cbledger.ledger.durable import fsync_directory, write_atomic
from cbledger.ledger.events import SuiteArchived, SuiteBumped
from cbledger.tasks import definitions as defs_mod
from cbledger.tasks.catalog import Catalog
from cbledger.tasks.definitions import Definitions, DirectorySource, Source
from cbledger.tasks.fixtures.install import safe_relative
from cbledger.workspace import Workspace, suite_definitions_name


def unsafe_names(defs: Definitions) -> list[str]:
    """Every id or file name of a kept manifest that would not stay under the directory it is laid
    out in. A ledger verified on another machine may come from anyone: its kept manifest is checked
    against the ledger's hashes, not against the names it holds, and a name like `../../x` or
    `/x` would otherwise write outside the scratch directory `replay --verify` lays suites out in."""
    names = [(f"tasks/{t}", n) for t, d in defs.tasks.items() for n in d.files]
    names += [(f"fixtures/{f}", n) for f, d in defs.fixtures.items() for n in (*d.files, *d.referenced)]
    names += [("suites", f"{n}.json") for n in defs.suites]
    out = []
    for where, name in names:
        try:
            if name.endswith("/"):
                raise UserError(f"a kept file {name!r}: names a directory, not a file")
            safe_relative(where, "a kept directory")
            safe_relative(name, f"a kept file of {where}/")
        except UserError as exc:
            out.append(str(exc))
    return out


def against_bump(defs: Definitions, bump: SuiteBumped) -> list[str]:
    """Where the definitions disagree with the hashes the suite version recorded: the standard's
    task manifest hashes and fixture tree hashes must be exactly the ones in `suite.bumped`."""
    out = []
    tasks = {t: d.manifest_hash for t, d in defs.tasks.items()}
    fixtures = {f: d.tree_sha256 for f, d in defs.fixtures.items()}
    for kind, have, recorded in (("task", tasks, bump.task_manifest_hashes), ("fixture", fixtures, bump.fixture_hashes)):
        for key in sorted(set(have) | set(recorded)):
            if key not in have:
                out.append(f"{kind} {key} is recorded in suite {bump.suite_version} but not in the definitions")
            elif key not in recorded:
                out.append(f"{kind} {key} is in the definitions but not recorded in suite {bump.suite_version}")
            elif have[key] != recorded[key]:
                out.append(f"{kind} {key} hashes to {have[key][:12]}, suite {bump.suite_version} recorded {recorded[key][:12]}")
    return out


def event_id(body: SuiteArchived) -> str:
    """The idempotency key of a `suite.archived`: one per version and definitions."""
    return f"suite.archived:{body.suite_version}:{body.definitions_hash}"


def archived_body(version: str, defs: Definitions, source: str) -> SuiteArchived:
    return SuiteArchived(
        suite_version=version,
        definitions_hash=defs_mod.sha256(defs_mod.encode(defs)),
        task_definition_hashes={t: defs_mod.entry_hash(d) for t, d in defs.tasks.items()},
        fixture_definition_hashes={f: defs_mod.entry_hash(d) for f, d in defs.fixtures.items()},
        source=source,
    )


def keep(
    workspace: Workspace, version: str, source: Source, bump: SuiteBumped, label: str, *, recorded: bool = False
) -> SuiteArchived:
    """Reads the definitions from `source`, checks them against the bump's hashes, writes every
    file and the manifest, and returns the `suite.archived` body to append. Refuses definitions
    that do not hash to what the suite version recorded, and (`recorded`: the ledger already
    holds this version's `suite.archived`) a different manifest under the same version."""
    defs, blobs = defs_mod.collect(source, workspace.root)
    problems = against_bump(defs, bump)
    if problems:
        raise UserError(
            f"the definitions from {label} are not suite {version} as recorded: " + "; ".join(problems)
        )
    manifest = defs_mod.encode(defs)
    target = workspace.suite_definitions(version)
    if recorded and target.is_file() and target.read_bytes() != manifest:
        raise UserError(f"{suite_definitions_name(version)}: already holds other definitions for suite {version}")
    written: set[Path] = set()
    for sha, data in sorted(blobs.items()):
        obj = workspace.suite_object(sha)
        if not (obj.is_file() and defs_mod.sha256(obj.read_bytes()) == sha):
            write_atomic(obj, data)
            written.add(obj.parent)
    write_atomic(target, manifest)
    # the events appended next name these files: their names must outlast a power cut too
    for directory in sorted(written | {target.parent}):
        fsync_directory(directory)
    return archived_body(version, defs, label)


@dataclass
class Opened:
    """A suite version's kept definitions, checked and laid out as a project to grade with."""

    version: str
    defs: Definitions | None = None
    catalog: Catalog | None = None
    #: (kind, message, file): why the kept definitions cannot be trusted or used
    problems: list[tuple[str, str, str | None]] = field(default_factory=list)


class _Layout:
    """Writes kept definition files under a project root. Strings, not paths: a version is some
    400 files, laid out by every command that restores a run."""

    def __init__(self, workspace: Workspace, root: Path, problems: list[tuple[str, str, str | None]]) -> None:
        self.workspace = workspace
        self.objects = str(workspace.suite_objects)
        self.root = str(root)
        self.problems = problems
        self.made: set[str] = set()

    def place(self, rel: str, sha: str, where: str) -> bool:
        obj = os.path.join(self.objects, sha[:2], sha)  # as Workspace.suite_object names it
        try:
            with open(obj, "rb") as f:
                blob = f.read()
        except OSError:
            self.problems.append(("archive-missing", f"{where}: its kept copy {self.workspace.shown_path(Path(obj))} is missing",
                                  where))
            return False
        if defs_mod.sha256(blob) != sha:
            self.problems.append(("archive-digest", f"{where}: its kept copy {self.workspace.shown_path(Path(obj))} no longer "
                                  f"hashes to {sha[:12]}… (damaged since it was kept)", where))
            return False
        dest = os.path.join(self.root, rel)
        parent = os.path.dirname(dest)
        if parent not in self.made:
            os.makedirs(parent, exist_ok=True)
            self.made.add(parent)
        with open(dest, "wb") as f:
            f.write(blob)
        return True


def open_kept(
    workspace: Workspace, archived: SuiteArchived, bump: SuiteBumped | None, into: Path
) -> Opened:
    """Checks the kept manifest and every kept file against the ledger, and lays the definitions
    out under `into` as a project root (tasks/, fixtures/, suites/) whose real boards' trees are
    the ones materialized in the workspace."""
    version = archived.suite_version
    out = Opened(version)
    rel = suite_definitions_name(version)
    path = workspace.suite_definitions(version)
    if not path.is_file():
        out.problems.append(("archive-missing", f"suite {version}'s definitions are recorded but {rel} is missing", rel))
        return out
    data = path.read_bytes()
    actual = defs_mod.sha256(data)
    if actual != archived.definitions_hash:
        out.problems.append(("archive-digest", f"{rel} hashes to {actual}, the ledger recorded {archived.definitions_hash}", rel))
        return out
    try:
        defs = defs_mod.decode(data, rel)
    except UserError as exc:
        out.problems.append(("archive-digest", str(exc), rel))
        return out
    if bump is None:
        out.problems.append(("archive-inconsistent", f"suite {version} has definitions kept but no suite.bumped", rel))
        return out
    for p in [*unsafe_names(defs), *against_bump(defs, bump)]:
        out.problems.append(("archive-inconsistent", p, rel))
    if out.problems:
        return out
    root = into
    trees: dict[str, Path] = {}
    place = _Layout(workspace, root, out.problems).place
    for t, d in defs.tasks.items():
        for name, entry in d.files.items():
            place(f"tasks/{t}/{name}", entry.sha256, f"suite {version}: tasks/{t}/{name}")
    for f, fd in defs.fixtures.items():
        for name, entry in fd.files.items():
            place(f"fixtures/{f}/{name}", entry.sha256, f"suite {version}: fixtures/{f}/{name}")
        if fd.origin == "upstream":
            local = workspace.root / "fixtures" / f
            trees[f] = local / "tree"
            for name, entry in fd.referenced.items():
                src = DirectorySource(workspace.root)
                try:
                    blob = src.read(f"fixtures/{f}/{name}")
                except UserError as exc:
                    out.problems.append(("fixture-baseline", str(exc), f"fixtures/{f}/{name}"))
                    continue
                if blob is None:
                    continue  # not materialized: the run's restore reports the fixture missing
                if defs_mod.sha256(blob) != entry.sha256:
                    out.problems.append((
                        "fixture-baseline",
                        f"fixtures/{f}/{name} hashes to {defs_mod.sha256(blob)[:12]}…, suite {version} recorded "
                        f"{entry.sha256[:12]}… (materialize the board again from the shared data)",
                        f"fixtures/{f}/{name}",
                    ))
                    continue
                dest = root / "fixtures" / f / name
                dest.parent.mkdir(parents=True, exist_ok=True)
                dest.write_bytes(blob)
    for name, entry in defs.suites.items():
        place(f"suites/{name}.json", entry.sha256, f"suite {version}: suites/{name}.json")
    out.defs = defs
    out.catalog = Catalog(root, trees=trees)
    return out


def on_disk(workspace: Workspace) -> Definitions:
    """The working tree's definitions (real boards' baselines as materialized)."""
    defs, _ = defs_mod.collect(DirectorySource(workspace.root), workspace.root, strict=False)
    return defs


def kept_definitions(workspace: Workspace, archived: SuiteArchived) -> Definitions:
    """The kept manifest of a suite version, checked against its recorded hash (no file read)."""
    rel = suite_definitions_name(archived.suite_version)
    path = workspace.suite_definitions(archived.suite_version)
    if not path.is_file():
        raise UserError(f"{rel}: missing; suite {archived.suite_version}'s definitions are recorded in the ledger")
    data = path.read_bytes()
    if defs_mod.sha256(data) != archived.definitions_hash:
        raise UserError(f"{rel}: does not hash to the definitions hash the ledger recorded")
    return defs_mod.decode(data, rel)


def named_differences(workspace: Workspace, coarse: list[str], archived: SuiteArchived | None) -> list[str]:
    """What differs from the recorded version, each task or fixture named by the files that
    changed (`task T: assertions.json changed`) where the kept definitions say which, not only
    as `task T changed`; what they do not cover (the vocabulary, the grader) as `coarse` says it."""
    if archived is None:
        return coarse
    try:
        kept = kept_definitions(workspace, archived)
    except UserError:
        if coarse:  # the differences are known without the kept files: say them, not their absence
            return coarse
        raise
    files = defs_mod.differences(kept, on_disk(workspace))
    return files + [d for d in coarse if not any(f.startswith(d.removesuffix(" changed")) for f in files)]
