"""Doc drift between docs/BOM.md, docs/PINOUT.md and the schematic."""

from __future__ import annotations

from pathlib import Path

import pytest

from cbledger.kicad import compute_nets, load_schematic
from cbledger.kicad.drift import bom_drift, doc_drift, pinout_drift, split_references
from cbledger.kicad.markdown import cell_text, split_row, tables
from cbledger.kicad.symbols import list_symbols


@pytest.fixture(scope="module")
def microphone(shared_real: Path):
    design = load_schematic(shared_real / "fixtures" / "antmicro-microphone-board" / "tree" / "hardware" / "microphone-board.kicad_sch")
    return design, compute_nets(design), list_symbols(design)


BOM_OK = """# Bill of materials

| Refdes | Value | Footprint | MPN |
|:-------|------:|:---------:|-----|
| R1 | R_51R_0402 | R_0402_1005Metric | x |
| R2, R3 | `R_0R_0402` | antmicro-footprints:R_0402_1005Metric | |
| C1 | C_180p_0402 | - | |
| MK1 | **MK_SPH0644LM4H-1** | — | |
"""


def test_a_faithful_bom_has_no_drift(microphone) -> None:
    _, _, symbols = microphone
    assert bom_drift(BOM_OK, symbols) == []


def test_bom_mismatches_are_one_line_each(microphone) -> None:
    _, _, symbols = microphone
    doc = """Intro text | with a pipe but no table.

| Ref | Value | Footprint |
| --- | --- | --- |
| R1 | 51R | R_0402_1005Metric |
| R9 | 1k | |
| C1-C2 | C_180p_0402 | C_0603_1608Metric |
"""
    assert bom_drift(doc, symbols, "BOM.md") == [
        "BOM.md line 5: R1 value is '51R' in the doc but 'R_51R_0402' in the schematic",
        "BOM.md line 6: R9 is not in the schematic",
        "BOM.md line 7: C1 footprint is 'C_0603_1608Metric' in the doc but 'antmicro-footprints:C_0402_1005Metric' in the schematic",
        "BOM.md line 7: C2 value is 'C_180p_0402' in the doc but 'C_100n_50V_X8L_0402' in the schematic",
        "BOM.md line 7: C2 footprint is 'C_0603_1608Metric' in the doc but 'antmicro-footprints:C_0402_1005Metric' in the schematic",
    ]


def test_value_comparison_is_case_sensitive(microphone) -> None:
    _, _, symbols = microphone
    doc = "| Refdes | Value |\n|---|---|\n| R1 | r_51r_0402 |\n"
    assert bom_drift(doc, symbols) == ["BOM.md line 3: R1 value is 'r_51r_0402' in the doc but 'R_51R_0402' in the schematic"]


def test_tables_without_a_reference_column_are_not_bom_tables(microphone) -> None:
    _, _, symbols = microphone
    assert bom_drift("| Part | Value |\n|---|---|\n| R99 | 1k |\n", symbols) == []
    assert bom_drift("```\n| Refdes | Value |\n|---|---|\n| R99 | 1k |\n```\n", symbols) == []


PINOUT_OK = """# Pinout

| Net | Pins |
|-----|------|
| DATA | J1.5, R1.2, D4.1 |
| CLK | `MK1.CLOCK` J1:3 D2-1 |
| GND | MK1.3 |
| - | J1.99 |

| Ref | Pin | Net | Notes |
|-----|-----|-----|-------|
| J1 | 1 | VCC | power in |
| J1 | 2, 4 | GND | |
| MK1 | DATA | Net-(MK1-DATA) | |
"""


def test_a_faithful_pinout_has_no_drift(microphone) -> None:
    _, nets, symbols = microphone
    assert pinout_drift(PINOUT_OK, nets, symbols) == []


def test_pinout_mismatches(microphone) -> None:
    _, nets, symbols = microphone
    doc = """| Net | Pins |
|---|---|
| PDM_DATA | J1.5 |
| DATA | J1.3, R1.9, X7.1, garbage |
| /sub/DATA | R1.2 |

| Designator | Pin | Signal |
|---|---|---|
| J1 | 3 | DATA |
| R1 | 1 | NC |
| #PWR01 | 1 | GND |
"""
    assert pinout_drift(doc, nets, symbols, "PINOUT.md") == [
        "PINOUT.md line 3: net PDM_DATA does not exist in the schematic",
        "PINOUT.md line 4: J1.3 is on /CLK, not DATA",
        "PINOUT.md line 4: R1 has no pin 9",
        "PINOUT.md line 4: cannot read 'X7.1' as REF.PIN with a reference from the schematic",
        "PINOUT.md line 4: cannot read 'garbage' as REF.PIN with a reference from the schematic",
        "PINOUT.md line 5: net /sub/DATA does not exist in the schematic",
        "PINOUT.md line 9: J1.3 is on /CLK, not DATA",
        "PINOUT.md line 10: R1.1 is not unconnected: it is on Net-(MK1-DATA)",
        "PINOUT.md line 11: #PWR01 has no pins in the netlist (not on the board, or a power symbol)",
    ]


def test_no_connect_claim_on_a_lone_pin(shared_real: Path) -> None:
    design = load_schematic(shared_real / "fixtures" / "openlighting-dmxsun-baseboard" / "tree" / "hardware" / "baseboard_2slots" / "baseboard_2slots.kicad_sch")
    nets, symbols = compute_nets(design), list_symbols(design)
    doc = "| Ref | Pin | Net |\n|---|---|---|\n| U2 | 42 | NC |\n| U2 | 19 | n/c |\n| U2 | GND | GND |\n"
    assert pinout_drift(doc, nets, symbols) == ["PINOUT.md line 5: U2.GND is on unconnected-(U2-GND-Pad42), not GND"]


def test_doc_drift_reads_the_docs_folder(microphone, tmp_path: Path) -> None:
    design, _, _ = microphone
    assert doc_drift(design, tmp_path) == []  # no docs, no claims
    (tmp_path / "BOM.md").write_text(BOM_OK)
    (tmp_path / "PINOUT.md").write_text(PINOUT_OK.replace("| DATA | J1.5", "| DATA_RENAMED | J1.5"))
    assert doc_drift(design, tmp_path) == ["PINOUT.md line 5: net DATA_RENAMED does not exist in the schematic"]


def test_reference_lists_and_ranges() -> None:
    assert split_references("R1, R2") == ["R1", "R2"]
    assert split_references("R1 R2; C3") == ["R1", "R2", "C3"]
    assert split_references("R1-R4") == ["R1", "R2", "R3", "R4"]
    assert split_references("R1–R3") == ["R1", "R2", "R3"]
    assert split_references("R1 - R3") == ["R1", "R2", "R3"]
    assert split_references("`U1`") == ["U1"]
    assert split_references("—") == []
    assert split_references("R1-4") == ["R1", "R2", "R3", "R4"]
    assert split_references("R4-R1") == ["R4-R1"]  # a backwards range is not a range
    assert split_references("U1-PA0") == ["U1-PA0"]


def test_markdown_tables() -> None:
    doc = "a | b\n--|--\n1 | `x|y`\n2 | p \\| q\n\nnot a table\n| h |\n|:-:|\n| v |\n"
    found = tables(doc)
    assert [t.headers for t in found] == [("a", "b"), ("h",)]
    assert found[0].rows == (("1", "`x|y`"), ("2", "p | q"))
    assert found[0].lines == (3, 4)
    assert found[0].column("A") == 0 and found[0].column("missing") is None
    assert split_row("| a | b |") == ["a", "b"]
    assert cell_text("[**U1**](#u1)") == "U1"
