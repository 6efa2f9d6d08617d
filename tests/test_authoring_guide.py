"""docs/AUTHORING.md, executed: every `sh` block of the guide, in order, in one shell, from the root
of a scratch copy of the project, ending in a bumped suite with a gold captured from a scripted
run of the real copperhead CLI. No hand edit and no `--skip-trial` in the guide."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.factories import run_cli

pytestmark = [pytest.mark.slow, pytest.mark.kicad, pytest.mark.copperhead]

REPO = Path(__file__).resolve().parent.parent
GUIDE = REPO / "docs" / "AUTHORING.md"
TASK = "led-current-budget-record"


def guide_script() -> str:
    return "\n".join(re.findall(r"^```sh\n(.*?)^```$", GUIDE.read_text(encoding="utf-8"), re.MULTILINE | re.DOTALL))


def test_the_guide_asks_for_no_hand_edit_and_no_skipped_trial():
    script = guide_script()
    assert script.count("cbledger ") >= 8
    assert "--skip-trial" not in script and "$EDITOR" not in script and "sed -i" not in script


def test_the_guide_runs_from_a_board_directory_to_a_bumped_suite(tmp_path, kicad_cli, copperhead_cli):
    root = tmp_path / "project"
    for name in ("tasks", "fixtures", "suites", "sessions"):
        # the real boards' trees are not needed (their manifests are enough for validate)
        shutil.copytree(REPO / name, root / name, ignore=shutil.ignore_patterns("tree") if name == "fixtures" else None)
    for fixture in (REPO / "fixtures").iterdir():
        if (fixture / "tree").is_dir() and '"origin": "upstream"' not in (fixture / "fixture.json").read_text():
            shutil.copytree(fixture / "tree", root / "fixtures" / fixture.name / "tree")
    # the project as it stands, recorded: the guide's task is then the only change its bump tries
    for args in (("init",), ("suite", "bump", "--reason", "the project as bundled", "--skip-trial")):
        result = run_cli([*args, "--root", root])
        assert result.exit_code == 0, result.output
    # a short TMPDIR: a scripted run's endpoint socket lives under it, and a Unix socket's path
    # is limited to 107 bytes (pytest's own tmp_path, under a parallel worker, is longer)
    short = Path(tempfile.mkdtemp(prefix="cbg-", dir="/tmp"))
    env = {
        **os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "COPPERHEAD_CLI": str(copperhead_cli), "TMPDIR": str(short), "CBLEDGER_ROOT": str(root),
    }
    env.pop("CBLEDGER_RESULTS", None)
    try:
        done = subprocess.run(["bash", "-euo", "pipefail", "-c", guide_script()], cwd=root, env=env,
                              capture_output=True, text=True, timeout=900)
    finally:
        shutil.rmtree(short, ignore_errors=True)
    assert done.returncode == 0, done.stdout + done.stderr

    fixture = json.loads((root / "fixtures" / "my-led-board" / "fixture.json").read_text())
    assert fixture["origin"] == "local" and fixture["upstream"]["url"] == "local"
    assert fixture["upstream"]["license"] == "CC0-1.0" and fixture["upstream"]["copyright"] == "Copyright 2026 A. Maintainer"
    gold = root / "tasks" / TASK / "gold"
    assert (gold / "files" / "docs" / "SPEC.md").is_file() and (gold / "files" / ".copperhead" / "constraints.json").is_file()
    transcript = [json.loads(line) for line in (gold / "transcript.jsonl").read_text().splitlines()]
    assert transcript[-1]["type"] == "run-end" and transcript[-1]["data"]["exitPath"] == "done"

    from cbledger.ledger.store import LedgerStore
    from cbledger.tasks.catalog import Catalog

    bumps = [s.event.body for s in LedgerStore(root / "results" / "ledger" / "events.jsonl").read(types={"suite.bumped"})]
    assert len(bumps) == 2
    last = bumps[-1]
    assert last.reason == "led-current-budget-record on my-led-board"  # tried, not --skip-trial
    assert last.task_manifest_hashes[TASK] == Catalog(root).task(TASK).manifest_hash
    assert "my-led-board" in last.fixture_hashes
    assert "trial: gold passes and noop fails on 1 changed task(s)" in done.stdout
    # the draft went to a scratch workspace: the project's ledger holds no run
    assert not list(LedgerStore(root / "results" / "ledger" / "events.jsonl").read(types={"run.recorded"}))
