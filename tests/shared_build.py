"""An expensive test input built once per test run and shared by every xdist worker.

A session-scoped fixture is per process: under `pytest -n 2` each worker would build it again.
Built under the run's common base directory instead, behind a file lock, it is made by whichever
worker asks first while the other waits for it. Callers copy it before changing anything.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from filelock import FileLock


def built_once(tmp_path_factory: pytest.TempPathFactory, name: str, build: Callable[[Path], None]) -> Path:
    """The directory `name` after `build(directory)` ran once in this test run."""
    basetemp = tmp_path_factory.getbasetemp()
    # a worker's base directory is `popen-gwN` under the run's own
    shared = basetemp.parent if os.environ.get("PYTEST_XDIST_WORKER") else basetemp
    base = shared / name
    with FileLock(shared / f"{name}.lock"):
        if not (base / ".built").is_file():
            shutil.rmtree(base, ignore_errors=True)
            base.mkdir(parents=True)
            build(base)
            (base / ".built").write_text("ok\n")
    return base
