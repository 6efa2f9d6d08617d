"""The committed JSON Schemas are generated from the types; a stale file is a failing test."""

from __future__ import annotations

import json

from cbledger import schemas


def test_committed_schemas_match_the_types(repo_root):
    stale = schemas.stale(repo_root / "schema")
    assert stale == [], f"regenerate with `cbledger schema`: {stale}"


def test_every_schema_is_valid_json_with_a_title(repo_root):
    names = sorted(p.name for p in (repo_root / "schema").glob("*.schema.json"))
    assert {"event.schema.json", "task.schema.json", "assertions.schema.json", "fixture.schema.json"} <= set(names)
    for name in names:
        doc = json.loads((repo_root / "schema" / name).read_text())
        assert doc["title"].startswith("cbledger ")


def test_stale_detects_an_edited_schema(tmp_path):
    schemas.write(tmp_path)
    assert schemas.stale(tmp_path) == []
    target = tmp_path / "task.schema.json"
    target.write_text(target.read_text().replace('"tier"', '"tiers"', 1))
    assert schemas.stale(tmp_path) == ["task.schema.json"]
