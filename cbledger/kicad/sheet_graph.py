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
        wires, buses = _cut_segments(sheet)
        items = _Items()
        wire_items, bus_items, attaching = _add_items(items, sheet, units, wires, buses)
        joined = _UnionFind(len(items.kinds))
        _attach_to_segment_bodies(items, joined, attaching, _SegmentIndex(wires, wire_items), _SegmentIndex(buses, bus_items))
        _join_at_points(items, joined)
        return _collect_groups(items, joined)


def _cut_segments(sheet: SheetFile) -> tuple[list[list[Point]], list[list[Point]]]:
    """Wires and buses as [start, end], each cut short at a junction or bus entry end lying
    strictly inside it (the part past the cut drops out of connectivity, as in kicad-cli)."""
    wires = [[w.start, w.end] for w in sheet.wires]
    buses = [[b.start, b.end] for b in sheet.buses]
    cuts = {j.position for j in sheet.junctions}
    for entry in sheet.bus_entries:
        cuts.add(entry.position)
        cuts.add(entry.end)
    for cut in sorted(cuts):
        for segment in (*wires, *buses):
            if strictly_inside(segment[0], segment[1], cut):
                segment[1] = cut
    return wires, buses


@dataclass(slots=True)
class _Items:
    """Every connectable item of one sheet: its kind, its payload, and which items sit at each
    connection point. An item's index is its place in KiCad's order."""

    kinds: list[int] = field(default_factory=list)
    payload: list[object] = field(default_factory=list)
    at_point: defaultdict[Point, list[int]] = field(default_factory=lambda: defaultdict(list))

    def add(self, kind: int, data: object, *points: Point) -> int:
        index = len(self.kinds)
        self.kinds.append(kind)
        self.payload.append(data)
        for point in points:
            self.at_point[point].append(index)
        return index


def _add_items(
    items: _Items, sheet: SheetFile, units: tuple[int, ...], wires: list[list[Point]], buses: list[list[Point]]
) -> tuple[list[int], list[int], list[tuple[int, Point]]]:
    """Adds every item in KiCad's own order (by item type, then file order), because the first
    subgraph in that order is the one that absorbs same-named neighbours, and its flags are the
    ones the netlist reports. Returns the wire items, the bus items, and the labels and sheet
    pins (with their positions) that may also attach to a wire's body."""
    for junction in sheet.junctions:
        items.add(_JUNCTION, None, junction.position)
    for flag in sheet.no_connects:
        items.add(_NC, None, flag.position)
    for i, entry in enumerate(sheet.bus_entries):
        items.add(_ENTRY, i, entry.position, entry.end)
    wire_items = [items.add(_WIRE, i, a, b) for i, (a, b) in enumerate(wires)]
    bus_items = [items.add(_BUS, i, a, b) for i, (a, b) in enumerate(buses)]
    attaching = []
    for kind in ("local", "global", "hierarchical"):
        for i, label in enumerate(sheet.labels):
            if label.kind == kind:
                attaching.append((items.add(_LABEL, i, label.position), label.position))
    _add_symbol_pins(items, sheet, units)
    for s, sh in enumerate(sheet.sheets):
        for k, pin in enumerate(sh.pins):
            attaching.append((items.add(_SHEET_PIN, (s, k), pin.position), pin.position))
    return wire_items, bus_items, attaching


def _add_symbol_pins(items: _Items, sheet: SheetFile, units: tuple[int, ...]) -> None:
    for s, symbol in enumerate(sheet.symbols):
        lib = sheet.lib_symbols.get(symbol.lib_symbol_key)
        if lib is None:
            continue
        for lib_pin in lib.pins_for(units[s], symbol.body_style):
            position = pin_position(symbol.position, lib_pin.position, symbol.rotation, symbol.mirror)
            nc_type = pin_type(lib_pin, symbol.pin_alternates.get(lib_pin.number)) == "no_connect"
            ref = PinRef(s, lib_pin, position, nc_type)
            if nc_type:
                items.add(_PIN, ref)  # touches nothing
            else:
                items.add(_PIN, ref, position)


class _UnionFind:
    """Connected items; the root of a set is its lowest index (its first item in KiCad's order)."""

    def __init__(self, size: int) -> None:
        self.parent = list(range(size))

    def find(self, i: int) -> int:
        parent = self.parent
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    def union(self, a: int, b: int) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra < rb:
            self.parent[rb] = ra
        elif rb < ra:
            self.parent[ra] = rb


_BLOCKING = {_PIN, _LABEL, _SHEET_PIN, _NC}


def _attach_to_segment_bodies(
    items: _Items, joined: _UnionFind, attaching: list[tuple[int, Point]], wires: _SegmentIndex, buses: _SegmentIndex
) -> None:
    """Labels and sheet pins also attach to the inside of every wire (or, first, bus) under
    them, unless a pin, label, sheet pin or no-connect flag sits exactly on them (KiCad's
    dangling-end test); a label where two wires cross or overlap joins both."""
    for item, position in attaching:
        if any(other != item and items.kinds[other] in _BLOCKING for other in items.at_point.get(position, ())):
            continue
        for target in buses.hits(position) or wires.hits(position):
            joined.union(item, target)


def _join_at_points(items: _Items, joined: _UnionFind) -> None:
    """Items at one point connect, except that wires and buses meet only through labels on the
    bus side: a label, sheet pin or junction at a point with a bus and no wire joins the bus."""
    kinds = items.kinds
    for at in items.at_point.values():
        if len(at) < 2:
            continue
        bus_side = [i for i in at if kinds[i] == _BUS]
        net_side = [i for i in at if kinds[i] in (_WIRE, _PIN, _NC, _ENTRY)]
        has_wire = any(kinds[i] == _WIRE for i in at)
        either = bus_side if bus_side and not has_wire else net_side
        either.extend(i for i in at if kinds[i] in (_LABEL, _SHEET_PIN, _JUNCTION))
        for side in (bus_side, net_side):
            for other in side[1:]:
                joined.union(side[0], other)


def _collect_groups(items: _Items, joined: _UnionFind) -> list[Group]:
    groups: dict[int, Group] = {}
    for i, kind in enumerate(items.kinds):
        root = joined.find(i)
        group = groups.get(root)
        if group is None:
            group = groups[root] = Group(order=root)
        data = items.payload[i]
        if kind == _PIN and isinstance(data, PinRef):
            group.pins.append(data)
        elif kind == _LABEL and isinstance(data, int):
            group.labels.append(data)
        elif kind == _SHEET_PIN and isinstance(data, tuple):
            group.sheet_pins.append(data)
        elif kind == _NC:
            group.no_connect_flag = True
        elif kind == _BUS:
            group.bus = True
    return sorted(groups.values(), key=lambda g: g.order)


class _SegmentIndex:
    """Segments bucketed by their fixed coordinate, so finding the wires under a label does not
    scan every wire: axis-parallel segments (nearly all of them) are looked up by x or y, within
    KiCad's 1 IU tolerance; any other segment is tested directly."""

    def __init__(self, segments: list[list[Point]], items: list[int]) -> None:
        self.vertical: dict[int, list[tuple[Point, Point, int]]] = defaultdict(list)
        self.horizontal: dict[int, list[tuple[Point, Point, int]]] = defaultdict(list)
        self.other: list[tuple[Point, Point, int]] = []
        for (a, b), item in zip(segments, items, strict=True):
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
