"""Writes the hand-made test schematics in this directory, and, with kicad-cli, their expected nets.

    python tests/data/kicad/regenerate.py            # schematics + expected nets (needs kicad-cli)
    python tests/data/kicad/regenerate.py --no-cli   # schematics only

Each schematic isolates cases the real boards do not exercise; the comments say which. The
`expected-nets.json` beside each one is kicad-cli's answer, recorded so connectivity tests run
without KiCad; tests/test_kicad_connectivity.py re-exports with kicad-cli when it is installed and
fails if the recorded answer went stale.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from sch_writer import (  # noqa: E402
    GND,
    PWR_FLAG,
    RESISTOR,
    TRANSISTOR,
    VCC,
    LibSymbol,
    Pin,
    Writer,
    resistor,
)

# (root file relative to this directory, [files written]) for every test design.
DESIGNS: dict[str, str] = {
    "orientation": "orientation/orientation.kicad_sch",
    "wiring": "wiring/wiring.kicad_sch",
    "power": "power/power.kicad_sch",
    "hierarchy": "hierarchy/hierarchy.kicad_sch",
    "units": "units/units.kicad_sch",
    "bus": "bus/bus.kicad_sch",
    "bus_hierarchy": "bus_hierarchy/bus_hierarchy.kicad_sch",
}


def orientation() -> dict[str, str]:
    """A three-pin part in all twelve rotation/mirror combinations, a label on each pin.

    A wrong library-to-sheet transform leaves labels floating, and their nets then hold no pins."""
    w = Writer("orientation", "orientation")
    n = 0
    pins = {"B": (-5.08, 0.0), "C": (2.54, 5.08), "E": (2.54, -7.62)}
    for angle in (0, 90, 180, 270):
        for mirror in (None, "x", "y"):
            n += 1
            ox, oy = 30.48 + ((n - 1) % 4) * 40.64, 30.48 + ((n - 1) // 4) * 40.64
            w.symbol(TRANSISTOR, f"Q{n}", ox, oy, angle=angle, mirror=mirror)
            for name, (lx, ly) in pins.items():
                x, y = lx, -ly
                x, y = {0: (x, y), 90: (y, -x), 180: (-x, -y), 270: (-y, x)}[angle]
                if mirror == "x":
                    y = -y
                elif mirror == "y":
                    x = -x
                w.label(f"Q{n}_{name}", round(ox + x, 4), round(oy + y, 4))
    # Rotated parts wired pin to pin: the base of Q13 (90°) to the collector of Q14 (180°, mirror y).
    w.symbol(TRANSISTOR, "Q13", 30.48, 160.02, angle=90)
    w.symbol(TRANSISTOR, "Q14", 60.96, 160.02, angle=180, mirror="y")
    w.path((30.48, 160.02 + 5.08), (30.48, 170.18), (60.96 - 2.54, 170.18), (60.96 - 2.54, 160.02 + 5.08))
    return {"orientation.kicad_sch": w.text()}


def wiring() -> dict[str, str]:
    """Where wires do and do not connect, and the single-pin and no-connect names."""
    w = Writer("wiring", "wiring")
    # T with a junction: kicad-cli cuts the through wire at the junction and keeps only the part
    # from its start, so R2 joins R1 but the label at the far end (T_FAR) is cut off.
    r1, r2 = resistor(w, "R1", 20.32, 30.48), resistor(w, "R2", 40.64, 30.48)
    w.path(r1.p1, (20.32, 20.32), (60.96, 20.32))
    w.wire(r2.p1, (40.64, 20.32))
    w.junction(40.64, 20.32)
    w.label("T_FAR", 60.96, 20.32)
    # T without a junction: a wire end on another wire's body does not connect.
    r3, r4 = resistor(w, "R3", 81.28, 30.48), resistor(w, "R4", 101.6, 30.48)
    w.path(r3.p1, (81.28, 20.32), (121.92, 20.32))
    w.wire(r4.p1, (101.6, 20.32))
    w.label("T_NOJ", 121.92, 20.32)
    # Crossing wires, without and with a junction.
    r5, r6 = resistor(w, "R5", 20.32, 73.66), resistor(w, "R6", 40.64, 73.66)
    w.path(r5.p1, (20.32, 60.96), (60.96, 60.96))
    w.wire(r6.p1, (40.64, 50.8))
    w.label("CROSS_A", 60.96, 60.96)
    w.label("CROSS_B", 40.64, 50.8)
    r7, r8 = resistor(w, "R7", 81.28, 73.66), resistor(w, "R8", 101.6, 73.66)
    w.path(r7.p1, (81.28, 60.96), (121.92, 60.96))
    w.path((101.6, 50.8), (101.6, 66.04))
    w.wire(r8.p1, (101.6, 66.04))
    w.junction(101.6, 60.96)
    # A label on a wire's body connects; a pin on a wire's body does not.
    r9, r10 = resistor(w, "R9", 142.24, 30.48), resistor(w, "R10", 162.56, 30.48)
    w.path(r9.p1, (142.24, 15.24))
    w.label("ON_BODY", 142.24, 20.32)
    w.wire((154.94, r10.p1[1]), (170.18, r10.p1[1]))
    w.label("PIN_ON_BODY", 154.94, r10.p1[1])
    # Collinear overlapping wires do not connect; wire ends meeting without a junction do.
    r11, r12 = resistor(w, "R11", 142.24, 73.66), resistor(w, "R12", 172.72, 73.66)
    w.path(r11.p1, (142.24, 60.96), (162.56, 60.96))
    w.path((152.4, 60.96), (172.72, 60.96), r12.p1)
    r13, r14, r15 = resistor(w, "R13", 20.32, 116.84), resistor(w, "R14", 30.48, 116.84), resistor(w, "R15", 40.64, 116.84)
    w.path(r13.p1, (20.32, 106.68), (30.48, 106.68))
    w.wire(r14.p1, (30.48, 106.68))
    w.path((30.48, 106.68), (40.64, 106.68), r15.p1)
    # Pins touching pins, and a label sitting on a pin.
    r16 = resistor(w, "R16", 60.96, 116.84)
    resistor(w, "R17", 60.96, 116.84 - 7.62)
    resistor(w, "R18", 81.28, 116.84)
    w.label("ON_PIN", 81.28, 116.84 - 3.81)
    del r16
    # No-connect flags: on a lone pin, and on a pin wired to a second pin.
    r19, r20, r21 = resistor(w, "R19", 101.6, 116.84), resistor(w, "R20", 121.92, 116.84), resistor(w, "R21", 132.08, 116.84)
    w.wire(r19.p1, (101.6, 106.68))
    w.no_connect(101.6, 106.68)
    w.path(r20.p1, (121.92, 106.68), (132.08, 106.68), r21.p1)
    w.no_connect(*r20.p1)
    # A part left off the board, a DNP part, a part left out of the BOM, and a PWR_FLAG.
    r22 = resistor(w, "R22", 20.32, 160.02, on_board=False)
    r23 = resistor(w, "R23", 40.64, 160.02, dnp=True)
    r24 = resistor(w, "R24", 60.96, 160.02, in_bom=False)
    w.path(r22.p1, (20.32, 149.86), (40.64, 149.86), r23.p1)
    w.path((40.64, 149.86), (60.96, 149.86), r24.p1)
    r25 = resistor(w, "R25", 81.28, 160.02)
    w.symbol(PWR_FLAG, "#FLG01", 81.28, 149.86)
    w.wire(r25.p1, (81.28, 149.86))
    # A pin of electrical type no_connect touches nothing, not even a pin on top of it.
    nc_part = LibSymbol("Test:NC_PART", {(1, 1): [Pin("1", "NC", -5.08, 0, 0, "no_connect"), Pin("2", "A", 5.08, 0, 180)]}, "U")
    w.symbol(nc_part, "U1", 111.76, 160.02)
    resistor(w, "R26", 111.76 - 5.08, 160.02 + 3.81)
    # Unnamed nets are named after a pin: its name wins over a bare pad number.
    r27 = resistor(w, "R27", 142.24, 160.02)
    w.symbol(TRANSISTOR, "Q1", 162.56, 149.86)
    w.path(r27.p1, (142.24, 149.86), (157.48, 149.86))
    return {"wiring.kicad_sch": w.text()}


def power() -> dict[str, str]:
    """Power symbols, global labels and the priorities between drivers."""
    w = Writer("power", "power")
    # A power symbol names its net by its Value; two of them join across the sheet.
    a, b = resistor(w, "R1", 20.32, 30.48), resistor(w, "R2", 40.64, 30.48)
    w.symbol(VCC, "#PWR01", 20.32, 20.32, value="+5V")
    w.wire(a.p1, (20.32, 20.32))
    w.symbol(VCC, "#PWR02", 40.64, 20.32, value="+5V")
    w.wire(b.p1, (40.64, 20.32))
    w.symbol(GND, "#PWR03", 20.32, 43.18)
    w.wire(a.p2, (20.32, 43.18))
    w.symbol(GND, "#PWR04", 40.64, 43.18)
    w.wire(b.p2, (40.64, 43.18))
    # A global label beats a power symbol on the same wire; a power symbol beats a local label.
    c = resistor(w, "R3", 60.96, 30.48)
    w.path(c.p1, (60.96, 20.32), (71.12, 20.32))
    w.label("GLOBAL_WINS", 60.96, 20.32, kind="global_label")
    w.symbol(VCC, "#PWR05", 71.12, 20.32, value="VPOWER")
    d = resistor(w, "R4", 91.44, 30.48)
    w.path(d.p1, (91.44, 20.32), (101.6, 20.32))
    w.label("LOCAL_LOSES", 91.44, 20.32)
    w.symbol(VCC, "#PWR06", 101.6, 20.32, value="VPOWER2")
    # Local labels: the lowest name wins; global beats local; local beats a bare pin.
    e = resistor(w, "R5", 121.92, 30.48)
    w.wire(e.p1, (121.92, 15.24))
    w.label("ZETA", 121.92, 15.24)
    w.label("ALPHA", 121.92, 20.32)
    f = resistor(w, "R6", 142.24, 30.48)
    w.wire(f.p1, (142.24, 15.24))
    w.label("LOCAL_X", 142.24, 15.24)
    w.label("GLOBAL_X", 142.24, 20.32, kind="global_label")
    # A global label on one wire joins the same-named local label on another wire of this sheet.
    g, h = resistor(w, "R7", 20.32, 73.66), resistor(w, "R8", 40.64, 73.66)
    w.wire(g.p1, (20.32, 63.5))
    w.label("SHARED", 20.32, 63.5)
    w.wire(h.p1, (40.64, 63.5))
    w.label("SHARED", 40.64, 63.5, kind="global_label")
    # Two global names on one wire: another wire carrying only the second takes the first.
    i, j = resistor(w, "R9", 60.96, 73.66), resistor(w, "R10", 81.28, 73.66)
    w.wire(i.p1, (60.96, 58.42))
    w.label("GLOB_B", 60.96, 58.42, kind="global_label")
    w.label("GLOB_A", 60.96, 63.5, kind="global_label")
    w.wire(j.p1, (81.28, 63.5))
    w.label("GLOB_B", 81.28, 63.5, kind="global_label")
    # A hidden power-in pin on an ordinary part joins the net named like the pin.
    chip = LibSymbol(
        "Test:CHIP", {(1, 1): [Pin("1", "IN", -7.62, 0, 0), Pin("2", "VDDX", 0, 7.62, 270, "power_in", 2.54, True)]}, "U"
    )
    w.symbol(chip, "U1", 111.76, 73.66)
    k = resistor(w, "R11", 132.08, 73.66)
    w.wire(k.p1, (132.08, 63.5))
    w.label("VDDX", 132.08, 63.5, kind="global_label")
    # A label with a slash in it, escaped in the net name.
    m = resistor(w, "R12", 152.4, 73.66)
    w.wire(m.p1, (152.4, 63.5))
    w.label("RX/TX", 152.4, 63.5)
    return {"power.kicad_sch": w.text()}


def hierarchy() -> dict[str, str]:
    """One sub-sheet file used twice, a nested sheet, sheet pins, hierarchical labels."""
    root = Writer("hierarchy", "hierarchy")
    amp = Writer("hierarchy-amp", "hierarchy")
    leaf = Writer("hierarchy-leaf", "hierarchy")
    top = "/" + root.uuid

    def pins(x: float, y: float) -> list[tuple[str, str, float, float, int]]:
        return [("IN", "input", x, y + 5.08, 180), ("OUT", "output", x + 25.4, y + 5.08, 0), ("AUX", "input", x, y + 10.16, 180)]

    u1 = root.sheet("Amp1", "amp.kicad_sch", 101.6, 25.4, 25.4, 20.32, pins(101.6, 25.4), top, "2")
    u2 = root.sheet("Amp2", "amp.kicad_sch", 101.6, 76.2, 25.4, 20.32, pins(101.6, 76.2), top, "3")
    # Both IN pins wired together and nothing else: the net is named after a sub-sheet label.
    root.path((101.6, 30.48), (91.44, 30.48), (91.44, 81.28), (101.6, 81.28))
    # OUT of Amp1 carries a root label, which outranks the hierarchical label below.
    root.wire((127.0, 30.48), (139.7, 30.48))
    root.label("AMP_OUT", 139.7, 30.48)
    # AUX of Amp1 goes to a root resistor; AUX of Amp2 is left open.
    r = resistor(root, "R100", 76.2, 39.37)
    root.path(r.p1, (76.2, 35.56), (101.6, 35.56))
    # OUT of Amp2 reaches a root resistor through a wire passing across the sheet pin.
    r2 = resistor(root, "R101", 152.4, 90.17)
    root.path(r2.p1, (152.4, 81.28), (121.92, 81.28))
    # A power symbol on the root, the same name as one inside the sub-sheets.
    r3 = resistor(root, "R102", 76.2, 120.65)
    root.symbol(GND, "#PWR01", 76.2, 129.54)
    root.wire(r3.p2, (76.2, 129.54))

    p1, p2 = f"{top}/{u1}", f"{top}/{u2}"

    def inst(a: str, b: str) -> list[tuple[str, str, int]]:
        return [(p1, a, 1), (p2, b, 1)]

    x = resistor(amp, "R1", 30.48, 30.48, instances=inst("R1", "R2"))
    amp.wire(x.p1, (30.48, 20.32))
    amp.label("IN", 30.48, 20.32, kind="hierarchical_label")
    amp.wire(x.p2, (30.48, 40.64))
    amp.label("MID", 30.48, 40.64)
    y = resistor(amp, "R3", 50.8, 30.48, instances=inst("R3", "R4"))
    amp.wire(y.p1, (50.8, 20.32))
    amp.label("OUT", 50.8, 20.32, kind="hierarchical_label", shape="output")
    amp.wire(y.p2, (50.8, 40.64))
    amp.label("ORPHAN", 50.8, 40.64, kind="hierarchical_label")
    z = resistor(amp, "R5", 71.12, 30.48, instances=inst("R5", "R6"))
    amp.wire(z.p1, (71.12, 20.32))
    amp.label("AUX", 71.12, 20.32, kind="hierarchical_label")
    amp.symbol(GND, "#PWR01", 71.12, 40.64, instances=inst("#PWR01", "#PWR02"))
    amp.wire(z.p2, (71.12, 40.64))
    # A local label and a hierarchical label of the same name on separate wires merge.
    v = resistor(amp, "R7", 91.44, 30.48, instances=inst("R7", "R8"))
    amp.wire(v.p1, (91.44, 20.32))
    amp.label("MID", 91.44, 20.32, kind="hierarchical_label")
    # The nested sheet: its only pin on this sheet is wired to a resistor.
    u3 = amp.sheet("Leaf", "leaf.kicad_sch", 121.92, 25.4, 20.32, 15.24, [("L", "bidirectional", 121.92, 30.48, 180)], p1, "4")
    t = resistor(amp, "R9", 111.76, 34.29, instances=inst("R9", "R10"))
    amp.path(t.p1, (111.76, 30.48), (121.92, 30.48))

    q1, q2 = f"{p1}/{u3}", f"{p2}/{u3}"
    s = resistor(leaf, "R11", 30.48, 30.48, instances=[(q1, "R11", 1), (q2, "R12", 1)])
    leaf.wire(s.p1, (30.48, 17.78))
    leaf.label("L", 30.48, 17.78, kind="hierarchical_label")
    leaf.label("LEAF_NET", 30.48, 22.86)
    leaf.wire(s.p2, (30.48, 40.64))
    leaf.label("GND", 30.48, 40.64, kind="global_label")
    return {"hierarchy.kicad_sch": root.text(), "amp.kicad_sch": amp.text(root=False), "leaf.kicad_sch": leaf.text(root=False)}


def units() -> dict[str, str]:
    """Multi-unit parts (a shared pin per unit), a De Morgan body style, lib_name, pin alternates."""
    w = Writer("units", "units")
    dual = LibSymbol(
        "Test:DUAL",
        {
            (1, 1): [Pin("1", "A", -7.62, 2.54, 0), Pin("2", "Y", 7.62, 0, 180)],
            (2, 1): [Pin("3", "A", -7.62, 2.54, 0), Pin("4", "Y", 7.62, 0, 180)],
            (0, 1): [Pin("8", "V+", 0, 7.62, 270, "power_in")],
            (1, 2): [Pin("1", "A", -7.62, -2.54, 0), Pin("2", "Y", 7.62, 0, 180)],
        },
        "U",
    )
    # Unit A and unit B of U1, each with its own copy of the shared pin 8 on a different label.
    w.symbol(dual, "U1", 40.64, 40.64, unit=1, instances=[("/" + w.uuid, "U1", 1)])
    w.symbol(dual, "U1", 101.6, 40.64, unit=2, instances=[("/" + w.uuid, "U1", 2)])
    w.label("RAIL_A", 40.64, 40.64 - 7.62)
    w.label("RAIL_B", 101.6, 40.64 - 7.62)
    a = resistor(w, "R1", 25.4, 44.45)
    w.path((40.64 - 7.62, 40.64 - 2.54), (25.4, 40.64 - 2.54), a.p1)
    b = resistor(w, "R2", 86.36, 44.45)
    w.path((101.6 - 7.62, 40.64 - 2.54), (86.36, 40.64 - 2.54), b.p1)
    # The De Morgan body style moves input A down: the label on the alternate position connects.
    w.symbol(dual, "U2", 162.56, 40.64, unit=1, convert=2, instances=[("/" + w.uuid, "U2", 1)])
    w.label("DEMORGAN_A", 162.56 - 7.62, 40.64 + 2.54)
    w.label("NORMAL_A_SPOT", 162.56 - 7.62, 40.64 - 2.54)
    # A symbol drawn from a lib_symbols entry renamed by lib_name.
    w.symbol(RESISTOR, "R3", 30.48, 91.44, lib_name="R_1")
    w.wire((30.48, 91.44 - 3.81), (30.48, 81.28))
    w.label("FROM_LIB_NAME", 30.48, 81.28)
    # A pin with a selected alternate function, and pin names with a slash.
    mcu = LibSymbol(
        "Test:MCU",
        {(1, 1): [
            Pin("1", "PA0", -10.16, 2.54, 0, "bidirectional", alternates=(("UART_TX", "output"), ("ADC0", "input"))),
            Pin("2", "RX/TX", -10.16, 0, 0, "bidirectional"),
            Pin("3", "GND", -10.16, -2.54, 0, "power_in"),
            Pin("4", "GND", 10.16, -2.54, 180, "power_in"),
        ]},
        "U",
    )
    w.symbol(mcu, "U3", 91.44, 91.44, alternates={"1": "UART_TX"})
    c = resistor(w, "R4", 71.12, 97.79)
    w.path((91.44 - 10.16, 91.44 - 2.54), (71.12, 91.44 - 2.54), c.p1)
    d = resistor(w, "R5", 60.96, 97.79)
    w.path((91.44 - 10.16, 91.44), (60.96, 91.44), (60.96, 93.98))
    e = resistor(w, "R6", 111.76, 100.33)
    w.path((91.44 + 10.16, 91.44 + 2.54), (111.76, 91.44 + 2.54), e.p1)
    f = resistor(w, "R7", 45.72, 100.33)
    w.path((91.44 - 10.16, 91.44 + 2.54), (76.2, 91.44 + 2.54), (76.2, 104.14), (45.72, 104.14), (45.72, 96.52))
    del d, f
    return {"units.kicad_sch": w.text()}


def bus() -> dict[str, str]:
    """A bus with entries and member labels: recognised, and kept apart from the nets."""
    w = Writer("bus", "bus")
    w.wire((50.8, 25.4), (50.8, 76.2), bus=True)
    w.label("D[0..3]", 50.8, 25.4)
    for k in range(4):
        y = 33.02 + k * 10.16
        w.bus_entry(50.8, y, 2.54, 2.54)
        r = resistor(w, f"R{k + 1}", 73.66, y + 2.54 + 3.81)
        w.path((53.34, y + 2.54), (73.66, y + 2.54))
        w.label(f"D{k}", 60.96, y + 2.54)
        del r
    # The same member names on plain wires elsewhere on the sheet: joined by label, not by bus.
    for k in range(2):
        r = resistor(w, f"R{k + 11}", 121.92 + k * 20.32, 40.64)
        w.wire(r.p1, (121.92 + k * 20.32, 30.48))
        w.label(f"D{k}", 121.92 + k * 20.32, 30.48)
    # A bus entry whose wire end carries no label: the wire stays its own, pin-named net.
    w.bus_entry(50.8, 73.66, 2.54, 2.54)
    resistor(w, "R20", 73.66, 76.2 + 3.81)
    w.path((53.34, 76.2), (73.66, 76.2))
    return {"bus.kicad_sch": w.text()}


def _bus_run(w: Writer, x0: float, y: float, count: int, refs: list[str], members: list[str | None], instances=None) -> float:
    """A horizontal bus cut at each entry (as KiCad saves it), entries down to resistors whose
    wires carry the member labels. Returns the bus's right end."""
    xs = [x0 + 10.16 * (k + 1) for k in range(count)]
    points = [x0, *xs, x0 + 10.16 * (count + 1)]
    for a, b in itertools.pairwise(points):
        w.wire((a, y), (b, y), bus=True)
    for k, x in enumerate(xs):
        w.bus_entry(x, y, 2.54, 2.54)
        resistor(w, refs[k], x + 2.54, y + 2.54 + 3.81, instances=instances(refs[k]) if instances else None)
        if members[k]:
            w.label(members[k], x + 2.54, y + 2.54)
    return points[-1]


def bus_hierarchy() -> dict[str, str]:
    """Nets that meet only through buses: a vector bus into a sub-sheet used twice, a group bus,
    and a global bus on the root whose members join a global net of the same name."""
    root = Writer("bus-hierarchy", "bus_hierarchy")
    sub = Writer("bus-hierarchy-sub", "bus_hierarchy")
    top = "/" + root.uuid
    uuids = []
    for k in range(2):
        y = 40.64 + 60.96 * k
        pins = [("D[0..1]", "input", 152.4, y, 180), ("I2C{SDA SCL}", "bidirectional", 152.4, y + 20.32, 180)]
        uuids.append(root.sheet(f"Port{k + 1}", "sub.kicad_sch", 152.4, y - 5.08, 25.4, 30.48, pins, top, str(k + 2)))
        # Root side of D: a vector bus labelled X[0..1] (root names win: /X0, /X1) on Port1 only;
        # Port2's D pin carries the bus with no root label, so its members keep the sub-sheet names.
        end = _bus_run(root, 60.96, y, 2, [f"R{k}0", f"R{k}1"], ["X0", "X1"] if k == 0 else [None, None])
        root.wire((end, y), (152.4, y), bus=True)
        if k == 0:
            root.label("X[0..1]", 63.5, y)
        # The group bus, named the same on both sides.
        end = _bus_run(root, 60.96, y + 20.32, 2, [f"R{k}2", f"R{k}3"], ["I2C.SDA", "I2C.SCL"])
        root.wire((end, y + 20.32), (152.4, y + 20.32), bus=True)
        root.label("I2C{SDA SCL}", 63.5, y + 20.32)
    # A global bus on the root: its local member labels become the global G0/G1.
    _bus_run(root, 20.32, 170.18, 2, ["R40", "R41"], ["G0", "G1"])
    root.label("G[0..1]", 22.86, 170.18, kind="global_label")
    g = resistor(root, "R42", 101.6, 177.8)
    root.wire(g.p1, (101.6, 165.1))
    root.label("G0", 101.6, 165.1, kind="global_label")

    paths = [f"{top}/{u}" for u in uuids]

    def instances(ref: str) -> list[tuple[str, str, int]]:
        return [(p, f"{ref}_{i + 1}", 1) for i, p in enumerate(paths)]

    sub.label("D[0..1]", 20.32, 30.48, kind="hierarchical_label")
    _bus_run(sub, 20.32, 30.48, 2, ["U0", "U1"], ["D0", "D1"], instances)
    sub.label("I2C{SDA SCL}", 20.32, 60.96, kind="hierarchical_label", shape="bidirectional")
    _bus_run(sub, 20.32, 60.96, 2, ["U2", "U3"], ["I2C.SDA", "I2C.SCL"], instances)
    return {"bus_hierarchy.kicad_sch": root.text(), "sub.kicad_sch": sub.text(root=False)}


BUILDERS = {"orientation": orientation, "wiring": wiring, "power": power, "hierarchy": hierarchy, "units": units, "bus": bus, "bus_hierarchy": bus_hierarchy}


def write_all(with_cli: bool) -> None:
    for name, build in BUILDERS.items():
        folder = HERE / name
        folder.mkdir(exist_ok=True)
        files = build()
        for file_name, text in files.items():
            (folder / file_name).write_text(text, encoding="utf-8")
        if with_cli:
            root = HERE / DESIGNS[name]
            (folder / "expected-nets.json").write_text(json.dumps(kicad_cli_nets(root), indent=1) + "\n", encoding="utf-8")


def kicad_cli_nets(schematic: Path) -> list[dict]:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out.net"
        subprocess.run(
            ["kicad-cli", "sch", "export", "netlist", "--format", "kicadsexpr", "-o", str(out), str(schematic)],
            check=True,
            capture_output=True,
        )
        sys.path.insert(0, str(HERE.parents[2]))
        from cbledger.kicad.kicad_net import read_kicad_netlist

        return read_kicad_netlist(out).to_builtins()


if __name__ == "__main__":
    write_all(with_cli="--no-cli" not in sys.argv)
