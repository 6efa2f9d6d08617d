"""A run page's evidence, kept by what it was read from (opt-in), so a site regenerated in another
copy of the same project does not restore every run again.

Regenerating the whole site restores every run (its seed rebuilt, its bundle read) to read its
transcript, diff and reports: for the 470 run pages of this repository's ledger that is most of a
`run`'s time in a fresh copy, where the site's hint (`regenerate.site_runs_due`) is absent. The
evidence is a function of the run's event, its bundle's bytes, the fixture it is restored on
(the files the seed is built from, with their modes, its manifest and baseline reports) and the
code that reads it (this package, pygit2 and libgit2); with `$CBLEDGER_SITE_EVIDENCE_CACHE`
naming a directory, `site_evidence.source` (the site's regeneration: `run`, `judge`, `rescore`,
`project`, `watch`) keeps each run's evidence under a BLAKE3 of all of those and reads it back
instead of restoring. Only evidence read without a problem is kept. `replay --verify` never reads
it: its site check compares the page of every run it restores without a problem against
evidence from its own restores, so a forged entry for such a run shows up as a page that
differs. Off unless the variable is set (the test suite sets it, as it sets
`$CBLEDGER_KICAD_REPORT_CACHE`).
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

import msgspec
import pygit2
from blake3 import blake3

from cbledger.errors import UserError
from cbledger.ledger.events import RunRecorded
from cbledger.projections.site.evidence import RunEvidence
from cbledger.tasks.catalog import Fixture
from cbledger.tasks.fixtures.install import read_directory
from cbledger.workspace import Workspace

CACHE_ENV = "CBLEDGER_SITE_EVIDENCE_CACHE"
#: a change to what is hashed (or how) is a new version: older entries are never read
_VERSION = b"cbledger-site-evidence-cache 1\0"
_DECODER = msgspec.msgpack.Decoder(RunEvidence)


@functools.cache
def code_identity() -> str:
    """A BLAKE3 of every file of the package (the site's templates, renderer and evidence reader
    among them): what other code made is not taken as this code's, whichever part changed."""
    h = blake3(f"pygit2 {pygit2.__version__} libgit2 {pygit2.LIBGIT2_VERSION}\0".encode())  # a page's diff is libgit2's
    package = Path(__file__).resolve().parent.parent
    for path in sorted(p for p in package.rglob("*") if p.is_file() and p.suffix in (".py", ".html", ".css", ".j2", ".svg")):
        h.update(str(path.relative_to(package)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def directory() -> Path | None:
    named = os.environ.get(CACHE_ENV)
    return Path(named) if named else None


class EvidenceCache:
    """One gathering's view of the cache: each fixture's identity is hashed once."""

    def __init__(self, root: Path, workspace: Workspace, diff_limit: int | None) -> None:
        self.root = root
        self.workspace = workspace
        self.diff_limit = diff_limit
        self._fixtures: dict[tuple[Path, Path], bytes | None] = {}

    def _fixture(self, fixture: Fixture) -> bytes | None:
        """What a restore reads of the fixture, hashed: every tree file the seed is built from
        (its path, whether it is executable, its bytes: `sandbox.build_seed_tree`), the
        manifest's id and tree hash (the seed commit's message) and the baseline reports. None
        for one that cannot be read (its run is restored, and says why)."""
        at = (fixture.dir, fixture.tree)
        if at not in self._fixtures:
            try:
                h = blake3(f"{fixture.manifest.id}\0{fixture.manifest.sha256}\0".encode())
                for f in read_directory(fixture.tree):
                    h.update(f"{f.path}\0{'x' if f.executable else '-'}\0".encode() + blake3(f.data).digest())
                for kind in ("erc", "drc"):
                    report = fixture.baseline_report(kind)
                    h.update(b"\0" + kind.encode() + b"\0" + (report if report is not None else b"none"))
                self._fixtures[at] = h.digest()
            except (UserError, OSError, ValueError):
                self._fixtures[at] = None
        return self._fixtures[at]

    def key(self, run: RunRecorded, fixture: Fixture) -> str | None:
        """What `run`'s evidence is read from, or None when its bundle is not there to hash."""
        bundle = self.workspace.stored(run.sandbox.store)
        try:
            data = bundle.read_bytes() if bundle is not None else None
        except OSError:
            data = None
        made_on = self._fixture(fixture)
        if data is None or made_on is None:
            return None
        h = blake3(_VERSION)
        h.update(code_identity().encode() + b"\0" + str(self.diff_limit).encode() + b"\0")
        h.update(msgspec.json.encode(run) + b"\0")
        h.update(blake3(data).digest() + made_on)
        return h.hexdigest()

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.msgpack"

    def get(self, key: str) -> RunEvidence | None:
        try:
            return _DECODER.decode(self._path(key).read_bytes())
        except (OSError, msgspec.DecodeError):
            return None

    def put(self, key: str, evidence: RunEvidence) -> None:
        if evidence.problem is not None:
            return
        path = self._path(key)
        temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        try:  # a cache, not a record: renamed into place whole, never synced
            path.parent.mkdir(parents=True, exist_ok=True)
            temp.write_bytes(msgspec.msgpack.encode(evidence))
            os.replace(temp, path)
        except OSError:
            temp.unlink(missing_ok=True)  # a cache that cannot be written is one that is not used
