"""Doc drift: where docs/BOM.md and docs/PINOUT.md say something the schematic contradicts.

The definition (also in docs/KICAD.md) is one-directional: every claim a table row makes must
hold in the schematic; parts or nets the docs do not mention are not drift. A row makes claims
only through the columns it has, and an empty cell or a dash (`-`, `–`, `—`, `n/a`) claims
nothing.

BOM tables: any table with a reference column (`Refdes`, `Ref`, `Ref Des`, `Reference(s)`,
`Designator(s)`). Each listed reference must exist; where a `Value` column is present its cell
must equal the symbol's Value exactly (case matters: 1m is not 1M), and where a `Footprint` column
is present its cell must equal the symbol's footprint, with or without the library nickname
(`R_0603_1608Metric` matches `Resistor_SMD:R_0603_1608Metric`). A cell may list several
references (`R1, R2`) and ranges (`R1-R4`, `R1–R4`).

PINOUT tables: any table with a net column (`Net`, `Net name`, `Signal`). The named net must
exist, by the lookup rule of `netlist.name_matches`. Pins are given either by a reference column
(as above) plus a `Pin`/`Pins` column of pin numbers or names, or, without a reference column,
by a `Pins` column (`Pins`, `Pin`, `Connections`, `Nodes`) of `REF.PIN`, `REF:PIN` or
`REF-PIN` items. Items are separated by commas, semicolons or spaces. Every listed pin must be on
that net; a pin named rather than numbered must be on it with every pin of that name. A net cell
of `NC`, `N/C`, `no connect` or `unconnected`, when no net of that name exists, claims instead
that the pin shares its net with no other pin.

Each mismatch is one human-readable line naming the doc, its line and the disagreement.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from cbledger.kicad.connectivity import compute_nets
from cbledger.kicad.markdown import cell_text, tables
from cbledger.kicad.model import Schematic
from cbledger.kicad.netlist import Net, Netlist, name_matches
from cbledger.kicad.symbols import SymbolRecord, list_symbols

REFERENCE_HEADERS = ("refdes", "ref", "ref des", "reference", "references", "designator", "designators")
NET_HEADERS = ("net", "net name", "signal")
PIN_HEADERS = ("pins", "pin", "connections", "nodes")
_NO_CLAIM = {"", "-", "–", "—", "n/a", "na"}
_NO_CONNECT = {"nc", "n/c", "no connect", "no-connect", "unconnected"}
_SEPARATORS = re.compile(r"[,;]\s*|\s+")


def doc_drift(schematic: Schematic, docs_dir: str | Path, netlist: Netlist | None = None) -> list[str]:
    """Every mismatch between docs/BOM.md, docs/PINOUT.md and the schematic; absent docs say nothing."""
    docs = Path(docs_dir)
    bom, pinout = docs / "BOM.md", docs / "PINOUT.md"
    return doc_drift_texts(
        schematic,
        bom.read_text(encoding="utf-8", errors="replace") if bom.is_file() else None,
        pinout.read_text(encoding="utf-8", errors="replace") if pinout.is_file() else None,
        netlist,
    )


def doc_drift_texts(schematic: Schematic, bom: str | None, pinout: str | None, netlist: Netlist | None = None) -> list[str]:
    """`doc_drift` over the docs' texts (None for a doc that is absent), wherever they were read."""
    symbols = list_symbols(schematic)
    mismatches: list[str] = []
    if bom is not None:
        mismatches.extend(bom_drift(bom, symbols, "BOM.md"))
    if pinout is not None:
        nets = netlist if netlist is not None else compute_nets(schematic)
        mismatches.extend(pinout_drift(pinout, nets, symbols, "PINOUT.md"))
    return mismatches


_REF_TOKEN = re.compile(r"([A-Za-z_#]+)(\d+)\s*[-–]\s*(?:\1)?(\d+)(?![\w.])|([^\s,;]+)")


def split_references(cell: str) -> list[str]:
    """`R1, R2` and `R1-R4` (or `R1 – R4`, `R1-4`) into references; other tokens stay as written."""
    text = cell_text(cell)
    if text.lower() in _NO_CLAIM:
        return []
    refs: list[str] = []
    for match in _REF_TOKEN.finditer(text):
        prefix, first, last, single = match.groups()
        if single is not None:
            refs.append(single)
        elif int(last) >= int(first) and int(last) - int(first) < 1000:
            refs.extend(f"{prefix}{n}" for n in range(int(first), int(last) + 1))
        else:
            refs.append(match.group(0))
    return refs


def _claim(cell: str) -> str | None:
    text = cell_text(cell)
    return None if text.lower() in _NO_CLAIM else text


def _footprint_matches(actual: str, claimed: str) -> bool:
    if ":" in claimed:
        return actual == claimed
    return actual == claimed or actual.split(":", 1)[-1] == claimed


def bom_drift(markdown: str, symbols: Sequence[SymbolRecord], doc: str = "BOM.md") -> list[str]:
    by_ref: dict[str, SymbolRecord] = {}
    for symbol in symbols:
        by_ref.setdefault(symbol.reference, symbol)
    mismatches: list[str] = []
    for table in tables(markdown):
        ref_col = table.column(*REFERENCE_HEADERS)
        if ref_col is None:
            continue
        value_col = table.column("value")
        footprint_col = table.column("footprint")
        for row, line in zip(table.rows, table.lines, strict=True):
            where = f"{doc} line {line}"
            value = _claim(row[value_col]) if value_col is not None else None
            footprint = _claim(row[footprint_col]) if footprint_col is not None else None
            for ref in split_references(row[ref_col]):
                record = by_ref.get(ref)
                if record is None:
                    mismatches.append(f"{where}: {ref} is not in the schematic")
                    continue
                if value is not None and record.value != value:
                    mismatches.append(f"{where}: {ref} value is {value!r} in the doc but {record.value!r} in the schematic")
                if footprint is not None and not _footprint_matches(record.footprint, footprint):
                    mismatches.append(
                        f"{where}: {ref} footprint is {footprint!r} in the doc but {record.footprint!r} in the schematic"
                    )
    return mismatches


def _pin_items(cell: str, known: set[str]) -> list[tuple[str, str] | str]:
    """`U1.3, J2:5, R1-2` into (reference, pin); an item that does not parse comes back as text."""
    items: list[tuple[str, str] | str] = []
    for token in _SEPARATORS.split(cell_text(cell)):
        if not token:
            continue
        parsed = None
        for i, ch in enumerate(token):
            if ch in ".:-" and token[:i] in known and token[i + 1 :]:
                parsed = (token[:i], token[i + 1 :])
                break
        items.append(parsed if parsed is not None else token)
    return items


def _pins_of(cell: str) -> list[str]:
    text = cell_text(cell)
    if text.lower() in _NO_CLAIM:
        return []
    return [p for p in _SEPARATORS.split(text) if p]


def pinout_drift(markdown: str, netlist: Netlist, symbols: Sequence[SymbolRecord], doc: str = "PINOUT.md") -> list[str]:
    known = {s.reference for s in symbols}
    mismatches: list[str] = []
    for table in tables(markdown):
        net_col = table.column(*NET_HEADERS)
        if net_col is None:
            continue
        ref_col = table.column(*REFERENCE_HEADERS)
        pin_col = table.column(*PIN_HEADERS)
        for row, line in zip(table.rows, table.lines, strict=True):
            where = f"{doc} line {line}"
            net_name = _claim(row[net_col])
            if net_name is None:
                continue
            nets = netlist.nets_by_name(net_name)
            no_connect_claim = not nets and net_name.lower() in _NO_CONNECT
            if not nets and not no_connect_claim:
                mismatches.append(f"{where}: net {net_name} does not exist in the schematic")
                continue
            pins: list[tuple[str, str] | str] = []
            if ref_col is not None:
                refs = split_references(row[ref_col])
                if pin_col is not None:
                    pins = [(ref, pin) for ref in refs for pin in _pins_of(row[pin_col])]
            elif pin_col is not None:
                pins = _pin_items(row[pin_col], known)
            for item in pins:
                if isinstance(item, str):
                    mismatches.append(f"{where}: cannot read {item!r} as REF.PIN with a reference from the schematic")
                    continue
                problem = _check_pin(netlist, known, item[0], item[1], net_name, nets, no_connect_claim)
                if problem:
                    mismatches.append(f"{where}: {problem}")
    return mismatches


def _check_pin(
    netlist: Netlist, known: set[str], ref: str, pin: str, net_name: str, nets: tuple[Net, ...], no_connect: bool
) -> str | None:
    if ref not in known:
        return f"{ref} is not in the schematic"
    on = netlist.pin_nets(ref, pin)
    if not on:
        if not netlist.has_reference(ref):
            return f"{ref} has no pins in the netlist (not on the board, or a power symbol)"
        return f"{ref} has no pin {pin}"
    if no_connect:
        crowded = [net.name for net in on if len(net.nodes) > 1]
        return f"{ref}.{pin} is not unconnected: it is on {', '.join(crowded)}" if crowded else None
    wrong = [net.name for net in on if not name_matches(net.name, net_name)]
    if wrong:
        return f"{ref}.{pin} is on {', '.join(wrong)}, not {net_name}"
    return None
