"""The end state is read for grading straight from its git tree: the same design as reading the
same files from a directory, sheet paths resolved the same way, and parsed once per content (a
second grade of the same bytes reuses the first's parse; an edit is parsed afresh)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cbledger.errors import UserError
from cbledger.grading import checks_kicad
from cbledger.kicad import compute_nets, list_symbols, load_schematic
from cbledger.kicad.hierarchy import load_schematic_tree
from cbledger.kicad.sexpr import PARSE_CACHE, DigestCache
from tests.test_grading_kit import SCHEMATIC, demo_schematic, one_assertion_box

DATA = Path(__file__).parent / "data" / "kicad"


def _files(directory: Path) -> dict[str, bytes]:
    return {p.relative_to(directory).as_posix(): p.read_bytes() for p in directory.rglob("*") if p.is_file()}


def _same_design(directory: Path, root: str) -> None:
    from_dir = load_schematic(directory / root)
    assert from_dir.files[from_dir.root].symbols
    files = _files(directory)
    from_tree = load_schematic_tree(files.get, root)
    assert sorted(from_tree.files) == sorted(from_dir.files)
    assert from_tree.instances == from_dir.instances
    assert list_symbols(from_tree) == list_symbols(from_dir)
    assert compute_nets(from_tree).nets == compute_nets(from_dir).nets


@pytest.mark.parametrize("design", ["hierarchy", "bus_hierarchy"])
def test_a_hierarchical_design_read_from_a_tree_is_the_design_read_from_its_directory(design):
    _same_design(DATA / design, f"{design}.kicad_sch")


def test_a_root_below_the_tree_root_resolves_its_sheets_from_its_own_directory(tmp_path):
    files = {f"hw/{k}": v for k, v in _files(DATA / "hierarchy").items()}
    from_tree = load_schematic_tree(files.get, "hw/hierarchy.kicad_sch")
    assert sorted(from_tree.files) == sorted(load_schematic(DATA / "hierarchy" / "hierarchy.kicad_sch").files)
    assert from_tree.files["hierarchy.kicad_sch"].path == "hw/hierarchy.kicad_sch"


def test_a_real_board_read_from_a_tree_is_the_board_read_from_its_directory(shared_real):
    compared = 0
    for board in sorted((shared_real / "fixtures").iterdir()):
        for project in sorted((board / "tree").rglob("*.kicad_pro")):
            _same_design(board / "tree", project.with_suffix(".kicad_sch").relative_to(board / "tree").as_posix())
            compared += 1
    assert compared >= 2


@pytest.mark.parametrize("sheet_file", ["../outside.kicad_sch", "/etc/hostname", "missing.kicad_sch"])
def test_a_sheet_naming_a_file_outside_the_tree_or_absent_is_refused_naming_the_sheet(sheet_file):
    files = _files(DATA / "hierarchy")
    root = files["hierarchy.kicad_sch"].decode()
    files["hierarchy.kicad_sch"] = root.replace('"amp.kicad_sch"', f'"{sheet_file}"', 1).encode()
    assert sheet_file in files["hierarchy.kicad_sch"].decode()
    with pytest.raises(UserError, match=r"^hierarchy\.kicad_sch: sheet .* which does not exist"):
        load_schematic_tree(files.get, "hierarchy.kicad_sch")


def test_a_second_grade_of_the_same_end_state_reuses_the_first_parse_and_an_edit_does_not(tmp_path):
    box = one_assertion_box(tmp_path, "net_present", {"net": "SIG"})
    PARSE_CACHE.clear()
    checks_kicad.END_STATE_CACHE.clear()
    first = box.grade()
    assert (len(PARSE_CACHE), len(checks_kicad.END_STATE_CACHE)) == (1, 1)
    again = box.grade()
    assert again.outcomes == first.outcomes
    assert (len(PARSE_CACHE), len(checks_kicad.END_STATE_CACHE)) == (1, 1)
    box.write(SCHEMATIC, demo_schematic(sig="SENSE"))
    edited = box.grade()
    assert edited.verdict == "fail" and first.verdict == "pass"
    assert (len(PARSE_CACHE), len(checks_kicad.END_STATE_CACHE)) == (2, 2)


def test_the_digest_cache_is_bounded_in_entries_and_in_source_bytes():
    built: list[str] = []

    def build(name: str):
        return lambda: built.append(name) or name

    cache = DigestCache(capacity=2, max_bytes=10)
    assert cache.get_or_build("k", b"aaaa", build("a")) == "a"
    assert cache.get_or_build("k", b"bbbb", build("b")) == "b"
    assert cache.get_or_build("k", b"aaaa", build("a2")) == "a"  # a hit, and a is now the newest
    cache.get_or_build("k", b"cc", build("c"))  # three entries: b, the oldest, goes
    assert len(cache) == 2
    assert cache.get_or_build("k", b"bbbb", build("b2")) == "b2"
    cache.get_or_build("k", b"x" * 11, build("big"))  # larger than the byte budget: never kept
    assert cache.get_or_build("k", b"x" * 11, build("big2")) == "big2"
    cache.get_or_build("k", b"y" * 9, build("y"))  # fits alone: everything older goes
    assert len(cache) == 1
    assert built == ["a", "b", "c", "b2", "big", "big2", "y"]


def test_parts_with_the_same_bytes_split_differently_have_different_keys():
    cache = DigestCache()
    assert cache.get_or_build_parts("k", [b"ab", b"c"], lambda: 1) == 1
    assert cache.get_or_build_parts("k", [b"a", b"bc"], lambda: 2) == 2
    assert cache.get_or_build_parts("k", [b"ab", b"c"], lambda: 3) == 1
