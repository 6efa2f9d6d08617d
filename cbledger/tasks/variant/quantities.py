"""Scaling the physical quantities of a task so that every relation between them still holds.

A variant multiplies every current, capacitance and power by one factor k and divides every
resistance by it; voltages, times and frequencies stay. Ohm's law (V = I R), the power a part
dissipates (P = V I), an RC time constant and every sum of currents come out the same, so a
budget that was kept is still kept with the same margin in proportion, and one that was broken is
still broken: the reasoning survives while every number a model might recall changes.

Quantities are found where the task states them: numbers with a unit (`5 mA`, `4.7 kohm`,
`100nF`), a bare number chained to one by `+`, `-`, `to`, `and`, `,` or `=` (`150 + 100 = 250 mA`),
the divisor of an Ohm's-law quotient that yields a current (`(5.0 - 2.0) / 1000 = 3.00 mA`: 1000
is ohms), and KiCad `Value` fields of resistors, capacitors and fuses. A bare number anywhere else
is not a quantity and is left alone.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from decimal import Decimal
from typing import Literal

Family = Literal["current", "resistance", "capacitance", "power"]

NUM = r"\d+(?:\.\d+)?"
#: how the tasks spell units, and what each measures
UNITS: dict[str, Family] = {
    "mA": "current", "uA": "current", "µA": "current", "A": "current",
    "kohm": "resistance", "k ohm": "resistance", "kΩ": "resistance", "Mohm": "resistance", "MΩ": "resistance",
    "ohms": "resistance", "ohm": "resistance", "Ω": "resistance", "k": "resistance",
    "pF": "capacitance", "nF": "capacitance", "uF": "capacitance", "µF": "capacitance",
    "mW": "power", "W": "power",
}
_UNIT_ALT = "|".join(re.escape(u) for u in sorted(UNITS, key=len, reverse=True))
QUANTITY = re.compile(rf"(?<![\w.])(?P<num>{NUM}) ?(?P<unit>{_UNIT_ALT})(?![\w])")
_CHAIN_TAIL = re.compile(rf"(?<![\w./*×])(?P<num>{NUM})\s*(?:\+|-|to|and|,|=)\s*$")
_OHM_DIVISOR = re.compile(rf"/\s*(?P<num>{NUM})\s*=\s*$")

#: budget keys name their unit in a suffix (`led_current_ma`)
KEY_SUFFIXES: dict[str, Family] = {
    "_ma": "current", "_ua": "current", "_a": "current", "_ohm": "resistance", "_ohms": "resistance",
    "_kohm": "resistance", "_pf": "capacitance", "_nf": "capacitance", "_uf": "capacitance",
    "_mw": "power", "_w": "power",
}


def factor_for(family: Family, k: Decimal) -> Decimal:
    return Decimal(1) / k if family == "resistance" else k


def key_family(key: str) -> Family | None:
    lowered = key.lower()
    for suffix, family in sorted(KEY_SUFFIXES.items(), key=lambda kv: -len(kv[0])):
        if lowered.endswith(suffix):
            return family
    return None


def scale_number(text: str, factor: Decimal) -> Decimal:
    """`text` times `factor`, exactly, at the original's precision when that loses nothing."""
    original = Decimal(text)
    result = original * factor
    exponent = original.as_tuple().exponent
    assert isinstance(exponent, int)
    quantized = result.quantize(Decimal(1).scaleb(exponent))
    return quantized if quantized == result else result.normalize()


def render(value: Decimal) -> str:
    return format(value, "f")


def scale_quantity(num: str, unit: str, k: Decimal) -> str:
    """`num` in `unit` scaled, written in the same unit: a quantity keeps its prefix (1k ohm becomes
    0.5k ohm, not 500 ohm), so a number chained to it, and the same value written elsewhere (a
    BOM cell, a KiCad Value), scale to the same text."""
    return render(scale_number(num, factor_for(UNITS[unit], k)))


def stated_families(texts: Iterable[str]) -> dict[str, set[Family]]:
    """For each number the texts write with a unit, the families they give it (`450 mA` in a
    refusal's arithmetic: 450 is a current)."""
    found: dict[str, set[Family]] = {}
    for text in texts:
        for m in QUANTITY.finditer(text):
            found.setdefault(m.group("num"), set()).add(UNITS[m.group("unit")])
    return found


def quantity_edits(text: str, k: Decimal, budget_keys: dict[str, Family]) -> list[tuple[int, int, str]]:
    """The replacements (start, end, new text) that scale every quantity `text` states."""
    edits: dict[tuple[int, int], str] = {}
    claimed: list[tuple[int, int]] = []

    def free(start: int, end: int) -> bool:
        return all(end <= s or start >= e for s, e in claimed)

    def bare(start: int, end: int, family: Family) -> None:
        if free(start, end):
            edits[(start, end)] = render(scale_number(text[start:end], factor_for(family, k)))
            claimed.append((start, end))

    quantities = list(QUANTITY.finditer(text))
    for m in quantities:
        edits[(m.start("num"), m.end("num"))] = scale_quantity(m.group("num"), m.group("unit"), k)
        claimed.append((m.start(), m.end()))
    for m in quantities:
        family = UNITS[m.group("unit")]
        prefix_text = text[: m.start()]
        if family == "current":
            ohm = _OHM_DIVISOR.search(prefix_text)
            if ohm:
                bare(ohm.start("num"), ohm.end("num"), "resistance")
                continue
        end = m.start()
        while True:
            tail = _CHAIN_TAIL.search(text[:end])
            if not tail or not free(tail.start("num"), tail.end("num")):
                break
            # a number chained to the quantity carries its unit
            edits[(tail.start("num"), tail.end("num"))] = scale_quantity(tail.group("num"), m.group("unit"), k)
            claimed.append((tail.start("num"), tail.end("num")))
            end = tail.start("num")
    for line in re.finditer(r"^\|\s*`(?P<key>[A-Za-z0-9_]+)`\s*\|(?P<cell>[^|\n]*)\|", text, re.MULTILINE):
        row_family = budget_keys.get(line.group("key"))
        if row_family is None:
            continue
        for n in re.finditer(rf"(?<![\w.]){NUM}(?![\w.])", line.group("cell")):
            start = line.start("cell") + n.start()
            bare(start, start + len(n.group()), row_family)
    return sorted((s, e, new) for (s, e), new in edits.items())


_VALUE = re.compile(r"^(?P<num>\d+(?:\.\d+)?)(?P<prefix>[pnuµmkM]?)(?P<unit>F|A|ohm|Ω)?$")
#: the family of a KiCad Value by the reference prefix of its part
VALUE_FAMILIES: dict[str, Family] = {"R": "resistance", "C": "capacitance", "F": "current"}


def scale_value(value: str, reference_prefix: str, k: Decimal) -> str | None:
    """A resistor's, capacitor's or fuse's KiCad Value scaled (`4.7k` → `2.35k`, `1k` → `500`,
    `100nF` → `200nF`), or None when it is not a plain number with an optional prefix and unit."""
    family = VALUE_FAMILIES.get(reference_prefix)
    m = _VALUE.match(value)
    if family is None or m is None:
        return None
    unit = m.group("unit") or ""
    if (family == "resistance" and unit in ("F", "A")) or (family == "capacitance" and unit != "F") or (family == "current" and unit != "A"):
        return None
    return f"{render(scale_number(m.group('num'), factor_for(family, k)))}{m.group('prefix')}{unit}"
