"""The read-only schematic model: what is read, from which spelling, and how failures read."""

from __future__ import annotations

from pathlib import Path

import pytest
import sexpdata

from cbledger.errors import UserError
from cbledger.kicad import load_schematic
from cbledger.kicad.hierarchy import find_root_schematics, symbol_reference
from cbledger.kicad.reader import parse_sheet_text, read_sheet_file
from cbledger.kicad.sexpr import PARSE_CACHE, _loads
from cbledger.kicad.symbols import find_symbol, list_symbols

DATA = Path(__file__).parent / "data" / "kicad"

# A KiCad 6 file (format 20211123): unquoted uuids, a bare `hide` in a pin, "Sheet name"/"Sheet
# file" properties, references in the root `symbol_instances` block, `(convert 1)`, bare flags.
KICAD6 = """(kicad_sch (version 20211123) (generator eeschema)
  (uuid 5b0c1a4e-0000-4000-8000-000000000001)
  (paper "A4")
  (lib_symbols
    (symbol "Device:R" (pin_numbers hide) (in_bom yes) (on_board yes)
      (property "Reference" "R" (id 0) (at 0 0 0))
      (property "Value" "R" (id 1) (at 0 0 0))
      (symbol "R_1_1"
        (pin passive line (at 0 3.81 270) (length 1.27) hide
          (name "~" (effects (font (size 1.27 1.27))))
          (number "1" (effects (font (size 1.27 1.27)))))
        (pin passive line (at 0 -3.81 90) (length 1.27)
          (name "~" (effects (font (size 1.27 1.27))))
          (number "2" (effects (font (size 1.27 1.27))))))))
  (wire (pts (xy 50.8 46.99) (xy 50.8 40.64)) (stroke (width 0) (type default) (color 0 0 0 0)) (uuid 5b0c1a4e-0000-4000-8000-000000000002))
  (label "OUT" (at 50.8 40.64 0) (effects (font (size 1.27 1.27)) (justify left bottom)) (uuid 5b0c1a4e-0000-4000-8000-000000000003))
  (polyline (pts (xy 10 10) (xy 20 20)) (stroke (width 0) (type default)))
  (future_thing (whatever 1 2 3))
  (symbol (lib_id "Device:R") (at 50.8 50.8 0) (unit 1) (convert 1) (in_bom yes) (on_board yes) (fields_autoplaced)
    (uuid 5b0c1a4e-0000-4000-8000-000000000004)
    (property "Reference" "R?" (id 0) (at 0 0 0))
    (property "Value" "10k" (id 1) (at 0 0 0))
    (property "Footprint" "Resistor_SMD:R_0603_1608Metric" (id 2) (at 0 0 0))
    (pin "1" (uuid 5b0c1a4e-0000-4000-8000-000000000005))
    (pin "2" (uuid 5b0c1a4e-0000-4000-8000-000000000006)))
  (sheet (at 100 40) (size 20 20) (fields_autoplaced)
    (uuid 5b0c1a4e-0000-4000-8000-000000000007)
    (property "Sheet name" "Child" (id 0) (at 100 39 0))
    (property "Sheet file" "child.kicad_sch" (id 1) (at 100 61 0))
    (pin "IN" input (at 100 45 180) (effects (font (size 1.27 1.27)) (justify left))))
  (sheet_instances (path "/" (page "1")) (path "/5b0c1a4e-0000-4000-8000-000000000007" (page "2")))
  (symbol_instances
    (path "/5b0c1a4e-0000-4000-8000-000000000004" (reference "R7") (unit 1) (value "10k") (footprint "x"))))
"""

CHILD6 = """(kicad_sch (version 20211123) (generator eeschema)
  (uuid 5b0c1a4e-0000-4000-8000-0000000000c1)
  (paper "A4")
  (lib_symbols)
  (hierarchical_label "IN" (shape input) (at 30 30 180) (effects (font (size 1.27 1.27))) (uuid 5b0c1a4e-0000-4000-8000-0000000000c2)))
"""


def test_kicad9_file_reads_symbols_units_flags_and_instances() -> None:
    design = load_schematic(DATA / "units" / "units.kicad_sch")
    sheet = design.files[design.root]
    assert sheet.version == 20250114
    u1 = [s for s in sheet.symbols if s.reference == "U1"]
    assert [s.unit for s in u1] == [1, 2]
    u2 = next(s for s in sheet.symbols if s.reference == "U2")
    assert u2.body_style == 2
    r3 = next(s for s in sheet.symbols if s.reference == "R3")
    assert (r3.lib_id, r3.lib_name, r3.lib_symbol_key) == ("Device:R", "R_1", "R_1")
    u3 = next(s for s in sheet.symbols if s.reference == "U3")
    assert u3.pin_alternates == {"1": "UART_TX"}
    dual = sheet.lib_symbols["Test:DUAL"]
    assert dual.unit_count == 2
    assert sorted(p.number for p in dual.pins_for(1, 1)) == ["1", "2", "8"]
    assert sorted(p.number for p in dual.pins_for(2, 1)) == ["3", "4", "8"]
    assert sorted(p.number for p in dual.pins_for(1, 2)) == ["1", "2"]
    assert [p.position for p in dual.pins_for(1, 2) if p.number == "1"] == [(-76200, -25400)]


def test_flags_power_symbols_and_items_of_the_wiring_sheet() -> None:
    sheet = load_schematic(DATA / "wiring" / "wiring.kicad_sch").files["wiring.kicad_sch"]
    by_ref = {s.reference: s for s in sheet.symbols}
    assert not by_ref["R22"].on_board and by_ref["R22"].in_bom
    assert by_ref["R23"].dnp
    assert not by_ref["R24"].in_bom
    assert sheet.lib_symbols["power:PWR_FLAG"].power
    assert not sheet.lib_symbols["Device:R"].power
    assert len(sheet.junctions) == 2 and len(sheet.no_connects) == 2
    assert {label.text for label in sheet.labels} >= {"T_FAR", "ON_BODY", "ON_PIN"}
    assert sheet.lib_symbols["Test:NC_PART"].pins[0].electrical_type == "no_connect"


def test_buses_and_bus_entries_are_recognised() -> None:
    sheet = load_schematic(DATA / "bus" / "bus.kicad_sch").files["bus.kicad_sch"]
    assert len(sheet.buses) == 1
    assert len(sheet.bus_entries) == 5
    assert sheet.bus_entries[0].end == (sheet.bus_entries[0].position[0] + 25400, sheet.bus_entries[0].position[1] + 25400)
    assert any(label.text == "D[0..3]" for label in sheet.labels)


def test_hierarchy_instances_paths_and_per_instance_references() -> None:
    design = load_schematic(DATA / "hierarchy" / "hierarchy.kicad_sch")
    assert sorted(design.files) == ["amp.kicad_sch", "hierarchy.kicad_sch", "leaf.kicad_sch"]
    paths = [inst.human_path for inst in design.instances]
    assert paths == ["/", "/Amp1/", "/Amp1/Leaf/", "/Amp2/", "/Amp2/Leaf/"]
    assert [inst.page for inst in design.instances] == ["1", "2", "4", "3", "4"]
    amp = design.files["amp.kicad_sch"]
    r1 = amp.symbols[0]
    refs = {inst.human_path: symbol_reference(design, inst, r1)[0] for inst in design.instances if inst.file == "amp.kicad_sch"}
    assert refs == {"/Amp1/": "R1", "/Amp2/": "R2"}
    root = design.files["hierarchy.kicad_sch"]
    assert [(s.name, s.file, [p.name for p in s.pins]) for s in root.sheets] == [
        ("Amp1", "amp.kicad_sch", ["IN", "OUT", "AUX"]),
        ("Amp2", "amp.kicad_sch", ["IN", "OUT", "AUX"]),
    ]
    assert [p.shape for p in root.sheets[0].pins] == ["input", "output", "input"]
    records = list_symbols(design)
    assert [r.reference for r in records if r.sheet == "/Amp2/Leaf/"] == ["R12"]
    assert find_symbol(design, "R101").sheet == "/"


def test_kicad6_spellings(tmp_path: Path) -> None:
    (tmp_path / "root.kicad_sch").write_text(KICAD6)
    (tmp_path / "child.kicad_sch").write_text(CHILD6)
    design = load_schematic(tmp_path / "root.kicad_sch")
    root = design.files["root.kicad_sch"]
    assert root.uuid == "5b0c1a4e-0000-4000-8000-000000000001"
    symbol = root.symbols[0]
    assert (symbol.reference, symbol.value, symbol.footprint, symbol.body_style) == ("R?", "10k", "Resistor_SMD:R_0603_1608Metric", 1)
    assert symbol_reference(design, design.instances[0], symbol) == ("R7", 1)
    assert root.lib_symbols["Device:R"].pins[0].hidden and not root.lib_symbols["Device:R"].pins[1].hidden
    assert root.sheets[0].name == "Child" and root.sheets[0].file == "child.kicad_sch"
    assert [inst.human_path for inst in design.instances] == ["/", "/Child/"]
    assert design.files["child.kicad_sch"].labels[0].kind == "hierarchical"
    assert len(root.wires) == 1 and len(root.labels) == 1  # polyline and unknown forms ignored


def test_missing_and_broken_files_name_the_file_and_line(tmp_path: Path) -> None:
    with pytest.raises(UserError, match=r"nope\.kicad_sch: no such file"):
        load_schematic(tmp_path / "nope.kicad_sch")
    text = (DATA / "power" / "power.kicad_sch").read_text()
    lines = text.split("\n")
    cut = next(i for i, line in enumerate(lines) if line.strip() == "(wire")
    broken = tmp_path / "broken.kicad_sch"
    broken.write_text("\n".join(lines[:cut] + lines[cut + 1 :]))
    with pytest.raises(UserError, match=rf"broken\.kicad_sch:{cut + 1}: not a valid s-expression"):
        load_schematic(broken)
    (tmp_path / "other.kicad_sch").write_text("(kicad_pcb (version 1))")
    with pytest.raises(UserError, match=r"other\.kicad_sch:1: expected a \(kicad_sch \.\.\.\) file"):
        load_schematic(tmp_path / "other.kicad_sch")
    (tmp_path / "empty.kicad_sch").write_text("")
    with pytest.raises(UserError, match="empty file"):
        load_schematic(tmp_path / "empty.kicad_sch")
    (tmp_path / "binary.kicad_sch").write_bytes(b"(kicad_sch\n\xff\xfe)")
    with pytest.raises(UserError, match=r"binary\.kicad_sch:2: not UTF-8"):
        load_schematic(tmp_path / "binary.kicad_sch")


def test_missing_or_recursive_sheet_files_are_user_errors(tmp_path: Path) -> None:
    (tmp_path / "root.kicad_sch").write_text(KICAD6)
    with pytest.raises(UserError, match=r"sheet 'Child' refers to 'child.kicad_sch', which does not exist"):
        load_schematic(tmp_path / "root.kicad_sch")
    (tmp_path / "child.kicad_sch").write_text(KICAD6.replace("5b0c1a4e-0000-4000-8000-000000000001", "5b0c1a4e-0000-4000-8000-0000000000ff"))
    with pytest.raises(UserError, match="one of its own ancestors"):
        load_schematic(tmp_path / "root.kicad_sch")


def test_fast_atoms_parse_exactly_like_stock_sexpdata() -> None:
    for path in sorted(DATA.glob("*/*.kicad_sch")):
        text = path.read_text()
        assert _loads(text) == sexpdata.loads(text, nil=None, true=None), path
    tricky = '(a 1 -2 3.5 -0.25 1e3 .5 -.5 + - -inf 12abc 0x10 "1" (b "q\\"uote"))'
    assert _loads(tricky) == sexpdata.loads(tricky, nil=None, true=None)
    # The one documented difference: a bare word that only float() reads as a number.
    assert _loads("(a inf nan)") == [sexpdata.Symbol("a"), sexpdata.Symbol("inf"), sexpdata.Symbol("nan")]


def test_fast_atoms_on_real_boards(shared_real: Path) -> None:
    for path in sorted((shared_real / "fixtures").glob("*/tree/**/*.kicad_sch")):
        text = path.read_text()
        assert _loads(text) == sexpdata.loads(text, nil=None, true=None), path


def test_parse_cache_is_keyed_by_content(tmp_path: Path) -> None:
    path = tmp_path / "p.kicad_sch"
    text = (DATA / "power" / "power.kicad_sch").read_text()
    path.write_text(text)
    PARSE_CACHE.clear()
    first = read_sheet_file(path)
    assert read_sheet_file(path) is first
    path.write_text(text.replace('"GLOBAL_WINS"', '"GLOBAL_WON"'))
    second = read_sheet_file(path)
    assert second is not first
    assert any(label.text == "GLOBAL_WON" for label in second.labels)


def test_root_schematics_of_a_tree(tmp_path: Path) -> None:
    assert find_root_schematics(DATA / "hierarchy") == [DATA / "hierarchy" / "hierarchy.kicad_sch"]
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "root.kicad_sch").write_text(KICAD6)
    (tmp_path / "a" / "child.kicad_sch").write_text(CHILD6)
    assert find_root_schematics(tmp_path) == [tmp_path / "a" / "root.kicad_sch"]
    (tmp_path / "a" / "root.kicad_pro").write_text("{}")
    (tmp_path / "a" / "child.kicad_pro").write_text("{}")
    assert find_root_schematics(tmp_path) == [tmp_path / "a" / "child.kicad_sch", tmp_path / "a" / "root.kicad_sch"]


def test_a_placed_symbol_without_lib_id_is_refused() -> None:
    with pytest.raises(UserError, match="has no lib_id"):
        parse_sheet_text('(kicad_sch (version 20250114) (symbol (at 0 0 0) (uuid "u1")))', "x.kicad_sch")
