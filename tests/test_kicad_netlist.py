"""Net lookups, kicad-cli's netlist format, and the net-by-net comparison."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cbledger.errors import UserError
from cbledger.kicad import Net, Netlist, Node, compute_nets, load_schematic, name_matches
from cbledger.kicad.compare import compare_netlists
from cbledger.kicad.kicad_net import parse_kicad_netlist, read_kicad_netlist
from cbledger.kicad.netlist import natural_key

DATA = Path(__file__).parent / "data" / "kicad"


def _net(name: str, *pins: str, pin_name: str = "") -> Net:
    return Net(name, tuple(Node(p.split(".")[0], p.split(".")[1], pin_name) for p in pins))


def test_name_rule() -> None:
    assert name_matches("/DATA", "DATA")
    assert name_matches("DATA", "DATA")
    assert not name_matches("/sub/DATA", "DATA")
    assert name_matches("/sub/DATA", "/sub/DATA")
    assert not name_matches("/DATA", "/sub/DATA")
    assert name_matches("/DATA", "/DATA") and not name_matches("DATA", "/DATA")
    assert not name_matches("Net-(MK1-DATA)", "DATA")


def test_lookups_on_the_microphone_board(shared_real: Path) -> None:
    board = shared_real / "fixtures" / "antmicro-microphone-board"
    nets = compute_nets(load_schematic(board / "tree" / "hardware" / "microphone-board.kicad_sch"))
    assert nets.net_by_name("DATA").name == "/DATA"
    assert nets.net_by_name("/DATA").name == "/DATA"
    assert nets.net_by_name("PDM_DATA") is None
    assert nets.net_by_name("GND").name == "GND"
    assert nets.pin_net("R1", "2").name == "/DATA"
    assert nets.pin_net("MK1", "DATA").name == "Net-(MK1-DATA)"  # by pin name
    assert nets.pin_net("MK1", "1").name == "Net-(MK1-DATA)"  # by number
    assert nets.pin_net("MK1", "99") is None
    assert nets.pin_net("Q9", "1") is None
    assert nets.has_reference("J1") and not nets.has_reference("#PWR01")


def test_bare_name_reaches_global_and_root_local_but_not_sub_sheets() -> None:
    nets = Netlist((_net("/DATA", "R1.1"), _net("DATA", "R2.1"), _net("/sub/DATA", "R3.1")))
    assert [n.name for n in nets.nets_by_name("DATA")] == ["/DATA", "DATA"]
    assert nets.net_by_name("DATA").name == "DATA"  # the exact match wins
    assert [n.name for n in nets.nets_by_name("/sub/DATA")] == ["/sub/DATA"]


def test_pin_named_on_two_nets_is_ambiguous() -> None:
    nets = Netlist((_net("GND", "U1.3", pin_name="GND"), _net("unconnected-(U1-GND-Pad4)", "U1.4", pin_name="GND")))
    assert len(nets.pin_nets("U1", "GND")) == 2
    with pytest.raises(UserError, match="more than one net"):
        nets.pin_net("U1", "GND")
    assert nets.pin_net("U1", "3").name == "GND"


def test_natural_order() -> None:
    assert sorted(["R10", "R2", "C1", "R1"], key=natural_key) == ["C1", "R1", "R2", "R10"]


def test_kicad_netlist_reader(shared_real: Path) -> None:
    nets = read_kicad_netlist(shared_real / "fixtures" / "antmicro-microphone-board" / "baseline" / "netlist.kicad_net")
    assert len(nets.nets) == 7
    clk = nets.net_by_name("/CLK")
    assert {(n.reference, n.pin, n.pin_name, n.pin_type) for n in clk.nodes} == {
        ("D2", "1", "C", "passive"),
        ("J1", "3", "", "passive"),
        ("MK1", "4", "CLOCK", "input"),
    }


def test_kicad_netlist_reader_errors(tmp_path: Path) -> None:
    with pytest.raises(UserError, match=re.escape("no (nets ...) section")):
        parse_kicad_netlist('(export (version "E") (components))', "a.net")
    with pytest.raises(UserError, match=re.escape("expected a (export ...) file")):
        parse_kicad_netlist("(kicad_sch)", "b.net")
    with pytest.raises(UserError, match="net #1 has no name"):
        parse_kicad_netlist('(export (nets (net (code "1") (node (ref "R1") (pin "1")))))', "c.net")
    with pytest.raises(UserError, match="no such file"):
        read_kicad_netlist(tmp_path / "missing.net")


def test_compare_reports_each_kind_of_difference() -> None:
    kicad = Netlist((_net("A", "R1.1", "R2.1"), _net("B", "R3.1"), _net("C", "R4.1", "R5.1")))
    ours = Netlist((_net("A", "R1.1", "R2.1"), _net("B2", "R3.1"), _net("C", "R4.1"), _net("D", "R5.1")))
    result = compare_netlists(ours, kicad)
    kinds = sorted((d.kind, d.kicad, d.ours) for d in result.differences)
    assert kinds == [("extra", "", "C"), ("extra", "", "D"), ("missing", "C", ""), ("renamed", "B", "B2")]
    assert result.agreeing == 1 and result.same_pins == 2
    assert not result.partition_equal and not result.names_equal
    assert "1/4 nets agree" in result.summary()
    same = compare_netlists(kicad, kicad)
    assert same.differences == () and same.names_equal and same.agreement == 1.0


def test_compare_pairs_a_pin_listed_on_two_nets() -> None:
    kicad = Netlist((_net("/VA", "U1.8"), _net("/VB", "U1.8")))
    assert compare_netlists(Netlist((_net("/VB", "U1.8"), _net("/VA", "U1.8"))), kicad).differences == ()
    node_type = Netlist((Net("/VA", (Node("U1", "8", "", "power_in"),)), _net("/VB", "U1.8")))
    assert [d.kind for d in compare_netlists(node_type, kicad).differences] == ["node-detail"]


def test_notes_flag_what_is_not_modelled(tmp_path: Path) -> None:
    text = (DATA / "power" / "power.kicad_sch").read_text()
    assert compute_nets(load_schematic(DATA / "power" / "power.kicad_sch")).notes == ()
    odd = text.replace('(lib_id "Device:R")', '(lib_id "Device:GONE")', 1).replace('(label "ZETA"', '(label "V_${X}"', 1)
    odd = odd.replace("(lib_symbols", '(bus_alias "PAIR" (members "P" "N"))\n\t(lib_symbols', 1)
    (tmp_path / "odd.kicad_sch").write_text(odd)
    notes = compute_nets(load_schematic(tmp_path / "odd.kicad_sch")).notes
    assert len(notes) == 3
    assert "uses 'Device:GONE', absent from lib_symbols" in notes[0]
    assert "bus aliases (PAIR) are not expanded" in notes[1]
    assert "text variable" in notes[2]
