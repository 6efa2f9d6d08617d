"""The real suite's discrimination check and the bundled rubric example, end to end on the real
boards: gold passes and noop fails every task of `suites/real.json` (the real-board tasks CI
grades), and docs/JUDGING.md's "Try it" commands score a draft run with the scripted judge."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.factories import run_cli

pytestmark = [pytest.mark.slow, pytest.mark.kicad, pytest.mark.shared]

REPO = Path(__file__).resolve().parent.parent
NEW = ("mic-select-strap-decision", "mic-supply-range-record", "mic-select-both-straps-refusal")


@pytest.fixture(scope="module")
def project(tmp_path_factory, shared_real, kicad_cli) -> Path:
    root = tmp_path_factory.mktemp("real") / "project"
    for part in ("fixtures", "tasks", "suites", "sessions"):
        shutil.copytree(REPO / part, root / part, ignore=shutil.ignore_patterns("tree") if part == "fixtures" else None)
    for fixture in (REPO / "fixtures").iterdir():
        if (fixture / "tree").is_dir() and '"origin": "upstream"' not in (fixture / "fixture.json").read_text():
            shutil.copytree(fixture / "tree", root / "fixtures" / fixture.name / "tree")
    for board in ("antmicro-microphone-board", "openlighting-dmxsun-baseboard"):
        result = run_cli(["fixture", "materialize", board, "--from", shared_real / "fixtures" / board, "--root", root])
        assert result.exit_code == 0, result.output
    return root


def test_gold_passes_and_noop_fails_every_real_task(project, tmp_path):
    tasks = json.loads((project / "suites" / "real.json").read_text())["tasks"]
    assert set(NEW) <= set(tasks)
    tiers = {json.loads((project / "tasks" / t / "task.json").read_text())["tier"] for t in NEW}
    assert tiers == {"simple", "medium", "hard"}
    verdicts = {}
    for agent in ("gold", "noop"):
        result = run_cli(["run", "--suite", "real", "--draft", "--agent", agent, "--repeats", "1", "--jobs", "2",
                          "--sandbox-root", tmp_path / agent, "--root", project, "--json"])
        assert result.exit_code == 0, result.output
        for r in json.loads(result.stdout)["runs"]:
            verdicts[(agent, r["task"])] = (r["verdict"], r["failureCategory"])
        shutil.rmtree(Path(result.stderr.split("draft workspace ", 1)[1].split(" ", 1)[0]), ignore_errors=True)
    for task in tasks:
        assert verdicts[("gold", task)] == ("pass", None), task
        assert verdicts[("noop", task)][0] == "fail", task
    # a do-nothing run on an edit task did not make the change: wrong-target, not a budget breach
    assert verdicts[("noop", "mic-select-strap-decision")][1] == "wrong-target"
    assert verdicts[("noop", "mic-supply-range-record")][1] == "wrong-target"


def test_the_judging_guide_scores_a_draft_run_of_the_bundled_rubric_task(project, tmp_path):
    guide = (REPO / "docs" / "JUDGING.md").read_text(encoding="utf-8")
    section = guide[guide.index("## Try it"):guide.index("## The rubric file")]
    script = "\n".join(re.findall(r"^```sh\n(.*?)^```$", section, re.MULTILINE | re.DOTALL))
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
           "TMPDIR": str(tmp_path), "CBLEDGER_ROOT": str(project)}
    env.pop("CBLEDGER_RESULTS", None)
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=project, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0.80 (model-judged)" in done.stdout
    assert "| 0.80 | actionable 1/2; states-the-purpose 3/3 | `compat:judge-scripted` |" in done.stdout
    assert not (project / "results").exists()  # the draft workspace, never the project's
