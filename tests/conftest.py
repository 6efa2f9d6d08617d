"""Shared pytest fixtures.

Two outside dependencies are optional on a developer laptop and mandatory in CI: the real
third-party data in `../shared/real` and `kicad-cli`. Without CI they skip with the reason; with
`CI=true` their absence fails the test, so a green CI run never hides a missing dependency.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
IN_CI = os.environ.get("CI", "").lower() in {"1", "true", "yes"}


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


@pytest.fixture(scope="session")
def kicad_cli() -> str:
    path = shutil.which("kicad-cli")
    if path is None:
        _missing("kicad-cli (install: scripts/install-system)")
    return path
