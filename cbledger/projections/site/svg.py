"""The site's charts as SVG text: a scatter with error bars and a heat map.

Small on purpose: two chart kinds with fixed geometry need no plotting library, and writing every
coordinate with fixed precision keeps the bytes a function of the data. Every label goes through
`escape`, so a model or task name can never open an element.
"""

from __future__ import annotations

from html import escape

from msgspec import Struct

WIDTH, HEIGHT = 560, 320
LEFT, RIGHT, TOP, BOTTOM = 56, 16, 24, 44


def _n(x: float) -> str:
    return f"{x:.1f}"


class Point(Struct, frozen=True, kw_only=True):
    label: str
    #: x: USD per passing task; None when it has no cost (drawn on the left edge, hollow)
    cost_usd: float | None
    rate: float
    low: float
    high: float


def _nice_max(value: float) -> float:
    for step in (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000):
        if value <= step:
            return float(step)
    return float(value)


def scatter(points: list[Point], title: str) -> str:
    """Pass rate (y, 0–100 %) with its Wilson interval against cost per passing task (x)."""
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    costs = [p.cost_usd for p in points if p.cost_usd is not None]
    xmax = _nice_max(max(costs)) if costs and max(costs) > 0 else 1.0

    def x(v: float | None) -> float:
        return LEFT + (0.0 if v is None else v / xmax * plot_w)

    def y(v: float) -> float:
        return TOP + (1.0 - v) * plot_h

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart scatter" viewBox="0 0 {WIDTH} {HEIGHT}" '
        f'width="{WIDTH}" height="{HEIGHT}" role="img" aria-label="{escape(title)}">',
        f"<title>{escape(title)}</title>",
        f'<rect x="{LEFT}" y="{TOP}" width="{plot_w}" height="{plot_h}" class="plot"/>',
    ]
    for i in range(5):
        v = i / 4
        out.append(f'<line x1="{LEFT}" x2="{LEFT + plot_w}" y1="{_n(y(v))}" y2="{_n(y(v))}" class="grid"/>')
        out.append(f'<text x="{LEFT - 6}" y="{_n(y(v) + 4)}" class="tick" text-anchor="end">{int(v * 100)}%</text>')
        xv = xmax * v
        out.append(f'<text x="{_n(x(xv))}" y="{TOP + plot_h + 16}" class="tick" text-anchor="middle">${xv:.2f}</text>')
    out.append(f'<text x="{LEFT + plot_w / 2:.1f}" y="{HEIGHT - 6}" class="axis" text-anchor="middle">'
               "cost per passing task (USD)</text>")
    out.append(f'<text x="14" y="{TOP + plot_h / 2:.1f}" class="axis" text-anchor="middle" '
               f'transform="rotate(-90 14 {TOP + plot_h / 2:.1f})">strict pass rate</text>')
    for p in points:
        cx = x(p.cost_usd)
        label = escape(p.label)
        hollow = " hollow" if p.cost_usd is None else ""
        out.append(f'<g class="point{hollow}"><title>{label}: {p.rate * 100:.1f}% '
                   f'({p.low * 100:.1f}–{p.high * 100:.1f}), '
                   + ("no cost" if p.cost_usd is None else f"${p.cost_usd:.4f} per passing task") + "</title>")
        out.append(f'<line x1="{_n(cx)}" x2="{_n(cx)}" y1="{_n(y(p.low))}" y2="{_n(y(p.high))}" class="errbar"/>')
        out.append(f'<circle cx="{_n(cx)}" cy="{_n(y(p.rate))}" r="4"/>')
        out.append(f'<text x="{_n(cx + 7)}" y="{_n(y(p.rate) - 6)}" class="label">{label}</text></g>')
    out.append("</svg>")
    return "\n".join(out)


class Cell(Struct, frozen=True, kw_only=True):
    passes: int
    runs: int


def _fill(rate: float) -> str:
    """Red (0 %) through amber to green (100 %), as an HSL hue."""
    return f"hsl({rate * 120:.0f}, 65%, 55%)"


def heatmap(rows: list[str], columns: list[str], cells: dict[tuple[str, str], Cell], title: str) -> str:
    """Pass rates of `rows` (tasks) by `columns` (models); an empty cell is a pair never run."""
    cw, ch, left, top = 84, 22, 260, 110
    width, height = left + cw * len(columns) + 90, top + ch * len(rows) + 8
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart heatmap" viewBox="0 0 {width} {height}" '
        f'width="{width}" height="{height}" role="img" aria-label="{escape(title)}">',
        f"<title>{escape(title)}</title>",
    ]
    for j, col in enumerate(columns):
        cx = left + j * cw + cw / 2
        out.append(f'<text x="{cx:.1f}" y="{top - 8}" class="collabel" '
                   f'transform="rotate(-35 {cx:.1f} {top - 8})">{escape(col)}</text>')
    for i, row in enumerate(rows):
        ry = top + i * ch
        out.append(f'<text x="{left - 6}" y="{ry + ch / 2 + 4:.1f}" class="rowlabel" text-anchor="end">{escape(row)}</text>')
        for j, col in enumerate(columns):
            c = cells.get((row, col))
            rx = left + j * cw
            if c is None or c.runs == 0:
                out.append(f'<rect x="{rx}" y="{ry}" width="{cw - 2}" height="{ch - 2}" class="cell empty"/>')
                continue
            rate = c.passes / c.runs
            out.append(f'<g class="cell"><title>{escape(row)} × {escape(col)}: {c.passes}/{c.runs}</title>'
                       f'<rect x="{rx}" y="{ry}" width="{cw - 2}" height="{ch - 2}" fill="{_fill(rate)}"/>'
                       f'<text x="{rx + cw / 2 - 1:.1f}" y="{ry + ch / 2 + 4:.1f}" text-anchor="middle">'
                       f"{c.passes}/{c.runs}</text></g>")
    out.append("</svg>")
    return "\n".join(out)
