"""Task and fixture manifests as typed data.

A task is data, never code (the standard's rule two): `task.json` says what to run against what
under which limits, `assertions.json` says how it is graded (see `vocabulary.py`), and the fixture
manifest records where a board came from and what its baseline reports contain. Decoding is
validation; the cross-file rules (id equals directory, hashes, targets exist) live in
`validate.py`.
"""

from __future__ import annotations

import datetime as _dt
from typing import Annotated, Literal

from msgspec import Meta, Struct, field

from cbledger.ledger.types import Hex40, Hex64, Mode, NonEmpty, Outcome, Slug, Tier
from cbledger.tasks.vocabulary import AnyAssertion, AssertionSpec


class Model(Struct, forbid_unknown_fields=True, frozen=True, kw_only=True, rename="camel"):
    pass


# --------------------------------------------------------------------------- task.json


class TaskFixture(Model, frozen=True, kw_only=True):
    path: Annotated[str, Meta(pattern=r"^fixtures/[a-z0-9]+(-[a-z0-9]+)*(?!\n)$")]
    sha256: Hex64

    @property
    def id(self) -> str:
        return self.path.split("/", 1)[1]


class TaskRequest(Model, frozen=True, kw_only=True):
    prompt: NonEmpty | None = None
    brief_path: NonEmpty | None = None


Budget = int | float


#: where every run's sandbox holds copperhead's configuration: the seed commit writes it (the
#: task's `config` applied), so an assertion may name it whatever the fixture tree holds
CONFIG_PATH = ".copperhead/config.json"


class TaskConfig(Model, frozen=True, kw_only=True):
    """Overrides for `.copperhead/config.json`. `llmCache` is not accepted: the runner forces it
    off, because a cached turn manufactures determinism the model does not have."""

    budgets: dict[NonEmpty, Budget] = field(default_factory=dict)
    max_turns: Annotated[int, Meta(ge=1)] | None = None
    max_repair_cycles: Annotated[int, Meta(ge=0)] | None = None
    #: per create-pipeline stage (`{"spec-seed": 60}`), as copperhead's config reads it
    stage_max_turns: dict[NonEmpty, Annotated[int, Meta(ge=1)]] | None = None


class TaskSetup(Model, frozen=True, kw_only=True):
    commands: list[Literal["init"]] = field(default_factory=list)


class TaskCaps(Model, frozen=True, kw_only=True):
    turns: Annotated[int, Meta(ge=1)]
    wall_clock_sec: Annotated[int, Meta(ge=1)]


#: repeat defaults by mode where they differ from 3 (a task's `repeats` overrides them)
MODE_REPEATS = {"create": 1}


class TaskManifest(Model, frozen=True, kw_only=True):
    schema_: str | None = field(default=None, name="$schema")
    id: Slug
    tier: Tier
    mode: Mode
    fixture: TaskFixture
    request: TaskRequest = field(default_factory=TaskRequest)
    expected_outcome: Outcome
    config: TaskConfig = field(default_factory=TaskConfig)
    setup: TaskSetup = field(default_factory=TaskSetup)
    caps: TaskCaps
    repeats: Annotated[int, Meta(ge=1, le=100)] | None = None
    tags: Annotated[list[NonEmpty], Meta(min_length=1)]
    variant_of: Slug | None = None
    rubric: NonEmpty | None = None

    @property
    def default_repeats(self) -> int:
        """The task's own `repeats`, else its mode's default: a create run is eight model-driven
        stages and minutes long, so the standard lets it repeat less than the others."""
        return self.repeats if self.repeats is not None else MODE_REPEATS.get(self.mode, 3)


Assertions = list[AnyAssertion]


# --------------------------------------------------------------------------- fixture.json

License = Literal[
    "Apache-2.0",
    "MIT",
    "BSD-2-Clause",
    "BSD-3-Clause",
    "CERN-OHL-P-2.0",
    "CC0-1.0",
    "Unlicense",
    "CC-BY-4.0",
    "CERN-OHL-W-2.0",
]


class Upstream(Model, frozen=True, kw_only=True):
    name: NonEmpty
    #: the upstream repository, or `local` for a fixture frozen from a repository with no known upstream
    url: Annotated[str, Meta(pattern=r"^(https?://|local$)")]
    commit: Hex40
    retrieved: _dt.date
    license: License
    license_file: NonEmpty
    copyright: NonEmpty
    modifications: NonEmpty


#: A KiCad release as upstream names the one it designed in: `9.0`, `8.x`, `6.0.11`.
KicadRelease = Annotated[
    str, Meta(pattern=r"^[0-9]{1,3}(\.([0-9]{1,4}|x)){0,2}(?!\n)$", description="a KiCad release: 9.0, 8.x, 6.0.11")
]


class KicadInfo(Model, frozen=True, kw_only=True):
    authored_version: KicadRelease
    file_format_version: NonEmpty
    verified_with_kicad_cli: NonEmpty


class Artifacts(Model, frozen=True, kw_only=True):
    schematic: NonEmpty
    board: str | None = None
    project: str | None = None


class Scale(Model, frozen=True, kw_only=True):
    schematic_lines: Annotated[int, Meta(ge=1)]
    board_lines: Annotated[int, Meta(ge=0)] | None = None
    symbols: Annotated[int, Meta(ge=1)]
    sheets: Annotated[int, Meta(ge=1)]
    signal_nets: list[str] = field(default_factory=list)
    power_nets: list[str] = field(default_factory=list)


Counts = dict[NonEmpty, Annotated[int, Meta(ge=0)]]


class ErcBaseline(Model, frozen=True, kw_only=True):
    report: NonEmpty
    errors: Annotated[int, Meta(ge=0)]
    error_types: Counts | None = None
    warnings: Annotated[int, Meta(ge=0)]
    warning_types: Counts | None = None


class DrcBaseline(ErcBaseline, frozen=True, kw_only=True):
    unconnected_items: Annotated[int, Meta(ge=0)]
    schematic_parity: Annotated[int, Meta(ge=0)]
    schematic_parity_types: Counts | None = None


class BaselineSummary(Model, frozen=True, kw_only=True):
    erc: ErcBaseline
    drc: DrcBaseline | None = None
    note: str | None = None


class FreezeRecipe(Model, frozen=True, kw_only=True):
    """Which upstream paths `fixture freeze` took at `upstream.commit`, and where it put them, so
    that `fixture materialize --git` can rebuild an uncommitted tree from a clone."""

    paths: Annotated[list[NonEmpty], Meta(min_length=1)]
    strip: NonEmpty | None = None
    into: NonEmpty | None = None


class FixtureManifest(Model, frozen=True, kw_only=True):
    """Provenance, scale and baseline state of one frozen board. Never copied into a sandbox."""

    schema_: str | None = field(default=None, name="$schema")
    id: Slug
    #: upstream: a third-party board at a commit an upstream repository holds (its tree is not
    #: committed here); synthetic: made for the benchmark; local: frozen from a repository with no
    #: known upstream (a maintainer's own board), its tree committed like a synthetic one's
    origin: Literal["upstream", "synthetic", "local"] = "upstream"
    sha256: Hex64
    complexity: Tier
    upstream: Upstream | None
    kicad: KicadInfo
    artifacts: Artifacts
    scale: Scale
    baseline: BaselineSummary
    freeze: FreezeRecipe | None = None


class Suite(Model, frozen=True, kw_only=True):
    name: Slug
    tasks: Annotated[list[Slug], Meta(min_length=1)]
    description: str | None = None


__all__ = [
    "AssertionSpec",
    "Assertions",
    "FixtureManifest",
    "Suite",
    "TaskManifest",
]
