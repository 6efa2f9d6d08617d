"""End-state document checks (doc lookup under docs/, regexes, GFM table rows) and the
constraint registry copperhead keeps in `.copperhead/constraints.json`."""

from __future__ import annotations

import json

from tests.test_grading_kit import check, one_assertion_box

# --------------------------------------------------------------------------- doc_contains


def test_doc_contains_looks_a_bare_name_up_under_docs(tmp_path):
    box = one_assertion_box(tmp_path, "doc_contains", {"doc": "PINOUT.md", "pattern": r"\bSIG\b"})
    assert check(box) == ("pass", r"PINOUT.md:5 matches /\bSIG\b/")


def test_doc_contains_prefers_a_root_file_of_that_name(tmp_path):
    box = one_assertion_box(tmp_path, "doc_contains", {"doc": "README.md", "pattern": "demo board"})
    assert check(box) == ("pass", "README.md:1 matches /demo board/")


def test_doc_contains_takes_a_path_with_a_slash_as_given(tmp_path):
    box = one_assertion_box(tmp_path, "doc_contains", {"doc": "docs/SPEC.md", "pattern": "^Line four"})
    assert check(box) == ("pass", "docs/SPEC.md:5 matches /^Line four/")  # ^ is per line


def test_doc_contains_fails_without_a_match(tmp_path):
    box = one_assertion_box(tmp_path, "doc_contains", {"doc": "PINOUT.md", "pattern": "SENSE"})
    assert check(box) == ("fail", "PINOUT.md does not match /SENSE/")
    box.write("docs/PINOUT.md", box.read("docs/PINOUT.md").replace("SIG", "SENSE"))
    assert check(box)[0] == "pass"


def test_doc_contains_absent(tmp_path):
    box = one_assertion_box(tmp_path, "doc_contains", {"doc": "PINOUT.md", "pattern": r"\bSIG\b", "absent": True})
    assert check(box) == ("fail", r"PINOUT.md:5 still matches /\bSIG\b/: 'SIG'")
    box.write("docs/PINOUT.md", box.read("docs/PINOUT.md").replace("SIG", "SENSE"))
    assert check(box) == ("pass", r"PINOUT.md does not match /\bSIG\b/")


def test_doc_contains_on_a_missing_doc_is_unevaluable(tmp_path):
    box = one_assertion_box(tmp_path, "doc_contains", {"doc": "LAYOUT.md", "pattern": "x"})
    assert check(box) == ("fail", "could not be evaluated: LAYOUT.md does not exist in the end state")


def test_doc_contains_absent_on_a_missing_doc_also_fails(tmp_path):
    """Absence of a pattern is a claim about a document; no document, no claim."""
    box = one_assertion_box(tmp_path, "doc_contains", {"doc": "LAYOUT.md", "pattern": "x", "absent": True})
    assert check(box)[0] == "fail"


# --------------------------------------------------------------------------- doc_row_matches


def test_doc_row_matches_reads_the_row_by_its_first_cell(tmp_path):
    box = one_assertion_box(tmp_path, "doc_row_matches", {"doc": "BOM.md", "key": "R2", "column": "Value", "pattern": "^10k$"})
    assert check(box) == ("pass", "BOM.md: row 'R2' column 'Value' is '10k', matches /^10k$/")


def test_doc_row_matches_unwraps_code_spans_and_ignores_header_case(tmp_path):
    box = one_assertion_box(tmp_path, "doc_row_matches", {"doc": "BOM.md", "key": "R1", "column": "notes", "pattern": "top"})
    assert check(box)[0] == "pass"


def test_doc_row_matches_fails_on_a_cell_a_row_or_a_column(tmp_path):
    box = one_assertion_box(tmp_path, "doc_row_matches", {"doc": "BOM.md", "key": "R2", "column": "Value", "pattern": "^22k$"})
    assert check(box) == ("fail", "BOM.md: row 'R2' column 'Value' is '10k', does not match /^22k$/")
    box.write("docs/BOM.md", box.read("docs/BOM.md").replace("| R2 | 10k |", "| R2 | 22k |"))
    assert check(box)[0] == "pass"
    box2 = one_assertion_box(tmp_path / "b", "doc_row_matches", {"doc": "BOM.md", "key": "R9", "column": "Value", "pattern": "x"})
    assert check(box2) == ("fail", "BOM.md: no table row whose first cell is 'R9'")
    box3 = one_assertion_box(tmp_path / "c", "doc_row_matches", {"doc": "BOM.md", "key": "R1", "column": "MPN", "pattern": "x"})
    assert check(box3) == ("fail", "BOM.md: no table has a column 'MPN'")


# --------------------------------------------------------------------------- constraint_registered


def test_constraint_registered_with_source_and_affects(tmp_path):
    box = one_assertion_box(
        tmp_path, "constraint_registered", {"key": "divider_current_ua", "source": "SPEC", "affects": ["R1"]}
    )
    assert check(box) == ("pass", "constraint 'divider_current_ua' is registered {\"max\": 200}")


def test_constraint_registered_fails_when_deleted_relaxed_or_rewired(tmp_path):
    box = one_assertion_box(tmp_path, "constraint_registered", {"key": "divider_current_ua", "source": "SPEC", "affects": ["R1", "R2"]})
    registry = json.loads(box.read(".copperhead/constraints.json"))
    registry["divider_current_ua"]["source"] = "assumed"
    box.write(".copperhead/constraints.json", json.dumps(registry))
    assert check(box) == ("fail", "constraint 'divider_current_ua' has source 'assumed', not matching /SPEC/")
    registry["divider_current_ua"]["source"] = "docs/SPEC.md"
    registry["divider_current_ua"]["affects"] = ["R1"]
    box.write(".copperhead/constraints.json", json.dumps(registry))
    assert check(box) == ("fail", "constraint 'divider_current_ua' does not list affects ['R2']")
    del registry["divider_current_ua"]
    box.write(".copperhead/constraints.json", json.dumps(registry))
    assert check(box) == ("fail", "constraint 'divider_current_ua' is not registered")


def test_constraint_registered_without_a_registry_or_with_a_broken_one(tmp_path):
    box = one_assertion_box(tmp_path, "constraint_registered", {"key": "divider_current_ua"})
    box.delete(".copperhead/constraints.json")
    assert check(box) == ("fail", ".copperhead/constraints.json does not exist in the end state")
    box.write(".copperhead/constraints.json", "{not json")
    status, detail = check(box)
    assert status == "fail" and detail.startswith("could not be evaluated: .copperhead/constraints.json is not valid JSON")
