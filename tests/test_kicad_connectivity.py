"""Differential tests: our nets against kicad-cli's, on real boards, synthetic fixtures and the
hand-made schematics in tests/data/kicad.

Agreement is printed per design (run with `-s` to see it) and must be 100%: same pins grouped
together, same names, same pin function and type on every node.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from cbledger.kicad import compute_nets, load_schematic
from cbledger.kicad.compare import Comparison, compare_netlists
from cbledger.kicad.hierarchy import find_root_schematics
from cbledger.kicad.kicad_net import read_kicad_netlist
from cbledger.kicad.netlist import Net, Netlist, Node, sort_nets

DATA = Path(__file__).parent / "data" / "kicad"
HAND_MADE = {
    "orientation": "orientation/orientation.kicad_sch",
    "wiring": "wiring/wiring.kicad_sch",
    "power": "power/power.kicad_sch",
    "hierarchy": "hierarchy/hierarchy.kicad_sch",
    "units": "units/units.kicad_sch",
    "bus": "bus/bus.kicad_sch",
    "bus_hierarchy": "bus_hierarchy/bus_hierarchy.kicad_sch",
}


def _report(label: str, comparison: Comparison) -> str:
    line = f"{label}: {comparison.summary()}"
    print(line)
    for d in comparison.differences:
        print(f"    {d.kind}: KiCad {d.kicad or '-'} / ours {d.ours or '-'}: {d.detail}")
    return line


def _export(kicad_cli: str, schematic: Path, out: Path) -> Netlist:
    result = subprocess.run(
        [kicad_cli, "sch", "export", "netlist", "--format", "kicadsexpr", "-o", str(out), str(schematic)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, f"kicad-cli could not export {schematic}: {result.stdout}{result.stderr}"
    return read_kicad_netlist(out)


def _recorded(design: str) -> Netlist:
    data = json.loads((DATA / design / "expected-nets.json").read_text(encoding="utf-8"))
    return Netlist(sort_nets([Net(n["name"], tuple(Node(**node) for node in n["nodes"])) for n in data]))


def test_real_boards_match_their_kicad_baseline_netlists(shared_real: Path) -> None:
    boards = sorted(p for p in (shared_real / "fixtures").iterdir() if p.is_dir())
    assert boards, f"no boards under {shared_real / 'fixtures'}"
    failures = []
    for board in boards:
        roots = find_root_schematics(board / "tree")
        assert len(roots) == 1, f"{board.name}: expected one root schematic, found {roots}"
        comparison = compare_netlists(compute_nets(load_schematic(roots[0])), read_kicad_netlist(board / "baseline" / "netlist.kicad_net"))
        line = _report(board.name, comparison)
        if comparison.differences or not comparison.names_equal:
            failures.append(line)
    assert not failures, "\n".join(failures)


def _fixture_failures(fixtures: Path, kicad_cli: str, work: Path) -> tuple[list[str], int]:
    """Checks every fixtures/<id>/tree against kicad-cli; returns the failures and how many
    schematics were compared. Trees are copied first: kicad-cli must not touch the originals."""
    failures: list[str] = []
    compared = 0
    for tree in sorted(p for p in fixtures.glob("*/tree") if p.is_dir()):
        name = tree.parent.name
        copy = work / name
        shutil.copytree(tree, copy)
        roots = find_root_schematics(copy)
        if not roots:
            failures.append(f"{name}: fixture tree has no .kicad_sch schematic")
            continue
        for root in roots:
            label = f"{name}/{root.relative_to(copy).as_posix()}"
            kicad = _export(kicad_cli, root, work / f"{name}-{root.stem}.net")
            comparison = compare_netlists(compute_nets(load_schematic(root)), kicad)
            line = _report(label, comparison)
            compared += 1
            if comparison.differences or not comparison.names_equal:
                failures.append(line)
    return failures, compared


def test_synthetic_fixtures_match_kicad_cli(repo_root: Path, kicad_cli: str, tmp_path: Path) -> None:
    if not any(p.is_dir() for p in (repo_root / "fixtures").glob("*/tree")):
        pytest.skip("no synthetic fixtures under fixtures/*/tree yet")
    failures, compared = _fixture_failures(repo_root / "fixtures", kicad_cli, tmp_path)
    assert not failures, "\n".join(failures)
    assert compared > 0


def test_fixture_check_fails_loudly_on_a_tree_without_a_schematic(kicad_cli: str, tmp_path: Path) -> None:
    fixtures = tmp_path / "fixtures"
    (fixtures / "empty" / "tree").mkdir(parents=True)
    (fixtures / "empty" / "tree" / "README.md").write_text("no design here\n")
    shutil.copytree(DATA / "power", fixtures / "good" / "tree")
    failures, compared = _fixture_failures(fixtures, kicad_cli, tmp_path / "work")
    assert failures == ["empty: fixture tree has no .kicad_sch schematic"]
    assert compared == 1


@pytest.mark.parametrize("design", sorted(HAND_MADE))
def test_hand_made_schematics_match_recorded_kicad_nets(design: str) -> None:
    comparison = compare_netlists(compute_nets(load_schematic(DATA / HAND_MADE[design])), _recorded(design))
    _report(design, comparison)
    assert comparison.differences == ()
    assert comparison.names_equal


@pytest.mark.kicad
@pytest.mark.parametrize("design", sorted(HAND_MADE))
def test_recorded_nets_are_what_kicad_cli_says(design: str, kicad_cli: str, tmp_path: Path) -> None:
    """The recordings are only evidence while kicad-cli still gives the same answer."""
    copy = tmp_path / design
    shutil.copytree(DATA / design, copy)
    kicad = _export(kicad_cli, copy / Path(HAND_MADE[design]).name, tmp_path / "out.net")
    assert kicad.to_builtins() == _recorded(design).to_builtins(), (
        f"tests/data/kicad/{design}/expected-nets.json is stale: run tests/data/kicad/regenerate.py"
    )
    comparison = compare_netlists(compute_nets(load_schematic(copy / Path(HAND_MADE[design]).name)), kicad)
    _report(f"{design} (live kicad-cli)", comparison)
    assert comparison.differences == ()


def _nets(design: str) -> Netlist:
    return compute_nets(load_schematic(DATA / HAND_MADE[design]))


def _pins(netlist: Netlist, name: str) -> set[tuple[str, str]]:
    net = netlist.net_by_name(name)
    assert net is not None, f"no net {name}: {[n.name for n in netlist.nets]}"
    return set(net.pins)


def test_junction_inside_a_wire_cuts_it_where_kicad_cli_does() -> None:
    nets = _nets("wiring")
    assert _pins(nets, "Net-(R1-Pad1)") == {("R1", "1"), ("R2", "1")}
    assert nets.net_by_name("T_FAR") is None  # the cut-off end holds no pin
    assert nets.pin_net("R8", "1").name == "unconnected-(R8-Pad1)"


def test_only_labels_and_sheet_pins_attach_to_a_wire_body() -> None:
    nets = _nets("wiring")
    assert _pins(nets, "ON_BODY") == {("R9", "1")}
    assert nets.pin_net("R10", "1").name == "unconnected-(R10-Pad1)"  # pin on a wire body
    assert nets.pin_net("R4", "1").name == "unconnected-(R4-Pad1)"  # wire end on a wire body
    assert _pins(_nets("hierarchy"), "/Amp2/OUT") == {("R4", "1"), ("R101", "1")}  # sheet pin on a wire body


def test_no_connect_names_and_excluded_parts() -> None:
    nets = _nets("wiring")
    flagged = nets.pin_net("R19", "1")
    assert flagged.name == "unconnected-(R19-Pad1)" and flagged.nodes[0].pin_type == "passive+no_connect"
    assert _pins(nets, "unconnected-(R20-Pad1)") == {("R20", "1"), ("R21", "1")}
    assert not nets.has_reference("R22")  # on_board no
    assert _pins(nets, "Net-(R23-Pad1)") == {("R23", "1"), ("R24", "1")}  # DNP and BOM-excluded stay
    assert nets.pin_net("U1", "1").nodes[0].pin_type == "no_connect"
    assert nets.pin_net("R26", "1").name == "unconnected-(R26-Pad1)"


def test_driver_priorities() -> None:
    nets = _nets("power")
    assert _pins(nets, "GLOBAL_WINS") == {("R3", "1")}
    assert _pins(nets, "VPOWER2") == {("R4", "1")}
    assert _pins(nets, "/ALPHA") == {("R5", "1")}
    assert _pins(nets, "GLOBAL_X") == {("R6", "1")}
    assert _pins(nets, "SHARED") == {("R7", "1"), ("R8", "1")}
    assert _pins(nets, "GLOB_A") == {("R9", "1"), ("R10", "1")}
    assert _pins(nets, "VDDX") == {("R11", "1"), ("U1", "2")}
    assert _pins(nets, "/RX{slash}TX") == {("R12", "1")}


def test_repeated_sheets_get_their_own_references_and_paths() -> None:
    nets = _nets("hierarchy")
    assert _pins(nets, "/Amp1/IN") == {("R1", "1"), ("R2", "1")}
    assert _pins(nets, "/AMP_OUT") == {("R3", "1")}
    assert _pins(nets, "/Amp1/AUX") == {("R5", "1"), ("R100", "1")}
    assert _pins(nets, "/Amp2/AUX") == {("R6", "1")}
    assert _pins(nets, "/Amp1/Leaf/LEAF_NET") == {("R9", "1"), ("R11", "1")}
    assert _pins(nets, "/Amp2/Leaf/LEAF_NET") == {("R10", "1"), ("R12", "1")}
    assert _pins(nets, "GND") == {("R5", "2"), ("R6", "2"), ("R11", "2"), ("R12", "2"), ("R102", "2")}


def test_units_body_styles_and_alternates() -> None:
    nets = _nets("units")
    assert [n.name for n in nets.pin_nets("U1", "8")] == ["/RAIL_A", "/RAIL_B"]
    assert _pins(nets, "Net-(U1A-A)") == {("U1", "1"), ("R1", "1")}
    assert _pins(nets, "/DEMORGAN_A") == {("U2", "1")}
    assert _pins(nets, "/FROM_LIB_NAME") == {("R3", "1")}
    pa0 = nets.pin_net("U3", "1")
    assert pa0.name == "Net-(U3-PA0)"
    assert {(n.reference, n.pin_name, n.pin_type) for n in pa0.nodes} == {("U3", "UART_TX", "output"), ("R4", "", "passive")}


def test_buses_stay_apart_from_nets() -> None:
    nets = _nets("bus")
    assert _pins(nets, "D0") == {("R1", "1"), ("R11", "1")}
    assert _pins(nets, "D3") == {("R4", "1")}
    assert nets.pin_net("R20", "1").name == "unconnected-(R20-Pad1)"


def test_nets_meet_through_buses_across_sheets() -> None:
    nets = _nets("bus_hierarchy")
    assert _pins(nets, "/X0") == {("R00", "1"), ("U0_1", "1")}  # root vector label names the member
    assert _pins(nets, "/Port2/D0") == {("U0_2", "1")}  # no root label: the sub-sheet's name
    assert _pins(nets, "/I2C.SDA") == {("R02", "1"), ("R12", "1"), ("U2_1", "1"), ("U2_2", "1")}
    assert _pins(nets, "G0") == {("R40", "1"), ("R42", "1")}  # a global bus makes its members global
