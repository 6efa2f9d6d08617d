"""A suite's definitions: every project-owned byte a grade depends on, hashed as one manifest.

The standard's task manifest hash covers `task.json` and `assertions.json` only, and a fixture
is pinned by its tree hash. A grade also depends on the fixture's recorded baseline reports (the
`*_no_new_violations` checks compare against them), on `fixture.json` (which names them), and a
gold run on the task's `gold/`. None of those is in the standard's hashes, and that formula is
not ours to change, so the definitions are a second, separate manifest: each file by path with
its SHA-256 and size, per task and per fixture, plus the named suites. A suite version records
its hash (`suite.archived`), and the files themselves are kept content-addressed under
`results/suites/` (`grading/suite_archive.py`), so a grade is re-graded under the definitions of
its own suite version, whatever the working tree holds today.

What is stored and what is only referenced: a synthetic fixture is the project's own work, so
its tree and baseline are stored. A real board's tree and baseline are third-party files the
repository never ships; they are referenced — the tree by the hash its `fixture.json` records,
each baseline report by SHA-256 — and materialized from the shared data when needed.

Files are read from a `Source`: the working tree, or a commit of the project's own history (how
the definitions of a suite version that predates archiving are recovered).
"""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path, PurePosixPath
from typing import Final, Literal, NamedTuple, Protocol

import msgspec
import pygit2
from msgspec import UNSET, Struct, UnsetType

from cbledger.errors import UserError
from cbledger.tasks.fixtures.hashing import digest_files, regular_files, task_manifest_hash

FORMAT: Final = "cbledger-suite-definitions/1"
#: A definition file larger than this is refused: tasks and synthetic boards are small text.
MAX_FILE_BYTES = 64 * 1024 * 1024


#: Marks a task or fixture directory still being written (`cbledger task variant` until its trial
#: passes). A process killed before it finished leaves the mark, so what it left is no task or
#: fixture to any reader (validate, the catalog's listings, the suite's definitions) and the next
#: `task variant` of that id takes it away.
INCOMPLETE = ".incomplete"


def incomplete(directory: Path) -> bool:
    return (directory / INCOMPLETE).exists()


class FileEntry(Struct, frozen=True, forbid_unknown_fields=True):
    sha256: str
    bytes: int


class TaskDefinition(Struct, frozen=True, forbid_unknown_fields=True, rename="camel"):
    #: the standard's task manifest hash, as the grades record it
    manifest_hash: str
    #: the fixture its task.json names
    fixture: str
    #: every file under tasks/<id>/, relative to it
    files: dict[str, FileEntry]


class FixtureDefinition(Struct, frozen=True, forbid_unknown_fields=True, rename="camel"):
    origin: Literal["upstream", "synthetic", "local"]
    #: the standard's tree hash, as fixture.json records it
    tree_sha256: str
    #: files kept in the archive, relative to fixtures/<id>/ (tree/ included when synthetic)
    files: dict[str, FileEntry]
    #: third-party files referenced by hash only (a real board's baseline reports)
    referenced: dict[str, FileEntry] = msgspec.field(default_factory=dict)


class Definitions(Struct, frozen=True, forbid_unknown_fields=True):
    format: Literal["cbledger-suite-definitions/1"]
    tasks: dict[str, TaskDefinition]
    fixtures: dict[str, FixtureDefinition]
    #: suites/<name>.json
    suites: dict[str, FileEntry]
    #: the code that computes a grade (CHECK_CODE, by path under cbledger/), kept since the suite
    #: versions bumped after it was recorded; absent in the definitions kept before, which are
    #: therefore held to no check code (and read and re-encode exactly as kept)
    checks: dict[str, FileEntry] | UnsetType = UNSET


_DECODER = msgspec.json.Decoder(Definitions)


def encode(defs: Definitions) -> bytes:
    """The canonical bytes: what the recorded hash is the SHA-256 of."""
    return msgspec.json.encode(defs, order="sorted")


def decode(data: bytes, where: str) -> Definitions:
    try:
        return _DECODER.decode(data)
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        raise UserError(f"{where}: not a suite definitions manifest: {exc}") from None


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def entry_hash(entry: TaskDefinition | FixtureDefinition) -> str:
    """The hash of one task's or one fixture's definition, as `suite.archived` records it."""
    return sha256(msgspec.json.encode(entry, order="sorted"))


class Source(Protocol):
    """Project files by '/'-separated path relative to the project root."""

    def files(self, prefix: str) -> list[str]:
        """Every regular file under `prefix` (a directory), relative to the root, sorted."""
        ...

    def read(self, rel: str) -> bytes | None:
        """The file's bytes, or None when it is not a regular file."""
        ...

    def dirs(self, prefix: str) -> list[str]:
        """The names of the directories directly under `prefix`."""
        ...


_SYMLINK = "a symlink; suite definitions are regular files only"
_SPECIAL = "not a regular file; suite definitions are regular files only"


class DirectorySource:
    """The working tree. Only regular files count; a symlink or a special file is refused."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._root = str(root)  # strings, not paths, for the hundreds of files each command reads

    def _check(self, path: str) -> os.stat_result:
        st = os.lstat(path)
        if stat.S_ISLNK(st.st_mode):
            raise UserError(f"{path}: {_SYMLINK}")
        return st

    def files(self, prefix: str) -> list[str]:
        base = self.root / prefix
        if not base.is_dir():
            return []
        rel = f"{PurePosixPath(prefix).as_posix()}/".removeprefix("./")
        return sorted(regular_files(base, symlink=_SYMLINK, special=_SPECIAL, prefix=rel))

    def read(self, rel: str) -> bytes | None:
        path = os.path.join(self._root, rel)
        try:
            st = self._check(path)
        except FileNotFoundError:
            return None
        if not stat.S_ISREG(st.st_mode):
            return None
        if st.st_size > MAX_FILE_BYTES:
            raise UserError(f"{path}: {st.st_size} bytes, over the {MAX_FILE_BYTES}-byte limit for a definition file")
        with open(path, "rb") as f:
            return f.read()

    def dirs(self, prefix: str) -> list[str]:
        base = self.root / prefix
        if not base.is_dir():
            return []
        return sorted(p.name for p in base.iterdir() if p.is_dir() and not p.is_symlink() and not incomplete(p))


class GitSource:
    """The files of one commit of the project's own history, read with pygit2."""

    def __init__(self, repo: pygit2.Repository, rev: str) -> None:
        try:
            self.commit = repo.revparse_single(rev).peel(pygit2.Commit)
        except (KeyError, ValueError, pygit2.GitError) as exc:
            raise UserError(f"{rev}: not a commit of {repo.workdir or repo.path}: {exc}") from None
        self.repo = repo

    def _node(self, rel: str):
        tree = self.commit.tree
        if not rel:
            return tree
        try:
            return tree[rel]
        except KeyError:
            return None

    def files(self, prefix: str) -> list[str]:
        node = self._node(prefix)
        if node is None or node.type_str != "tree":
            return []
        out: list[str] = []

        def walk(tree, base: str) -> None:
            for e in tree:
                path = f"{base}/{e.name}"
                if e.type_str == "tree":
                    walk(self.repo[e.id].peel(pygit2.Tree), path)
                elif e.filemode in (pygit2.enums.FileMode.BLOB, pygit2.enums.FileMode.BLOB_EXECUTABLE):
                    out.append(path)
                else:
                    raise UserError(f"{self.commit.id}:{path}: not a regular file; suite definitions are regular files only")

        walk(self.repo[node.id].peel(pygit2.Tree), prefix)
        return sorted(out)

    def read(self, rel: str) -> bytes | None:
        node = self._node(rel)
        if node is None or node.type_str != "blob":
            return None
        return self.repo[node.id].peel(pygit2.Blob).data

    def dirs(self, prefix: str) -> list[str]:
        node = self._node(prefix)
        if node is None or node.type_str != "tree":
            return []
        return sorted(e.name or "" for e in self.repo[node.id].peel(pygit2.Tree) if e.type_str == "tree")


def _entry(data: bytes) -> FileEntry:
    return FileEntry(sha256=sha256(data), bytes=len(data))


def _require(source: Source, rel: str) -> bytes:
    data = source.read(rel)
    if data is None:
        raise UserError(f"{rel}: missing (a suite definition file)")
    return data


def _task(source: Source, task_id: str, blobs: dict[str, bytes]) -> TaskDefinition:
    prefix = f"tasks/{task_id}"
    files = {}
    for rel in source.files(prefix):
        data = _require(source, rel)
        blobs[sha256(data)] = data
        files[rel[len(prefix) + 1:]] = _entry(data)
    task_bytes = _require(source, f"{prefix}/task.json")
    assertions_bytes = _require(source, f"{prefix}/assertions.json")
    try:
        doc = msgspec.json.decode(task_bytes)
        fixture = doc["fixture"]["path"].split("/", 1)[1]
    except (msgspec.DecodeError, KeyError, TypeError, AttributeError, IndexError):
        raise UserError(f"{prefix}/task.json: fixture.path missing or invalid") from None
    return TaskDefinition(manifest_hash=task_manifest_hash(task_bytes, assertions_bytes), fixture=fixture, files=files)


def _fixture(source: Source, fixture_id: str, materialized: Path, blobs: dict[str, bytes], strict: bool) -> FixtureDefinition:
    prefix = f"fixtures/{fixture_id}"
    manifest_bytes = _require(source, f"{prefix}/fixture.json")
    try:
        manifest = msgspec.json.decode(manifest_bytes)
    except msgspec.DecodeError as exc:
        raise UserError(f"{prefix}/fixture.json: not valid JSON: {exc}") from None
    origin = manifest.get("origin", "upstream") if isinstance(manifest, dict) else None
    tree_sha = manifest.get("sha256") if isinstance(manifest, dict) else None
    if origin not in ("upstream", "synthetic", "local") or not isinstance(tree_sha, str):
        raise UserError(f"{prefix}/fixture.json: origin or sha256 missing or invalid")
    files: dict[str, FileEntry] = {}
    referenced: dict[str, FileEntry] = {}
    tree_files: list[tuple[str, bytes]] = []
    for rel in source.files(prefix):
        inner = rel[len(prefix) + 1:]
        third_party = origin == "upstream" and inner.split("/", 1)[0] in ("tree", "baseline")
        if third_party:
            continue  # a real board's files: referenced below, never stored
        data = _require(source, rel)
        blobs[sha256(data)] = data
        files[inner] = _entry(data)
        if inner.startswith("tree/"):
            tree_files.append((inner[len("tree/"):], data))
    if origin == "synthetic":
        actual = digest_files(tree_files)
        if strict and actual != tree_sha:
            raise UserError(f"{prefix}/tree: hashes to {actual}, fixture.json records {tree_sha}")
    else:
        local = DirectorySource(materialized)
        for rel in local.files(f"{prefix}/baseline"):
            data = _require(local, rel)
            referenced[rel[len(prefix) + 1:]] = _entry(data)
    return FixtureDefinition(origin=origin, tree_sha256=tree_sha, files=files, referenced=referenced)


#: The packages whose code decides a grade: the assertion checks, scoring and evidence readers,
#: and the schematic model they read. A check loosened in code is as much a change of the suite
#: as a threshold loosened in assertions.json, so its digest is part of what a version locks.
CHECK_CODE = ("grading", "kicad")
_PACKAGE = Path(__file__).resolve().parents[1]


def check_code(package: Path | None = None) -> dict[str, FileEntry]:
    """Each source file of CHECK_CODE in this build (or under `package`), by its path under cbledger/."""
    package = package or _PACKAGE
    return {
        p.relative_to(package).as_posix(): _entry(p.read_bytes())
        for name in CHECK_CODE for p in sorted((package / name).rglob("*.py"))
    }


def collect(source: Source, materialized: Path, *, strict: bool = True) -> tuple[Definitions, dict[str, bytes]]:
    """(the definitions manifest, the stored files by SHA-256). `materialized` is the project
    root whose fixtures/<id>/baseline/ holds a real board's third-party reports. `strict`
    refuses a synthetic tree that does not hash to its fixture.json (what is kept must be
    consistent); a comparison with kept definitions wants the file-by-file difference instead."""
    blobs: dict[str, bytes] = {}
    tasks = {
        t: _task(source, t, blobs) for t in source.dirs("tasks") if source.read(f"tasks/{t}/task.json") is not None
    }
    fixtures = {
        f: _fixture(source, f, materialized, blobs, strict)
        for f in source.dirs("fixtures")
        if source.read(f"fixtures/{f}/fixture.json") is not None
    }
    suites = {}
    for rel in source.files("suites"):
        p = PurePosixPath(rel)
        if p.suffix == ".json" and len(p.parts) == 2:
            data = _require(source, rel)
            blobs[sha256(data)] = data
            suites[p.stem] = _entry(data)
    # The working tree's definitions go with this build's check code; a git commit's (the
    # definitions of a version bumped before they were kept) are held to none.
    checks = check_code() if isinstance(source, DirectorySource) else UNSET
    return Definitions(format=FORMAT, tasks=tasks, fixtures=fixtures, suites=suites, checks=checks), blobs


def differences(recorded: Definitions, now: Definitions, *, tasks: list[str] | None = None) -> list[str]:
    """What differs between two definitions, file by file (for `tasks`, and their fixtures, only
    when given). Third-party files referenced by hash count as much as stored ones."""
    return [d.message for d in file_differences(recorded, now, tasks)]


def changed_tasks(recorded: Definitions, now: Definitions) -> set[str]:
    """The tasks on disk with any file other than the last version's, or on a fixture with one:
    a gold, a rubric, a session or a baseline report, which the manifest hashes do not cover,
    changes what a bump records as much as the task's own manifest; a changed check, every task."""
    found = file_differences(recorded, now)
    if any(d.kind == "check code" for d in found):
        return set(now.tasks)  # the grader itself changed: every task is graded anew
    fixtures = {d.key for d in found if d.kind == "fixture"}
    edited = {d.key for d in found if d.kind == "task"}
    return {t for t, entry in now.tasks.items() if t in edited or entry.fixture in fixtures}


class FileDifference(NamedTuple):
    kind: str  # "check code", "task", "fixture" or "suites"
    key: str  # the task or fixture id ("cbledger", "")
    rel: str | None  # the file, relative to the task's or fixture's directory (None: the whole of it)
    message: str


def file_differences(recorded: Definitions, now: Definitions, tasks: list[str] | None = None) -> list[FileDifference]:
    """Each difference `differences` names, with what it is of and the file it is in."""
    out: list[FileDifference] = []
    task_ids = sorted(set(recorded.tasks) | set(now.tasks)) if tasks is None else sorted(tasks)
    fixture_ids: set[str] | None = None if tasks is None else set()

    def files_diff(kind: str, key: str, before: dict[str, FileEntry], after: dict[str, FileEntry]) -> None:
        for rel in sorted(set(before) | set(after)):
            what = f"{kind} {key}: {rel}" if key else f"named suite {rel}"
            if rel not in after:
                out.append(FileDifference(kind, key, rel, f"{what} removed"))
            elif rel not in before:
                out.append(FileDifference(kind, key, rel, f"{what} added"))
            elif before[rel] != after[rel]:
                out.append(FileDifference(kind, key, rel, f"{what} changed"))

    if recorded.checks is not UNSET:
        files_diff("check code", "cbledger", recorded.checks, {} if now.checks is UNSET else now.checks)
    for t in task_ids:
        a, b = recorded.tasks.get(t), now.tasks.get(t)
        if a is None or b is None:
            out.append(FileDifference("task", t, None, f"task {t} {'added' if a is None else 'removed'}"))
            continue
        files_diff("task", t, a.files, b.files)
        if fixture_ids is not None:
            fixture_ids.update({a.fixture, b.fixture})
    for f in sorted(set(recorded.fixtures) | set(now.fixtures)) if fixture_ids is None else sorted(fixture_ids):
        fa, fb = recorded.fixtures.get(f), now.fixtures.get(f)
        if fa is None or fb is None:
            out.append(FileDifference("fixture", f, None, f"fixture {f} {'added' if fa is None else 'removed'}"))
            continue
        if fa.origin != fb.origin or fa.tree_sha256 != fb.tree_sha256:
            out.append(FileDifference("fixture", f, None, f"fixture {f}: tree hash or origin changed"))
        files_diff("fixture", f, fa.files, fb.files)
        if fa.referenced and fb.referenced:
            files_diff("fixture", f, fa.referenced, fb.referenced)
        # else: a real board not materialized on one side (here: its runs report the fixture
        # missing; at the bump: the version pinned its tree alone), so no report to compare
    if tasks is None:
        files_diff("suites", "", recorded.suites, now.suites)
    return out

