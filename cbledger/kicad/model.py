"""The read-only schematic model: what a `.kicad_sch` file says, and nothing computed from it.

Coordinates are integers in KiCad's schematic internal unit (1 IU = 100 nm, so 1 mm = 10000),
exactly as KiCad holds them after loading, so geometry compares points with `==`. Library pin
positions stay in library coordinates (Y up); the one place that maps them into the sheet
(Y down) is `geometry.pin_position`.

Only what grading can observe is kept: graphics, fonts and fills are dropped at parse time.
"""

from __future__ import annotations

from typing import Literal

import msgspec

Point = tuple[int, int]

LabelKind = Literal["local", "global", "hierarchical"]


class LibPin(msgspec.Struct, frozen=True):
    number: str
    name: str
    electrical_type: str
    position: Point
    rotation: int
    length: int
    hidden: bool
    unit: int  # 0: common to every unit
    body_style: int  # 0: common to every body style
    alternates: tuple[tuple[str, str], ...] = ()  # (name, electrical type)

    @property
    def shown_name(self) -> str:
        """KiCad writes an empty pin name as `~`."""
        return "" if self.name == "~" else self.name


class LibSymbol(msgspec.Struct, frozen=True):
    name: str  # the key in lib_symbols: a lib_id, or the symbol's lib_name
    power: bool
    reference_prefix: str
    value: str
    pins: tuple[LibPin, ...]
    unit_count: int
    extends: str = ""
    in_bom: bool = True
    on_board: bool = True

    def pins_for(self, unit: int, body_style: int) -> tuple[LibPin, ...]:
        return tuple(
            p
            for p in self.pins
            if (p.unit == 0 or p.unit == unit) and (p.body_style == 0 or p.body_style == body_style)
        )


class SymbolInstance(msgspec.Struct, frozen=True):
    """One `(path ...)` of a symbol's `instances` block (or of a KiCad 6 `symbol_instances`)."""

    path: str
    reference: str
    unit: int
    project: str = ""


class Symbol(msgspec.Struct, frozen=True):
    lib_id: str
    lib_name: str
    uuid: str
    position: Point
    rotation: int  # 0, 90, 180 or 270, counter-clockwise as seen on the sheet
    mirror: str  # "", "x" or "y"
    unit: int
    body_style: int
    in_bom: bool
    on_board: bool
    dnp: bool
    properties: dict[str, str]
    instances: tuple[SymbolInstance, ...]
    pin_alternates: dict[str, str]  # pin number -> selected alternate function

    @property
    def lib_symbol_key(self) -> str:
        """The `lib_symbols` entry this symbol draws from (KiCad prefers `lib_name`)."""
        return self.lib_name or self.lib_id

    @property
    def reference(self) -> str:
        return self.properties.get("Reference", "")

    @property
    def value(self) -> str:
        return self.properties.get("Value", "")

    @property
    def footprint(self) -> str:
        return self.properties.get("Footprint", "")


class Wire(msgspec.Struct, frozen=True):
    start: Point
    end: Point


class BusEntry(msgspec.Struct, frozen=True):
    position: Point
    size: Point

    @property
    def end(self) -> Point:
        return (self.position[0] + self.size[0], self.position[1] + self.size[1])


class Junction(msgspec.Struct, frozen=True):
    position: Point


class NoConnect(msgspec.Struct, frozen=True):
    position: Point


class Label(msgspec.Struct, frozen=True):
    kind: LabelKind
    text: str
    position: Point
    rotation: int
    shape: str = ""


class SheetPin(msgspec.Struct, frozen=True):
    name: str
    shape: str
    position: Point


class SheetInstanceRef(msgspec.Struct, frozen=True):
    path: str
    page: str
    project: str = ""


class Sheet(msgspec.Struct, frozen=True):
    """A sheet symbol: a box on its parent that pulls in another schematic file."""

    uuid: str
    name: str
    file: str
    position: Point
    size: Point
    pins: tuple[SheetPin, ...]
    instances: tuple[SheetInstanceRef, ...]


class SheetFile(msgspec.Struct, frozen=True):
    """One `.kicad_sch` file as written, before any hierarchy is resolved."""

    path: str
    version: int
    uuid: str
    lib_symbols: dict[str, LibSymbol]
    symbols: tuple[Symbol, ...]
    wires: tuple[Wire, ...]
    buses: tuple[Wire, ...]
    bus_entries: tuple[BusEntry, ...]  # bus-to-wire; KiCad saves bus-to-bus entries as buses
    junctions: tuple[Junction, ...]
    no_connects: tuple[NoConnect, ...]
    labels: tuple[Label, ...]
    sheets: tuple[Sheet, ...]
    bus_aliases: tuple[tuple[str, tuple[str, ...]], ...]
    legacy_symbol_instances: tuple[SymbolInstance, ...]  # KiCad 6 root `symbol_instances`


class SheetInstance(msgspec.Struct, frozen=True):
    """One place a file appears in the hierarchy; a file used twice has two of these."""

    uuid_path: tuple[str, ...]  # sheet-symbol uuids from the root, the root itself excluded
    names: tuple[str, ...]  # sheet names along the same path
    file: str  # key into Schematic.files
    page: str = ""

    @property
    def human_path(self) -> str:
        """KiCad's prefix for local net names: `/` on the root, `/a/b/` below it."""
        return "/" + "".join(f"{name}/" for name in self.names)

    @property
    def depth(self) -> int:
        return len(self.uuid_path)


class Schematic(msgspec.Struct, frozen=True):
    """A whole design: the root file, every file it pulls in, and every sheet instance."""

    root: str  # key of the root file in `files`
    root_uuid: str
    files: dict[str, SheetFile]
    instances: tuple[SheetInstance, ...]  # depth-first, the root first

    def file_of(self, instance: SheetInstance) -> SheetFile:
        return self.files[instance.file]

    def instance_key(self, instance: SheetInstance) -> str:
        """The full KIID path KiCad 7+ writes in `instances` blocks: `/<root>/<sheet>/...`."""
        return "/" + "/".join((self.root_uuid, *instance.uuid_path))
