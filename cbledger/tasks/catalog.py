"""Loading tasks, fixtures and suites from a project root.

Loading is strict and names the file and field of every problem; cross-file checks are in
`validate.py`. A `Task` keeps the exact bytes its manifest hash was computed from, so the hash
recorded on a run is the hash of what was graded.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import msgspec

from cbledger import inputs, invocation
from cbledger.errors import UserError, did_you_mean
from cbledger.tasks.definitions import incomplete
from cbledger.tasks.fixtures.hashing import task_manifest_hash
from cbledger.tasks.fixtures.manifest_file import find_placeholders
from cbledger.tasks.model import Assertions, FixtureManifest, Suite, TaskManifest
from cbledger.tasks.vocabulary import VOCABULARY, AssertionSpec

_TASK = msgspec.json.Decoder(TaskManifest)
_ASSERTIONS = msgspec.json.Decoder(Assertions)
_FIXTURE = msgspec.json.Decoder(FixtureManifest)
_SUITE = msgspec.json.Decoder(Suite)


def _decode(decoder: msgspec.json.Decoder, data: bytes, path: Path):
    problem = inputs.json_problem(data)
    if problem is not None:
        raise UserError(f"{path}: {problem}")
    try:
        return decoder.decode(data)
    except msgspec.ValidationError as exc:
        message = str(exc)
        if message.startswith("Invalid value") and "`$[" in message and "].type`" in message:
            message = (
                f"unknown assertion type ({message}); the vocabulary is closed: "
                + ", ".join(VOCABULARY)
            )
        raise UserError(f"{path}: {message}") from None
    except msgspec.DecodeError as exc:
        raise UserError(f"{path}: not valid JSON: {exc}") from None


#: Tasks, fixture manifests and suites are small hand-written JSON.
MAX_DEFINITION_BYTES = 4 * inputs.MiB


def _read(path: Path) -> bytes:
    if not os.path.lexists(path):
        raise UserError(f"{path}: missing")
    return inputs.read_regular(path, MAX_DEFINITION_BYTES)


@dataclass(frozen=True)
class Task:
    dir: Path
    task_bytes: bytes
    assertions_bytes: bytes
    manifest: TaskManifest
    assertions: tuple[AssertionSpec, ...]

    @property
    def id(self) -> str:
        return self.manifest.id

    @cached_property
    def manifest_hash(self) -> str:
        return task_manifest_hash(self.task_bytes, self.assertions_bytes)

    @property
    def gold_dir(self) -> Path:
        return self.dir / "gold"


def load_task(task_dir: Path) -> Task:
    task_bytes = _read(task_dir / "task.json")
    assertions_bytes = _read(task_dir / "assertions.json")
    manifest = _decode(_TASK, task_bytes, task_dir / "task.json")
    assertions = _decode(_ASSERTIONS, assertions_bytes, task_dir / "assertions.json")
    return Task(task_dir, task_bytes, assertions_bytes, manifest, tuple(assertions))


@dataclass(frozen=True)
class Fixture:
    dir: Path
    manifest: FixtureManifest
    #: where the tree is when it is not `dir/tree`: a real board's materialized tree, used with
    #: a suite version's kept definitions (`tasks/suite_archive.py`)
    tree_dir: Path | None = None

    @property
    def id(self) -> str:
        return self.manifest.id

    @property
    def tree(self) -> Path:
        return self.tree_dir if self.tree_dir is not None else self.dir / "tree"

    def baseline_report(self, kind: str) -> bytes | None:
        """The fixture's recorded kicad-cli report (`erc` or `drc`), if present."""
        summary = self.manifest.baseline
        entry = summary.erc if kind == "erc" else summary.drc
        if entry is None:
            return None
        path = self.dir / entry.report
        return path.read_bytes() if path.is_file() else None


def load_fixture(fixture_dir: Path, tree_dir: Path | None = None) -> Fixture:
    path = fixture_dir / "fixture.json"
    data = _read(path)
    try:
        return Fixture(fixture_dir, _decode(_FIXTURE, data, path), tree_dir)
    except UserError as exc:
        raise UserError(f"{exc}{_unfinished(data, fixture_dir.name)}") from None


def _unfinished(data: bytes, fixture_id: str) -> str:
    """What a manifest `fixture freeze` left for its author says of itself: the schema's complaint
    about a placeholder (`Expected object, got str`) does not say that a command fills it in."""
    if inputs.json_problem(data) is not None:
        return ""  # not JSON a reader takes at all (too deep, say): that alone is the problem
    try:
        left = find_placeholders(msgspec.json.decode(data))
    except msgspec.DecodeError:
        return ""
    if not left:
        return ""
    fields = ", ".join(name for name, _ in left[:6]) + (", …" if len(left) > 6 else "")
    return (f"; the fixture is not finished: {len(left)} field(s) still hold a TODO(author) placeholder ({fields}), "
            f"each saying what fills it in (`{invocation.command('fixture', 'check', fixture_id)}` lists them)")


def load_suite(path: Path) -> Suite:
    return _decode(_SUITE, _read(path), path)


@dataclass
class Catalog:
    """Everything under a project root: `tasks/`, `fixtures/`, `suites/`."""

    root: Path
    #: fixture id -> its tree, for fixtures whose tree is not under this root
    trees: dict[str, Path] = field(default_factory=dict)
    #: a suite version's kept definitions laid out with some files that did not verify:
    #: "tasks/<id>" or "fixtures/<id>" -> why (only what they define is not to be graded with)
    damaged: dict[str, str] = field(default_factory=dict)

    def damage_of(self, task_id: str) -> str | None:
        """Why this catalog cannot grade `task_id`: its own files, or its fixture's, did not verify.
        A task it does not hold is not damage: the caller names that as it always did."""
        why = self.damaged.get(f"tasks/{task_id}")
        if why is None and self.damaged:
            try:
                why = self.fixture_damage(self.task(task_id).manifest.fixture.id)
            except UserError:
                return None
        return why

    def fixture_damage(self, fixture_id: str) -> str | None:
        """Why this catalog's copy of a fixture is not to be restored or graded from, if it is not."""
        return self.damaged.get(f"fixtures/{fixture_id}")

    @property
    def tasks_dir(self) -> Path:
        return self.root / "tasks"

    @property
    def fixtures_dir(self) -> Path:
        return self.root / "fixtures"

    @property
    def suites_dir(self) -> Path:
        return self.root / "suites"

    def task_ids(self) -> list[str]:
        if not self.tasks_dir.is_dir():
            return []
        return sorted(p.name for p in self.tasks_dir.iterdir() if (p / "task.json").is_file() and not incomplete(p))

    def fixture_ids(self) -> list[str]:
        if not self.fixtures_dir.is_dir():
            return []
        return sorted(p.name for p in self.fixtures_dir.iterdir() if (p / "fixture.json").is_file() and not incomplete(p))

    def suite_names(self) -> list[str]:
        if not self.suites_dir.is_dir():
            return []
        return sorted(p.stem for p in self.suites_dir.glob("*.json"))

    def task(self, task_id: str) -> Task:
        d = self.tasks_dir / task_id
        if not (d / "task.json").is_file():
            raise UserError(f"{d}: no such task{did_you_mean(task_id, self.task_ids())}")
        task = load_task(d)
        if task.manifest.id != task_id:
            # else a plan asked for this directory would run, and record, the task it names
            raise UserError(f"{d / 'task.json'}: id: {task.manifest.id!r} differs from its directory name {task_id!r}")
        return task

    def fixture(self, fixture_id: str) -> Fixture:
        d = self.fixtures_dir / fixture_id
        if not (d / "fixture.json").is_file():
            raise UserError(f"{d}: no such fixture{did_you_mean(fixture_id, self.fixture_ids())}")
        return load_fixture(d, self.trees.get(fixture_id))

    def fixture_for(self, task: Task) -> Fixture:
        return self.fixture(task.manifest.fixture.id)

    def suite(self, name: str) -> Suite:
        path = self.suites_dir / f"{name}.json"
        if not path.is_file():
            raise UserError(
                f"{path}: no such suite (known: {', '.join(self.suite_names()) or 'none'})"
            )
        return load_suite(path)
