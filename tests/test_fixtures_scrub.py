"""Baselines hold no machine paths: the one scrub function, every committed baseline scanned, and
`fixture baseline` / `fixture materialize` writing tree-relative paths."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from cbledger.tasks.fixtures.scrub import comparable, machine_paths, scrub, tree_relative
from tests.factories import run_cli
from tests.test_grading_kit import SCHEMATIC, write_fixture

TREE = frozenset({"hardware/demo.kicad_sch", "hardware/demo.kicad_pcb", "hardware/lib/parts.kicad_sym"})

NETLIST = b"""(export (version "E")
  (design
    (source "/tmp/cbledger-kicad-run-x1y2/tree/hardware/demo.kicad_sch")
    (date "2026-12-01T11:17:06+0000")
    (tool "Eeschema 9.0.8+1")
    (sheet (number "1") (name "/") (tstamps "/")
      (title_block
        (date "2022-11-30")
        (source "demo.kicad_sch"))))
  (libraries
    (library (logical "parts")
      (uri "/tmp/cbledger-kicad-run-x1y2/tree/hardware/sub/../lib/parts.kicad_sym"))
    (library (logical "Device")
      (uri "/usr/share/kicad/symbols/Device.kicad_sym")))
  (nets
    (net (code "1") (name "/SIG") (class "Default"))))
"""


# --------------------------------------------------------------------------- the scrub function


def test_absolute_paths_in_a_netlist_become_tree_relative_and_nothing_else_changes():
    out = scrub("netlist.kicad_net", NETLIST, TREE)
    expected = (
        NETLIST.replace(b"/tmp/cbledger-kicad-run-x1y2/tree/hardware/demo.kicad_sch", b"hardware/demo.kicad_sch")
        .replace(b"/tmp/cbledger-kicad-run-x1y2/tree/hardware/sub/../lib/parts.kicad_sym", b"hardware/lib/parts.kicad_sym")
        .replace(b"/usr/share/kicad/symbols/Device.kicad_sym", b"Device.kicad_sym")
    )
    assert out == expected
    assert scrub("netlist.kicad_net", out, TREE) == out  # scrubbing twice is scrubbing once
    assert machine_paths("netlist.kicad_net", NETLIST) == [
        'source "/tmp/cbledger-kicad-run-x1y2/tree/hardware/demo.kicad_sch"',
        'uri "/tmp/cbledger-kicad-run-x1y2/tree/hardware/sub/../lib/parts.kicad_sym"',
        'uri "/usr/share/kicad/symbols/Device.kicad_sym"',
    ]
    assert machine_paths("netlist.kicad_net", out) == []


def test_a_json_report_source_is_scrubbed_in_place():
    report = b'{\n  "date": "2026-01-01T00:00:00+0000",\n  "source": "/home/someone/board/hardware/demo.kicad_pcb",\n  "violations": []\n}\n'
    out = scrub("drc.json", report, TREE)
    assert out == report.replace(b"/home/someone/board/hardware/demo.kicad_pcb", b"hardware/demo.kicad_pcb")
    plain = report.replace(b"/home/someone/board/hardware/", b"")
    assert scrub("drc.json", plain, TREE) == plain  # kicad-cli's usual file name stays as it is


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("C:\\Users\\me\\board\\hardware\\demo.kicad_sch", "hardware/demo.kicad_sch"),
        ("/srv/x/hardware/lib/parts.kicad_sym", "hardware/lib/parts.kicad_sym"),
        ("/srv/x/elsewhere/other.kicad_sym", "other.kicad_sym"),
        ("lib/parts.kicad_sym", "lib/parts.kicad_sym"),
        ("${KIPRJMOD}/lib/parts.kicad_sym", "${KIPRJMOD}/lib/parts.kicad_sym"),
    ],
)
def test_tree_relative(path, expected):
    assert tree_relative(path, TREE) == expected


def test_comparable_masks_report_timestamps_but_not_a_title_block_date():
    later = NETLIST.replace(b"2026-12-01T11:17:06+0000", b"2027-01-01T00:00:00+0000")
    assert comparable("netlist.kicad_net", later, TREE) == comparable("netlist.kicad_net", NETLIST, TREE)
    retitled = NETLIST.replace(b'(date "2022-11-30")', b'(date "2023-01-01")')
    assert comparable("netlist.kicad_net", retitled, TREE) != comparable("netlist.kicad_net", NETLIST, TREE)
    report = {"date": "2026-01-01T00:00:00+0000", "source": "demo.kicad_sch", "sheets": []}
    moved = dict(report, date="2027-01-01T00:00:00+0000")
    assert comparable("erc.json", json.dumps(moved).encode(), TREE) == comparable("erc.json", json.dumps(report).encode(), TREE)


def test_comparable_holds_violation_lists_in_any_order_but_not_with_one_changed():
    """kicad-cli's DRC lists the same violations in another order on a loaded machine (seen on
    the dmxsun board with six concurrent runs); a changed or dropped violation still differs."""
    a = {"type": "clearance", "severity": "error", "items": [{"uuid": "1"}]}
    b = {"type": "silk_overlap", "severity": "warning", "items": [{"uuid": "2"}]}
    drc = {"date": "x", "violations": [a, b], "unconnected_items": [b, a], "schematic_parity": []}
    shuffled = dict(drc, violations=[b, a], unconnected_items=[a, b])
    assert comparable("drc.json", json.dumps(shuffled).encode(), TREE) == comparable("drc.json", json.dumps(drc).encode(), TREE)
    erc = {"sheets": [{"path": "/", "violations": [a, b]}]}
    erc_shuffled = {"sheets": [{"path": "/", "violations": [b, a]}]}
    assert comparable("erc.json", json.dumps(erc).encode(), TREE) == comparable("erc.json", json.dumps(erc_shuffled).encode(), TREE)
    changed = dict(drc, violations=[a, dict(b, severity="error")])
    assert comparable("drc.json", json.dumps(changed).encode(), TREE) != comparable("drc.json", json.dumps(drc).encode(), TREE)
    dropped = dict(drc, violations=[a, a])
    assert comparable("drc.json", json.dumps(dropped).encode(), TREE) != comparable("drc.json", json.dumps(drc).encode(), TREE)


# --------------------------------------------------------------------------- every committed baseline

# Independent of the scrub module on purpose: what a machine path looks like in any text.
_ABSOLUTE_FIELD = re.compile(r'\((?:source|uri)\s+"(?:/|[A-Za-z]:[\\/]|\\\\)|"source"\s*:\s*"(?:/|[A-Za-z]:[\\/]|\\\\)')


def machine_traces(text: str) -> list[str]:
    """Every trace of the machine a file was made on: an absolute path in a path-bearing field, or
    a temporary, home or checkout directory anywhere."""
    hits = [m.group(0) for m in _ABSOLUTE_FIELD.finditer(text)]
    markers = ["/tmp/", "/var/folders/", "/private/var/", "/home/", "/Users/", "/root/", "\\Users\\", "\\Temp\\", "cbledger-"]
    for directory in (tempfile.gettempdir(), str(Path.home()), str(Path(__file__).resolve().parent.parent)):
        if len(directory) > 1:
            markers.append(directory.rstrip("/") + "/")
    hits.extend(marker for marker in markers if marker in text)
    return hits


@pytest.mark.parametrize(
    "planted",
    [
        '(uri "/tmp/cbledger-baseline-b5kb3umb/tree/lib/synth.kicad_sym")',
        '(source "/home/someone/board/led.kicad_sch")',
        '"source": "/Users/someone/board/led.kicad_pcb"',
        '(source "C:\\\\Users\\\\me\\\\led.kicad_sch")',
        f'(description "{Path.home()}/notes")',
        f'(description "{tempfile.gettempdir()}/x")',
    ],
)
def test_the_scan_finds_a_planted_machine_path(planted):
    assert machine_traces(f"(export\n  {planted}\n)\n")


def test_no_committed_baseline_holds_a_machine_path(repo_root):
    listed = subprocess.run(["git", "ls-files", "fixtures"], cwd=repo_root, capture_output=True, text=True, check=True)
    baselines = [p for p in listed.stdout.split() if "/baseline/" in p]
    assert len(baselines) >= 15  # five synthetic fixtures, three outputs each
    found = {}
    for rel in baselines:
        data = (repo_root / rel).read_bytes()
        traces = machine_traces(data.decode("utf-8")) + machine_paths(rel, data)
        if traces:
            found[rel] = traces
    assert found == {}


# --------------------------------------------------------------------------- the commands that write baselines


def test_fixture_check_fails_on_a_machine_path_in_a_baseline_but_validate_does_not(tmp_path):
    """The author's check refuses it; a run's validation does not, since every count is right."""
    fixture = write_fixture(tmp_path / "project")
    (fixture.dir / "baseline" / "netlist.kicad_net").write_bytes(NETLIST)
    r = run_cli(["fixture", "check", fixture.id, "--root", tmp_path / "project"])
    assert r.exit_code == 1
    assert (
        'error: fixtures/demo-board/baseline/netlist.kicad_net: uri "/usr/share/kicad/symbols/Device.kicad_sym" is a '
        f"machine path (`cbledger fixture baseline demo-board --root {tmp_path / 'project'}` or `fixture materialize` write "
        "tree-relative ones)"
    ) in r.stderr
    assert r.stderr.count("is a machine path") == 3
    assert run_cli(["validate", "--root", tmp_path / "project"]).exit_code == 0


def test_materialize_scrubs_the_reports_it_copies(tmp_path):
    fixture = write_fixture(tmp_path / "project", origin="upstream")
    source = tmp_path / "source"
    source.mkdir()
    shutil.move(str(fixture.tree), source / "tree")
    shutil.move(str(fixture.dir / "baseline"), source / "baseline")
    made_elsewhere = NETLIST.replace(b"/tmp/cbledger-kicad-run-x1y2/tree/", str(source / "tree").encode() + b"/")
    (source / "baseline" / "netlist.kicad_net").write_bytes(made_elsewhere)
    r = run_cli(["fixture", "materialize", fixture.id, "--from", source, "--root", tmp_path / "project"])
    assert r.exit_code == 0, r.output
    copied = (fixture.dir / "baseline" / "netlist.kicad_net").read_text()
    assert f'(source "{SCHEMATIC}")' in copied
    assert machine_traces(copied) == []
    assert run_cli(["fixture", "check", fixture.id, "--root", tmp_path / "project"]).exit_code == 0


@pytest.mark.kicad
def test_baseline_of_a_board_with_a_project_library_writes_tree_relative_paths(tmp_path, kicad_cli, repo_root):
    """The committed LED fixture names its symbol library in the netlist; measured again in a
    temporary copy, the library `uri` must still be tree-relative and the reports the committed
    ones but for their timestamps."""
    fixture_id = "synthetic-led-resistor"
    committed = repo_root / "fixtures" / fixture_id
    project = tmp_path / "project"
    shutil.copytree(committed, project / "fixtures" / fixture_id)
    r = run_cli(["fixture", "baseline", fixture_id, "--root", project])
    assert r.exit_code == 0, r.output
    measured = project / "fixtures" / fixture_id
    netlist = (measured / "baseline" / "netlist.kicad_net").read_text()
    assert '(uri "lib/synth.kicad_sym")' in netlist and '(source "led-indicator.kicad_sch")' in netlist
    tree = frozenset(p.relative_to(committed / "tree").as_posix() for p in (committed / "tree").rglob("*") if p.is_file())
    for name in ("erc.json", "drc.json", "netlist.kicad_net"):
        fresh = (measured / "baseline" / name).read_bytes()
        assert machine_traces(fresh.decode()) == [], name
        assert comparable(name, fresh, tree) == comparable(name, (committed / "baseline" / name).read_bytes(), tree), name
    assert json.loads((measured / "fixture.json").read_text()) == json.loads((committed / "fixture.json").read_text())
