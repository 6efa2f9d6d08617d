"""The seeded renaming a variant applies: reference designators, signal nets and one scale factor.

Everything is drawn from `random.Random(seed)` over sorted inputs, so the same task and seed give
the same mapping on any machine. Which names exist is read from the schematics of the fixture and
of the gold solution (a part the task adds, like a new capacitor, is renamed with the rest):

* reference designators keep their letters (a resistor stays an R) and get new numbers, drawn
  without repetition per letter group, never all unchanged; power symbols (`#PWR…`) keep theirs;
* signal nets named by a local or global label get one seeded suffix (`SDA` → `SDA_K3`, and a
  task's `I2C_SDA` → `I2C_SDA_K3`), unless the name is also a pin name, a sheet pin or a
  hierarchical label, where prose could not tell the net from the pin; power nets keep their
  names, which state a voltage the scaling keeps;
* the factor k (2 or 1/2) scales currents, capacitances and powers by k and resistances by 1/k
  (`quantities.py`).
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path

from cbledger.kicad.reader import read_sheet_file
from cbledger.tasks.variant import quantities
from cbledger.tasks.variant.quantities import Family

REFDES = re.compile(r"^(?P<prefix>[A-Z]+)(?P<number>[0-9]+)$")
TAG_LETTERS = "BHKMQVXZ"
SCALES = (Decimal(2), Decimal("0.5"))
#: a character that continues a name; a name is replaced only where none touches it
_NAME_CHAR = r"A-Za-z0-9_"


@dataclass(frozen=True)
class Design:
    """The names a design uses, read from its schematics."""

    references: dict[str, str] = field(default_factory=dict)  # refdes → lib id
    values: dict[str, str] = field(default_factory=dict)  # refdes → Value
    labels: set[str] = field(default_factory=set)  # local and global label texts
    reserved: set[str] = field(default_factory=set)  # pin names, sheet pins, hierarchical labels, power nets


def read_design(schematics: Iterable[Path]) -> Design:
    design = Design()
    for path in schematics:
        sheet = read_sheet_file(path)
        for lib in sheet.lib_symbols.values():
            design.reserved.update(p.name for p in lib.pins if p.name and p.name != "~")
            if lib.power:
                design.reserved.add(lib.value)
        for symbol in sheet.symbols:
            refs = {i.reference for i in symbol.instances} | {symbol.properties.get("Reference", "")}
            for ref in refs:
                if REFDES.match(ref):
                    design.references[ref] = symbol.lib_id
                    design.values[ref] = symbol.properties.get("Value", "")
            if sheet.lib_symbols.get(symbol.lib_name or symbol.lib_id) is not None and sheet.lib_symbols[symbol.lib_name or symbol.lib_id].power:
                design.reserved.add(symbol.properties.get("Value", ""))
        for label in sheet.labels:
            if label.kind in ("local", "global"):
                design.labels.add(label.text)
            else:
                design.reserved.add(label.text)
        for sub in sheet.sheets:
            design.reserved.update(p.name for p in sub.pins)
    return design


@dataclass(frozen=True)
class VariantMap:
    seed: int
    refdes: dict[str, str]
    nets: dict[str, str]
    k: Decimal
    #: original KiCad Value → scaled Value, for the parts whose Value is a quantity
    values: dict[str, str]
    budget_families: dict[str, Family]

    @property
    def names(self) -> dict[str, str]:
        return {**self.refdes, **self.nets}

    def rename(self, text: str) -> str:
        """Every whole reference designator and net name in `text` replaced at once."""
        names = self.names
        if not names:
            return text
        pattern = re.compile(
            rf"(?<![{_NAME_CHAR}])(" + "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True)) + rf")(?![{_NAME_CHAR}])"
        )
        return pattern.sub(lambda m: names[m.group(1)], text)

    def net(self, name: str) -> str:
        """A KiCad net name: a label name, a sheet path (`/Input/VBUS_F`: the last part is the
        label) or a name KiCad derives from a pin (`Net-(D1-A)`)."""
        head, sep, last = name.rpartition("/")
        if sep and last in self.nets:
            return f"{self.rename(head)}/{self.nets[last]}"
        return self.nets.get(name) or self.rename(name)

    def value(self, value: str, refdes: str) -> str | None:
        m = REFDES.match(refdes)
        if m is None:
            return None
        return quantities.scale_value(value, m.group("prefix"), self.k)

    def text(self, text: str) -> str:
        """Prose (a prompt, a doc, a note): names renamed, quantities scaled, and a Value written
        alone in backticks, a table cell or a quoted KiCad `(property "Value" …)` (as a session's
        edit quotes the schematic) replaced by its scaled Value."""
        edits = quantities.quantity_edits(text, self.k, self.budget_families)
        for m in re.finditer(r"`([^`\n]+)`|(?<=\|) ([^|\n]+?) (?=\|)|\(property \\?\"Value\\?\" \\?\"([^\"\\\n]+)\\?\"", text):
            group = next(g for g in (1, 2, 3) if m.group(g) is not None)
            literal = m.group(group)
            if literal in self.values and all(m.end(group) <= s or m.start(group) >= e for s, e, _n in edits):
                edits.append((m.start(group), m.end(group), self.values[literal]))
        out: list[str] = []
        cursor = 0
        for start, end, new in sorted(edits):
            if start < cursor:
                continue
            out.append(self.rename(text[cursor:start]))
            out.append(new)
            cursor = end
        out.append(self.rename(text[cursor:]))
        return "".join(out)


def build(seed: int, design: Design, budget_keys: Iterable[str]) -> VariantMap:
    rng = random.Random(seed)
    refdes = _refdes(rng, sorted(design.references))
    labels = sorted(design.labels - design.reserved)
    existing = set(design.labels) | design.reserved | set(design.references)
    tag = ""
    for _ in range(100):
        tag = f"_{rng.choice(TAG_LETTERS)}{rng.randint(1, 9)}"
        if not any(f"{n}{tag}" in existing for n in labels):
            break
    nets = {n: f"{n}{tag}" for n in labels}
    k = rng.choice(SCALES)
    families = {key: fam for key in sorted(budget_keys) if (fam := quantities.key_family(key)) is not None}
    values: dict[str, str] = {}
    for ref, value in sorted(design.values.items()):
        m = REFDES.match(ref)
        scaled = quantities.scale_value(value, m.group("prefix"), k) if m else None
        if scaled is not None:
            values[value] = scaled
    return VariantMap(seed=seed, refdes=refdes, nets=nets, k=k, values=values, budget_families=families)


def _refdes(rng: random.Random, references: list[str]) -> dict[str, str]:
    groups: dict[str, list[str]] = {}
    for ref in references:
        m = REFDES.match(ref)
        assert m is not None
        groups.setdefault(m.group("prefix"), []).append(ref)
    mapping: dict[str, str] = {}
    for _ in range(100):
        mapping = {}
        for prefix, refs in sorted(groups.items()):
            numbers = rng.sample(range(1, max(20, 4 * len(refs)) + 1), len(refs))
            mapping.update({ref: f"{prefix}{n}" for ref, n in zip(sorted(refs, key=_number), numbers, strict=True)})
        if any(k != v for k, v in mapping.items()) or not mapping:
            return mapping
    return mapping


def _number(ref: str) -> int:
    m = REFDES.match(ref)
    return int(m.group("number")) if m else 0
