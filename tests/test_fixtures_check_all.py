"""`cbledger fixture check --all` and `--kicad`, the one fixture checker (`scripts/check-fixtures`
calls it): every fixture, the tasks pinning it, kicad-cli reproducing the baseline, gold
solutions, doc drift; and excluded violations counted alike by the check, the baseline summary
and grading."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cbledger.kicad.netlist import Net, Netlist, Node
from cbledger.kicad.reports import count_violations, parse_report
from cbledger.kicad.symbols import SymbolRecord
from cbledger.tasks.catalog import load_fixture
from cbledger.tasks.fixtures.docs_check import bom_omissions, pinout_omissions
from tests.factories import run_cli
from tests.test_fixtures_materialize import REAL
from tests.test_grading_kit import (
    PROJECT,
    PROJECT_FILE,
    SCHEMATIC,
    assertion,
    demo_schematic,
    tree_files,
    write_fixture,
    write_task,
)


def check(root: Path, *args: str | Path):
    return run_cli(["fixture", "check", *args, "--root", root])


def _upstream_manifest_only(root: Path, fixture_id: str = "demo-upstream") -> None:
    """An upstream fixture as a real board is committed: the manifest, no tree, no baseline."""
    fixture = write_fixture(root, fixture_id, origin="upstream")
    shutil.rmtree(fixture.tree)
    shutil.rmtree(fixture.dir / "baseline")


def _measured(root: Path, files: dict[str, bytes]) -> Path:
    """A demo fixture whose baseline `fixture baseline` measured with kicad-cli."""
    fixture = write_fixture(root, files=files)
    r = run_cli(["fixture", "baseline", fixture.id, "--root", root])
    assert r.exit_code == 0, r.output
    return fixture.dir


# --------------------------------------------------------------------------- offline


def test_all_checks_every_fixture_and_notes_an_unmaterialized_real_board(tmp_path):
    root = tmp_path / "project"
    write_fixture(root)
    _upstream_manifest_only(root)
    r = check(root, "--all")
    assert r.exit_code == 0, r.output
    assert "note: fixtures/demo-upstream/tree: not materialized (third-party tree, not committed)" in r.stdout
    assert "demo-upstream: ok (tree not materialized)" in r.stdout
    assert "checked 2 fixture(s): ok" in r.stdout
    named = check(root, "demo-upstream")  # named, it must be there
    assert named.exit_code == 1 and "not materialized (run `cbledger fixture materialize demo-upstream" in named.stderr


def test_all_fails_when_any_fixture_fails_and_says_which(tmp_path):
    root = tmp_path / "project"
    write_fixture(root)
    broken = write_fixture(root, "demo-broken")
    (broken.tree / "README.md").write_text("edited\n")
    r = check(root, "--all", "--json")
    assert r.exit_code == 1
    doc = json.loads(r.stdout)
    assert doc["ok"] is False
    assert {f["fixture"]: f["ok"] for f in doc["fixtures"]} == {"demo-board": True, "demo-broken": False}
    assert [p["field"] for p in doc["fixtures"][1]["problems"]] == ["sha256"]


def test_ids_and_all_are_exclusive(tmp_path):
    root = tmp_path / "project"
    write_fixture(root)
    assert "give one or more fixture ids, or --all" in check(root).stderr
    assert check(root, "demo-board", "--all").exit_code == 2


def test_all_outside_a_project_is_refused_not_an_empty_success(tmp_path, monkeypatch):
    """It once said `checked 0 fixture(s): ok`: a CI step started in the wrong directory passed."""
    monkeypatch.chdir(tmp_path)
    r = run_cli(["fixture", "check", "--all"])
    assert r.exit_code == 2 and f"no cbledger project at or above {tmp_path}" in r.stderr, r.output


def test_kicad_without_kicad_cli_is_refused_before_anything_runs(tmp_path):
    root = tmp_path / "project"
    write_fixture(root)
    r = run_cli(["fixture", "check", "--all", "--kicad", "--root", root], env={"CBLEDGER_KICAD_CLI": str(tmp_path / "none")})
    assert r.exit_code == 2
    assert "CBLEDGER_KICAD_CLI names" in r.stderr and "not an executable kicad-cli" in r.stderr
    assert r.stdout == ""


def test_a_task_pinning_another_hash_fails_its_fixture(tmp_path):
    root = tmp_path / "project"
    fixture = write_fixture(root)
    old = write_task(root, "pins-old", fixture, [assertion("a", "erc_clean")])
    doc = json.loads((old.dir / "task.json").read_text())
    doc["fixture"]["sha256"] = "0" * 64
    (old.dir / "task.json").write_text(json.dumps(doc))
    write_task(root, "pins-current", fixture, [assertion("a", "erc_clean")])
    r = check(root, "demo-board")
    assert r.exit_code == 1
    assert (
        f"error: tasks/pins-old/task.json: fixture.sha256: pins {'0' * 64}, but fixtures/demo-board is {fixture.manifest.sha256}"
        in r.stderr
    )
    assert "pins-current" not in r.stderr


def test_bom_and_pinout_omissions():
    symbols = [
        SymbolRecord(ref, "10k", "R_0603", "synth:R", 1, False, True, True, ref.startswith("#"), "/", ref)
        for ref in ("R1", "R2", "R3", "#PWR01")
    ]
    bom = "| Refdes | Value | Footprint |\n| --- | --- | --- |\n| R1, R2 | 10k | R_0603 |\n"
    assert bom_omissions(bom, symbols) == ["BOM.md: R3 is placed but not listed"]
    assert bom_omissions("no table here\n", symbols) == []
    netlist = Netlist(
        (
            Net("/SIG", (Node("R1", "2"), Node("R2", "1"))),
            Net("VCC", (Node("R1", "1"),)),
            Net("GND", (Node("R2", "2"),)),
            Net("Net-(R3-Pad1)", (Node("R3", "1"),)),
        )
    )
    pinout = "| Net | Pins | Notes |\n| --- | --- | --- |\n| SIG | R1.2 | midpoint |\n| VCC | R1.1 | supply |\n"
    assert pinout_omissions(pinout, netlist) == [
        "PINOUT.md line 3: SIG does not list R2.1",
        "PINOUT.md: net GND is named but not listed",
    ]


# --------------------------------------------------------------------------- with kicad-cli


@pytest.mark.kicad
def test_excluded_violations_are_counted_alike_by_baseline_check_and_grading(tmp_path, kicad_cli):
    """The board's authors excluded one ERC violation in its project file: the report lists it
    with `excluded: true`, and neither the baseline summary, nor the check of a fresh kicad-cli
    run, nor grading's per-type counts include it."""
    files = tree_files()
    files[SCHEMATIC] = demo_schematic(pwr_flags=False).encode()
    project = json.loads(PROJECT_FILE)
    project["erc"]["erc_exclusions"] = [
        "power_pin_not_driven|508000|381000|c0413840-fd8e-5dfc-925a-b5a5d8828c61|00000000-0000-0000-0000-000000000000"
    ]
    files[PROJECT] = (json.dumps(project, indent=2) + "\n").encode()
    root = tmp_path / "project"
    fixture_dir = _measured(root, files)
    raw = json.loads((fixture_dir / "baseline" / "erc.json").read_text())
    violations = [v for sheet in raw["sheets"] for v in sheet["violations"]]
    counted = [v for v in violations if v["severity"] == "error" and not v.get("excluded")]
    excluded = [v for v in violations if v.get("excluded")]
    assert excluded and counted  # the case in question: both kinds in one report
    recorded = json.loads((fixture_dir / "fixture.json").read_text())["baseline"]["erc"]
    assert recorded["errors"] == len(counted) != len(counted) + len(excluded)
    assert recorded["errorTypes"] == {"power_pin_not_driven": len(counted)}
    grading = count_violations(parse_report(raw), "error")
    assert grading == {("erc", "power_pin_not_driven"): recorded["errors"]}
    r = check(root, "demo-board", "--kicad", "--json")
    assert r.exit_code == 0, r.output
    assert [p for p in json.loads(r.stdout)["problems"] if p["severity"] == "error"] == []


@pytest.mark.kicad
def test_a_baseline_kicad_cli_no_longer_reproduces_is_named_with_its_counts(tmp_path, kicad_cli):
    root = tmp_path / "project"
    fixture_dir = _measured(root, tree_files())
    report = fixture_dir / "baseline" / "erc.json"
    raw = json.loads(report.read_text())
    raw["sheets"][0]["violations"].append({"type": "pin_not_connected", "severity": "error", "description": "x", "items": []})
    report.write_text(json.dumps(raw, indent=2))
    manifest = fixture_dir / "fixture.json"
    doc = json.loads(manifest.read_text())
    doc["baseline"]["erc"].update(errors=1, errorTypes={"pin_not_connected": 1})
    manifest.write_text(json.dumps(doc, indent=2))
    assert check(root, "demo-board").exit_code == 0  # the files agree with each other
    r = check(root, "demo-board", "--kicad")
    assert r.exit_code == 1
    assert (
        "error: fixtures/demo-board/baseline/erc.json: differs from a fresh kicad-cli run "
        '(errors 1 recorded, 0 now; errorTypes {"pin_not_connected": 1} recorded, null now)'
    ) in r.stderr


@pytest.mark.kicad
def test_kicad_cli_writing_into_the_tree_copy_is_an_error(tmp_path, kicad_cli):
    root = tmp_path / "project"
    _measured(root, tree_files())
    messy = tmp_path / "messy-kicad-cli"
    messy.write_text(f'#!/bin/sh\nfor a; do last="$a"; done\ntouch "$(dirname "$last")/fp-info-cache"\nexec {kicad_cli} "$@"\n')
    messy.chmod(0o755)
    r = run_cli(["fixture", "check", "demo-board", "--kicad", "--root", root], env={"CBLEDGER_KICAD_CLI": str(messy)})
    assert r.exit_code == 1
    assert "error: fixtures/demo-board/tree: kicad-cli added or changed hardware/fp-info-cache in a copy of the tree" in r.stderr


@pytest.mark.kicad
def test_a_gold_solution_must_keep_the_clean_reports_its_task_asserts(tmp_path, kicad_cli):
    root = tmp_path / "project"
    _measured(root, tree_files())
    fixture = load_fixture(root / "fixtures" / "demo-board")
    for task_id, schematic in (("gold-clean", demo_schematic(sig="SENSE")), ("gold-unpowered", demo_schematic(pwr_flags=False))):
        write_task(root, task_id, fixture, [assertion("net", "net_present", {"net": "SIG"}), assertion("erc", "erc_clean")])
        gold = root / "tasks" / task_id / "gold" / "files" / SCHEMATIC
        gold.parent.mkdir(parents=True)
        gold.write_text(schematic)
    r = check(root, "demo-board", "--kicad")
    assert r.exit_code == 1
    errors = [line for line in r.stderr.splitlines() if line.startswith("error:")]
    assert errors == [
        (
            "error: tasks/gold-unpowered/assertions.json: [1]: asserts erc_clean, but the gold end state's ERC has "
            "2 error(s), 0 warning(s) (power_pin_not_driven 2)"
        )
    ]
    # the renamed net leaves PINOUT.md naming SIG, which the gold's docs did not follow: a note
    assert "note: tasks/gold-clean/gold/files: PINOUT.md line 5: net SIG does not exist in the schematic" in r.stdout
    assert check(root, "demo-board", "--kicad", "--no-gold").exit_code == 0


@pytest.mark.shared
@pytest.mark.kicad
@pytest.mark.slow
def test_check_fixtures_passes_on_this_project_with_the_real_boards_materialized(tmp_path, shared_real, repo_root, kicad_cli):
    """The script, on a copy of this project's fixtures and tasks with both real boards
    materialized from the shared data: every fixture reproduces under kicad-cli and every gold
    holds. The real boards' reports carry violations their authors excluded, which a checker
    counting them would find at odds with the manifests."""
    root = tmp_path / "project"
    shutil.copytree(repo_root / "fixtures", root / "fixtures")
    shutil.copytree(repo_root / "tasks", root / "tasks")
    for fixture_id in REAL:
        shutil.rmtree(root / "fixtures" / fixture_id / "tree", ignore_errors=True)
        shutil.rmtree(root / "fixtures" / fixture_id / "baseline", ignore_errors=True)
        r = run_cli(["fixture", "materialize", fixture_id, "--from", shared_real / "fixtures" / fixture_id, "--root", root])
        assert r.exit_code == 0, r.output
    drc = json.loads((shared_real / "fixtures" / "antmicro-microphone-board" / "baseline" / "drc.json").read_text())
    excluded_errors = sum(1 for v in drc["violations"] if v.get("excluded") and v["severity"] == "error")
    recorded = json.loads((root / "fixtures" / "antmicro-microphone-board" / "fixture.json").read_text())
    assert excluded_errors == 3 and recorded["baseline"]["drc"]["errors"] == 0

    env = dict(os.environ, CBLEDGER_ROOT=str(root), PYTHONPATH=str(repo_root))
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    proc = subprocess.run(
        [str(repo_root / "scripts" / "check-fixtures"), "--json"], capture_output=True, text=True, env=env, timeout=600, check=False
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    doc = json.loads(proc.stdout)
    assert doc["ok"] is True
    fixtures = {f["fixture"]: f for f in doc["fixtures"]}
    assert sorted(fixtures) == sorted(p.name for p in (repo_root / "fixtures").iterdir() if (p / "fixture.json").is_file())
    for fixture_id, sha in REAL.items():
        assert fixtures[fixture_id]["ok"] and fixtures[fixture_id]["treeHash"] == sha
        assert fixtures[fixture_id]["problems"] == []
    assert doc["reproduced"] == len(fixtures)
    assert doc["goldChecked"] == sum(1 for p in (repo_root / "tasks").glob("*/gold/files") if p.is_dir())
    drift = [p["message"] for p in fixtures["synthetic-mcu-sensor-drift"]["problems"]]
    assert drift == ["BOM.md line 13: R2 value is '4.7k' in the doc but '47k' in the schematic"]


def test_a_whole_project_check_reports_each_fixture_as_it_finishes(repo_root):
    """`fixture check --all --kicad` takes minutes: each fixture is reported as it is done."""
    from cbledger.tasks.fixtures.project_check import check_fixtures

    heard: list[tuple[int, int, str]] = []
    report = check_fixtures(repo_root, ["synthetic-led-resistor", "synthetic-mcu-sensor"], on_fixture=lambda *a: heard.append(a))
    assert [f.fixture_id for f in report.fixtures] == ["synthetic-led-resistor", "synthetic-mcu-sensor"]
    assert heard == [(1, 2, "synthetic-led-resistor"), (2, 2, "synthetic-mcu-sensor")]
