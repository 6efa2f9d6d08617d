"""The credential pattern set and what the backstop does with a match: the added kinds (AWS,
PEM, URL credentials), JSON-escaped credentials, names, redaction that keeps JSON valid, and
messages that never echo a secret or a raw control character."""

from __future__ import annotations

import json

import pytest

from cbledger import credentials

OPENAI = "sk-" + "test0123456789" * 2
AWS_ID = "AKIA" + "TESTKEY123456789"
PEM = "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEAtest\nline2\n-----END RSA PRIVATE KEY-----"


def kinds(text: str) -> set[str]:
    return {m.kind for m in credentials.scan_text(text, "f")}


@pytest.mark.parametrize(("text", "kind"), [
    (f"id={AWS_ID}", "aws-access-key-id"),
    ("aws_secret_access_key = " + "a" * 20 + "/" + "B" * 19, "aws-secret-access-key"),
    (PEM, "pem-private-key"),
    ("-----BEGIN OPENSSH PRIVATE KEY-----", "pem-private-key"),
    ("-----BEGIN PGP PRIVATE KEY BLOCK-----", "pem-private-key"),
    ("clone https://bob:s3cret@git.example.invalid/repo.git", "url-credentials"),
    ("postgres://app:pw@10.0.0.1:5432/db", "url-credentials"),
])
def test_the_added_kinds_match(text, kind):
    assert kind in kinds(text)


@pytest.mark.parametrize("text", [
    "https://github.com/owner/repo", "ssh://git@github.com:22/x", "https://example.com:8080/a@b",
    "mailto:someone@example.com", "-----BEGIN PUBLIC KEY-----", "-----BEGIN CERTIFICATE-----", "AKIAshort",
])
def test_look_alikes_do_not(text):
    assert kinds(text) == set()


def test_a_json_escaped_key_is_found_and_the_location_says_so():
    line = json.dumps({"text": OPENAI}).replace("s", "\\u0073", 1)
    assert "sk-" not in line
    (match,) = credentials.scan_text("first line\n" + line, "transcript.jsonl")
    assert match.kind == "openai-or-anthropic-key" and match.location == "transcript.jsonl:2 (JSON-escaped)"
    assert credentials.scan_json({"a": "\\u0073k-" + "x" * 24})


def test_redaction_keeps_json_valid_and_removes_the_whole_pem_block():
    doc = {"text": f"key {OPENAI} and\nnewline", "pem": PEM}
    escaped = json.dumps(doc).replace("sk-", "\\u0073k-")
    redacted = credentials.redact(escaped)
    assert json.loads(redacted) == {"text": "key <openai-or-anthropic-key> and\nnewline", "pem": "<pem-private-key>"}
    assert not credentials.has_match(redacted)


def test_a_key_split_by_an_escape_is_still_redacted():
    text = '"Bearer\\n' + "A" * 30 + '"'
    assert credentials.has_match(text)
    assert not credentials.has_match(credentials.redact(text))


def test_names_and_locations_never_echo_a_secret_or_a_control_character():
    (match,) = credentials.scan_name(f"docs/{OPENAI}.txt", f"file name docs/{OPENAI}.txt")
    assert OPENAI not in str(match) and "<openai-or-anthropic-key>" in str(match)
    (match,) = credentials.scan_text(OPENAI, "docs/\x1b[31mred\n.txt")
    assert "\x1b" not in str(match) and "\n" not in str(match) and "\\x1b[31mred\\n.txt" in str(match)
    (match,) = credentials.scan_json({OPENAI: "value"})
    assert OPENAI not in str(match)
    assert credentials.printable("x" * 500).endswith("…") and len(credentials.printable("x" * 500)) == credentials.PRINTABLE_LIMIT


def test_binary_data_keeps_its_bytes_where_nothing_matched():
    data = b"\xff\xfe\x00binary " + OPENAI.encode() + b" \x80tail"
    out = credentials.redact_bytes(data)
    assert out == b"\xff\xfe\x00binary <openai-or-anthropic-key> \x80tail"


def test_the_pattern_set_hash_covers_the_added_kinds():
    assert {"aws-access-key-id", "aws-secret-access-key", "pem-private-key", "url-credentials"} <= {p.kind for p in credentials.PATTERNS}
    assert credentials.PATTERN_SET_HASH != "0" * 64


def test_a_json_escaped_key_in_an_imported_transcript_is_refused_without_echo(tmp_path):
    from cbledger.ledger.store import LedgerStore
    from tests.factories import MAINTAINER, run_cli
    from tests.test_reproduce_imports import manual

    root = tmp_path / "project"
    LedgerStore(root / "results" / "ledger" / "events.jsonl").init("imports-test", MAINTAINER)
    path = manual(tmp_path)
    escaped = "\\u0073" + OPENAI[1:]
    (path.parent / "session.jsonl").write_text(f'{{"type":"tool","data":{{"result":"{escaped}"}}}}\n')
    result = run_cli(["import", "--manual", path, "--root", root])
    assert result.exit_code == 4, result.output
    assert "at session.jsonl:1 (JSON-escaped)" in result.stderr
    assert OPENAI not in result.output and escaped not in result.output
    assert not (root / "results" / "imports").exists()
