"""kicad-cli's ERC and DRC JSON reports, reduced to what baseline-relative assertions compare.

An assertion like `erc_no_new_violations` must not fail a run for violations the fixture already
had (a bare checkout of a real board carries library warnings it cannot fix), so reports are
compared as counts per (source, type) against the fixture's recorded baseline: a type is
introduced when the end state has more of it than the baseline did.

Sources: `erc` (every sheet's violations), `drc` (`violations`), `unconnected` (DRC
`unconnected_items`) and `schematic_parity` (DRC `schematic_parity`). Severity filter: `error`
counts errors only; `warning` counts warnings and errors. Excluded violations never count.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any, Literal

import msgspec

from cbledger.errors import UserError

Severity = Literal["error", "warning"]
_RANK = {"error": 2, "warning": 1}


class Violation(msgspec.Struct, frozen=True):
    source: str
    type: str
    severity: str
    description: str = ""


class Report(msgspec.Struct, frozen=True):
    kind: Literal["erc", "drc"]
    violations: tuple[Violation, ...]
    kicad_version: str = ""


class Introduced(msgspec.Struct, frozen=True):
    source: str
    type: str
    baseline: int
    end: int


def read_report(path: str | Path) -> Report:
    source = Path(path)
    try:
        data = json.loads(source.read_bytes())
    except FileNotFoundError:
        raise UserError(f"{source}: report not found") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise UserError(f"{source}: not a JSON report ({exc})") from None
    return parse_report(data, str(source))


def parse_report(data: Any, source: str = "<report>") -> Report:
    """Accepts either report shape; ERC has `sheets`, DRC has `violations` at the top."""
    if not isinstance(data, dict):
        raise UserError(f"{source}: expected a JSON object at the top level")
    version = str(data.get("kicad_version", ""))
    if "sheets" in data:
        sheets = _list(data, "sheets", source)
        found: list[Violation] = []
        for i, sheet in enumerate(sheets):
            if not isinstance(sheet, dict):
                raise UserError(f"{source}: sheets[{i}] is not an object")
            found.extend(_violations(sheet.get("violations", []), "erc", f"{source}: sheets[{i}].violations"))
        return Report("erc", tuple(found), version)
    if "violations" in data or "unconnected_items" in data or "schematic_parity" in data:
        found = []
        for key, src in (("violations", "drc"), ("unconnected_items", "unconnected"), ("schematic_parity", "schematic_parity")):
            found.extend(_violations(data.get(key, []), src, f"{source}: {key}"))
        return Report("drc", tuple(found), version)
    raise UserError(f"{source}: neither an ERC report (sheets) nor a DRC report (violations)")


def _list(data: dict, key: str, source: str) -> list:
    value = data.get(key)
    if not isinstance(value, list):
        raise UserError(f"{source}: {key} is not a list")
    return value


def _violations(items: Any, source: str, where: str) -> list[Violation]:
    if not isinstance(items, list):
        raise UserError(f"{where} is not a list")
    found = []
    for i, item in enumerate(items):
        if not isinstance(item, dict) or not isinstance(item.get("type"), str):
            raise UserError(f"{where}[{i}] has no string type")
        if item.get("excluded") is True:
            continue
        found.append(Violation(source, item["type"], str(item.get("severity", "")), str(item.get("description", ""))))
    return found


def count_violations(report: Report, severity: Severity = "error") -> dict[tuple[str, str], int]:
    """Violations at or above `severity`, counted per (source, type)."""
    if severity not in _RANK:
        raise UserError(f"severity must be 'error' or 'warning', not {severity!r}")
    floor = _RANK[severity]
    counts = Counter((v.source, v.type) for v in report.violations if _RANK.get(v.severity, 0) >= floor)
    return dict(sorted(counts.items()))


def introduced_violations(baseline: Report, end: Report, severity: Severity = "error") -> list[Introduced]:
    """Types the end state has more of than the baseline, with both counts, sorted."""
    if baseline.kind != end.kind:
        raise UserError(f"cannot compare a {baseline.kind.upper()} baseline with a {end.kind.upper()} end state")
    before = count_violations(baseline, severity)
    after = count_violations(end, severity)
    return [
        Introduced(source, kind, before.get((source, kind), 0), count)
        for (source, kind), count in sorted(after.items())
        if count > before.get((source, kind), 0)
    ]


def is_clean(report: Report) -> bool:
    """No violation of any severity, as `erc_clean`/`drc_clean` require."""
    return not any(_RANK.get(v.severity, 0) > 0 for v in report.violations)
