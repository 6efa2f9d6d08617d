"""`cbledger fixture hash` and `cbledger fixture check`: the standard's toy vectors, and every
way a fixture can disagree with its manifest, named by file and field."""

from __future__ import annotations

import json
import shutil

import pytest

from cbledger.tasks.fixtures.hashing import hash_directory
from tests.factories import run_cli
from tests.test_grading_kit import drc_report, erc_report, violation, write_fixture


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        ({"a.txt": "one", "b.txt": "two"}, "fc68fd20426e1afb9503b1d4bbfe33460f23529060b8104fb3945ae0cd8de3ad"),
        ({"a.txt": "one"}, "04850079809654c634318a880b80585149cae0f71feb143f67296122d3b0af51"),
        ({}, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
    ],
)
def test_fixture_hash_toy_vectors(tmp_path, files, expected):
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    r = run_cli(["fixture", "hash", tmp_path])
    assert (r.exit_code, r.stdout.strip()) == (0, expected)


def test_fixture_hash_refuses_symlinks(tmp_path):
    (tmp_path / "a.txt").write_text("one")
    (tmp_path / "link").symlink_to("a.txt")
    r = run_cli(["fixture", "hash", tmp_path])
    assert r.exit_code == 2 and "symlinks are not allowed in a fixture tree" in r.stderr


@pytest.fixture
def fixture(tmp_path):
    return write_fixture(
        tmp_path / "project",
        erc=erc_report(violation("lib_symbol_issues", "warning"), violation("pin_not_connected", "error")),
        drc=drc_report(
            violation("courtyards_overlap"),
            violation("courtyards_overlap", excluded=True),
            parity=[violation("footprint_symbol_mismatch", "warning")],
        ),
    )


def check(fixture, *extra):
    return run_cli(["fixture", "check", fixture.id, "--root", fixture.dir.parent.parent, *extra])


def test_a_good_fixture_checks(fixture):
    r = check(fixture)
    assert r.exit_code == 0, r.output
    assert r.stdout.strip() == f"demo-board: ok (tree {fixture.manifest.sha256})"
    doc = json.loads((fixture.dir / "fixture.json").read_text())
    assert doc["baseline"]["erc"] == {
        "report": "baseline/erc.json",
        "errors": 1,
        "errorTypes": {"pin_not_connected": 1},
        "warnings": 1,
        "warningTypes": {"lib_symbol_issues": 1},
    }
    assert doc["baseline"]["drc"] == {
        "report": "baseline/drc.json",
        "errors": 1,
        "errorTypes": {"courtyards_overlap": 1},  # the excluded one is not counted
        "warnings": 0,
        "unconnectedItems": 0,
        "schematicParity": 1,
        "schematicParityTypes": {"footprint_symbol_mismatch": 1},
    }


def test_a_tree_that_does_not_hash_to_the_manifest(fixture):
    (fixture.tree / "docs" / "BOM.md").write_text("edited\n")
    r = check(fixture)
    assert r.exit_code == 1
    assert f"error: fixtures/demo-board/fixture.json: sha256: records {fixture.manifest.sha256}, but tree/ hashes to " in r.stderr
    assert "a file under tree/ was edited, added or removed since the tree was frozen (`cbledger validate --root " in r.stderr


def test_baseline_counts_that_disagree_are_named_by_field(fixture):
    path = fixture.dir / "fixture.json"
    doc = json.loads(path.read_text())
    doc["baseline"]["erc"]["warnings"] = 44
    doc["baseline"]["drc"]["schematicParityTypes"] = {"net_conflict": 1}
    path.write_text(json.dumps(doc))
    r = check(fixture, "--json")
    assert r.exit_code == 1
    problems = {(p["field"], p["message"]) for p in json.loads(r.stdout)["problems"]}
    assert problems == {
        ("baseline.erc.warnings", "records 44, but baseline/erc.json has 1"),
        (
            "baseline.drc.schematicParityTypes",
            'records {"net_conflict": 1}, but baseline/drc.json has {"footprint_symbol_mismatch": 1}',
        ),
    }


def test_missing_baseline_reports_and_artifacts(fixture):
    (fixture.dir / "baseline" / "drc.json").unlink()
    (fixture.tree / "hardware" / "demo.kicad_pro").unlink()
    path = fixture.dir / "fixture.json"
    doc = json.loads(path.read_text())
    doc["sha256"] = hash_directory(fixture.tree)
    path.write_text(json.dumps(doc))
    r = check(fixture)
    assert r.exit_code == 1
    assert ("error: fixtures/demo-board/fixture.json: baseline.drc.report: baseline/drc.json is missing "
            f"(run `cbledger fixture baseline demo-board --root {fixture.dir.parent.parent}`)") in r.stderr
    assert "error: fixtures/demo-board/fixture.json: artifacts.project: hardware/demo.kicad_pro does not exist in tree/" in r.stderr


def test_a_report_of_the_wrong_kind_or_shape(fixture):
    shutil.copyfile(fixture.dir / "baseline" / "erc.json", fixture.dir / "baseline" / "drc.json")
    r = check(fixture)
    assert "error: fixtures/demo-board/baseline/drc.json: is a ERC report, expected DRC" in r.stderr
    (fixture.dir / "baseline" / "drc.json").write_text("[]")
    r = check(fixture)
    assert "fixtures/demo-board/baseline/drc.json: expected a JSON object at the top level" in r.stderr


def test_a_manifest_that_does_not_decode(fixture):
    (fixture.dir / "fixture.json").write_text("{")
    r = check(fixture)
    assert r.exit_code == 1 and "error: fixtures/demo-board/fixture.json: not valid JSON" in r.stderr


def test_an_unknown_fixture(tmp_path):
    r = run_cli(["fixture", "check", "nope", "--root", tmp_path])
    assert r.exit_code == 2 and "fixtures/nope/fixture.json: no such fixture" in r.stderr


def test_a_misspelled_fixture_is_refused_with_the_id_it_was_close_to(fixture):
    root = fixture.dir.parent.parent
    for command in (["fixture", "check", "demo-bord"], ["fixture", "materialize", "demo-bord"]):
        r = run_cli([*command, "--root", root])
        assert r.exit_code == 2 and "demo-bord/fixture.json: no such fixture (did you mean 'demo-board'?)" in r.stderr, r.output
