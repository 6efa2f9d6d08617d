"""`copperhead check` captured when a run ends (`cbledger/runner/check_capture.py`), so that
`check_clean` grades a live run and `replay --verify` re-derives the same grade from the bundle.

The end-to-end tests drive the bundled `led-resistor-swap` (which asserts `check_clean`) through
`cbledger run` in a copy of the repository's suite, with the real copperhead 0.9.0 doing the
check."""

from __future__ import annotations

import json

import pytest

from cbledger.runner import check_capture
from cbledger.tasks.catalog import Catalog
from tests.modes_project import REPO, Project

TASK = "led-resistor-swap"


def test_only_tasks_that_grade_the_check_need_it():
    catalog = Catalog(REPO)
    assert check_capture.needed(catalog.task(TASK))
    assert not check_capture.needed(catalog.task("mcu-rename-i2c-nets"))


def test_the_captured_result_names_why_it_has_no_exit_code_and_bounds_its_output():
    killed = check_capture.result(None, b"", b"boom", killed="the 300s wall-clock cap")
    assert killed == {"command": "copperhead --json check", "exitCode": None, "stderr": "boom", "killed": "the 300s wall-clock cap"}
    big = check_capture.result(1, b"x" * (check_capture.OUTPUT_LIMIT + 5), b"")
    assert big["exitCode"] == 1 and len(big["output"]) == check_capture.OUTPUT_LIMIT and big["outputTruncated"] is True
    assert "stderr" not in big and "skipped" not in big


@pytest.mark.kicad
@pytest.mark.copperhead
def test_the_check_is_captured_graded_and_reproduced(tmp_path, kicad_cli, copperhead_cli, monkeypatch):
    monkeypatch.delenv("COPPERHEAD_CLI", raising=False)
    project = Project(tmp_path, [TASK])

    first, _, outcomes = project.run(TASK, "--agent", "gold", "--copperhead-cli", copperhead_cli)
    assert outcomes["copperhead-check"] == ("pass", "`copperhead check` exited 0")
    assert first.evidence["check"].path == "check.json" and first.evidence["check"].bytes > 0

    # no CLI to run the check with: the run is still recorded, and the grade says why it failed
    # (a campaign of its own: the same plan again would resume the first one and record nothing)
    run, _, outcomes = project.run(TASK, "--agent", "gold", "--campaign", "without-the-cli")
    assert run.run_id != first.run_id
    assert outcomes["copperhead-check"] == (
        "fail",
        "could not be evaluated: the captured check result has no integer exitCode "
        "(copperhead CLI not available (set --copperhead-cli or $COPPERHEAD_CLI))",
    )

    result = project.cli("replay", "--verify")
    assert result.exit_code == 0, result.output
    assert "runs: 2 checked: 2 reproduced" in result.output


@pytest.mark.kicad
@pytest.mark.copperhead
def test_a_check_that_fails_is_captured_as_failed(tmp_path, kicad_cli, copperhead_cli, monkeypatch):
    monkeypatch.delenv("COPPERHEAD_CLI", raising=False)
    # a solution that leaves the BOM behind the schematic: copperhead's drift check fails it
    project = Project(tmp_path, [TASK], edit=lambda root: (root / "tasks" / TASK / "gold" / "files" / "docs" / "BOM.md").unlink())
    _, _, outcomes = project.run(TASK, "--agent", "gold", "--copperhead-cli", copperhead_cli)
    assert outcomes["copperhead-check"] == ("fail", "`copperhead check` exited 1")
    assert outcomes["docs-agree"][0] == "fail"
    result = project.cli("replay", "--verify")
    assert result.exit_code == 0, result.output


@pytest.mark.kicad
@pytest.mark.copperhead
def test_a_task_without_check_clean_captures_no_check(tmp_path, kicad_cli, copperhead_cli, monkeypatch):
    monkeypatch.delenv("COPPERHEAD_CLI", raising=False)
    def without_check(root):
        assertions = root / "tasks" / TASK / "assertions.json"
        assertions.write_text(json.dumps([a for a in json.loads(assertions.read_text()) if a["type"] != "check_clean"], indent=2))

    project = Project(tmp_path, [TASK], edit=without_check)
    run, _, outcomes = project.run(TASK, "--agent", "gold", "--copperhead-cli", copperhead_cli)
    assert "check" not in run.evidence and "copperhead-check" not in outcomes
