"""Shared pytest fixtures.

Two outside dependencies are optional on a developer laptop and mandatory in CI: the real
third-party data in `../shared/real` and `kicad-cli`. Without CI they skip with the reason; with
`CI=true` their absence fails the test, so a green CI run never hides a missing dependency.

scripts/test runs the suite in parallel (pytest-xdist, `-n auto --dist loadgroup`, a worker per
core and one more): tests share no state (each writes under its own temporary directory, each
PostgreSQL test has a schema of its own, tests/postgres.py). The hooks below keep the tests of a module that builds an expensive
module-scoped fixture on one worker and start the longest units of work first, by the times
tests/durations.txt lists (`pytest --store-durations` refreshes it).
"""

from __future__ import annotations

import functools
import os
import random
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from xdist.scheduler import LoadGroupScheduling

REPO = Path(__file__).resolve().parent.parent
IN_CI = os.environ.get("CI", "").lower() in {"1", "true", "yes"}
_TREE_BEFORE = pytest.StashKey[str | None]()


#: a module that builds a module-scoped fixture: `@pytest.fixture(scope="module")` in its source
_MODULE_FIXTURE = re.compile(r"@pytest\.fixture\(\s*scope=[\"']module[\"']")


@functools.cache
def _shares_a_module_fixture(path: str) -> bool:
    file = REPO / path
    return file.suffix == ".py" and file.is_file() and _MODULE_FIXTURE.search(file.read_text()) is not None


def scope_of(nodeid: str) -> str:
    """The unit of work a test belongs to: an explicit `xdist_group` (the `@name` suffix xdist
    gives its node id), the module when it builds a module-scoped fixture, else the test alone."""
    if nodeid.rfind("@") > nodeid.rfind("]"):  # a parametrize id may hold an @
        return nodeid.split("@")[-1]
    path = nodeid.split("::", 1)[0]
    return path if _shares_a_module_fixture(path) else nodeid


class ModuleFixtureScheduling(LoadGroupScheduling):
    """xdist's `loadgroup` with one more group: every test of a module that builds a
    module-scoped fixture (a suite run through kicad-cli, real-harness runs, a Dask cluster).
    Spread over workers, each worker that drew one of its tests would build that fixture again.
    The scheduler sees only node ids, so the module is found by its source; explicit
    `xdist_group` marks keep their meaning. (xdist 3.8 cannot add its own group suffix to a
    node id under pytest 9.2, so marks added at collection would not reach it.) The units are
    handed out in collection order, longest first (`pytest_collection_modifyitems`), not
    xdist's default of the unit with most tests first, which put every small grouped module
    before the minute-long single tests."""

    def __init__(self, config: pytest.Config, log: Any = None) -> None:
        config.option.loadscopereorder = False
        super().__init__(config, log)

    def _split_scope(self, nodeid: str) -> str:
        return scope_of(nodeid)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    return ModuleFixtureScheduling(config, log) if config.getvalue("dist") == "loadgroup" else None


def _tree_status() -> str | None:
    """`git status` of the repository, each untracked file named (the ignored build and tool
    caches left out: collection itself writes `__pycache__/`); None outside git."""
    try:
        done = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"],
                              cwd=REPO, capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def pytest_sessionstart(session: pytest.Session) -> None:
    if IN_CI and not hasattr(session.config, "workerinput"):
        session.config.stash[_TREE_BEFORE] = _tree_status()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Under CI=true a test run that changed the repository's tree fails: tests write only under
    their temporary directories, so workers running side by side never see each other's files
    and the project's tracked outputs stay as committed."""
    before = session.config.stash.get(_TREE_BEFORE, None)
    if before is None:
        return
    after = _tree_status()
    if after is None or after == before:
        return
    changed = sorted(set(after.splitlines()) ^ set(before.splitlines()))
    sys.stderr.write(f"error: the tests changed the repository tree: {'; '.join(changed[:10])}\n")
    session.exitstatus = pytest.ExitCode.TESTS_FAILED


#: Each test's wall time in seconds as last measured, for the tests that took a second or more
#: (`pytest --store-durations` rewrites it from a whole run): the order the units of work start in.
DURATIONS = REPO / "tests" / "durations.txt"
#: what a test the list does not name is taken to take: most take a tenth of a second; a new
#: `slow` test is put among the long ones until the list is refreshed
UNLISTED_SEC, UNLISTED_SLOW_SEC = 0.1, 10.0
#: the shortest time the list keeps
LISTED_FROM_SEC = 1.0


@functools.cache
def known_durations(path: Path = DURATIONS) -> dict[str, float]:
    if not path.is_file():
        return {}
    pairs = (line.split(" ", 1) for line in path.read_text().splitlines() if line.strip())
    return {nodeid: float(seconds) for seconds, nodeid in pairs}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The longest units of work first (longest processing time first): in a parallel run a
    worker that drew a minute-long end-to-end test last would finish alone while the other
    idled. A unit's time is the sum of its tests' (`DURATIONS`); its tests stay together, in
    collection order."""
    known = known_durations()

    def seconds(item: pytest.Item) -> float:
        listed = known.get(item.nodeid)
        if listed is not None:
            return listed
        return UNLISTED_SLOW_SEC if item.get_closest_marker("slow") else UNLISTED_SEC

    units: dict[str, float] = {}
    for item in items:
        scope = scope_of(item.nodeid)
        units[scope] = units.get(scope, 0.0) + seconds(item)
    items.sort(key=lambda item: -units[scope_of(item.nodeid)])


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--store-durations", action="store_true",
                     help=f"rewrite {DURATIONS.relative_to(REPO)} from this run's test times (a whole run)")


class _DurationRecorder:
    """`--store-durations`: each test's setup, call and teardown summed, as the controlling
    process hears of them from the workers, and the list written when the run ends."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.times: dict[str, float] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.times[report.nodeid] = self.times.get(report.nodeid, 0.0) + report.duration

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        listed = sorted(((round(t, 1), n) for n, t in self.times.items() if t >= LISTED_FROM_SEC), reverse=True)
        self.path.write_text("".join(f"{t:.1f} {n}\n" for t, n in listed))


#: The property tests' seed: random in CI (hypothesis's own "ci" profile would derandomize them, so
#: a CI run never explores past the one fixed sequence), printed in the header so a failure can be
#: replayed with `CBLEDGER_HYPOTHESIS_SEED=N` or `--hypothesis-seed=N`. Each test keeps its own
#: fixed example budget. Exported so xdist workers draw from the same seed.
HYPOTHESIS_SEED = "CBLEDGER_HYPOTHESIS_SEED"


#: kicad-cli's reports and `copperhead check`'s results kept for the whole session
#: (`runner/report_cache.py`), shared by the xdist workers and every `cbledger` process the tests
#: start: the same gold and noop trees are verified by many tests, each distinct tree still by
#: kicad-cli and copperhead once. The same for each run page's evidence
#: (`reproduce/evidence_cache.py`): the tests that copy this project and regenerate its site
#: restore its runs once in all, not once each (`replay --verify` never reads it). Made by the
#: controlling process (workers inherit them) and removed at its end; a value set outside is
#: used as it is.
_CACHES = {"CBLEDGER_KICAD_REPORT_CACHE": "cbledger-test-kicad-reports-",
           "CBLEDGER_SITE_EVIDENCE_CACHE": "cbledger-test-site-evidence-"}
_MADE_CACHES = pytest.StashKey[list[Path]]()


def _start_caches(config: pytest.Config) -> None:
    if hasattr(config, "workerinput"):
        return
    import tempfile

    made = config.stash.setdefault(_MADE_CACHES, [])
    for name, prefix in _CACHES.items():
        if not os.environ.get(name):
            made.append(Path(tempfile.mkdtemp(prefix=prefix)))
            os.environ[name] = str(made[-1])


#: Where the session's throwaway restores go (`cbledger/scratch.py`): a directory of its own where
#: restores would go anyway (in memory when the machine has room), removed at the session's end.
#: A test that keeps a restore without removing it, or a process a test kills mid-restore, would
#: otherwise leave it in the machine's /dev/shm for good. A value set outside is used as it is.
_SCRATCH = "CBLEDGER_SCRATCH"
_MADE_SCRATCH = pytest.StashKey[Path]()


def _start_scratch(config: pytest.Config) -> None:
    if hasattr(config, "workerinput") or os.environ.get(_SCRATCH):
        return
    from cbledger import scratch

    made = scratch.mkdtemp("cbledger-test-scratch-")
    os.environ[_SCRATCH] = str(made)
    config.stash[_MADE_SCRATCH] = made
    # the snapshots the tests' commands write are sealed with a key of the run's own, never
    # the one in the user's home (the workers and every command they start inherit it)
    os.environ.setdefault("CBLEDGER_SNAPSHOT_KEY", str(made / "snapshot.key"))


def pytest_unconfigure(config: pytest.Config) -> None:
    for made in [*config.stash.get(_MADE_CACHES, []), config.stash.get(_MADE_SCRATCH, None)]:
        if made is not None:
            shutil.rmtree(made, ignore_errors=True)


def pytest_configure(config: pytest.Config) -> None:
    from hypothesis import core, settings

    _start_caches(config)
    _start_scratch(config)
    if config.getoption("store_durations", False) and not hasattr(config, "workerinput"):
        config.pluginmanager.register(_DurationRecorder(DURATIONS), "cbledger-store-durations")
    seed = config.getoption("hypothesis_seed", None) or os.environ.get(HYPOTHESIS_SEED)
    if seed is None and not IN_CI:
        return
    seed = str(seed if seed is not None else random.SystemRandom().randrange(2**32))
    os.environ[HYPOTHESIS_SEED] = seed
    settings.register_profile("cbledger-random", derandomize=False, database=None, print_blob=True)
    settings.load_profile("cbledger-random")
    core.global_force_seed = int(seed)


def pytest_report_header(config: pytest.Config) -> str | None:
    seed = os.environ.get(HYPOTHESIS_SEED)
    return f"hypothesis seed {seed} (replay: {HYPOTHESIS_SEED}={seed})" if seed else None


def _missing(what: str) -> None:
    if IN_CI:
        pytest.fail(f"{what} is required when CI=true", pytrace=False)
    pytest.skip(f"{what} not available")


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO


@pytest.fixture(scope="session")
def shared_real() -> Path:
    """`../shared/real` beside the repository (override with CBLEDGER_SHARED=<shared dir>)."""
    base = Path(os.environ.get("CBLEDGER_SHARED", REPO.parent / "shared"))
    real = base / "real"
    if not (real / "fixtures").is_dir():
        _missing(f"shared real data at {real}")
    return real


@pytest.fixture
def pg_ledger(tmp_path: Path):
    """A fresh, not yet created ledger URL on the test PostgreSQL server (tests/postgres.py);
    dropped after the test. Without a server it skips, and under CI=true it fails."""
    from tests.postgres import drop, ledger_url

    url = ledger_url(tmp_path)
    drop(url)
    yield url
    drop(url)


@pytest.fixture(scope="session")
def kicad_cli() -> str:
    path = shutil.which("kicad-cli")
    if path is None:
        _missing("kicad-cli (install: scripts/install-system)")
    return path


@pytest.fixture(scope="session")
def copperhead_cli() -> Path:
    """The real harness: copperhead 0.9.0 as `scripts/install-copperhead` installs it under
    `.cache/copperhead/` (or the CLI `$COPPERHEAD_CLI` names). With CI=true its absence fails."""
    from cbledger.runner.agents.copperhead import INSTALLED_CLI

    named = os.environ.get("COPPERHEAD_CLI")
    path = Path(named) if named else REPO / INSTALLED_CLI
    if not path.is_file():
        _missing(f"the copperhead CLI at {path} (install: scripts/install-copperhead)")
    if shutil.which("node") is None and not (Path(sys.executable).parent / "node").is_file():
        _missing("node (Node.js >= 20) for the copperhead CLI")
    return path
