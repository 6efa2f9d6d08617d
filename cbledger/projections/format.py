"""Fixed number and text formatting for generated files.

Nothing here consults the locale, the timezone or the platform: percentages and money are
formatted from exact fractions or IEEE doubles with fixed precision, so the same ledger renders
the same bytes everywhere.
"""

from __future__ import annotations

import datetime as _dt
from fractions import Fraction


def pct(x: Fraction | float | None) -> str:
    if x is None:
        return "—"
    return f"{float(x) * 100:.1f}%"


def interval(lo: float | None, hi: float | None) -> str:
    if lo is None or hi is None:
        return "—"
    return f"{lo * 100:.1f}–{hi * 100:.1f}"


def usd_micros(micros: Fraction | int | None, places: int = 4) -> str:
    """Exact: rounds micro-dollars half-to-even to `places` decimals of a dollar."""
    if micros is None:
        return "—"
    scale = 10**places
    q = round(Fraction(micros) * scale / 10**6)
    sign = "-" if q < 0 else ""
    q = abs(q)
    return f"{sign}${q // scale}.{q % scale:0{places}d}"


def utc_stamp(at: _dt.datetime | None) -> str:
    if at is None:
        return "—"
    return at.astimezone(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def utc_date(at: _dt.datetime | None) -> str:
    if at is None:
        return "—"
    return at.astimezone(_dt.UTC).strftime("%Y-%m-%d")


def cell(text: object) -> str:
    """A Markdown table cell: pipes escaped, line breaks flattened."""
    s = str(text)
    return s.replace("\\", "\\\\").replace("|", "\\|").replace("\r", " ").replace("\n", " ")


def table(header: list[str], rows: list[list[str]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "| " + " | ".join("---" for _ in header) + " |"]
    out.extend("| " + " | ".join(cell(c) for c in row) + " |" for row in rows)
    return out
