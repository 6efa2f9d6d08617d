"""`cbledger fixture gold`: a task's gold solution taken from a kept sandbox is exactly the run's
end state against its baseline, so capturing the gold agent's own run gives back the gold it
applied (the transcript aside, whose run-time fields the gold agent fills in)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.factories import run_cli

pytestmark = [pytest.mark.slow, pytest.mark.kicad]

REPO = Path(__file__).resolve().parent.parent
TASK = "led-resistor-swap"


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_capturing_a_gold_run_gives_back_its_gold(tmp_path, kicad_cli, copperhead_cli, monkeypatch):
    monkeypatch.setenv("COPPERHEAD_CLI", str(copperhead_cli))  # the runs capture `copperhead check`
    root = tmp_path / "project"
    for name in ("tasks", "suites", "fixtures"):  # a bump refuses a task whose fixture is not there
        shutil.copytree(REPO / name, root / name)
    for args in (("init",), ("suite", "bump", "--reason", "x", "--skip-trial")):
        assert run_cli([*args, "--root", root]).exit_code == 0
    sandboxes = tmp_path / "sandboxes"
    result = run_cli(["run", TASK, "--agent", "gold", "--repeats", "1", "--keep-sandboxes", "--sandbox-root", sandboxes, "--root", root])
    assert result.exit_code == 0, result.output
    (sandbox,) = sandboxes.iterdir()
    idle = tmp_path / "idle"  # a run that fails the task, made before the gold changes the suite
    result = run_cli(["run", TASK, "--agent", "noop", "--repeats", "1", "--keep-sandboxes", "--sandbox-root", idle, "--root", root])
    assert result.exit_code == 0, result.output
    (noop,) = idle.iterdir()
    original = _files(REPO / "tasks" / TASK / "gold" / "files")
    result = run_cli(["fixture", "gold", TASK, "--from-sandbox", sandbox, "--root", root])
    assert result.exit_code == 0, result.output
    assert f"{TASK}: gold has {len(original)} file(s), 0 deletion(s)" in result.output
    assert "warning" not in result.stderr, result.stderr
    gold = root / "tasks" / TASK / "gold"
    assert _files(gold / "files") == original
    assert not (gold / "delete.txt").exists()
    events = [json.loads(line) for line in (gold / "transcript.jsonl").read_text().splitlines()]
    end = events[-1]
    assert end["type"] == "run-end" and end["data"]["tokensIn"] == 0 and end["data"]["exitPath"] == "done"
    assert "versions" not in events[0]["data"]  # no machine path of the run that was captured
    # a sync task's gold: copperhead asks a sync run its own fixed request, never the task's
    # prompt, and every sync run was refused as "asked another prompt"
    sync_task, synced = "mcu-budget-dual-write-sync", tmp_path / "synced"
    result = run_cli(["run", sync_task, "--agent", "gold", "--repeats", "1", "--keep-sandboxes", "--sandbox-root", synced, "--root", root])
    assert result.exit_code == 0, result.output
    (sync_box,) = synced.iterdir()
    result = run_cli(["fixture", "gold", sync_task, "--from-sandbox", sync_box, "--root", root])
    assert result.exit_code == 0, result.output
    assert _files(root / "tasks" / sync_task / "gold" / "files") == _files(REPO / "tasks" / sync_task / "gold" / "files")
    did = tmp_path / "did"  # a do task's run on the same board is no sync run
    result = run_cli(["run", "mcu-rename-i2c-nets", "--agent", "gold", "--repeats", "1", "--keep-sandboxes", "--sandbox-root", did, "--root", root])
    assert result.exit_code == 0, result.output
    (do_box,) = did.iterdir()
    refused = run_cli(["fixture", "gold", sync_task, "--from-sandbox", do_box, "--root", root])
    assert refused.exit_code == 2 and f"not a run of {sync_task}: its harness ran 'do', a sync task runs 'sync'" in refused.stderr, refused.output
    refused = run_cli(["fixture", "gold", "mcu-rename-i2c-nets", "--from-sandbox", sync_box, "--root", root])
    assert refused.exit_code == 2 and "its harness ran 'sync'" not in refused.stderr, refused.output  # a do task: its prompt
    assert "not a run of mcu-rename-i2c-nets: its harness was asked 'resolve design-state" in refused.stderr, refused.output
    # another task's run is refused, the other task's gold untouched: one on another fixture (its
    # seed names the fixture) and one on the same board asked another prompt
    for other, why in (("mcu-rename-i2c-nets", "its seed is 'seed: fixture synthetic-led-resistor "),
                       ("led-current-refusal", "its harness was asked 'Make the power indicator a little brighter")):
        kept = _files(root / "tasks" / other / "gold")
        refused = run_cli(["fixture", "gold", other, "--from-sandbox", sandbox, "--root", root])
        assert refused.exit_code == 2 and f"not a run of {other}: {why}" in refused.stderr, refused.output
        assert refused.stderr.rstrip().endswith("nothing replaced") and _files(root / "tasks" / other / "gold") == kept
    # a run that fails its own task is kept all the same, and said to fail now, not at the bump
    result = run_cli(["fixture", "gold", TASK, "--from-sandbox", noop, "--root", root, "--json"])
    assert result.exit_code == 0 and json.loads(result.stdout)["verdict"] == "fail", result.output
    assert f"warning: the run in {noop} fails {TASK} (first failed: resistor-changed: " in result.stderr
    assert "refused by `cbledger suite bump" in result.stderr
    # a directory that is not a kept sandbox is refused
    result = run_cli(["fixture", "gold", TASK, "--from-sandbox", tmp_path, "--root", root])
    assert result.exit_code != 0 and "not a kept sandbox" in result.output
    gone = run_cli(["fixture", "gold", TASK, "--from-sandbox", tmp_path / "no-such", "--root", root])
    assert gone.exit_code == 2 and f"{tmp_path / 'no-such'}: no such directory" in gone.stderr, gone.output
