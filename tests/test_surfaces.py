"""Surfaces as data: the catalog, its schema, which surface a run or an import came through, the
ownership the leaderboard shows, and a planted canary for every surface's redaction rule."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pygit2
import pytest

from cbledger.errors import UserError
from cbledger.grading.evidence.bundle import BASELINE_REF, CAPTURE_REF, EVIDENCE_REF
from cbledger.ledger import surfaces
from cbledger.ledger.events import (
    EvidenceImported,
    EvidenceImportedEvent,
    ImportSummary,
    ModelIdentity,
)
from cbledger.ledger.store import LedgerStore
from cbledger.projections import leaderboard
from cbledger.projections.fold import fold
from cbledger.runner import backstop
from cbledger.schemas import render
from tests.factories import MAINTAINER, rich_stream, run_cli, run_recorded

REPO = Path(__file__).resolve().parent.parent
SIGNATURE = pygit2.Signature("cbledger", "runner@cbledger.invalid", 1_700_000_000, 0)


def test_the_catalog_lists_every_surface_once_and_its_schema_is_committed():
    ids = [s.id for s in surfaces.catalog().surfaces]
    assert ids == [
        "copperhead-api-provider", "copperhead-saved-login", "copperhead-compat-endpoint",
        "scripted-harness-agents", "manual-reviewer-import", "imported-reference-records",
    ]
    assert (REPO / "schema" / "surfaces.schema.json").read_text() == render("surfaces", surfaces.SurfaceCatalog)
    doc = json.loads(surfaces.PATH.read_text())
    doc["surfaces"].append(dict(doc["surfaces"][0]))
    with pytest.raises(ValueError, match="listed twice"):
        surfaces.parse(json.dumps(doc).encode(), "surfaces.json")
    doc["surfaces"][0]["ownership"] = "mine"
    with pytest.raises(ValueError, match="ownership"):
        surfaces.parse(json.dumps(doc).encode(), "surfaces.json")


def _run(model: str, mode: str = "agent", segment: str = "api-frontier"):
    body = run_recorded(1).body
    return msgspec.structs.replace(
        body, run_mode=mode,
        model=ModelIdentity(id=model, provider="p", segment=segment, pinning="strong", selection_source="flag"),
    )


@pytest.mark.parametrize("model, mode, segment, surface", [
    ("gpt-5", "agent", "api-frontier", "copperhead-api-provider"),
    ("claude-sonnet", "agent", "api-frontier", "copperhead-api-provider"),
    ("codex", "agent", "saved-login", "copperhead-saved-login"),
    ("claude-code:sonnet", "agent", "saved-login", "copperhead-saved-login"),
    ("compat:local-llm", "agent", "open-weight-self-hosted", "copperhead-compat-endpoint"),
    ("compat:scripted-solve", "scripted", "harness", "copperhead-compat-endpoint"),
    ("harness:gold", "gold", "harness", "scripted-harness-agents"),
    ("harness:noop", "noop", "harness", "scripted-harness-agents"),
])
def test_a_run_names_the_surface_its_route_says(model, mode, segment, surface):
    run = _run(model, mode, segment)
    assert surfaces.run_surface(run) == surface
    surfaces.catalog().get(surface)  # listed


def _import(fmt: str, ownership: str, surface=msgspec.UNSET) -> EvidenceImported:
    return EvidenceImported(
        ownership=ownership, source="s", original_path="a.json", format=fmt, sha256="ab" * 32, content="{}",  # type: ignore[arg-type]
        summary=ImportSummary(), surface=surface,
    )


def test_ownership_comes_from_the_surface_never_from_the_events_claim():
    s = rich_stream()
    claim = _import(surfaces.MANUAL_IMPORT_FORMAT, "imported", surface="copperhead-api-provider")
    s._add(EvidenceImportedEvent, claim, id="evidence.imported:claim", actor=MAINTAINER)
    text = leaderboard.render(fold(s.events))
    imported = text.split("## Imported / reviewer-supplied evidence", 1)[1].split("\n## ", 1)[0]
    row = next(line for line in imported.splitlines() if line.startswith(f"| {len(s.events)} |"))
    assert "| manual-reviewer-import | reviewer-supplied |" in row
    assert "surface-mismatch" in text and "import claims copperhead-api-provider / imported" in text


# --------------------------------------------------------------------------- canaries

CANARIES = {
    "copperhead-api-provider": ("transcript", "sk-" + "canaryApiProvider0123456789"),
    "copperhead-saved-login": ("harness log", "Authorization: Bearer " + "canarySavedLogin0123456789"),
    "copperhead-compat-endpoint": ("commit message", "gsk_" + "canaryCompatEndpoint01234"),
    "scripted-harness-agents": ("file name", "ghp_" + "canaryScriptedHarness0123456789abcdefgh"),
    "manual-reviewer-import": ("manual transcript", "sk-" + "canaryManualImport0123456789"),
    "imported-reference-records": ("reference record", "sk-" + "canaryReferenceRecord0123456"),
}


def test_every_surface_has_a_canary():
    assert set(CANARIES) == {s.id for s in surfaces.catalog().surfaces}


def _commit(repo: pygit2.Repository, files: dict[str, bytes], parents: list, message: str) -> pygit2.Oid:
    builder = repo.TreeBuilder()
    for name, data in files.items():
        builder.insert(name, repo.create_blob(data), pygit2.enums.FileMode.BLOB)
    return repo.create_commit(None, SIGNATURE, SIGNATURE, message, builder.write(), parents)


def _plant_in_a_run(tmp_path: Path, where: str, canary: str) -> None:
    """A preserved run's commits with the canary where that surface's evidence carries it, put
    through the backstop every run's bundle goes through."""
    repo = pygit2.init_repository(str(tmp_path / "run"), bare=True)
    seed = _commit(repo, {"board.kicad_sch": b"(kicad_sch)"}, [], "seed")
    files = {"board.kicad_sch": b"(kicad_sch)"}
    message = "agent edit"
    if where == "transcript":
        files["transcript.jsonl"] = f'{{"type":"tool","data":{{"result":"{canary}"}}}}\n'.encode()
    elif where == "file name":
        files[f"{canary}.txt"] = b"x"
    elif where == "commit message":
        message = f"agent edit with {canary}"
    head = _commit(repo, files, [seed], message)
    evidence_files = dict(files)
    evidence_files["harness-stderr.log"] = (canary if where == "harness log" else "ok").encode()
    evidence = _commit(repo, evidence_files, [head], "evidence")
    for ref, oid in ((BASELINE_REF, seed), (CAPTURE_REF, head), (EVIDENCE_REF, evidence)):
        repo.references.create(ref, oid, force=True)
    assert backstop.scan_preserved(repo, str(seed)), "the canary was not planted where the scan looks"
    redacted = backstop.require_clean(repo, str(seed), "canary-run", baseline_sha=str(seed), head_sha=str(head), stash_sha=None)
    assert redacted is not None and redacted.found
    assert backstop.scan_preserved(repo, str(seed)) == []
    for ref in (CAPTURE_REF, EVIDENCE_REF):
        commit = repo[repo.references[ref].target].peel(pygit2.Commit)
        assert canary not in commit.message
        for entry in commit.tree:
            assert canary not in (entry.name or "") and canary.encode() not in repo[entry.id].peel(pygit2.Blob).data


def _plant_in_an_import(tmp_path: Path, where: str, canary: str) -> None:
    root = tmp_path / "project"
    ledger = root / "results" / "ledger" / "events.jsonl"
    LedgerStore(ledger).init("canary", MAINTAINER)
    before = ledger.read_bytes()
    d = tmp_path / "review"
    d.mkdir()
    if where == "manual transcript":
        (d / "prompt.md").write_text("Rename the net.\n")
        (d / "session.jsonl").write_text(f'{{"type":"tool","data":{{"result":"{canary}"}}}}\n')
        doc = {
            "surface_id": "manual-reviewer-import", "benchmark": "copperbench", "case_slug": "do-rename-net",
            "variant": "baseline", "fixture_path": "fixtures/x", "prompt_path": "prompt.md",
            "transcript_path": "session.jsonl", "run_timestamp": "2026-09-10T14:30:00+02:00",
            "evaluator_notes": "n", "provenance": {"reviewer": "R"}, "redactions": [],
        }
        (d / "import.json").write_text(json.dumps(doc))
        result = run_cli(["import", "--manual", d / "import.json", "--root", root])
    else:
        (d / "run-1.json").write_text(json.dumps({"note": canary}))
        result = run_cli(["import", d / "run-1.json", "--root", root])
    assert result.exit_code == 4, result.output
    assert canary not in result.output
    assert ledger.read_bytes() == before


@pytest.mark.parametrize("surface_id", sorted(CANARIES))
def test_a_canary_planted_on_each_surface_is_stopped_by_its_rule(surface_id, tmp_path):
    where, canary = CANARIES[surface_id]
    rule = surfaces.catalog().get(surface_id).redaction
    if rule == "backstop-redact":
        _plant_in_a_run(tmp_path, where, canary)
    else:
        assert rule == "refuse-on-match"
        _plant_in_an_import(tmp_path, where, canary)


def test_the_saved_login_surface_says_unsandboxed_as_its_runs_must_be():
    """The catalog called it sandboxed while `run` refuses it without --unsandboxed, so the
    leaderboard's Surfaces row said "sandboxed" beside "unsandboxed 1"."""
    from cbledger.runner.suite_run import SAVED_LOGIN_ROUTES, refuse_saved_login

    for route in SAVED_LOGIN_ROUTES:
        with pytest.raises(UserError, match="--unsandboxed"):
            refuse_saved_login(f"{route}:some-model")
    assert surfaces.catalog().get("copperhead-saved-login").execution.startswith("unsandboxed-")
