"""A small writer of KiCad 9 schematic files (format 20250114), for test schematics.

It writes only what connectivity needs plus the fields kicad-cli requires to load a file, laid out
the way KiCad lays out its own files (one form per line, tab-indented), so the same files also
exercise the reader's error locations. UUIDs are derived from a seed so regenerating a file gives
the same bytes.
"""

from __future__ import annotations

import itertools
import uuid as _uuid
from dataclasses import dataclass, field

Atom = str | int | float


class Sym(str):
    """A bare keyword (written without quotes)."""


def q(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def num(value: float) -> str:
    text = f"{value:.4f}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def render(node: list, depth: int = 0) -> str:
    pad = "\t" * depth
    parts: list[str] = []
    nested = []
    for item in node:
        if isinstance(item, list) or nested:
            nested.append(item)
        else:
            parts.append(_atom(item))
    if not nested:
        return pad + "(" + " ".join(parts) + ")"
    lines = [pad + "(" + " ".join(parts)]
    for item in nested:
        lines.append(render(item, depth + 1) if isinstance(item, list) else "\t" * (depth + 1) + _atom(item))
    lines.append(pad + ")")
    return "\n".join(lines)


def _atom(item: Atom) -> str:
    if isinstance(item, Sym):
        return str(item)
    if isinstance(item, bool):
        return "yes" if item else "no"
    if isinstance(item, (int, float)):
        return num(float(item))
    return q(item)


def at(x: float, y: float, angle: float | None = None) -> list:
    return [Sym("at"), x, y] + ([angle] if angle is not None else [])


def effects(hide: bool = False) -> list:
    node = [Sym("effects"), [Sym("font"), [Sym("size"), 1.27, 1.27]]]
    if hide:
        node.append([Sym("hide"), Sym("yes")])
    return node


def prop(name: str, value: str, x: float = 0, y: float = 0, hide: bool = False) -> list:
    return [Sym("property"), name, value, at(x, y, 0), effects(hide)]


@dataclass
class Pin:
    number: str
    name: str
    x: float
    y: float
    angle: int
    etype: str = "passive"
    length: float = 2.54
    hidden: bool = False
    alternates: tuple[tuple[str, str], ...] = ()

    def node(self) -> list:
        node = [Sym("pin"), Sym(self.etype), Sym("line"), at(self.x, self.y, self.angle), [Sym("length"), self.length]]
        if self.hidden:
            node.append([Sym("hide"), Sym("yes")])
        node += [[Sym("name"), self.name, effects()], [Sym("number"), self.number, effects()]]
        for alt_name, alt_type in self.alternates:
            node.append([Sym("alternate"), alt_name, Sym(alt_type), Sym("line")])
        return node


@dataclass
class LibSymbol:
    lib_id: str
    units: dict[tuple[int, int], list[Pin]]
    reference: str = "U"
    value: str = ""
    power: bool = False

    @property
    def short(self) -> str:
        return self.lib_id.split(":", 1)[-1]

    def node(self, key: str | None = None) -> list:
        name = key or self.lib_id
        short = name.split(":", 1)[-1]
        node: list = [Sym("symbol"), name]
        if self.power:
            node.append([Sym("power")])
        node += [
            [Sym("exclude_from_sim"), Sym("no")],
            [Sym("in_bom"), Sym("yes")],
            [Sym("on_board"), Sym("yes")],
            prop("Reference", self.reference),
            prop("Value", self.value or self.short),
            prop("Footprint", "", hide=True),
            prop("Datasheet", "", hide=True),
            prop("Description", "", hide=True),
            [Sym("symbol"), f"{short}_0_1",
             [Sym("rectangle"), [Sym("start"), -2.54, -2.54], [Sym("end"), 2.54, 2.54],
              [Sym("stroke"), [Sym("width"), 0.254], [Sym("type"), Sym("default")]], [Sym("fill"), [Sym("type"), Sym("none")]]]],
        ]
        for (unit, style), pins in sorted(self.units.items()):
            node.append([Sym("symbol"), f"{short}_{unit}_{style}", *[p.node() for p in pins]])
        node.append([Sym("embedded_fonts"), Sym("no")])
        return node


# The symbols the test schematics use. Pin positions are in library coordinates (Y up).
RESISTOR = LibSymbol("Device:R", {(1, 1): [Pin("1", "~", 0, 3.81, 270, length=1.27), Pin("2", "~", 0, -3.81, 90, length=1.27)]}, "R")
TRANSISTOR = LibSymbol(
    "Test:Q_NPN", {(1, 1): [Pin("1", "B", -5.08, 0, 0), Pin("2", "C", 2.54, 5.08, 270), Pin("3", "E", 2.54, -7.62, 90)]}, "Q"
)
GND = LibSymbol("power:GND", {(1, 1): [Pin("1", "GND", 0, 0, 270, "power_in", 0, True)]}, "#PWR", power=True)
VCC = LibSymbol("power:VCC", {(1, 1): [Pin("1", "VCC", 0, 0, 90, "power_in", 0, True)]}, "#PWR", power=True)
PWR_FLAG = LibSymbol("power:PWR_FLAG", {(1, 1): [Pin("1", "pwr", 0, 0, 90, "power_out", 0)]}, "#FLG", power=True)


class Writer:
    """One schematic file. `root=True` adds the root-only `sheet_instances` block."""

    def __init__(self, seed: str, project: str) -> None:
        self.seed = seed
        self.project = project
        self.counter = 0
        self.uuid = self.new_uuid()
        self.libs: dict[str, list] = {}
        self.items: list[list] = []

    def new_uuid(self) -> str:
        self.counter += 1
        return str(_uuid.uuid5(_uuid.NAMESPACE_URL, f"cbledger-test:{self.seed}:{self.counter}"))

    def add_lib(self, lib: LibSymbol, key: str | None = None) -> None:
        self.libs[key or lib.lib_id] = lib.node(key)

    def symbol(
        self,
        lib: LibSymbol,
        ref: str,
        x: float,
        y: float,
        angle: int = 0,
        mirror: str | None = None,
        value: str | None = None,
        footprint: str = "",
        unit: int = 1,
        convert: int | None = None,
        in_bom: bool = True,
        on_board: bool = True,
        dnp: bool = False,
        instances: list[tuple[str, str, int]] | None = None,
        lib_name: str | None = None,
        alternates: dict[str, str] | None = None,
    ) -> None:
        self.add_lib(lib, lib_name)
        node: list = [Sym("symbol"), [Sym("lib_id"), lib.lib_id]]
        if lib_name:
            node.append([Sym("lib_name"), lib_name])
        node.append(at(x, y, angle))
        if mirror:
            node.append([Sym("mirror"), Sym(mirror)])
        node.append([Sym("unit"), unit])
        if convert:
            node.append([Sym("convert"), convert])
        node += [
            [Sym("exclude_from_sim"), Sym("no")],
            [Sym("in_bom"), Sym("yes" if in_bom else "no")],
            [Sym("on_board"), Sym("yes" if on_board else "no")],
            [Sym("dnp"), Sym("yes" if dnp else "no")],
            [Sym("uuid"), self.new_uuid()],
            prop("Reference", ref, x, y - 5),
            prop("Value", value if value is not None else lib.value or lib.short, x, y + 5),
            prop("Footprint", footprint, x, y, hide=True),
            prop("Datasheet", "", x, y, hide=True),
            prop("Description", "", x, y, hide=True),
        ]
        numbers = sorted({p.number for pins in lib.units.values() for p in pins})
        for number in numbers:
            pin: list = [Sym("pin"), number, [Sym("uuid"), self.new_uuid()]]
            if alternates and number in alternates:
                pin.append([Sym("alternate"), alternates[number]])
            node.append(pin)
        paths = instances if instances is not None else [("/" + self.uuid, ref, unit)]
        node.append(
            [Sym("instances"), [Sym("project"), self.project,
                                *[[Sym("path"), path, [Sym("reference"), r], [Sym("unit"), u]] for path, r, u in paths]]]
        )
        self.items.append(node)

    def _stroke(self) -> list:
        return [Sym("stroke"), [Sym("width"), 0], [Sym("type"), Sym("default")]]

    def wire(self, a: tuple[float, float], b: tuple[float, float], bus: bool = False) -> None:
        self.items.append(
            [Sym("bus" if bus else "wire"), [Sym("pts"), [Sym("xy"), a[0], a[1]], [Sym("xy"), b[0], b[1]]], self._stroke(),
             [Sym("uuid"), self.new_uuid()]]
        )

    def path(self, *points: tuple[float, float]) -> None:
        for a, b in itertools.pairwise(points):
            self.wire(a, b)

    def label(self, text: str, x: float, y: float, kind: str = "label", shape: str = "input", angle: int = 0) -> None:
        node: list = [Sym(kind), text]
        if kind != "label":
            node.append([Sym("shape"), Sym(shape)])
        node += [at(x, y, angle), [Sym("fields_autoplaced"), Sym("yes")], effects(), [Sym("uuid"), self.new_uuid()]]
        if kind == "global_label":
            node.append(prop("Intersheetrefs", "${INTERSHEET_REFS}", x, y, hide=True))
        self.items.append(node)

    def junction(self, x: float, y: float) -> None:
        self.items.append([Sym("junction"), at(x, y), [Sym("diameter"), 0], [Sym("color"), 0, 0, 0, 0], [Sym("uuid"), self.new_uuid()]])

    def no_connect(self, x: float, y: float) -> None:
        self.items.append([Sym("no_connect"), at(x, y), [Sym("uuid"), self.new_uuid()]])

    def bus_entry(self, x: float, y: float, dx: float = 2.54, dy: float = 2.54) -> None:
        self.items.append([Sym("bus_entry"), at(x, y), [Sym("size"), dx, dy], self._stroke(), [Sym("uuid"), self.new_uuid()]])

    def sheet(
        self,
        name: str,
        file: str,
        x: float,
        y: float,
        w: float,
        h: float,
        pins: list[tuple[str, str, float, float, int]],
        parent_path: str,
        page: str,
    ) -> str:
        sheet_uuid = self.new_uuid()
        node: list = [
            Sym("sheet"), at(x, y), [Sym("size"), w, h],
            [Sym("exclude_from_sim"), Sym("no")], [Sym("in_bom"), Sym("yes")], [Sym("on_board"), Sym("yes")],
            [Sym("dnp"), Sym("no")], [Sym("fields_autoplaced"), Sym("yes")],
            [Sym("stroke"), [Sym("width"), 0.1524], [Sym("type"), Sym("solid")]],
            [Sym("fill"), [Sym("color"), 0, 0, 0, 0]],
            [Sym("uuid"), sheet_uuid],
            prop("Sheetname", name, x, y - 1),
            prop("Sheetfile", file, x, y + h + 1),
        ]
        for pin_name, shape, px, py, angle in pins:
            node.append([Sym("pin"), pin_name, Sym(shape), at(px, py, angle), [Sym("uuid"), self.new_uuid()], effects()])
        node.append([Sym("instances"), [Sym("project"), self.project, [Sym("path"), parent_path, [Sym("page"), page]]]])
        self.items.append(node)
        return sheet_uuid

    def text(self, root: bool = True) -> str:
        node: list = [
            Sym("kicad_sch"),
            [Sym("version"), 20250114],
            [Sym("generator"), "eeschema"],
            [Sym("generator_version"), "9.0"],
            [Sym("uuid"), self.uuid],
            [Sym("paper"), "A4"],
            [Sym("lib_symbols"), *[self.libs[k] for k in sorted(self.libs)]],
            *self.items,
        ]
        if root:
            node.append([Sym("sheet_instances"), [Sym("path"), "/", [Sym("page"), "1"]]])
        node.append([Sym("embedded_fonts"), Sym("no")])
        return render(node) + "\n"


@dataclass
class Placed:
    """Where a resistor's pins land when placed upright at (x, y): pin 1 above, pin 2 below."""

    x: float
    y: float
    p1: tuple[float, float] = field(init=False)
    p2: tuple[float, float] = field(init=False)

    def __post_init__(self) -> None:
        self.p1 = (self.x, round(self.y - 3.81, 4))
        self.p2 = (self.x, round(self.y + 3.81, 4))


def resistor(w: Writer, ref: str, x: float, y: float, **kwargs) -> Placed:
    w.symbol(RESISTOR, ref, x, y, **kwargs)
    return Placed(x, y)
