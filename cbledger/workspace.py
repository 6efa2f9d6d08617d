"""Where a project's outputs live, derived from its root in one place.

The ledger, the preserved runs, the result records, LEADERBOARD.md, the read model and the kept
copies of imported evidence all sit at fixed places under the project root. A path written out in
two modules is two layouts waiting to drift, and a bundle path is recorded in `run.recorded`, so
the layout is part of the ledger's meaning: every module asks a `Workspace` instead.

The relative forms (`LEDGER`, `READ_MODEL`, ...) are what reports and events name; a `Workspace`
turns them into paths on this machine. The ledger is the one path a user may place elsewhere
(`--ledger`), and the one that may be no path at all: a `postgresql://` URL names a ledger kept
in a database (`is_database_url`). Everything else follows the root. Domain-free, so every layer
may use it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path, PurePosixPath

# Relative to the project root, with `/`, as reports and events name them.
RESULTS = "results"
LEDGER = f"{RESULTS}/ledger/events.jsonl"
LEADERBOARD = "LEADERBOARD.md"
READ_MODEL = f"{RESULTS}/cbledger.db"
RUNS = f"{RESULTS}/runs"
IMPORTS = f"{RESULTS}/imports"
CHECKPOINTS = f"{RESULTS}/checkpoints"
#: Each suite version's definitions, content-addressed (docs/REPRODUCE.md, "Suite definitions").
SUITES = f"{RESULTS}/suites"
#: Each run's recorded model exchanges, content-addressed (docs/REPRODUCE.md, "Re-execution").
CASSETTES = f"{RESULTS}/cassettes"
#: Public keys whose checkpoint signatures this project accepts (never a private key: see docs/CHECKPOINTS.md).
KEYS = "keys"


#: URL schemes of a ledger kept in PostgreSQL rather than in the JSON Lines file
DATABASE_SCHEMES = ("postgresql", "postgres")


def is_database_url(location: str | Path) -> bool:
    """Whether a ledger location is a database URL (`postgresql://…`) rather than a file."""
    if not isinstance(location, str) or "://" not in location:
        return False
    return location.split("://", 1)[0].lower() in DATABASE_SCHEMES


def checkpoint_name(size: int) -> str:
    """A published checkpoint's file relative to the root: one per tree size."""
    return f"{CHECKPOINTS}/{size}.txt"


def suite_definitions_name(version: str) -> str:
    """A suite version's definitions manifest relative to the root."""
    return f"{SUITES}/{version}.json"


def cassette_name(blake3_hex: str) -> str:
    """A run's cassette relative to the root, as `run.recorded.cassette` records it."""
    return f"{CASSETTES}/{blake3_hex}.json"


def bundle_name(run_id: str) -> str:
    """A preserved run's bundle relative to the root, as `run.recorded` records it."""
    return f"{RUNS}/{run_id}.bundle"


def record_name(relpath: str) -> str:
    """A result record's path relative to the root, given its path relative to `results/`."""
    return f"{RESULTS}/{relpath}"


@dataclass(frozen=True)
class Workspace:
    root: Path
    #: the JSON Lines file, or (a str) the URL of a ledger in a database
    ledger: Path | str

    @classmethod
    def at(cls, root: Path, ledger: Path | str | None = None) -> Workspace:
        """The workspace of `root`, its ledger at the default place unless one is given (a path,
        or a database URL)."""
        if ledger is None:
            return cls(root, root / LEDGER)
        return cls(root, ledger if is_database_url(ledger) else Path(ledger))

    @property
    def ledger_file(self) -> Path | None:
        """The ledger's file, or None when the ledger is in a database."""
        return self.ledger if isinstance(self.ledger, Path) else None

    @property
    def results(self) -> Path:
        return self.root / RESULTS

    @property
    def leaderboard(self) -> Path:
        return self.root / LEADERBOARD

    @property
    def read_model(self) -> Path:
        return self.root / READ_MODEL

    @property
    def runs(self) -> Path:
        return self.root / RUNS

    def record(self, relpath: str) -> Path:
        """A result record, given its path relative to `results/` (the record path rule's form)."""
        return self.results / relpath

    def staged_bundle(self, run_id: str) -> Path:
        """Where a bundle waits until its events are appended; hidden, so never mistaken for one."""
        return self.runs / f".{run_id}.bundle.tmp"

    def staged_cassette(self, run_id: str) -> Path:
        """Where a run's cassette waits, beside its staged bundle, until its events are appended."""
        return self.runs / f".{run_id}.cassette.tmp"

    def pending_events(self, run_id: str) -> Path:
        """A run whose bundle is in place but whose append the ledger refused (a torn tail, a disk
        that filled) keeps its two events here, ready for `cbledger append` once it is repaired."""
        return self.runs / f"{run_id}.events.jsonl"

    def stored(self, relpath: str) -> Path | None:
        """A path an event recorded relative to the root, or None when it would leave the project
        (an absolute path or one with `..`): a ledger is input, and input does not choose where
        the project reads."""
        rel = PurePosixPath(relpath)
        if rel.is_absolute() or ".." in rel.parts:
            return None
        return self.root / rel

    @property
    def checkpoints(self) -> Path:
        return self.root / CHECKPOINTS

    def checkpoint(self, size: int) -> Path:
        return self.root / checkpoint_name(size)

    @property
    def keys(self) -> Path:
        return self.root / KEYS

    @property
    def suites(self) -> Path:
        return self.root / SUITES

    def suite_definitions(self, version: str) -> Path:
        return self.root / suite_definitions_name(version)

    def suite_object(self, sha256: str) -> Path:
        """One kept definition file, named by its SHA-256."""
        return self.root / SUITES / "objects" / sha256[:2] / sha256

    def kept_import(self, sha256: str) -> Path:
        """The directory holding the kept copies of one imported file's evidence."""
        return self.root / IMPORTS / sha256
