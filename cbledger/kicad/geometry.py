"""Where things are on the sheet.

KiCad draws library symbols in a Y-up frame and sheets in a Y-down frame. A placed symbol's pin
lands at `symbol position + M(R(flip(lib position)))`: flip Y, rotate counter-clockwise as seen on
the sheet, then mirror (`x` flips vertically, `y` horizontally). The order (rotation before mirror)
was settled against kicad-cli on all eight orientations; see tests/test_kicad_geometry.py.
"""

from __future__ import annotations

from cbledger.kicad.model import Point


def transform(point: Point, rotation: int, mirror: str) -> Point:
    x, y = point[0], -point[1]
    r = rotation % 360
    if r == 90:
        x, y = y, -x
    elif r == 180:
        x, y = -x, -y
    elif r == 270:
        x, y = -y, x
    if mirror == "x":
        y = -y
    elif mirror == "y":
        x = -x
    return (x, y)


def pin_position(origin: Point, lib_position: Point, rotation: int, mirror: str) -> Point:
    dx, dy = transform(lib_position, rotation, mirror)
    return (origin[0] + dx, origin[1] + dy)


def strictly_inside(start: Point, end: Point, point: Point) -> bool:
    """On the segment and not at either end: KiCad's test for breaking a wire at a junction."""
    if point in (start, end):
        return False
    return on_segment(start, end, point)


def on_segment(start: Point, end: Point, point: Point) -> bool:
    """Exactly on the closed segment (integer coordinates, so exact)."""
    (x1, y1), (x2, y2), (px, py) = start, end, point
    if (x2 - x1) * (py - y1) - (y2 - y1) * (px - x1) != 0:
        return False
    return min(x1, x2) <= px <= max(x1, x2) and min(y1, y2) <= py <= max(y1, y2)


def near_segment(start: Point, end: Point, point: Point, accuracy: int = 1) -> bool:
    """Within `accuracy` IU of the closed segment: how KiCad decides a label sits on a wire."""
    (x1, y1), (x2, y2), (px, py) = start, end, point
    dx, dy = x2 - x1, y2 - y1
    length_sq = dx * dx + dy * dy
    qx: float
    qy: float
    if length_sq == 0:
        qx, qy = x1, y1
    else:
        t = ((px - x1) * dx + (py - y1) * dy) / length_sq
        t = 0.0 if t < 0 else 1.0 if t > 1 else t
        qx, qy = x1 + t * dx, y1 + t * dy
    return (px - qx) ** 2 + (py - qy) ** 2 <= accuracy * accuracy
