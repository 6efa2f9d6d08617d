"""Which items touch on one sheet file: geometry only, no names.

Every instance of a sheet file has the same geometry, so this is computed once per file (and per
assignment of units, which can differ between instances) and shared; naming, which does differ
per instance, happens in `connectivity`. The rules here (junction cuts, what may land on a wire's
body, what never connects) are listed in the `connectivity` module docstring and docs/KICAD.md.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from cbledger.kicad.geometry import near_segment, pin_position, strictly_inside
from cbledger.kicad.model import LibPin, Point, SheetFile
from cbledger.kicad.naming import pin_type

# Item kinds in a sheet's connection map.
_WIRE, _BUS, _JUNCTION, _NC, _LABEL, _SHEET_PIN, _PIN, _ENTRY = range(8)


@dataclass(slots=True)
class PinRef:
    symbol: int  # index in SheetFile.symbols
    pin: LibPin
    position: Point
    nc_type: bool


@dataclass(slots=True)
class Group:
    """A connected group of items on one sheet file (shared by every instance of the file)."""

    order: int
    pins: list[PinRef] = field(default_factory=list)
    labels: list[int] = field(default_factory=list)
    sheet_pins: list[tuple[int, int]] = field(default_factory=list)
    no_connect_flag: bool = False
    bus: bool = False


class SheetGraph:
    """Connectivity of one sheet file for one assignment of units, computed once per file."""

    def __init__(self, sheet: SheetFile, units: tuple[int, ...]) -> None:
        self.sheet = sheet
        self.groups = self._build(sheet, units)

    @staticmethod
    def _build(sheet: SheetFile, units: tuple[int, ...]) -> list[Group]:
        wires = [[w.start, w.end] for w in sheet.wires]
        buses = [[b.start, b.end] for b in sheet.buses]
        cuts = {j.position for j in sheet.junctions}
        for entry in sheet.bus_entries:
            cuts.add(entry.position)
            cuts.add(entry.end)
        for cut in sorted(cuts):
            for segment in wires:
                if strictly_inside(segment[0], segment[1], cut):
                    segment[1] = cut
            for segment in buses:
                if strictly_inside(segment[0], segment[1], cut):
                    segment[1] = cut

        kinds: list[int] = []
        payload: list[object] = []
        at_point: dict[Point, list[int]] = defaultdict(list)

        def add(kind: int, data: object, *points: Point) -> int:
            index = len(kinds)
            kinds.append(kind)
            payload.append(data)
            for point in points:
                at_point[point].append(index)
            return index

        # Items enter in KiCad's own order (by item type, then file order) because the first
        # subgraph in that order is the one that absorbs same-named neighbours, and its flags
        # are the ones the netlist reports.
        for junction in sheet.junctions:
            add(_JUNCTION, None, junction.position)
        for flag in sheet.no_connects:
            add(_NC, None, flag.position)
        for i, entry in enumerate(sheet.bus_entries):
            add(_ENTRY, i, entry.position, entry.end)
        wire_items = [add(_WIRE, i, a, b) for i, (a, b) in enumerate(wires)]
        bus_items = [add(_BUS, i, a, b) for i, (a, b) in enumerate(buses)]
        label_items = []
        for kind in ("local", "global", "hierarchical"):
            label_items += [add(_LABEL, i, label.position) for i, label in enumerate(sheet.labels) if label.kind == kind]
        for s, symbol in enumerate(sheet.symbols):
            lib = sheet.lib_symbols.get(symbol.lib_symbol_key)
            if lib is None:
                continue
            for lib_pin in lib.pins_for(units[s], symbol.body_style):
                position = pin_position(symbol.position, lib_pin.position, symbol.rotation, symbol.mirror)
                nc_type = pin_type(lib_pin, symbol.pin_alternates.get(lib_pin.number)) == "no_connect"
                ref = PinRef(s, lib_pin, position, nc_type)
                if nc_type:
                    add(_PIN, ref)  # touches nothing
                else:
                    add(_PIN, ref, position)
        sheet_pin_items = []
        for s, sh in enumerate(sheet.sheets):
            for k, pin in enumerate(sh.pins):
                sheet_pin_items.append(add(_SHEET_PIN, (s, k), pin.position))

        parent = list(range(len(kinds)))

        def find(i: int) -> int:
            while parent[i] != i:
                parent[i] = parent[parent[i]]
                i = parent[i]
            return i

        def union(a: int, b: int) -> None:
            ra, rb = find(a), find(b)
            if ra != rb:
                if ra < rb:
                    parent[rb] = ra
                else:
                    parent[ra] = rb

        # Labels and sheet pins also attach to the inside of every wire (or, first, bus) under
        # them, unless a pin, label, sheet pin or no-connect flag sits exactly on them (KiCad's
        # dangling-end test); a label where two wires cross or overlap joins both.
        blocking = {_PIN, _LABEL, _SHEET_PIN, _NC}
        wire_index = _SegmentIndex(wires, wire_items)
        bus_index = _SegmentIndex(buses, bus_items)
        for item in (*label_items, *sheet_pin_items):
            position = sheet.labels[payload[item]].position if kinds[item] == _LABEL else _sheet_pin_position(sheet, payload[item])
            if any(other != item and kinds[other] in blocking for other in at_point.get(position, ())):
                continue
            targets = bus_index.hits(position) or wire_index.hits(position)
            for target in targets:
                union(item, target)

        for items in at_point.values():
            if len(items) < 2:
                continue
            has_bus = any(kinds[i] == _BUS for i in items)
            has_wire = any(kinds[i] == _WIRE for i in items)
            bus_side = [i for i in items if kinds[i] == _BUS]
            net_side = [i for i in items if kinds[i] in (_WIRE, _PIN, _NC, _ENTRY)]
            for i in items:
                if kinds[i] in (_LABEL, _SHEET_PIN, _JUNCTION):
                    (bus_side if has_bus and not has_wire else net_side).append(i)
            for side in (bus_side, net_side):
                for other in side[1:]:
                    union(side[0], other)

        groups: dict[int, Group] = {}
        for i, kind in enumerate(kinds):
            root = find(i)
            group = groups.get(root)
            if group is None:
                group = groups[root] = Group(order=root)
            data = payload[i]
            if kind == _PIN:
                group.pins.append(data)  # type: ignore[arg-type]
            elif kind == _LABEL:
                group.labels.append(data)  # type: ignore[arg-type]
            elif kind == _SHEET_PIN:
                group.sheet_pins.append(data)  # type: ignore[arg-type]
            elif kind == _NC:
                group.no_connect_flag = True
            elif kind == _BUS:
                group.bus = True
        return sorted(groups.values(), key=lambda g: g.order)


def _sheet_pin_position(sheet: SheetFile, key: object) -> Point:
    s, k = key  # type: ignore[misc]
    return sheet.sheets[s].pins[k].position


class _SegmentIndex:
    """Segments bucketed by their fixed coordinate, so finding the wires under a label does not
    scan every wire: axis-parallel segments (nearly all of them) are looked up by x or y, within
    KiCad's 1 IU tolerance; any other segment is tested directly."""

    def __init__(self, segments: list[list[Point]], items: list[int]) -> None:
        self.vertical: dict[int, list[tuple[Point, Point, int]]] = defaultdict(list)
        self.horizontal: dict[int, list[tuple[Point, Point, int]]] = defaultdict(list)
        self.other: list[tuple[Point, Point, int]] = []
        for (a, b), item in zip(segments, items):
            if a[0] == b[0]:
                self.vertical[a[0]].append((a, b, item))
            elif a[1] == b[1]:
                self.horizontal[a[1]].append((a, b, item))
            else:
                self.other.append((a, b, item))

    def hits(self, point: Point) -> list[int]:
        x, y = point
        found = []
        for offset in (-1, 0, 1):
            for a, b, item in self.vertical.get(x + offset, ()):
                if near_segment(a, b, point):
                    found.append(item)
            for a, b, item in self.horizontal.get(y + offset, ()):
                if near_segment(a, b, point):
                    found.append(item)
        found.extend(item for a, b, item in self.other if near_segment(a, b, point))
        return sorted(set(found))
