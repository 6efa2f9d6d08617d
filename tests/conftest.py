"""Shared pytest fixtures.

Two outside dependencies are optional on a developer laptop and mandatory in CI: the real
third-party data in `../shared/real` and `kicad-cli`. Without CI they skip with the reason; with
`CI=true` their absence fails the test, so a green CI run never hides a missing dependency.
"""

from __future__ import annotations

import os
import random
import shutil
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
IN_CI = os.environ.get("CI", "").lower() in {"1", "true", "yes"}


#: The property tests' seed: random in CI (hypothesis's own "ci" profile would derandomize them, so
#: a CI run never explores past the one fixed sequence), printed in the header so a failure can be
#: replayed with `CBLEDGER_HYPOTHESIS_SEED=N` or `--hypothesis-seed=N`. Each test keeps its own
#: fixed example budget. Exported so xdist workers draw from the same seed.
HYPOTHESIS_SEED = "CBLEDGER_HYPOTHESIS_SEED"


def pytest_configure(config: pytest.Config) -> None:
    from hypothesis import core, settings

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
