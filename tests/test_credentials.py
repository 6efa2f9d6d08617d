"""The credential pattern set and what the backstop does with a match: the added kinds (AWS,
PEM, URL credentials), JSON-escaped credentials, names, redaction that keeps JSON valid, and
messages that never echo a secret or a raw control character."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

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


# One sample match of every pattern kind, in the spellings a case-insensitive pattern also matches.
#: the characters beyond ASCII that `re` matches, case-insensitively, to an ASCII letter (`ſ` to
#: `s`, the Kelvin sign to `k`): lower-casing alone leaves them as they are
_CASE_FOLDS = {"\u017f": "s", "\u212a": "k", "\u0130": "i", "\u0131": "i"}


SAMPLES = {
    "openai-or-anthropic-key": ["sk-" + "a" * 24],
    "google-api-key": ["AIza" + "b" * 35],
    "http-bearer-token": ["Bearer " + "c" * 20, "BEARER " + "c" * 20, "bEaReR\t" + "c" * 20],
    "npm-token": ["npm_" + "d" * 36],
    "github-token": [f"gh{x}_" + "e" * 36 for x in "pousr"],
    "github-fine-grained-pat": ["github_pat_" + "f" * 22],
    "groq-key": ["gsk_" + "g" * 20],
    "aws-access-key-id": [p + "H" * 16 for p in ("AKIA", "ASIA", "ABIA", "ACCA")],
    "aws-secret-access-key": [
        "aws_secret_access_key=" + "i" * 40,
        "AWS_SECRET_ACCESS_KEY: " + "i" * 40,
        # re's case-insensitive matching takes the long s for s and the Kelvin sign for k
        "aws_\u017fecret_access_\u212aey=" + "i" * 40,
    ],
    "pem-private-key": ["-----BEGIN EC PRIVATE KEY-----"],
    "url-credentials": ["https://u:p@h.example"],
}


def test_every_kind_has_a_sample_and_every_sample_matches_its_kind():
    assert set(SAMPLES) == {p.kind for p in credentials.PATTERNS}
    for kind, texts in SAMPLES.items():
        for text in texts:
            assert kind in kinds(f"before {text} after"), (kind, text)


def test_the_anchor_test_never_rules_out_a_text_a_pattern_matches():
    """`scan_text` and the ledger skip a pattern none of whose anchors occurs: that must be sound,
    in the text and in the canonical JSON holding it."""
    anchored = {p.kind for p in credentials.PATTERNS if p.anchors}
    for kind, texts in SAMPLES.items():
        for text in texts:
            for wrapped in (text, f"x {text} y", f"\u00e9 {text}"):
                for where in (wrapped, json.dumps({"v": wrapped}, ensure_ascii=False)):
                    assert kind not in anchored or kind in credentials.anchored_kinds(where), (kind, where)
    assert credentials.anchored_kinds("plain text, with_underscores and a BEARING") == set()


def test_the_case_folds_are_every_character_beyond_ascii_that_matches_an_ascii_letter_ignoring_case():
    import re

    letters = "abcdefghijklmnopqrstuvwxyz"
    any_letter = re.compile(f"[{letters}]", re.IGNORECASE)
    folds = {}
    for code in range(128, 0x110000):
        c = chr(code)
        if any_letter.fullmatch(c):
            folds[c] = next(x for x in letters if re.fullmatch(x, c, re.IGNORECASE))
    assert folds == _CASE_FOLDS


def test_undoing_an_escape_agrees_with_the_json_decoder():
    escapes = ['\\"', "\\\\", "\\/", "\\b", "\\f", "\\n", "\\r", "\\t", "\\u0073", "\\u00e9", "\\uD83D\\uDE00",
               "\\ud800", "\\udc00", "\\uFFFF", "\\u0000"]
    for escape in escapes:
        text = f"a{escape}b"
        assert credentials.unescaped(text) == json.loads(f'"{text}"'), escape


def test_the_url_pattern_is_searched_by_window_and_finds_what_finditer_finds():
    import random
    import re

    url = next(p for p in credentials.PATTERNS if p.kind == "url-credentials")
    assert [k for k, *_, windowed in credentials._SCANNED if windowed] == ["url-credentials"]
    rx = url.compiled()
    rng = random.Random(14)
    pieces = ["https", "://", "u", "ser", ":", "pw", "@", "h", "/", " ", "\n", "x", "é", "_", "a" * 31, "-", "[", "@@", "s3"]
    found = 0
    for _ in range(3000):
        parts = []
        for _ in range(rng.randint(0, 6)):
            # mostly near-URLs with credentials, each then cut or spliced at random
            parts.append(rng.choice(["https", "a" * rng.randint(30, 34), "x-y.z", "é"]) + "://" + rng.choice(["u", "us/er", "é"])
                         + ":" + rng.choice(["pw", "p w", "p:w", ""]) + "@" + rng.choice(["h", "[", "/", "@h"]))
            parts.append("".join(rng.choice(pieces) for _ in range(rng.randint(0, 4))))
        text = "".join(parts)
        if text and rng.random() < 0.3:
            cut = rng.randrange(len(text))
            text = text[:cut] + text[cut + 1:]
        expected = [m.span() for m in rx.finditer(text)]
        found += bool(expected)
        assert [m.span() for m in credentials._url_matches(rx, text)] == expected, text
    assert found > 500
    assert [m.span() for m in credentials._url_matches(rx, "xhttps://u:p@h")] == [m.span() for m in re.finditer(url.regex, "xhttps://u:p@h")]


def _scan_text_line_by_line(text: str, location: str) -> list[credentials.Match]:
    """scan_text as the standard states it: every line, and every escaped line undone at every depth, on its own."""
    found = [
        credentials.Match(kind, f"{location}:{text.count(chr(10), 0, m.start()) + 1}")
        for kind, matches in credentials._matches(text) for m in matches
    ]
    seen = {(m.kind, m.location) for m in found}
    for lineno, line in enumerate(text.split("\n"), start=1):
        if "\\" in line:
            for kind, matches in credentials._matches(credentials.unescaped_fully(line)):
                if next(matches, None) is not None and (kind, f"{location}:{lineno}") not in seen:
                    seen.add((kind, f"{location}:{lineno}"))
                    found.append(credentials.Match(kind, f"{location}:{lineno} (JSON-escaped)"))
    return found


_PIECES = st.sampled_from([
    "sk-", "abcdefghijklmnopqrstuvwxyz0123", "\\u0073k-", "\\u0073", "k-", "\\n", "\n", "\\", "\\\\", '\\"', " ",
    "Bearer ", "\\u0042earer ", "https://", "u:p@h", "-----BEGIN ", "PRIVATE KEY-----", "AKIA", "0123456789ABCDEF",
    "\\ud83d", "\\ude00", "\u017f", "npm_", "plain words",
])


@settings(max_examples=300, deadline=None)
@given(st.lists(_PIECES, max_size=14).map("".join))
@example("\\\\u0073k-abcdefghijklmnopqrstuvwxyz0123")  # escaped twice: a random seed once found it
def test_scan_text_finds_what_a_line_by_line_scan_finds(text: str) -> None:
    """scan_text rules the escaped lines out together before it scans them one by one: that
    shortcut must never change what it reports."""
    assert credentials.scan_text(text, "f") == _scan_text_line_by_line(text, "f")


@pytest.mark.parametrize("depth", [2, 3, 5])
def test_a_key_json_escaped_at_any_depth_is_found_redacted_and_refused(depth, tmp_path):
    """`{"k":"\\\\u0073k-proj-…"}` (escaped twice) was once kept as written; the single form was caught."""
    from tests.factories import draft_dict, new_ledger, run_cli, run_retracted

    value = "\\" * (2 ** (depth - 1) - 1) + "\\u0073" + OPENAI[1:]  # JSON-decoded `depth` times: the key
    text = json.dumps({"k": value})
    assert "sk-" not in text
    assert [m.kind for m in credentials.scan_text(text, "f")] == ["openai-or-anthropic-key"]
    assert credentials.has_match(text) and not credentials.has_match(credentials.redact(text))
    assert credentials.scan_json(json.loads(text))
    ledger = tmp_path / "events.jsonl"
    new_ledger(ledger)
    before = ledger.read_bytes()
    draft = draft_dict(run_retracted(1))
    draft["body"]["reason"] = value
    result = run_cli(["append", "--ledger", ledger, "-"], input=json.dumps(draft))
    assert result.exit_code == 4 and "credential pattern matched" in result.stderr, result.stderr
    assert ledger.read_bytes() == before


def _spellings(pattern: credentials.Pattern, anchor: str) -> list[str]:
    """The anchor as written and, for a case-insensitive pattern, in other cases and with the
    characters beyond ASCII that `re` folds to its letters."""
    if not pattern.flags & re.IGNORECASE:
        return [anchor]
    out = [anchor, anchor.upper(), anchor.title(), anchor.swapcase()]
    for beyond, letter in _CASE_FOLDS.items():
        if letter in anchor:
            out.append(anchor.replace(letter, beyond))
    return out


def test_the_anchor_searches_find_every_anchor_of_every_pattern_wherever_it_stands():
    """`anchored_kinds` finds anchors in a few passes instead of one per anchor; a pattern whose
    anchor it missed would never be run, so it must find every one: alone, inside other text
    and right beside any other anchor (a search must not swallow its neighbour's)."""
    anchored = [(p, a) for p in credentials.PATTERNS for a in p.anchors]
    assert {p.kind for p, _ in anchored} == {p.kind for p in credentials.PATTERNS if p.anchors}
    for p, anchor in anchored:
        for text in _spellings(p, anchor):
            for before, after in [("", ""), ("x", "y"), ("\u00e9 ", " \u00e9"), ("-_/AB", "_-/AB")]:
                assert p.kind in credentials.anchored_kinds(before + text + after), (p.kind, before + text + after)
            for q, other in anchored:
                for joined in (text + other, other + text):
                    assert {p.kind, q.kind} <= credentials.anchored_kinds(joined), joined
    assert credentials.anchored_kinds("plain text, with_underscores, A B and a BEARING - //") == set()


_NEAR_ANCHORS = st.sampled_from([
    "sk", "k-", "-", "AI", "za", "Iza", "b", "B", "earer", "EARER", "npm", "_", "gh", "p_", "github", "pat_", "gsk",
    "A", "KIA", "SIA", "BIA", "CCA", "aws", "AWS", "\u017fecret", "secret_access_", "\u212aey", "key", "-----",
    "----BEGIN ", ":", "/", "//", "x", "é", "\n", " ",
])


def _folded(text: str) -> str:
    lowered = text.lower()
    for beyond, letter in _CASE_FOLDS.items():
        lowered = lowered.replace(beyond, letter)
    return lowered


@settings(max_examples=1500, deadline=None)
@given(st.lists(_NEAR_ANCHORS, max_size=16).map("".join))
def test_the_anchor_searches_find_what_a_search_for_each_anchor_finds(text: str) -> None:
    """Anchors assembled from pieces: the searches report a pattern exactly when one of its
    anchors occurs, compared as its pattern compares (case folded for a case-insensitive one)."""
    expected = {
        p.kind for p in credentials.PATTERNS
        if any((a.lower() in _folded(text)) if p.flags & re.IGNORECASE else (a in text) for a in p.anchors)
    }
    assert credentials.anchored_kinds(text) == expected, text


@pytest.mark.parametrize("value", [
    "https:\\/\\/u:p@h.example",  # the string holds `\/`: decoded once more, a URL with credentials
    "https:\\\\/\\\\/u:p@h.example",
    "\\u0073k-" + "x" * 24,
    "\\\\u0041Iza" + "b" * 35,
])
def test_an_anchor_spelt_only_by_an_escape_still_sends_the_event_to_the_full_scan(value):
    """The ledger's check searches the bytes as written and undoes nothing when no escape can
    spell an anchor's character; `\\u` and `\\/` can, at any depth."""
    import msgspec

    from cbledger.ledger.credential_guard import may_hold_credential

    assert credentials.scan_json({"k": value})
    data = msgspec.json.encode({"k": value, "seed": '{"a":1}'}, order="sorted")
    assert not credentials.anchored_kinds(data.decode())
    assert may_hold_credential(data)


def test_anchors_sharing_a_character_are_both_found():
    """`sk-` and `-----BEGIN ` can share a hyphen; a search reporting one kind per place would
    have hidden the second."""
    assert credentials.anchored_kinds("sk-----BEGIN ") == {"openai-or-anthropic-key", "pem-private-key"}
    assert credentials.anchored_kinds("ghs_ecret_access_key aws_ ghs_") == {"github-token"}
