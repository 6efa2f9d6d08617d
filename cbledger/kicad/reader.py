"""Turns one `.kicad_sch` file (KiCad 6 to 9) into a `SheetFile`.

Forms this module does not know (graphics, images, text boxes, rule areas, netclass flags and
whatever a later KiCad adds) are skipped rather than rejected: a grader that refuses a file KiCad
loads would fail a correct edit. What it does read, it reads the way KiCad's own parser does,
including the older spellings (`convert` for the body style, a bare `hide` inside a pin,
`Sheet name`/`Sheet file`, unquoted uuids, the KiCad 6 root `symbol_instances` block).
"""

from __future__ import annotations

import itertools
from pathlib import Path

import msgspec

from cbledger.errors import UserError
from cbledger.kicad.model import (
    BusEntry,
    Junction,
    Label,
    LabelKind,
    LibPin,
    LibSymbol,
    NoConnect,
    Sheet,
    SheetFile,
    SheetInstanceRef,
    SheetPin,
    Symbol,
    SymbolInstance,
    Wire,
)
from cbledger.kicad.sexpr import (
    PARSE_CACHE,
    Node,
    at,
    child,
    child_int,
    child_text,
    children,
    decode,
    has_flag,
    head,
    parse_text,
    read_text,
    text_arg,
    to_iu,
    xy,
    yes_no,
)

_LABEL_KINDS: dict[str, LabelKind] = {"label": "local", "global_label": "global", "hierarchical_label": "hierarchical"}


def read_sheet_file(path: Path) -> SheetFile:
    """Reads and parses one schematic file; repeated reads of identical bytes are served cached."""
    return sheet_file_from_bytes(read_text(path), str(path))


def sheet_file_from_bytes(data: bytes, source: str) -> SheetFile:
    """Parses a schematic's bytes; `source` names it in messages and in `SheetFile.path`. The
    cache key holds both, so bytes read again under the same name (the same file of another
    grade's end state) are parsed once."""
    return PARSE_CACHE.get_or_build(f"kicad_sch:{source}", data, lambda: parse_sheet_text(decode(data, source), source))


def parse_sheet_text(text: str, source: str) -> SheetFile:
    tree = parse_text(text, source, expect="kicad_sch")
    version = child_int(tree, "version", 0)
    lib_symbols: dict[str, LibSymbol] = {}
    symbols: list[Symbol] = []
    wires: list[Wire] = []
    buses: list[Wire] = []
    entries: list[BusEntry] = []
    junctions: list[Junction] = []
    no_connects: list[NoConnect] = []
    labels: list[Label] = []
    sheets: list[Sheet] = []
    aliases: list[tuple[str, tuple[str, ...]]] = []
    legacy_instances: list[SymbolInstance] = []

    for node in tree[1:]:
        kind = head(node)
        if kind is None:
            continue
        if kind == "wire":
            wires.extend(_segments(node))
        elif kind == "bus":
            buses.extend(_segments(node))
        elif kind == "junction":
            junctions.append(Junction(xy(child(node, "at"))))
        elif kind == "no_connect":
            no_connects.append(NoConnect(xy(child(node, "at"))))
        elif kind in _LABEL_KINDS:
            position, rotation = at(node)
            labels.append(
                Label(
                    kind=_LABEL_KINDS[kind],
                    text=text_arg(node),
                    position=position,
                    rotation=rotation,
                    shape=child_text(node, "shape"),
                )
            )
        elif kind == "symbol":
            symbols.append(_placed_symbol(node, source))
        elif kind == "bus_entry":
            entries.append(BusEntry(xy(child(node, "at")), xy(child(node, "size"))))
        elif kind == "sheet":
            sheets.append(_sheet(node))
        elif kind == "lib_symbols":
            for lib in children(node, "symbol"):
                parsed = _lib_symbol(lib)
                lib_symbols[parsed.name] = parsed
        elif kind == "bus_alias":
            members = child(node, "members")
            names = tuple(str(m) for m in members[1:]) if members else ()
            aliases.append((text_arg(node), names))
        elif kind == "symbol_instances":
            for entry in children(node, "path"):
                legacy_instances.append(
                    SymbolInstance(
                        path=text_arg(entry),
                        reference=child_text(entry, "reference"),
                        unit=child_int(entry, "unit", 1),
                    )
                )

    return SheetFile(
        path=source,
        version=version,
        uuid=child_text(tree, "uuid"),
        lib_symbols=_resolve_extends(lib_symbols),
        symbols=tuple(symbols),
        wires=tuple(wires),
        buses=tuple(buses),
        bus_entries=tuple(entries),
        junctions=tuple(junctions),
        no_connects=tuple(no_connects),
        labels=tuple(labels),
        sheets=tuple(sheets),
        bus_aliases=tuple(aliases),
        legacy_symbol_instances=tuple(legacy_instances),
    )


def _segments(node: Node) -> list[Wire]:
    pts = child(node, "pts")
    points = [xy(p) for p in children(pts, "xy")] if pts else []
    return [Wire(a, b) for a, b in itertools.pairwise(points)]


def _properties(node: Node) -> dict[str, str]:
    props: dict[str, str] = {}
    for prop in children(node, "property"):
        key = text_arg(prop, 1)
        if key and key not in props:
            props[key] = text_arg(prop, 2)
    return props


def _placed_symbol(node: Node, source: str) -> Symbol:
    position, rotation = at(node)
    mirror = child_text(node, "mirror")
    instances: list[SymbolInstance] = []
    for block in children(node, "instances"):
        for project in children(block, "project"):
            name = text_arg(project)
            for entry in children(project, "path"):
                instances.append(
                    SymbolInstance(
                        path=text_arg(entry),
                        reference=child_text(entry, "reference"),
                        unit=child_int(entry, "unit", child_int(node, "unit", 1)),
                        project=name,
                    )
                )
    alternates: dict[str, str] = {}
    for pin in children(node, "pin"):
        alternate = child(pin, "alternate")
        if alternate is not None:
            alternates[text_arg(pin)] = text_arg(alternate)
    lib_id = child_text(node, "lib_id")
    if not lib_id:
        raise UserError(f"{source}: a placed symbol has no lib_id (uuid {child_text(node, 'uuid') or '?'})")
    return Symbol(
        lib_id=lib_id,
        lib_name=child_text(node, "lib_name"),
        uuid=child_text(node, "uuid"),
        position=position,
        rotation=rotation,
        mirror=mirror if mirror in {"x", "y"} else "",
        unit=child_int(node, "unit", 1),
        body_style=child_int(node, "convert", child_int(node, "body_style", 1)),
        in_bom=yes_no(node, "in_bom", True),
        on_board=yes_no(node, "on_board", True),
        dnp=yes_no(node, "dnp", False),
        properties=_properties(node),
        instances=tuple(instances),
        pin_alternates=alternates,
    )


def _sheet(node: Node) -> Sheet:
    props = _properties(node)
    pins = []
    for pin in children(node, "pin"):
        position, _ = at(pin)
        shape = str(pin[2]) if len(pin) > 2 and not isinstance(pin[2], list) else ""
        pins.append(SheetPin(name=text_arg(pin), shape=shape, position=position))
    instances = []
    for block in children(node, "instances"):
        for project in children(block, "project"):
            for entry in children(project, "path"):
                instances.append(
                    SheetInstanceRef(path=text_arg(entry), page=child_text(entry, "page"), project=text_arg(project))
                )
    return Sheet(
        uuid=child_text(node, "uuid"),
        name=props.get("Sheetname", props.get("Sheet name", "")),
        file=props.get("Sheetfile", props.get("Sheet file", "")),
        position=xy(child(node, "at")),
        size=xy(child(node, "size")),
        pins=tuple(pins),
        instances=tuple(instances),
    )


def _lib_pin(node: Node, unit: int, body_style: int) -> LibPin:
    position, rotation = at(node)
    length = child(node, "length")
    hidden = has_flag(node, "hide") or yes_no(node, "hide", False)
    alternates = tuple(
        (text_arg(a, 1), text_arg(a, 2)) for a in children(node, "alternate")
    )
    return LibPin(
        number=child_text(node, "number"),
        name=child_text(node, "name"),
        electrical_type=text_arg(node, 1),
        position=position,
        rotation=rotation,
        length=to_iu(length[1]) if length is not None and len(length) > 1 else 0,
        hidden=hidden,
        unit=unit,
        body_style=body_style,
        alternates=alternates,
    )


def _unit_and_style(sub_name: str) -> tuple[int, int]:
    """`NAME_U_B`: unit U (0 for all units), body style B (0 for both)."""
    parts = sub_name.rsplit("_", 2)
    if len(parts) == 3:
        try:
            return int(parts[1]), int(parts[2])
        except ValueError:
            pass
    return 0, 0


def _lib_symbol(node: Node) -> LibSymbol:
    name = text_arg(node)
    props = _properties(node)
    pins: list[LibPin] = [_lib_pin(p, 0, 0) for p in children(node, "pin")]
    unit_count = 1
    for sub in children(node, "symbol"):
        unit, style = _unit_and_style(text_arg(sub))
        unit_count = max(unit_count, unit)
        pins.extend(_lib_pin(p, unit, style) for p in children(sub, "pin"))
    return LibSymbol(
        name=name,
        power=child(node, "power") is not None,
        reference_prefix=props.get("Reference", ""),
        value=props.get("Value", ""),
        pins=tuple(pins),
        unit_count=unit_count,
        extends=child_text(node, "extends"),
        in_bom=yes_no(node, "in_bom", True),
        on_board=yes_no(node, "on_board", True),
    )


def _resolve_extends(libs: dict[str, LibSymbol]) -> dict[str, LibSymbol]:
    """A derived symbol draws its pins from its parent; KiCad usually flattens the cache itself."""
    if not any(lib.extends and not lib.pins for lib in libs.values()):
        return libs
    by_short = {key.split(":", 1)[-1]: lib for key, lib in libs.items()}
    resolved = dict(libs)
    for key, lib in libs.items():
        seen = {key}
        parent = lib
        while parent.extends and not parent.pins:
            nxt = libs.get(parent.extends) or by_short.get(parent.extends)
            if nxt is None or nxt.name in seen:
                break
            seen.add(nxt.name)
            parent = nxt
        if parent is not lib:
            resolved[key] = msgspec.structs.replace(
                lib, pins=parent.pins, unit_count=parent.unit_count, power=lib.power or parent.power
            )
    return resolved
