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


def test_the_event_schema_holds_seq_as_the_ledger_does(repo_root):
    """The schema is what a runner in another language validates its drafts against: it must
    accept what append accepts (every committed event; a draft without seq) and refuse what append
    refuses (a draft stating seq 0)."""
    import jsonschema

    validator = jsonschema.Draft202012Validator(json.loads((repo_root / "schema" / "event.schema.json").read_text()))
    lines = (repo_root / "results" / "ledger" / "events.jsonl").read_bytes().splitlines()
    for line in lines[:60]:
        validator.validate(json.loads(line)["event"])
    draft = json.loads(lines[1])["event"]
    draft.pop("seq")
    validator.validate(draft)
    assert not validator.is_valid({**draft, "seq": 0})
