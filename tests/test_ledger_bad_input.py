"""What `cbledger append` does with input it must refuse: exit non-zero, say what is wrong and
where (kind and JSON path), never repeat a credential back, and leave the ledger byte-identical.
Also the input shapes it must accept."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest

from cbledger import credentials
from cbledger.errors import SecretFound
from cbledger.ledger import encoding
from cbledger.ledger.encoding import InvalidEvent
from cbledger.ledger.store import LedgerStore
from cbledger.ledger.verify import verify_chain
from tests.factories import (
    draft_dict,
    draft_json,
    grade_recorded,
    new_ledger,
    one_of_each,
    pricing_published,
    rubric_scored,
    run_cli,
    run_recorded,
    run_retracted,
)

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def ledger(tmp_path: Path) -> Path:
    path = tmp_path / "events.jsonl"
    new_ledger(path).append([run_recorded(1)])
    return path


def append(ledger: Path, data: bytes | str) -> Any:
    return run_cli(["append", "--ledger", ledger, "-"], input=data)


def refused(ledger: Path, data: bytes | str, *needles: str, code: int | None = None) -> str:
    """Appends `data`, asserts the refusal, and returns the error message."""
    before = ledger.read_bytes()
    result = append(ledger, data)
    assert result.exit_code != 0, result.output
    if code is not None:
        assert result.exit_code == code, result.output
    assert result.stdout == ""
    assert result.stderr.startswith("error: "), result.stderr
    assert "Traceback" not in result.stderr
    for needle in needles:
        assert needle in result.stderr, f"{needle!r} not in {result.stderr!r}"
    assert ledger.read_bytes() == before
    return result.stderr


def edited(event, edit: Callable[[dict], None]) -> bytes:
    doc = draft_dict(event)
    edit(doc)
    return json.dumps(doc).encode()


# --------------------------------------------------------------------------- malformed and mistyped


def test_malformed_json(ledger: Path) -> None:
    message = refused(ledger, b'{"type": "run.retracted", "id": ', "<stdin>", "not valid JSON", code=2)
    assert "truncated" in message or "malformed" in message


def test_malformed_json_on_a_later_line_names_the_line(ledger: Path) -> None:
    data = draft_json(run_retracted(1)) + b"\n" + draft_json(run_retracted(2)) + b"\n{not json}\n"
    refused(ledger, data, "line 3: not valid JSON", "malformed", code=2)


def test_unknown_event_type(ledger: Path) -> None:
    data = edited(run_retracted(1), lambda d: d.update(type="run.deleted"))
    message = refused(ledger, data, "$.type", "(the event types: ", code=2)
    assert "run.retracted, run.recorded" not in message and "run.recorded, run.retracted" in message  # sorted


def test_missing_field(ledger: Path) -> None:
    data = edited(run_retracted(1), lambda d: d["body"].pop("reason"))
    refused(ledger, data, "missing required field `reason`", "$.body", code=2)


def test_missing_nested_field(ledger: Path) -> None:
    data = edited(run_recorded(2), lambda d: d["body"]["sandbox"].pop("captureSha"))
    refused(ledger, data, "`captureSha`", "$.body.sandbox", code=2)


def test_mistyped_field(ledger: Path) -> None:
    data = edited(run_retracted(1), lambda d: d["body"].update(runId=5))
    refused(ledger, data, "Expected `str`, got `int`", "$.body.runId", code=2)


def test_value_breaking_a_pattern(ledger: Path) -> None:
    data = edited(run_recorded(2), lambda d: d["body"]["sandbox"].update(headSha="ABC"))
    refused(ledger, data, "$.body.sandbox.headSha", code=2)


@pytest.mark.parametrize(
    ("path", "edit"),
    [
        ("$.body.sandbox.headSha", lambda d: d["body"]["sandbox"].update(headSha=d["body"]["sandbox"]["headSha"] + "\n")),
        ("$.body.sandbox.storeBlake3", lambda d: d["body"]["sandbox"].update(storeBlake3=d["body"]["sandbox"]["storeBlake3"] + "\n")),
        ("$.body.task.id", lambda d: d["body"]["task"].update(id="fix-net\n")),
        ("$.body.comparability.suiteVersion", lambda d: d["body"]["comparability"].update(suiteVersion="1.1.0\n")),
        ("$.body.runId", lambda d: d["body"].update(runId="run-000002\n")),
        ("$.body.model.id", lambda d: d["body"]["model"].update(id="claude-sonnet-4.5\n")),
        ("$.id", lambda d: d.update(id="run.recorded:run-000002\n")),
    ],
    ids=["Hex40", "Hex64", "Slug", "SemVer", "RunId", "ModelId", "EventId"],
)
def test_a_trailing_newline_breaks_an_anchored_pattern(ledger: Path, path: str, edit: Callable[[dict], None]) -> None:
    """Python's `$` also matches before a final newline; the patterns must not let one through."""
    refused(ledger, edited(run_recorded(2), edit), path, code=2)


def test_a_trailing_newline_breaks_a_decimal_price(ledger: Path) -> None:
    data = edited(pricing_published(2), lambda d: d["body"]["models"]["gpt-5-mini"].update(input="0.25\n"))
    refused(ledger, data, "$.body.models", code=2)


@pytest.mark.parametrize("event_id", ["42", "0042", "7\n"])
def test_an_all_digit_event_id_is_refused(ledger: Path, event_id: str) -> None:
    """`cbledger show 42` means seq 42, so no event may be called 42."""
    refused(ledger, edited(run_retracted(1), lambda d: d.update(id=event_id)), "$.id", code=2)


def test_an_event_id_with_digits_and_more_is_accepted(ledger: Path) -> None:
    result = append(ledger, edited(run_retracted(1), lambda d: d.update(id="42a")))
    assert result.exit_code == 0, result.output
    assert LedgerStore(ledger).find("42a") is not None


def test_every_anchored_schema_pattern_refuses_a_trailing_newline(repo_root: Path) -> None:
    """msgspec checks patterns with `re.search`, so each one ending in `$` must end in `(?!\\n)$`
    (the same meaning as `$` in the ECMA-262 regexes of the published JSON Schemas)."""

    def patterns(doc: Any) -> list[str]:
        if isinstance(doc, dict):
            own = [doc["pattern"]] if isinstance(doc.get("pattern"), str) else []
            return own + [p for v in doc.values() for p in patterns(v)]
        if isinstance(doc, list):
            return [p for v in doc for p in patterns(v)]
        return []

    found = {p for path in sorted((repo_root / "schema").glob("*.schema.json")) for p in patterns(json.loads(path.read_text()))}
    anchored = sorted(p for p in found if p.endswith("$"))
    assert anchored
    assert [p for p in anchored if not p.endswith(r"(?!\n)$")] == []


def test_unknown_field(ledger: Path) -> None:
    data = edited(run_retracted(1), lambda d: d["body"].update(reson="typo"))
    refused(ledger, data, "unknown field `reson`", "$.body", code=2)


def test_unknown_envelope_field(ledger: Path) -> None:
    data = edited(run_retracted(1), lambda d: d.update(hash="0" * 64))
    refused(ledger, data, "unknown field `hash`", code=2)


@pytest.mark.parametrize("field", ["at", "timings"])
def test_naive_datetime(ledger: Path, field: str) -> None:
    if field == "at":
        data = edited(run_retracted(1), lambda d: d.update(at="2026-03-01T12:00:00"))
        path = "$.at"
    else:
        data = edited(run_recorded(2), lambda d: d["body"]["timings"].update(startedAt="2026-03-01T12:00:00"))
        path = "$.body.timings.startedAt"
    refused(ledger, data, "timezone", path, code=2)


def test_nan_literal(ledger: Path) -> None:
    data = draft_json(grade_recorded(1)).replace(b'"partialCredit":0.75', b'"partialCredit":NaN')
    assert b"NaN" in data
    refused(ledger, data, "malformed", code=2)


def test_out_of_range_float(ledger: Path) -> None:
    data = edited(grade_recorded(1), lambda d: d["body"].update(partialCredit=1.5))
    refused(ledger, data, "<= 1.0", "$.body.partialCredit", code=2)


def test_float_where_money_is_a_decimal_string(ledger: Path) -> None:
    data = edited(pricing_published(1), lambda d: d["body"]["models"]["gpt-5-mini"].update(input=0.25))
    refused(ledger, data, "got `float`", "$.body.models", "input", code=2)


def test_float_where_money_is_integer_micros(ledger: Path) -> None:
    data = edited(run_recorded(2), lambda d: d["body"]["cost"].update(usdMicros=0.19))
    refused(ledger, data, "$.body.cost.usdMicros", code=2)


def test_seq_supplied_by_the_client(ledger: Path) -> None:
    data = edited(run_retracted(1), lambda d: d.update(seq=9))
    refused(ledger, data, "seq is assigned by the ledger", code=2)


def test_grade_contradicting_itself(ledger: Path) -> None:
    data = edited(grade_recorded(1), lambda d: d["body"].update(verdict="fail"))
    refused(ledger, data, "verdict fail", code=2)


@pytest.mark.parametrize("score", [0.99, 1.5])
def test_a_judge_score_that_is_not_its_criteria_points_over_the_maximum(ledger: Path, score: float) -> None:
    """Criteria of 3/3 and 1/2 beside a score of 0.99 were appended, shown on the leaderboard and
    verified: the score a reader sees must be the one the points make (4/5)."""
    criteria = [{"id": "states-the-purpose", "points": 3, "maxPoints": 3}, {"id": "actionable", "points": 1, "maxPoints": 2}]
    data = edited(rubric_scored(1), lambda d: d["body"].update(criteria=criteria, score=score))
    refused(ledger, data, f"score {score} is not its criteria's 4 points of 5", code=2)
    assert append(ledger, edited(rubric_scored(1), lambda d: d["body"].update(criteria=criteria, score=0.8))).exit_code == 0


def test_one_bad_line_among_good_ones_writes_nothing(ledger: Path) -> None:
    good = [draft_json(e) for e in one_of_each(5)]
    bad = edited(run_retracted(6), lambda d: d["body"].update(runId=None))
    refused(ledger, b"\n".join(good[:3] + [bad] + good[3:]) + b"\n", "line 4", "$.body.runId", code=2)


def test_one_bad_element_of_an_array_writes_nothing(ledger: Path) -> None:
    docs = [draft_dict(e) for e in one_of_each(5)]
    docs[2]["body"]["unexpected"] = True
    refused(ledger, json.dumps(docs), "unknown field `unexpected`", "$[2].body", code=2)


def test_empty_input(ledger: Path) -> None:
    refused(ledger, b"  \n", "no events", code=2)


# --------------------------------------------------------------------------- NaN built in Python


def _replace_body(event, **changes):
    return msgspec.structs.replace(event, body=msgspec.structs.replace(event.body, **changes))


@pytest.mark.parametrize(
    "build, path",
    [
        (lambda: _replace_body(grade_recorded(1), partial_credit=float("nan")), "$.body.partialCredit"),
        (lambda: _replace_body(grade_recorded(1), partial_credit=float("inf")), "$.body.partialCredit"),
        (lambda: _replace_body(rubric_scored(1), score=float("nan")), "$.body.score"),
        (
            lambda: _replace_body(
                grade_recorded(1),
                assertions=[
                    msgspec.structs.replace(a, weight=float("nan")) if i == 2 else a
                    for i, a in enumerate(grade_recorded(1).body.assertions)
                ],
            ),
            "$.body.assertions[2].weight",
        ),
    ],
    ids=["nan-partial-credit", "inf-partial-credit", "nan-rubric-score", "nan-assertion-weight"],
)
def test_nan_built_in_python_is_refused_by_the_library(ledger: Path, build, path: str) -> None:
    """JSON has no NaN, so msgspec would quietly encode it as null; the store must notice."""
    event = build()
    before = ledger.read_bytes()
    with pytest.raises(InvalidEvent, match=re.escape(path)):
        LedgerStore(ledger).append([run_retracted(3), event])
    with pytest.raises(InvalidEvent, match=re.escape(path)):
        encoding.encode(event)
    assert ledger.read_bytes() == before


# --------------------------------------------------------------------------- credentials

#: One sample per credential kind; a new kind without a sample fails the coverage test below.
SECRETS = {
    "openai-or-anthropic-key": "sk-proj-Tq8vX2mN4kL7pR9sW3yZ6bC1",
    "google-api-key": "AIzaSyD4kL7pR9sW3yZ6bC1Tq8vX2mN4kL7pR9x",
    "http-bearer-token": "Bearer eyJhbGciOiJIUzI1NiJ9.abcdEFGH",
    "npm-token": "npm_Tq8vX2mN4kL7pR9sW3yZ6bC1Tq8vX2mN4kL7",
    "github-token": "ghp_Tq8vX2mN4kL7pR9sW3yZ6bC1Tq8vX2mN4kL7",
    "github-fine-grained-pat": "github_pat_11ABCDEFG0123456789_abcdefghijklmnop",
    "groq-key": "gsk_Tq8vX2mN4kL7pR9sW3yZ6bC1",
    "aws-access-key-id": "AKIATQ8VX2MN4KL7PR9S",
    "aws-secret-access-key": "aws_secret_access_key = Tq8vX2mN4kL7pR9sW3yZ6bC1Tq8vX2mN4kL7pR9s",
    "pem-private-key": "-----BEGIN RSA PRIVATE KEY-----",
    "url-credentials": "https://deploy:Tq8vX2mN4kL7@db.example.invalid/app",
}


def test_every_credential_kind_has_a_sample() -> None:
    assert set(SECRETS) == {p.kind for p in credentials.PATTERNS}
    for p in credentials.PATTERNS:
        assert p.compiled().search(SECRETS[p.kind]), p.kind


def secret_free(message: str, secret: str) -> bool:
    """Neither the secret nor any recognisable run of it appears in the message."""
    core = re.sub(
        r"^(sk-|AIza|Bearer\s+|npm_|gh[pousr]_|github_pat_|gsk_|AKIA|aws_secret_access_key = |-----BEGIN |https://)",
        "", secret, flags=re.I,
    )
    return secret not in message and core[:12] not in message


@pytest.mark.parametrize("kind", sorted(SECRETS))
def test_each_credential_kind_is_refused_without_being_echoed(ledger: Path, kind: str) -> None:
    secret = SECRETS[kind]
    data = edited(run_retracted(1), lambda d: d["body"].update(reason=f"debug: {secret} oops"))
    message = refused(ledger, data, kind, "$.body.reason", code=4)
    assert secret_free(message, secret), message


# Places a key can be planted, each with the JSON path the message must name (None where the
# event is refused by the schema first; the message must still not repeat the key).
SK = SECRETS["openai-or-anthropic-key"]
PLACEMENTS: list[tuple[str, Callable[[], bytes], str | None]] = [
    ("free-text", lambda: edited(run_recorded(2, note=f"key={SK}"), lambda d: None), "$.body.runnerNote"),
    ("patterned-field", lambda: edited(run_retracted(1), lambda d: d["body"].update(runId=SK)), "$.body.runId"),
    ("event-id", lambda: edited(run_retracted(1), lambda d: d.update(id=SK)), "$.id"),
    ("actor-name", lambda: edited(run_retracted(1), lambda d: d["actor"].update(name=SK)), "$.actor.name"),
    ("list-item", lambda: edited(run_recorded(2), lambda d: d["body"]["task"]["tags"].append(SK)), "$.body.task.tags[2]"),
    (
        "dict-key",
        lambda: edited(run_recorded(2), lambda d: d["body"]["evidence"].update({SK: d["body"]["evidence"]["diff"]})),
        "$.body.evidence",
    ),
    ("unknown-field-name", lambda: edited(run_retracted(1), lambda d: d["body"].update({SK: 1})), None),
    ("enum-value", lambda: edited(run_retracted(1), lambda d: d["actor"].update(kind=SK)), None),
    ("event-type", lambda: edited(run_retracted(1), lambda d: d.update(type=SK)), None),
    (
        "grade-invariant-message",
        lambda: edited(
            grade_recorded(1),
            lambda d: d["body"]["assertions"][1].update(id=SK, status="fail"),
        ),
        None,
    ),
    ("malformed-json", lambda: b'{"id": "' + SK.encode() + b'", "type": ', None),
]


@pytest.mark.parametrize("name, build, path", PLACEMENTS, ids=[p[0] for p in PLACEMENTS])
def test_a_planted_key_is_never_echoed(ledger: Path, name: str, build, path: str | None) -> None:
    needles = ("openai-or-anthropic-key", path) if path else ()
    message = refused(ledger, build(), *needles)
    assert secret_free(message, SK), message


@pytest.mark.parametrize(
    "batch, which, path",
    [
        (lambda: [run_retracted(3), run_recorded(2, note=SK)], "event 1 ", "$.body.runnerNote"),
        (lambda: [run_retracted(3), run_retracted(1, id=SK)], "event 1 ", "$.id"),
        (lambda: [msgspec.structs.replace(run_retracted(1, id=SK), seq=4)], "event 0 ", "$.id"),
    ],
    ids=["note", "id", "id-and-seq"],
)
def test_a_key_built_in_python_is_refused_by_the_library(
    ledger: Path, batch, which: str, path: str
) -> None:
    before = ledger.read_bytes()
    with pytest.raises(SecretFound) as info:
        LedgerStore(ledger).append(batch())
    assert str(info.value).startswith(which)
    assert f"openai-or-anthropic-key at {path}" in str(info.value)
    assert secret_free(str(info.value), SK)
    assert ledger.read_bytes() == before


@pytest.mark.parametrize(
    "note",
    [
        "Bearer\tAbCdEfGhIjKlMnOpQrSt",  # whitespace JSON escapes
        "Bearer\u00a0AbCdEfGhIjKlMnOpQrSt",  # whitespace JSON leaves as UTF-8
        'a "quoted" note, then ' + SK,  # an escape elsewhere in the event
        "first line\n" + SK,
        SK + "\\",
    ],
    ids=["bearer-tab", "bearer-nbsp", "escaped-quote", "after-newline", "before-backslash"],
)
def test_credentials_next_to_escapes_are_found(ledger: Path, note: str) -> None:
    """The store rules events out with one search over their canonical JSON; strings that JSON
    escapes must still be scanned as the strings they are."""
    before = ledger.read_bytes()
    with pytest.raises(SecretFound):
        LedgerStore(ledger).append([run_recorded(2, note=note)])
    assert ledger.read_bytes() == before


# --------------------------------------------------------------------------- accepted shapes


def _appended(ledger: Path, result) -> list[dict]:
    assert result.exit_code == 0, result.output
    assert verify_chain(ledger).ok
    return json.loads(result.stdout)


def test_json_array(ledger: Path) -> None:
    events = one_of_each(7)
    data = json.dumps([draft_dict(e) for e in events])
    out = _appended(ledger, run_cli(["append", "--json", "--ledger", ledger, "-"], input=data))
    assert [r["id"] for r in out] == [e.id for e in events]
    assert [r["seq"] for r in out] == list(range(3, 3 + len(events)))


def test_json_lines_with_blank_lines(ledger: Path) -> None:
    events = one_of_each(7)
    data = b"\n\n".join(draft_json(e) for e in events) + b"\n"
    out = _appended(ledger, run_cli(["append", "--json", "--ledger", ledger, "-"], input=data))
    assert [r["id"] for r in out] == [e.id for e in events]


def test_pretty_printed_single_object(ledger: Path) -> None:
    data = json.dumps(draft_dict(run_recorded(2)), indent=2)
    assert data.count("\n") > 10
    out = _appended(ledger, run_cli(["append", "--json", "--ledger", ledger, "-"], input=data))
    assert [(r["seq"], r["id"]) for r in out] == [(3, "run.recorded:run-000002")]


def test_pretty_printed_single_object_with_an_error_names_the_path(ledger: Path) -> None:
    doc = draft_dict(run_recorded(2))
    doc["body"]["repeat"] = 0
    refused(ledger, json.dumps(doc, indent=2), "$.body.repeat", code=2)


def test_a_file_argument(ledger: Path, tmp_path: Path) -> None:
    source = tmp_path / "events.json"
    source.write_bytes(draft_json(run_retracted(1)))
    out = _appended(ledger, run_cli(["append", "--json", "--ledger", ledger, source]))
    assert out[0]["type"] == "run.retracted"
    missing = run_cli(["append", "--ledger", ledger, tmp_path / "nope.json"])
    assert missing.exit_code != 0 and "no such file" in missing.stderr


def test_stdin_through_the_real_command(ledger: Path) -> None:
    """The same path a runner takes: a separate process, events piped on stdin."""
    data = b"\n".join(draft_json(e) for e in one_of_each(8)) + b"\n"
    cmd = [sys.executable, "-m", "cbledger.cli.app", "append", "--ledger", str(ledger)]
    ok = subprocess.run(cmd, input=data, capture_output=True, cwd=REPO, timeout=60)
    assert ok.returncode == 0, ok.stderr.decode()
    assert ok.stdout.decode().count("\n") == len(one_of_each(8))
    before = ledger.read_bytes()
    bad = draft_json(run_retracted(9)).replace(b'"reason":"', b'"reason":"' + SK.encode())
    refused_run = subprocess.run(cmd, input=bad, capture_output=True, cwd=REPO, timeout=60)
    assert refused_run.returncode == 4
    assert b"openai-or-anthropic-key at $.body.reason" in refused_run.stderr
    assert SK.encode() not in refused_run.stderr + refused_run.stdout
    assert ledger.read_bytes() == before


# --------------------------------------------------------------------------- seq and size limits


@pytest.mark.parametrize("seq", [0, 2, 545, -1, "0", None])
def test_a_client_seq_is_refused_whatever_its_value(ledger: Path, seq: object) -> None:
    """`"seq": 0` once passed silently (a draft's default), while `"seq": 545` was refused."""
    refused(ledger, edited(run_retracted(1), lambda d: d.update(seq=seq)), "seq is assigned by the ledger", "$.seq",
            code=2)


def test_a_client_seq_in_an_array_names_the_item(ledger: Path) -> None:
    items = [draft_dict(run_retracted(1)), {**draft_dict(run_retracted(2)), "seq": 0}]
    refused(ledger, json.dumps(items), "item 1", "$[1].seq", code=2)


@pytest.mark.parametrize(
    ("where", "edit"),
    [
        ("$.actor.name", lambda d: d["actor"].update(name="x" * 70_000)),
        ("$.body.reason", lambda d: d["body"].update(reason="r" * 70_000)),
        ("bytes, over the limit", lambda d: d["actor"].update(name="x" * 10_000_000)),
    ],
    ids=["actor-name", "reason", "whole-event"],
)
def test_a_field_or_event_over_its_size_limit_is_refused(ledger: Path, where: str, edit: Callable[[dict], None]) -> None:
    refused(ledger, edited(run_retracted(1), edit), where, "over the limit", code=2)


def test_the_store_holds_python_built_events_to_the_same_limits(ledger: Path) -> None:
    from cbledger.ledger.events import Actor

    before = ledger.read_bytes()
    event = msgspec.structs.replace(run_retracted(1), actor=Actor(kind="person", name="n" * 70_000))
    with pytest.raises(Exception, match=r"over the limit of 65536 - at `\$\.actor\.name`"):
        LedgerStore(ledger).append([event])
    assert ledger.read_bytes() == before


def test_a_price_table_appended_by_hand_is_held_to_the_bound_pricing_publish_holds_it_to(ledger: Path) -> None:
    """`pricing publish` refused a price past $1,000,000 per million tokens, while the same table
    submitted to `cbledger append` went in: its runs' costs then pass what an event can hold."""
    def absurd(doc: dict) -> None:
        doc["body"]["models"] = {"m:x": {"segment": "api-cheap", "pinning": "strong", "input": "1", "output": "10000000"}}

    message = refused(ledger, edited(pricing_published(1), absurd), "line 1",
                      '$.body.models["m:x"].output: 10000000 USD per million tokens is past any real price (1000000 at most)')
    assert "nothing appended" in message
    after_the_run = edited(pricing_published(1), lambda doc: doc["body"].update(effectiveDate="2026-03-02"))
    assert append(ledger, after_the_run).exit_code == 0


def test_a_price_table_appended_by_hand_never_reaches_back_as_pricing_publish_refuses(tmp_path: Path) -> None:
    """`pricing publish` refused a table that would re-price a recorded run; appended as an
    event it went in, and the day's later runs of that model were priced at it, in one row."""
    ledger = tmp_path / "events.jsonl"
    new_ledger(ledger).append([pricing_published(1), run_recorded(1)])

    def backdated(doc: dict) -> None:
        doc["id"], doc["body"]["tableVersion"] = "pricing:later", "later"
        doc["body"]["effectiveDate"] = "2026-01-02"
        doc["body"]["models"]["claude-sonnet-4.5"]["input"] = "30"

    refused(ledger, edited(pricing_published(1), backdated), "<stdin>: line 1: effectiveDate 2026-01-02 would "
            "re-price 1 recorded run(s) (first run-000001, claude-sonnet-4.5", "a price change never reaches back")

    def reused(doc: dict) -> None:
        doc["id"] = "pricing:again"
        doc["body"]["models"]["gpt-5-mini"]["output"] = "9"

    refused(ledger, edited(pricing_published(1), reused), "$.tableVersion: '2026-01' is already published with other prices")
    assert append(ledger, edited(pricing_published(1), lambda doc: None)).exit_code == 0  # the same table again: a no-op
