"""The symbols of a design as a flat list, one entry per placed unit per sheet instance.

A sub-sheet used twice places its symbols twice under different references, and a multi-unit
part appears once per unit; assertions such as `symbol_present` ask about references, so the list
resolves each placement to the reference it carries on its sheet instance.
"""

from __future__ import annotations

import msgspec

from cbledger.kicad.hierarchy import symbol_reference
from cbledger.kicad.model import Schematic
from cbledger.kicad.netlist import natural_key


class SymbolRecord(msgspec.Struct, frozen=True):
    reference: str
    value: str
    footprint: str
    lib_id: str
    unit: int
    dnp: bool
    in_bom: bool
    on_board: bool
    power: bool
    sheet: str  # KiCad's human-readable sheet path, "/" for the root
    uuid: str


def list_symbols(schematic: Schematic) -> tuple[SymbolRecord, ...]:
    records = []
    for instance in schematic.instances:
        sheet = schematic.file_of(instance)
        for symbol in sheet.symbols:
            reference, unit = symbol_reference(schematic, instance, symbol)
            lib = sheet.lib_symbols.get(symbol.lib_symbol_key)
            records.append(
                SymbolRecord(
                    reference=reference,
                    value=symbol.value,
                    footprint=symbol.footprint,
                    lib_id=symbol.lib_id,
                    unit=unit,
                    dnp=symbol.dnp,
                    in_bom=symbol.in_bom,
                    on_board=symbol.on_board,
                    power=bool(lib and lib.power),
                    sheet=instance.human_path,
                    uuid=symbol.uuid,
                )
            )
    return tuple(sorted(records, key=lambda r: (natural_key(r.reference), r.unit, r.sheet)))


def find_symbol(schematic: Schematic, reference: str) -> SymbolRecord | None:
    """The first placement of a reference (units of one part share value and footprint)."""
    return next((r for r in list_symbols(schematic) if r.reference == reference), None)
