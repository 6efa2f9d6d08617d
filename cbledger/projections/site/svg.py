"""The site's charts as SVG text: a cost-against-pass-rate frontier and a heat map.

Small on purpose: two chart kinds with fixed geometry need no plotting library, and writing every
coordinate with fixed precision keeps the bytes a function of the data. Every label goes through
`escape`, so a model or task name can never open an element.

Labels never collide: a scatter marks its points with numbers (the legend beside it names them)
and places each number in the first free spot around its point, and the heat map's sizes follow
its longest label. Widths of text are estimated on the generous side, so the browser's real boxes
(which the browser tests measure) stay inside the estimates. Colours are a viridis-like scale,
told apart by every common form of colour blindness and in greyscale.
"""

from __future__ import annotations

import itertools
import math
from html import escape

from msgspec import Struct

WIDTH, HEIGHT = 560, 320
LEFT, RIGHT, TOP, BOTTOM = 56, 24, 24, 44
#: an over-estimate of one character's advance at the charts' 11px font, and of a line's height
CHAR_W, LINE_H = 7.0, 13.0
#: viridis at 0, 0.25, 0.5, 0.75 and 1: dark purple through teal to yellow, monotone in lightness
_VIRIDIS = ((68, 1, 84), (59, 82, 139), (33, 145, 140), (94, 201, 98), (253, 231, 37))


LIGHT = ' class="light"'


def _n(x: float) -> str:
    return f"{x:.1f}"


class Point(Struct, frozen=True, kw_only=True):
    #: the number the point carries on the chart and in its legend
    number: int
    label: str
    cost_usd: float
    rate: float
    low: float
    high: float
    #: every task of the row ran once: drawn hollow and kept off the frontier line
    single: bool = False


Box = tuple[float, float, float, float]


def _overlaps(a: Box, b: Box) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def _text_box(x: float, y: float, text: str) -> Box:
    """The box of start-anchored text at baseline `y`, padded by 1px on every side."""
    return (x - 1, y - LINE_H + 2, x + CHAR_W * len(text) + 1, y + 4)


def _candidates(cx: float, cy: float) -> list[tuple[float, float]]:
    """Spots around a point, nearest first: right, then the other seven directions, ring by ring."""
    out = []
    for radius in (8.0, 16.0, 26.0, 38.0, 52.0, 70.0, 92.0):
        for k in range(8):
            a = -k * math.pi / 4
            out.append((cx + radius * math.cos(a), cy + radius * math.sin(a) + 4))
    return out


def place_labels(anchors: list[tuple[float, float, str]], bounds: Box, taken: list[Box]) -> list[tuple[float, float]]:
    """A spot (x, baseline y) for each label near its anchor where it overlaps no placed label
    and stays in `bounds`; when every ring is taken, the free spot on a grid nearest the anchor."""
    placed: list[Box] = list(taken)
    spots = []
    for cx, cy, text in anchors:
        w = CHAR_W * len(text)
        ring = [(x, y) if x >= cx else (x - w, y) for x, y in _candidates(cx, cy)]
        grid = sorted(
            ((float(gx), float(gy)) for gx in range(int(bounds[0]) + 1, int(bounds[2] - w), 4)
             for gy in range(int(bounds[1] + LINE_H), int(bounds[3]) - 4, 4)),
            key=lambda s: ((s[0] - cx) ** 2 + (s[1] - cy) ** 2, s),
        )
        for x, y in [*ring, *grid]:
            box = _text_box(x, y, text)
            inside = bounds[0] <= box[0] and box[2] <= bounds[2] and bounds[1] <= box[1] and box[3] <= bounds[3]
            if inside and not any(_overlaps(box, b) for b in placed):
                placed.append(box)
                spots.append((x, y))
                break
        else:  # a full chart: the label goes on its point rather than nowhere
            spots.append((cx, cy))
    return spots


def _nice_max(value: float) -> float:
    for step in (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000):
        if value <= step:
            return float(step)
    return float(value)


def _places(step: float) -> int:
    """Decimals enough that ticks `step` apart read as distinct amounts ($0.005, not $0.01)."""
    places = 2
    while places < 6 and abs(round(step, places) - step) > step * 1e-6:
        places += 1
    return places


def frontier_points(points: list[Point]) -> list[Point]:
    """The cost frontier: each repeated point no cheaper-or-equal point matches in pass rate,
    cheapest first. Single-run points are drawn but never on it: one run is not a result."""
    out: list[Point] = []
    for p in sorted((p for p in points if not p.single), key=lambda p: (p.cost_usd, -p.rate, p.number)):
        if not out or p.rate > out[-1].rate:
            out.append(p)
    return out


def scatter(points: list[Point], title: str) -> str:
    """Strict pass rate (y, 0–100 %) with its Wilson interval against cost per passing task (x),
    for the points of one cost segment (a USD axis never spans two), with the frontier drawn."""
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    costs = [p.cost_usd for p in points]
    xmax = _nice_max(max(costs)) if costs and max(costs) > 0 else 1.0

    def x(v: float) -> float:
        return LEFT + v / xmax * plot_w

    def y(v: float) -> float:
        return TOP + (1.0 - v) * plot_h

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart scatter" viewBox="0 0 {WIDTH} {HEIGHT}" '
        f'width="{WIDTH}" height="{HEIGHT}" role="img" aria-label="{escape(title)}">',
        f"<title>{escape(title)}</title>",
        f'<rect x="{LEFT}" y="{TOP}" width="{plot_w}" height="{plot_h}" class="plot"/>',
    ]
    places = _places(xmax / 4)
    for i in range(5):
        v = i / 4
        out.append(f'<line x1="{LEFT}" x2="{LEFT + plot_w}" y1="{_n(y(v))}" y2="{_n(y(v))}" class="grid"/>')
        out.append(f'<text x="{LEFT - 6}" y="{_n(y(v) + 4)}" class="tick" text-anchor="end">{int(v * 100)}%</text>')
        xv = xmax * v
        anchor = "start" if i == 0 else ("end" if i == 4 else "middle")
        out.append(f'<text x="{_n(x(xv))}" y="{TOP + plot_h + 16}" class="tick" text-anchor="{anchor}">${xv:.{places}f}</text>')
    out.append(f'<text x="{LEFT + plot_w / 2:.1f}" y="{HEIGHT - 6}" class="axis" text-anchor="middle">'
               "cost per passing task (USD)</text>")
    out.append(f'<text x="14" y="{TOP + plot_h / 2:.1f}" class="axis" text-anchor="middle" '
               f'transform="rotate(-90 14 {TOP + plot_h / 2:.1f})">strict pass rate</text>')
    front = frontier_points(points)
    if len(front) > 1:
        # a step line: from each frontier point right to the next one's cost, then up to its rate
        steps = [f"{_n(x(front[0].cost_usd))},{_n(y(front[0].rate))}"]
        for before, p in itertools.pairwise(front):
            steps += [f"{_n(x(p.cost_usd))},{_n(y(before.rate))}", f"{_n(x(p.cost_usd))},{_n(y(p.rate))}"]
        out.append(f'<polyline class="frontier" points="{" ".join(steps)}"/>')
    markers = [(x(p.cost_usd), y(p.rate)) for p in points]
    # the markers themselves are taken, so no number hides a point
    taken = [(mx - 5, my - 5, mx + 5, my + 5) for mx, my in markers]
    spots = place_labels([(mx, my, str(p.number)) for (mx, my), p in zip(markers, points, strict=True)],
                         (LEFT, TOP, LEFT + plot_w, TOP + plot_h), taken)
    for p, (cx, cy), (lx, ly) in zip(points, markers, spots, strict=True):
        label = escape(p.label)
        kind = " single" if p.single else ""
        out.append(f'<g class="point{kind}"><title>{p.number}. {label}: {p.rate * 100:.1f}% '
                   f'({p.low * 100:.1f}–{p.high * 100:.1f}), ${p.cost_usd:.4f} per passing task'
                   + (", single run" if p.single else "") + "</title>")
        out.append(f'<line x1="{_n(cx)}" x2="{_n(cx)}" y1="{_n(y(p.low))}" y2="{_n(y(p.high))}" class="errbar"/>')
        if p.single:
            out.append(f'<rect x="{_n(cx - 4)}" y="{_n(cy - 4)}" width="8" height="8" '
                       f'transform="rotate(45 {_n(cx)} {_n(cy)})"/>')
        else:
            out.append(f'<circle cx="{_n(cx)}" cy="{_n(cy)}" r="4"/>')
        if math.hypot(lx - cx, ly - 4 - cy) > 20:
            out.append(f'<line x1="{_n(cx)}" y1="{_n(cy)}" x2="{_n(lx)}" y2="{_n(ly - 4)}" class="leader"/>')
        out.append(f'<text x="{_n(lx)}" y="{_n(ly)}" class="label">{p.number}</text></g>')
    out.append("</svg>")
    return "\n".join(out)


class Cell(Struct, frozen=True, kw_only=True):
    passes: int
    runs: int


def fill(rate: float) -> tuple[str, bool]:
    """The viridis colour of a rate in [0, 1], and whether text on it should be light."""
    pos = min(max(rate, 0.0), 1.0) * (len(_VIRIDIS) - 1)
    i = min(int(pos), len(_VIRIDIS) - 2)
    t = pos - i
    r, g, b = (round(a + (c - a) * t) for a, c in zip(_VIRIDIS[i], _VIRIDIS[i + 1], strict=True))
    return f"#{r:02x}{g:02x}{b:02x}", rate < 0.55


def heatmap(
    rows: list[str], columns: list[str], cells: dict[tuple[str, str], Cell], title: str,
    row_href: dict[str, str] | None = None, column_href: dict[str, str] | None = None,
) -> str:
    """Pass rates of `rows` (tasks) by `columns` (models); an empty cell is a pair never run.
    Column labels stand upright above their column, so the top margin is the longest of them."""
    cw, ch = 40, 22
    left = int(max((len(r) for r in rows), default=4) * CHAR_W) + 14
    top = int(max((len(c) for c in columns), default=4) * CHAR_W) + 14
    scale = 5  # the scale's swatches under the grid, as wide as five columns
    width = max(left + cw * max(len(columns), scale) + 8, 300)
    height = top + ch * len(rows) + 44
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart heatmap" viewBox="0 0 {width} {height}" '
        f'width="{width}" height="{height}" role="img" aria-label="{escape(title)}">',
        f"<title>{escape(title)}</title>",
    ]

    def link(text: str, href: str | None) -> str:
        return f'<a href="{escape(href)}">{text}</a>' if href else text

    for j, col in enumerate(columns):
        cx = left + j * cw + cw / 2 + 4
        label = (f'<text x="{cx:.1f}" y="{top - 6}" class="collabel" '
                 f'transform="rotate(-90 {cx:.1f} {top - 6})">{escape(col)}</text>')
        out.append(link(label, (column_href or {}).get(col)))
    for i, row in enumerate(rows):
        ry = top + i * ch
        label = f'<text x="{left - 6}" y="{ry + ch / 2 + 4:.1f}" class="rowlabel" text-anchor="end">{escape(row)}</text>'
        out.append(link(label, (row_href or {}).get(row)))
        for j, col in enumerate(columns):
            c = cells.get((row, col))
            rx = left + j * cw
            if c is None or c.runs == 0:
                out.append(f'<rect x="{rx}" y="{ry}" width="{cw - 2}" height="{ch - 2}" class="cell empty"/>')
                continue
            colour, light = fill(c.passes / c.runs)
            out.append(f'<g class="cell"><title>{escape(row)} × {escape(col)}: {c.passes}/{c.runs}</title>'
                       f'<rect x="{rx}" y="{ry}" width="{cw - 2}" height="{ch - 2}" fill="{colour}"/>'
                       f'<text x="{rx + cw / 2 - 1:.1f}" y="{ry + ch / 2 + 4:.1f}" text-anchor="middle"'
                       f"{LIGHT if light else ''}>{c.passes}/{c.runs}</text></g>")
    # the scale: five swatches from 0 % to 100 %
    ly = top + ch * len(rows) + 12
    out.append(f'<text x="{left - 6}" y="{ly + 12}" class="tick" text-anchor="end">pass rate</text>')
    for k in range(scale):
        colour, light = fill(k / (scale - 1))
        out.append(f'<rect x="{left + k * cw}" y="{ly}" width="{cw - 2}" height="16" fill="{colour}"/>'
                   f'<text x="{left + k * cw + cw / 2 - 1:.1f}" y="{ly + 12}" text-anchor="middle" class="tick'
                   f'{" light" if light else ""}">{k * 100 // (scale - 1)}%</text>')
    out.append("</svg>")
    return "\n".join(out)
