"""Surfaces: every way evidence reaches the ledger, as data (`surfaces.json` beside this module).

A surface says what kind of thing produced the evidence, who owns it, how it executed, whether
credentials were in reach, and which redaction rule the credential backstop applies before any
of it is preserved or published:

* `backstop-redact`: everything bound for `results/` is scanned; a match is replaced by its kind,
  the run is recorded and hard-fails (`runner/backstop.py`).
* `refuse-on-match`: evidence from outside is kept verbatim or not at all; a match refuses the
  event, nothing is written (`ledger/credential_guard.py`, which the store runs on every event).

Which surface a run or an import came through is read off facts the event itself records (its
run mode, model route, segment; an import's source), so a surface named on an event is checked
against them, and ownership is always the surface's, never the event's claim.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Literal

import msgspec
from msgspec import Struct

from cbledger.ledger.events import EvidenceImported, RunRecorded
from cbledger.ledger.types import NonEmpty, Slug

PATH = Path(__file__).with_name("surfaces.json")

Redaction = Literal["backstop-redact", "refuse-on-match"]
Ownership = Literal["project-owned", "reviewer-supplied", "imported"]


class Surface(Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    id: Slug
    kind: Literal["model-harness", "scripted-agent", "import"]
    description: NonEmpty
    ownership: Ownership
    execution: Literal[
        "sandboxed-local-harness-remote-model", "sandboxed-local-harness-endpoint-model",
        # a saved login's provider CLI and the operator's home: what the sandbox cannot expose
        "unsandboxed-local-harness-remote-model", "local-no-model", "outside-the-project",
    ]
    credentials: bool
    redaction: Redaction


class SurfaceCatalog(Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    format: Literal["cbledger-surfaces/1"]
    surfaces: list[Surface]

    def get(self, surface_id: str) -> Surface:
        for s in self.surfaces:
            if s.id == surface_id:
                return s
        raise KeyError(surface_id)


def parse(data: bytes, where: str) -> SurfaceCatalog:
    try:
        catalog = msgspec.json.decode(data, type=SurfaceCatalog)
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        raise ValueError(f"{where}: {exc}") from None
    ids = [s.id for s in catalog.surfaces]
    dup = sorted({i for i in ids if ids.count(i) > 1})
    if dup:
        raise ValueError(f"{where}: surface {dup[0]!r} is listed twice")
    return catalog


@cache
def catalog() -> SurfaceCatalog:
    """The project's surfaces (read once; the file ships with the package)."""
    return parse(PATH.read_bytes(), str(PATH))


SAVED_LOGIN_PREFIXES = ("codex", "cursor", "claude-code")


def run_surface(run: RunRecorded) -> str:
    """The surface a run came through, from what the run records."""
    if run.run_mode in ("gold", "noop"):
        return "scripted-harness-agents"
    model = run.model.id
    if model == "compat" or model.startswith("compat:"):
        return "copperhead-compat-endpoint"
    if model.split(":", 1)[0] in SAVED_LOGIN_PREFIXES or run.model.segment == "saved-login":
        return "copperhead-saved-login"
    return "copperhead-api-provider"


#: the format of a reviewer's manual import (`cbledger import --manual`)
MANUAL_IMPORT_FORMAT = "manual-import/1"


def import_surface(body: EvidenceImported) -> str:
    """A reviewer's manual record, or another implementation's records."""
    return "manual-reviewer-import" if body.format == MANUAL_IMPORT_FORMAT else "imported-reference-records"


def named_surface(recorded: str | object, derived: str) -> tuple[str, str | None]:
    """The surface to show and, when the event named another one, what it named."""
    if isinstance(recorded, str) and recorded != derived:
        return derived, recorded
    return derived, None
