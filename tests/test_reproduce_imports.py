"""`cbledger import`: the reference implementation's published records (both of its layouts) and
reviewer-supplied manual imports become `evidence.imported`, verbatim and idempotent, shown in
their own leaderboard section and never in a model row, skipped by `replay --verify` with a note;
bad input and credentials are refused with nothing written."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
from pathlib import Path

import msgspec
import pytest

from cbledger.ledger.store import LedgerStore
from cbledger.projections.writers import load_state
from cbledger.reproduce.import_formats import LEGACY_FORMAT
from cbledger.reproduce.manual import REQUIRED
from tests.factories import MAINTAINER, run_cli

SECRET = "sk-" + "a1B2" * 8  # matches the openai-or-anthropic-key pattern


@pytest.fixture
def root(tmp_path) -> Path:
    root = tmp_path / "project"
    LedgerStore(root / "results" / "ledger" / "events.jsonl").init("imports-test", MAINTAINER)
    return root


@pytest.fixture
def published(shared_real) -> Path:
    return shared_real / "reference-records" / "results"


def ledger_of(root: Path) -> Path:
    return root / "results" / "ledger" / "events.jsonl"


def imports(root: Path) -> list:
    return [s.event for s in LedgerStore(ledger_of(root)).read(types={"evidence.imported"})]


def cli(root: Path, *args):
    return run_cli([*args, "--root", root])


# --------------------------------------------------------------------------- published records


def test_a_tree_of_both_layouts_is_imported_verbatim(root, published):
    files = sorted(published.rglob("*.json"))
    result = cli(root, "import", published, "--source", "copperheadhq/copperbench", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["imported"] == len(files) == 19

    events = imports(root)
    by_path = {e.body.original_path: e for e in events}
    assert set(by_path) == {f.relative_to(published).as_posix() for f in files}
    for f in files:
        e = by_path[f.relative_to(published).as_posix()]
        data = f.read_bytes()
        assert e.id == f"evidence.imported:{hashlib.sha256(data).hexdigest()}"
        assert e.body.sha256 == hashlib.sha256(data).hexdigest() and e.body.content == data.decode()
        assert e.body.ownership == "imported" and e.body.source == "copperheadhq/copperbench"
        assert e.actor.kind == "importer" and e.body.files == []
    formats = [e.body.format for e in events]
    assert formats.count(LEGACY_FORMAT) == 3 and formats.count("copperbench-result/1.0.0") == 16

    legacy = by_path["2026-08-01/compat-qwen2.5-coder-7b/do-rename-net/run-2.json"].body.summary
    assert (legacy.task_id, legacy.model, legacy.verdict, legacy.suite_version, legacy.run_date, legacy.repeat) == (
        "do-rename-net", "compat:qwen2.5-coder:7b", "fail", "1.0.1", "2026-08-01", 2)
    assert legacy.fixture_sha256 == "b4332d44964cab0323746e3a74e60b5636ff30775fb7c2133b18339b13bb2ac6"
    unscoreable = by_path["2026-09-06/harness-gold/do-rename-net/run-1.json"].body.summary
    assert (unscoreable.verdict, unscoreable.model, unscoreable.suite_version, unscoreable.run_date) == (
        "unscoreable", "harness:gold", "0.1.0", "2026-09-06")
    assert unscoreable.fixture_sha256 == "dad443ad059b7cd2ec57313967db7c511caa8bcfd1ba72dc2f02cd3560249529"


def test_a_retracted_record_and_its_mark_are_not_imported(root, published, tmp_path):
    tree = tmp_path / "tree"
    shutil.copytree(published, tree)
    day = tree / "2026-09-06" / "harness-gold" / "do-rename-net"
    (day / "run-2.retracted.json").write_text(json.dumps({
        "format": "cbledger-retraction/1", "runId": "x", "retracted": True, "retractedAtSeq": 9,
        "reason": "a test", "records": ["run-2.json"],
    }))
    result = cli(root, "import", tree, "--source", "a-mirror", "--json")
    assert result.exit_code == 0, result.output
    imported = {e.body.original_path for e in imports(root)}
    assert len(imported) == 18 and "2026-09-06/harness-gold/do-rename-net/run-2.json" not in imported
    assert not any(p.endswith(".retracted.json") for p in imported)


def test_importing_again_is_a_no_op(root, published):
    assert cli(root, "import", published, "--source", "ref").exit_code == 0
    before = ledger_of(root).read_bytes()
    again = cli(root, "import", published, "--source", "ref", "--json")
    assert again.exit_code == 0
    report = json.loads(again.stdout)
    assert report["unchanged"] == 19 and report["imported"] == 0
    one = published / "2026-08-01" / "compat-qwen2.5-coder-7b" / "do-rename-net" / "run-1.json"
    elsewhere = cli(root, "import", one, "--source", "a-mirror", "--json")
    assert elsewhere.exit_code == 0
    (outcome,) = json.loads(elsewhere.stdout)["outcomes"]
    assert outcome["status"] == "duplicate" and "2026-08-01/compat-qwen2.5-coder-7b/do-rename-net/run-1.json" in outcome["note"]
    assert ledger_of(root).read_bytes() == before


def test_a_single_file_keeps_its_name_and_where_it_sits(root, published):
    one = published / "2026-09-07" / "harness-noop" / "do-rename-net" / "run-1.json"
    assert cli(root, "import", one).exit_code == 0
    (e,) = imports(root)
    assert e.body.original_path == "run-1.json" and e.body.source == "run-1.json"
    assert (e.body.summary.run_date, e.body.summary.repeat, e.body.format) == ("2026-09-07", 1, "copperbench-result/1.0.0")


def test_imports_have_their_own_section_and_never_a_model_row(root, published):
    assert cli(root, "import", published, "--source", "copperheadhq/copperbench").exit_code == 0
    assert cli(root, "project", "all").exit_code == 0
    state = load_state(ledger_of(root))
    assert state.runs == {} and len(state.imports) == 19
    board = (root / "LEADERBOARD.md").read_text()
    head, section = board.split("## Imported / reviewer-supplied evidence", 1)
    section = section.split("\n## ", 1)[0]
    assert "compat:qwen2.5-coder:7b" not in head and "harness:gold" not in head
    rows = [line for line in section.splitlines() if line.startswith("| ") and "copperheadhq/copperbench" in line]
    assert len(rows) == 19 and sum("| unscoreable |" in r for r in rows) == 1
    assert not list((root / "results").glob("20*/*/*/run-*.json"))  # never a project record
    db = sqlite3.connect(root / "results" / "cbledger.db")
    assert db.execute("SELECT count(*) FROM imports").fetchone() == (19,)
    assert db.execute("SELECT count(*) FROM runs").fetchone() == (0,)
    assert db.execute("SELECT count(*) FROM leaderboard_rows").fetchone() == (0,)

    verify = cli(root, "replay", "--verify", "--json")
    assert verify.exit_code == 0, verify.output
    report = json.loads(verify.stdout)
    notes = [n for n in report["notes"] if n["kind"] == "imported"]
    assert len(notes) == 19 and all("not re-gradable" in n["message"] for n in notes)


def test_a_file_in_neither_layout_refuses_the_whole_import(root, published, tmp_path):
    tree = tmp_path / "tree"
    shutil.copytree(published, tree)
    bad = tree / "2026-09-07" / "harness-gold" / "do-rename-net" / "run-2.json"
    bad.write_text(json.dumps({"verdict": "pass", "note": "not a record"}))
    before = ledger_of(root).read_bytes()
    result = cli(root, "import", tree)
    assert result.exit_code == 2
    assert str(bad) in result.stderr and "not a copperbench result record in either known layout" in result.stderr
    assert ledger_of(root).read_bytes() == before

    wrong_type = tree / "2026-09-07" / "harness-gold" / "do-rename-net" / "run-2.json"
    record = json.loads((tree / "2026-09-07" / "harness-gold" / "do-rename-net" / "run-1.json").read_text())
    record["run"]["repeat"] = "one"
    wrong_type.write_text(json.dumps(record))
    result = cli(root, "import", tree)
    assert result.exit_code == 2 and "$.run.repeat" in result.stderr
    assert ledger_of(root).read_bytes() == before


def test_a_credential_in_a_record_refuses_the_import(root, published, tmp_path):
    tree = tmp_path / "tree"
    shutil.copytree(published, tree)
    victim = tree / "2026-09-06" / "harness-noop" / "do-rename-net" / "run-2.json"
    victim.write_text(victim.read_text().replace('"detail": "', f'"detail": "{SECRET} ', 1))
    before = ledger_of(root).read_bytes()
    result = cli(root, "import", tree)
    assert result.exit_code == 4
    assert "openai-or-anthropic-key at 2026-09-06/harness-noop/do-rename-net/run-2.json:" in result.stderr
    assert SECRET not in result.output
    assert ledger_of(root).read_bytes() == before


# --------------------------------------------------------------------------- manual imports


def manual(tmp_path: Path, **overrides) -> Path:
    d = tmp_path / "review"
    d.mkdir(exist_ok=True)
    (d / "prompt.md").write_text("Rename the net DATA to PDM_DATA and update the pinout.\n")
    (d / "session.jsonl").write_text('{"type":"run-start","data":{}}\n{"type":"run-end","data":{"exitPath":"done"}}\n')
    doc = {
        "surface_id": "manual-reviewer-import",
        "benchmark": "copperbench suite 1.0.0",
        "case_slug": "do-rename-net",
        "variant": "baseline",
        "fixture_path": "fixtures/antmicro-microphone-board",
        "prompt_path": "prompt.md",
        "transcript_path": "session.jsonl",
        "run_timestamp": "2026-09-10T14:30:00+02:00",
        "evaluator_notes": "Both labels renamed; the pinout row was left stale.",
        "provenance": {"reviewer": "R. Viewer", "tool": "claude-code 1.2 (print mode)"},
        "redactions": ["home directory paths"],
    }
    for k, v in overrides.items():
        if v is _DROP:
            doc.pop(k)
        else:
            doc[k] = v
    path = d / "import.json"
    path.write_text(json.dumps(doc, indent=2) + "\n")
    return path


_DROP = object()


def test_a_manual_import_keeps_prompt_and_transcript_as_files(root, tmp_path):
    path = manual(tmp_path)
    result = cli(root, "import", "--manual", path)
    assert result.exit_code == 0, result.output
    (e,) = imports(root)
    b = e.body
    data = path.read_bytes()
    assert (b.ownership, b.source, b.format, b.original_path) == ("reviewer-supplied", "manual-reviewer-import", "manual-import/1", "import.json")
    assert b.sha256 == hashlib.sha256(data).hexdigest() and b.content == data.decode() and e.actor.kind == "reviewer"
    s = b.summary
    assert (s.task_id, s.variant, s.benchmark, s.surface_id, s.run_date, s.model, s.verdict) == (
        "do-rename-net", "baseline", "copperbench suite 1.0.0", "manual-reviewer-import", "2026-09-10", None, None)
    assert [f.role for f in b.files] == ["prompt", "transcript"]
    for f, src in zip(b.files, ("prompt.md", "session.jsonl"), strict=True):
        kept = root / f.stored_path
        original = (path.parent / src).read_bytes()
        assert f.stored_path == f"results/imports/{b.sha256}/{f.role}/{src}" and f.original_path == src
        assert kept.read_bytes() == original and f.sha256 == hashlib.sha256(original).hexdigest() and f.bytes == len(original)
    before = ledger_of(root).read_bytes()
    again = cli(root, "import", "--manual", path)
    assert again.exit_code == 0 and "already imported" in again.stdout
    assert ledger_of(root).read_bytes() == before

    assert cli(root, "project", "all").exit_code == 0
    section = (root / "LEADERBOARD.md").read_text().split("## Imported / reviewer-supplied evidence", 1)[1]
    assert "| reviewer-supplied | manual-reviewer-import | manual-import/1 | do-rename-net |" in section


def test_a_manual_import_under_results_dir_names_the_files_where_they_were_kept(tmp_path):
    """It once printed `kept results/imports/…` for files it kept in DIR, and then cut a path
    longer than 200 characters (as any value it prints) to one nobody could open."""
    chosen = tmp_path / ("elsewhere-" + "d" * 120)
    LedgerStore(chosen / "ledger" / "events.jsonl").init("imports-test", MAINTAINER)
    path = manual(tmp_path)
    result = run_cli(["--results", chosen, "import", "--manual", path, "--root", tmp_path])
    assert result.exit_code == 0, result.output
    kept = [line.split(None, 1)[1] for line in result.stdout.splitlines() if line.startswith("kept ")]
    assert kept and all(Path(k).is_file() and k.startswith(f"{chosen}/imports/") for k in kept), result.stdout


@pytest.mark.parametrize("field", REQUIRED)
def test_each_missing_field_is_named(root, tmp_path, field):
    path = manual(tmp_path, **{field: _DROP})
    result = cli(root, "import", "--manual", path)
    assert result.exit_code == 2
    assert f"{field}: missing" in result.stderr and "1 problem(s)" in result.stderr
    assert imports(root) == [] and not (root / "results" / "imports").exists()


def test_every_mistyped_field_is_named_at_once(root, tmp_path):
    path = manual(
        tmp_path, surface_id=7, case_slug="Do Rename", run_timestamp="2026-09-10 14:30", provenance="",
        evaluator_notes=None, redactions="none", reviewer="someone",
    )
    result = cli(root, "import", "--manual", path)
    assert result.exit_code == 2
    for expected in (
        "surface_id: must be a string, got a number",
        "case_slug: 'Do Rename' is not a kebab-case slug",
        "run_timestamp: '2026-09-10 14:30' has no timezone",
        "provenance: must be a non-empty string or object",
        "evaluator_notes: must be a string, got null",
        "redactions: must be an array of non-empty strings",
        "reviewer: unknown field",
    ):
        assert expected in result.stderr, result.stderr
    assert "7 problem(s)" in result.stderr
    assert imports(root) == []


def test_a_missing_prompt_file_is_named(root, tmp_path):
    path = manual(tmp_path, prompt_path="prompts/missing.md")
    result = cli(root, "import", "--manual", path)
    assert result.exit_code == 2
    assert "prompt_path: no such file: prompts/missing.md" in result.stderr
    assert imports(root) == [] and not (root / "results" / "imports").exists()


def test_a_credential_in_a_manual_transcript_writes_nothing(root, tmp_path):
    path = manual(tmp_path)
    (path.parent / "session.jsonl").write_text(f'{{"type":"tool","data":{{"result":"Authorization: Bearer {SECRET}"}}}}\n')
    result = cli(root, "import", "--manual", path)
    assert result.exit_code == 4
    assert "at session.jsonl:1" in result.stderr and SECRET not in result.output
    assert imports(root) == [] and not (root / "results" / "imports").exists()


# --------------------------------------------------------------------------- hostile manual imports

PEM = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\n-----END OPENSSH PRIVATE KEY-----\n"
AWS = "[default]\naws_access_key_id = AKIAIOSFODNN7EXAMPLE\naws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\n"


def _outside(tmp_path: Path) -> dict[str, Path]:
    """A planted PEM key and an AWS credentials file beside (not under) the import root."""
    secrets = tmp_path / "home" / ".secrets"
    secrets.mkdir(parents=True)
    (secrets / "id_ed25519").write_text(PEM)
    (secrets / "credentials").write_text(AWS)
    return {"pem": secrets / "id_ed25519", "aws": secrets / "credentials", "passwd": Path("/etc/passwd")}


def _refused(root: Path, path: Path, field: str, why: str) -> None:
    result = cli(root, "import", "--manual", path)
    assert result.exit_code == 2, result.output
    assert f"{field}: " in result.stderr and why in result.stderr, result.stderr
    assert imports(root) == [] and not (root / "results" / "imports").exists()
    for secret in ("BEGIN OPENSSH", "AKIAIOSFODNN7EXAMPLE", "root:x:0:0"):
        assert secret not in result.output


@pytest.mark.parametrize("target", ["passwd", "pem", "aws"])
def test_an_absolute_path_outside_the_import_root_is_refused(root, tmp_path, target):
    outside = _outside(tmp_path)
    path = manual(tmp_path, transcript_path=str(outside[target]))
    _refused(root, path, "transcript_path", "is an absolute path")


@pytest.mark.parametrize("target", ["pem", "aws"])
def test_a_dotdot_path_is_refused(root, tmp_path, target):
    outside = _outside(tmp_path)
    rel = os.path.relpath(outside[target], tmp_path / "review")
    assert rel.startswith("..")
    path = manual(tmp_path, prompt_path=rel)
    _refused(root, path, "prompt_path", "contains '..'")


@pytest.mark.parametrize("target", ["passwd", "pem", "aws"])
def test_a_symlink_to_a_file_outside_is_refused(root, tmp_path, target):
    outside = _outside(tmp_path)
    path = manual(tmp_path)
    link = path.parent / "session.jsonl"
    link.unlink()
    link.symlink_to(outside[target])
    _refused(root, path, "transcript_path", "goes through a symlink")


def test_a_symlinked_directory_on_the_way_is_refused(root, tmp_path):
    outside = _outside(tmp_path)
    path = manual(tmp_path, transcript_path="logs/credentials")
    (path.parent / "logs").symlink_to(outside["aws"].parent)
    _refused(root, path, "transcript_path", "goes through a symlink (logs)")


def test_a_fifo_in_place_of_the_transcript_is_refused_without_blocking(root, tmp_path):
    path = manual(tmp_path)
    fifo = path.parent / "session.jsonl"
    fifo.unlink()
    os.mkfifo(fifo)
    _refused(root, path, "transcript_path", "a FIFO; only regular files are read")


def test_the_import_file_itself_as_a_symlink_is_refused(root, tmp_path):
    path = manual(tmp_path)
    link = tmp_path / "link.json"
    link.symlink_to(path)
    result = cli(root, "import", "--manual", link)
    assert result.exit_code == 2 and "a symlink" in result.stderr
    assert imports(root) == []


def test_an_explicit_import_root_bounds_what_is_read(root, tmp_path):
    path = manual(tmp_path, prompt_path="prompt.md")
    narrower = path.parent / "inner"
    narrower.mkdir()
    result = cli(root, "import", "--manual", path, "--import-root", narrower)
    assert result.exit_code == 2 and "not under the import root" in result.stderr


def test_size_limits_name_the_file_and_field(root, tmp_path, monkeypatch):
    from cbledger.reproduce import manual as manual_mod

    path = manual(tmp_path, evaluator_notes="x" * 70000)
    result = cli(root, "import", "--manual", path)
    assert result.exit_code == 2 and "evaluator_notes: 70000 characters, over the limit of 65536" in result.stderr
    monkeypatch.setitem(manual_mod.MAX_FILE_BYTES, "transcript", 16)
    path = manual(tmp_path)
    result = cli(root, "import", "--manual", path)
    assert result.exit_code == 2
    assert "transcript_path: " in result.stderr and "session.jsonl" in result.stderr and "over the limit of 16 bytes" in result.stderr
    monkeypatch.setattr(manual_mod, "MAX_IMPORT_BYTES", 64)
    result = cli(root, "import", "--manual", path)
    assert result.exit_code == 2 and "import.json (the manual import file): " in result.stderr and "over the limit of 64 bytes" in result.stderr
    assert imports(root) == []


def test_deep_nesting_and_duplicate_keys_in_an_import_are_refused(root, tmp_path):
    path = manual(tmp_path)
    path.write_text("[" * 100000 + "]" * 100000)
    result = cli(root, "import", "--manual", path)
    assert result.exit_code == 2 and "nested 100000 deep, over the limit of 64" in result.stderr
    path.write_text(path.read_text()[:0] + '{"case_slug": "a", "case_slug": "b"}')
    result = cli(root, "import", "--manual", path)
    assert result.exit_code == 2 and 'duplicate key case_slug' in result.stderr
    assert imports(root) == []


def test_a_timestamp_that_overflows_in_utc_is_refused(root, tmp_path):
    path = manual(tmp_path, run_timestamp="0001-01-01T00:00:00+05:00")
    result = cli(root, "import", "--manual", path)
    assert result.exit_code == 2 and "run_timestamp: " in result.stderr and "outside the representable range" in result.stderr


def test_a_symlink_in_a_record_tree_is_refused(root, tmp_path):
    outside = _outside(tmp_path)
    tree = tmp_path / "records"
    tree.mkdir()
    (tree / "run-1.json").symlink_to(outside["aws"])
    result = cli(root, "import", tree)
    assert result.exit_code == 2 and "a symlink" in result.stderr and "AKIA" not in result.output
    assert imports(root) == []


@pytest.mark.parametrize("durable", [True, False], ids=["after-the-batch-landed", "before-it"])
def test_an_interrupted_import_keeps_its_files_exactly_when_its_events_landed(root, tmp_path, monkeypatch, durable):
    """An interrupt may land after the batch was made durable and before the append returned:
    the event then names the kept prompt and transcript, which must stay; before that, nothing
    may stay."""
    from cbledger.reproduce import imports as imports_mod
    from cbledger.workspace import Workspace

    real_append = LedgerStore.append

    def interrupted(self, events, **kw):
        if durable:
            real_append(self, events, **kw)
        raise KeyboardInterrupt

    path = manual(tmp_path)
    monkeypatch.setattr(LedgerStore, "append", interrupted)
    before = {p for p in (root / "results").rglob("*") if p.is_file()}
    with pytest.raises(KeyboardInterrupt):
        imports_mod.import_manual(Workspace.at(root), path, None, None)
    new_files = {p for p in (root / "results").rglob("*") if p.is_file()} - before
    landed = imports(root)
    if durable:
        (e,) = landed
        named = {root / f.stored_path for f in e.body.files}
        assert len(named) == 2 and named <= new_files, "the files the landed event names were removed"
    else:
        assert landed == [] and new_files == set()


def test_an_import_is_held_to_what_its_event_states(root, tmp_path):
    """`replay --verify` skipped imports with a note and never read their kept files, and
    `append` took an import whose content did not hash to the sha256 its id claims: evidence
    could be rewritten after its import, or made up under another import's hash."""
    path = manual(tmp_path)
    assert cli(root, "import", "--manual", path).exit_code == 0
    (e,) = imports(root)
    assert cli(root, "replay", "--verify", "--no-projections").exit_code == 0
    transcript = root / next(f.stored_path for f in e.body.files if f.role == "transcript")
    original = transcript.read_bytes()
    transcript.write_bytes(original + b'{"role":"assistant","content":"tampered"}\n')
    tampered = cli(root, "replay", "--verify", "--no-projections", "--json")
    assert tampered.exit_code == 3, tampered.output
    (found,) = json.loads(tampered.stdout)["failures"]
    assert (found["kind"], found["file"], found["seq"]) == ("import-file-different", f"results/imports/{e.body.sha256}/transcript/session.jsonl", 2)
    said = cli(root, "replay", "--verify", "--no-projections")
    assert "NOT VERIFIED: an import does not match what its event states (exit 3)" in said.stderr, said.stderr
    transcript.unlink()
    gone = json.loads(cli(root, "replay", "--verify", "--no-projections", "--json").stdout)["failures"]
    assert [f["kind"] for f in gone] == ["import-file-missing"]
    transcript.write_bytes(original)
    # an import under a hash its content does not have: refused at append, nothing written
    forged = msgspec.to_builtins(e)
    forged.pop("seq", None)
    forged["body"]["sha256"] = "3" * 64
    forged["id"] = "evidence.imported:" + "3" * 64
    before = ledger_of(root).read_bytes()
    refused = run_cli(["append", "-", "--ledger", ledger_of(root)], input=json.dumps(forged) + "\n")
    assert refused.exit_code == 2, refused.output
    assert f"$.body.content hashes to sha256 {e.body.sha256}, not the $.body.sha256 {'3' * 64}" in refused.stderr
    assert ledger_of(root).read_bytes() == before


def test_a_record_that_claims_a_layout_and_breaks_it_is_refused_naming_the_layout_and_path(tmp_path):
    """The refusal named the class that reads a layout (`not a CurrentRecord`), which no reader has."""
    from cbledger.errors import UserError
    from cbledger.reproduce.import_formats import recognize

    claims = json.dumps({"verdict": "pass", "comparability": {}, "task": 7}).encode()
    with pytest.raises(UserError) as caught:
        recognize(claims, "2026-01-01/m/t/run-1.json", "in.json")
    said = str(caught.value)
    assert said.startswith("in.json: not a result record in the copperbench-result/<schemaVersion> layout: "), said
    assert "Record" not in said.split(":", 2)[1] and "`$." in said, said
    with pytest.raises(UserError, match=r"a JSON object is expected\) - at `\$`"):
        recognize(b"[1]", "x.json", "x.json")
