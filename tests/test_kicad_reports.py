"""ERC/DRC reports counted against a baseline, on the real boards' kicad-cli reports."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest

from cbledger.errors import UserError
from cbledger.kicad.reports import (
    count_violations,
    introduced_violations,
    is_clean,
    parse_report,
    read_report,
)


def _load(shared_real: Path, board: str, kind: str) -> dict:
    return json.loads((shared_real / "fixtures" / board / "baseline" / f"{kind}.json").read_text())


def test_microphone_baselines_match_the_recorded_summary(shared_real: Path) -> None:
    erc = read_report(shared_real / "fixtures" / "antmicro-microphone-board" / "baseline" / "erc.json")
    drc = read_report(shared_real / "fixtures" / "antmicro-microphone-board" / "baseline" / "drc.json")
    assert erc.kind == "erc" and drc.kind == "drc"
    assert count_violations(erc) == {}
    assert count_violations(erc, "warning") == {("erc", "footprint_link_issues"): 12, ("erc", "lib_symbol_issues"): 32}
    assert count_violations(drc) == {}  # the three courtyard errors are excluded on the board
    assert count_violations(drc, "warning") == {("drc", "lib_footprint_issues"): 13}
    assert not is_clean(erc)


def test_dmxsun_drc_counts_parity_and_errors(shared_real: Path) -> None:
    drc = read_report(shared_real / "fixtures" / "openlighting-dmxsun-baseboard" / "baseline" / "drc.json")
    assert count_violations(drc) == {("drc", "courtyards_overlap"): 1}
    warnings = count_violations(drc, "warning")
    assert warnings[("schematic_parity", "footprint_symbol_mismatch")] == 1
    assert warnings[("drc", "lib_footprint_issues")] == 43


def test_introduced_types_with_both_counts(shared_real: Path) -> None:
    base = _load(shared_real, "openlighting-dmxsun-baseboard", "drc")
    end = copy.deepcopy(base)
    end["violations"].append({"type": "courtyards_overlap", "severity": "error", "description": "", "items": []})
    end["violations"].append({"type": "clearance", "severity": "error", "description": "", "items": []})
    end["unconnected_items"].append({"type": "unconnected_items", "severity": "error", "description": "", "items": []})
    end["schematic_parity"].append({"type": "missing_footprint", "severity": "warning", "description": "", "items": []})
    end["violations"].append({"type": "clearance", "severity": "error", "excluded": True, "description": "", "items": []})
    before, after = parse_report(base, "base"), parse_report(end, "end")
    assert [(i.source, i.type, i.baseline, i.end) for i in introduced_violations(before, after)] == [
        ("drc", "clearance", 0, 1),
        ("drc", "courtyards_overlap", 1, 2),
        ("unconnected", "unconnected_items", 0, 1),
    ]
    assert ("schematic_parity", "missing_footprint", 0, 1) in [
        (i.source, i.type, i.baseline, i.end) for i in introduced_violations(before, after, "warning")
    ]
    assert introduced_violations(before, before, "warning") == []
    assert introduced_violations(after, before) == []  # fewer is never "introduced"


def test_erc_violations_nest_under_every_sheet(shared_real: Path) -> None:
    base = _load(shared_real, "antmicro-microphone-board", "erc")
    end = copy.deepcopy(base)
    end["sheets"].append({"path": "/sub/", "uuid_path": "/x/y", "violations": [{"type": "pin_not_connected", "severity": "error", "items": []}]})
    found = introduced_violations(parse_report(base), parse_report(end))
    assert [(i.source, i.type, i.baseline, i.end) for i in found] == [("erc", "pin_not_connected", 0, 1)]


def test_clean_and_kind_mismatch() -> None:
    assert is_clean(parse_report({"sheets": [{"violations": []}]}))
    assert is_clean(parse_report({"violations": [], "unconnected_items": [], "schematic_parity": []}))
    assert not is_clean(parse_report({"violations": [], "unconnected_items": [{"type": "unconnected_items", "severity": "error"}]}))
    with pytest.raises(UserError, match="cannot compare a ERC baseline with a DRC end state"):
        introduced_violations(parse_report({"sheets": []}), parse_report({"violations": []}))
    with pytest.raises(UserError, match="severity must be"):
        count_violations(parse_report({"sheets": []}), "info")  # type: ignore[arg-type]


def test_malformed_reports_name_file_and_field(tmp_path: Path) -> None:
    bad = tmp_path / "erc.json"
    bad.write_text("{not json")
    with pytest.raises(UserError, match=re.escape("erc.json: not a JSON report")):
        read_report(bad)
    with pytest.raises(UserError, match=re.escape("file.json: sheets[0].violations[1] has no string type")):
        parse_report({"sheets": [{"violations": [{"type": "a", "severity": "error"}, {"severity": "error"}]}]}, "file.json")
    with pytest.raises(UserError, match="neither an ERC report"):
        parse_report({"hello": 1}, "x.json")
    with pytest.raises(UserError, match=re.escape("x.json: violations is not a list")):
        parse_report({"violations": {}}, "x.json")
    with pytest.raises(UserError, match="report not found"):
        read_report(tmp_path / "none.json")
