"""Where a project's outputs live, derived from its root in one place.

The ledger, the preserved runs, the result records, LEADERBOARD.md, the read model and the kept
copies of imported evidence all sit at fixed places under the project root. A path written out in
two modules is two layouts waiting to drift, and a bundle path is recorded in `run.recorded`, so
the layout is part of the ledger's meaning: every module asks a `Workspace` instead.

The relative forms (`LEDGER`, `READ_MODEL`, ...) are what reports and events name; a `Workspace`
turns them into paths on this machine. What runs read (tasks, fixtures, suites, keys) follows the
root; what they write (the ledger and everything made from it) lives in one results directory,
`results/` under the root unless another is chosen, and a `results/...` name resolves in it. A
ledger given as a file elsewhere takes its results directory with it (`results_beside`); a
`postgresql://` URL names a ledger kept in a database (`is_database_url`). Domain-free, so every
layer may use it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path, PurePosixPath

# Relative to the project root, with `/`, as reports and events name them.
RESULTS = "results"
LEDGER = f"{RESULTS}/ledger/events.jsonl"
LEADERBOARD = "LEADERBOARD.md"
READ_MODEL = f"{RESULTS}/cbledger.db"
#: The static HTML site (`cbledger project site`).
SITE = f"{RESULTS}/site"
#: The packed record store (docs/PROJECTIONS.md, "Result records"): a workspace holding it keeps
#: its records there instead of one file each under `results/<date>/`.
RECORDS_STORE_NAME = "records.sqlite"
RUNS = f"{RESULTS}/runs"
#: the suffix of a run's events kept for later beside its bundle (`Workspace.pending_events`)
PENDING_EVENTS = ".events.jsonl"
IMPORTS = f"{RESULTS}/imports"
CHECKPOINTS = f"{RESULTS}/checkpoints"
#: Projection snapshots beside the ledger: a derived local cache, never committed (docs/PROJECTIONS.md, "Snapshots").
SNAPSHOTS = f"{RESULTS}/ledger/snapshots"
#: Each suite version's definitions, content-addressed (docs/REPRODUCE.md, "Suite definitions").
SUITES = f"{RESULTS}/suites"
#: Each run's recorded model exchanges, content-addressed (docs/REPRODUCE.md, "Re-execution").
CASSETTES = f"{RESULTS}/cassettes"
#: Each campaign's plan, as its first invocation fixed it (docs/RUNNER.md, "Campaigns").
CAMPAIGNS = f"{RESULTS}/campaigns"
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


def results_beside(ledger: Path) -> Path:
    """The results directory a ledger file belongs to: the one holding its `ledger/` folder
    (`X/ledger/events.jsonl` -> `X`, the default layout), else the ledger's own directory
    (`Workspace.at` moves it to `<stem>.results/` when that directory is the project root)."""
    return ledger.parent.parent if ledger.parent.name == "ledger" else ledger.parent


@dataclass(frozen=True)
class Workspace:
    """A project root (tasks, fixtures, suites: what runs read) and one results directory (the
    ledger, preserved runs, records, read model, LEADERBOARD.md: what runs write). The results
    directory is `results/` under the root unless one is chosen; paths an event records as
    `results/...` are read from it, so a workspace moved whole still verifies."""

    root: Path
    #: the JSON Lines file, or (a str) the URL of a ledger in a database
    ledger: Path | str
    #: the results directory when it is not `results/` under the root
    results_dir: Path | None = None

    @classmethod
    def at(cls, root: Path, ledger: Path | str | None = None, results: Path | None = None) -> Workspace:
        """The workspace of `root`. With a results directory: its ledger under it unless one is
        given. With only a ledger file away from the default place: the results directory it
        belongs to (`results_beside`), so its records never land beside another ledger's. With
        neither: `results/` and its ledger under the root."""
        default = root / RESULTS
        if results is not None:
            chosen = Path(results)
            here = None if same_directory(chosen, default) else chosen
            if ledger is None:
                return cls(root, chosen / "ledger" / "events.jsonl", here)
            return cls(root, ledger if is_database_url(ledger) else Path(ledger), here)
        if ledger is None:
            return cls(root, root / LEDGER)
        if is_database_url(ledger):
            return cls(root, ledger)
        path = Path(ledger)
        beside = results_beside(path)
        if same_directory(beside, root):
            # a ledger file in the project root: its results beside it would lay runs, records
            # and kept suites (`suites/`) over the project's own tasks/, fixtures/ and suites/
            beside = beside / f"{path.stem}.results"
        return cls(root, path, None if same_directory(beside, default) else beside)

    @property
    def ledger_file(self) -> Path | None:
        """The ledger's file, or None when the ledger is in a database."""
        return self.ledger if isinstance(self.ledger, Path) else None

    @property
    def results(self) -> Path:
        return self.results_dir if self.results_dir is not None else self.root / RESULTS

    def _under_results(self, name: str) -> Path:
        """A path the layout names as `results/...`, in this workspace's results directory."""
        return self.results / PurePosixPath(name).relative_to(RESULTS)

    @property
    def leaderboard(self) -> Path:
        """`LEADERBOARD.md` at the root for the project's own `results/` (where it is committed);
        inside a results directory chosen elsewhere, with the rest of that workspace."""
        return self.root / LEADERBOARD if self.results_dir is None else self.results_dir / LEADERBOARD

    @property
    def read_model(self) -> Path:
        return self._under_results(READ_MODEL)

    @property
    def site(self) -> Path:
        return self._under_results(SITE)

    @property
    def runs(self) -> Path:
        return self._under_results(RUNS)

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
        return self.runs / f"{run_id}{PENDING_EVENTS}"

    def pending_run_ids(self, prefix: str) -> list[str]:
        """The runs starting with `prefix` whose events wait beside their bundle (`pending_events`)."""
        if not self.runs.is_dir():
            return []
        return sorted(p.name.removesuffix(PENDING_EVENTS) for p in self.runs.glob(f"{prefix}*{PENDING_EVENTS}"))

    def bundles(self, prefix: str = "") -> dict[str, Path]:
        """Run id -> the bundle in place under `runs/` (staged ones are hidden and not among them):
        what a killed driver's leftovers and a ledger cut at its end are looked for in."""
        if not self.runs.is_dir():
            return {}
        return {p.name.removesuffix(".bundle"): p for p in self.runs.glob(f"{prefix}*.bundle")}

    def stored(self, relpath: str) -> Path | None:
        """A path an event recorded relative to the root, or None when it would leave the project
        (an absolute path or one with `..`): a ledger is input, and input does not choose where
        the project reads."""
        rel = PurePosixPath(relpath)
        if rel.is_absolute() or ".." in rel.parts:
            return None
        if rel.parts[:1] == (RESULTS,):
            return self.results.joinpath(*rel.parts[1:])
        return self.root / rel

    def shown_path(self, path: Path) -> str:
        """A file of this workspace as a reader opens it: relative to the root in the project's own
        layout (`results/…`, `LEADERBOARD.md`), its own path under `--results DIR`."""
        if self.results_dir is None and path.is_relative_to(self.root):
            return path.relative_to(self.root).as_posix()
        return str(path)

    def shown(self, name: str) -> str:
        """`shown_path` of a file an event or finding names `results/...` (or relative to the root)."""
        found = self.stored(name)
        return self.shown_path(found) if found is not None else name

    def recorded_name(self, path: Path) -> str:
        """How an event names a path of this workspace: `results/...` for one in the results
        directory (wherever it is), else relative to the root; `stored` reads it back."""
        if path.is_relative_to(self.results):
            return PurePosixPath(RESULTS, path.relative_to(self.results).as_posix()).as_posix()
        return path.relative_to(self.root).as_posix()

    @property
    def checkpoints(self) -> Path:
        return self._under_results(CHECKPOINTS)

    @property
    def snapshots(self) -> Path:
        return self._under_results(SNAPSHOTS)

    def checkpoint(self, size: int) -> Path:
        return self._under_results(checkpoint_name(size))

    @property
    def keys(self) -> Path:
        return self.root / KEYS

    @property
    def own_keys(self) -> Path:
        """Where `key generate` puts a public key: the project's `keys/`, or for a scratch
        workspace (its own results directory) a `keys/` inside that, so that trying signing out
        never adds a key the project's verifiers would trust."""
        return self.keys if self.results_dir is None else self.results_dir / "keys"

    def trusted_key_files(self) -> list[Path]:
        """The public keys this workspace trusts by default: the project's, and a scratch
        workspace's own."""
        dirs = dict.fromkeys((self.keys, self.own_keys))
        return [p for d in dirs for p in sorted(d.glob("*.vkey"))]

    @property
    def suites(self) -> Path:
        return self._under_results(SUITES)

    @property
    def campaigns(self) -> Path:
        return self._under_results(CAMPAIGNS)

    def suite_definitions(self, version: str) -> Path:
        return self._under_results(suite_definitions_name(version))

    @property
    def suite_objects(self) -> Path:
        """Where kept definition files are, each at `<first two hex digits>/<SHA-256>`."""
        return self.suites / "objects"

    def suite_object(self, sha256: str) -> Path:
        """One kept definition file, named by its SHA-256."""
        return self.suite_objects / sha256[:2] / sha256

    def kept_import(self, sha256: str) -> Path:
        """The directory holding the kept copies of one imported file's evidence."""
        return self._under_results(IMPORTS) / sha256


def same_directory(a: Path, b: Path) -> bool:
    """One directory however it is named: a results directory named through a link (a `$HOME` or
    `$PWD` that holds one, a link to the project's `results/`) is the project's own, and its
    LEADERBOARD.md stays at the root."""
    if a.absolute() == b.absolute():
        return True
    try:
        return a.resolve() == b.resolve()
    except (OSError, RuntimeError):  # a loop of links (RuntimeError before Python 3.13): another place
        return False
