"""Tampering with a stored ledger: every edit `replay --verify` can see must fail the command and
name the first bad seq and the kind of problem, because "the chain is broken somewhere" does not
tell a maintainer what to look at."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import msgspec
import pytest

from cbledger.ledger import encoding
from cbledger.ledger.chain import GENESIS, format_line, link_hash, parse_line
from cbledger.ledger.verify import verify_chain
from tests.factories import (
    draft_json,
    grade_recorded,
    ledger_created,
    new_ledger,
    pricing_published,
    run_cli,
    run_recorded,
    run_retracted,
    suite_bumped,
)

Lines = list[bytes]


@pytest.fixture
def ledger(tmp_path: Path) -> Path:
    path = tmp_path / "events.jsonl"
    store = new_ledger(path)
    store.append([suite_bumped(1), pricing_published(1)])  # seq 2, 3
    store.append([run_recorded(1), grade_recorded(1), run_recorded(2), grade_recorded(2)])  # 4..7
    store.append([run_retracted(1)])  # seq 8
    return path


def split(path: Path) -> Lines:
    return path.read_bytes().splitlines(keepends=True)


def events_of(lines: Lines) -> list[bytes]:
    return [bytes(parse_line(line).event) for line in lines]


def rechain(events: list[bytes]) -> bytes:
    """Builds a file whose every link and hash is correct for these event bytes, as a forger who
    knows the format would: only the content can give such a file away."""
    out, prev = [], GENESIS
    for data in events:
        seq = msgspec.json.decode(data)["seq"]
        h = link_hash(prev, seq, data)
        out.append(format_line(data, h, prev))
        prev = h
    return b"".join(out)


def with_seq(data: bytes, seq: int) -> bytes:
    return encoding.encode(msgspec.structs.replace(encoding.decode(data), seq=seq))


def forged_at(seq: int, draft, prev: str) -> bytes:
    data = encoding.encode(msgspec.structs.replace(draft, seq=seq))
    return format_line(data, link_hash(prev, seq, data), prev)


def edit(line: bytes, old: bytes, new: bytes) -> bytes:
    assert old in line, (old, line[:80])
    return line.replace(old, new, 1)


def put(lines: Lines, index: int, line: bytes) -> bytes:
    return b"".join(lines[:index] + [line] + lines[index + 1 :])


def flip_hash_digit(line: bytes, field: bytes) -> bytes:
    start = line.index(b'"' + field + b'":"') + len(field) + 4
    digit = line[start + 10 : start + 11]
    other = b"0" if digit != b"0" else b"1"
    return line[: start + 10] + other + line[start + 11 :]


def reorder_envelope(line: bytes) -> bytes:
    parsed = parse_line(line)
    return b'{"hash":"%s","prev":"%s","event":%s}\n' % (parsed.hash.encode(), parsed.prev.encode(), bytes(parsed.event))


def escape_hash_digit(line: bytes) -> bytes:
    start = line.index(b'"hash":"') + 8
    return line[:start] + b"\\u%04x" % line[start] + line[start + 1 :]


# Each case: a name, how to tamper (lines -> file bytes), and the kind, line and seq verify must
# name. The seq named is the one stored on the first bad line (for a seq-gap, the unexpected seq;
# the message also says which was expected); every line before it verifies.
Tamper = Callable[[Lines], bytes]
CASES: list[tuple[str, Tamper, str, int, int]] = [
    ("byte-in-body", lambda ls: put(ls, 3, edit(ls[3], b"linux-x86_64", b"linux-x86_65")), "hash-mismatch", 4, 4),
    (
        "byte-in-envelope",
        lambda ls: put(ls, 5, edit(ls[5], b'"copperbench-runner"', b'"copperbench-rUnner"')),
        "hash-mismatch",
        6,
        6,
    ),
    ("byte-in-own-hash", lambda ls: put(ls, 4, flip_hash_digit(ls[4], b"hash")), "hash-mismatch", 5, 5),
    ("byte-in-prev", lambda ls: put(ls, 4, flip_hash_digit(ls[4], b"prev")), "broken-link", 5, 5),
    ("byte-breaks-json", lambda ls: put(ls, 2, edit(ls[2], b'"event":{', b'"event":[')), "undecodable", 3, 3),
    ("newline-removed", lambda ls: put(ls, 2, ls[2][:-1] + b" "), "undecodable", 3, 3),
    ("drop-first-line", lambda ls: b"".join(ls[1:]), "seq-gap", 1, 2),
    ("drop-middle-line", lambda ls: b"".join(ls[:4] + ls[5:]), "seq-gap", 5, 6),
    ("duplicate-line", lambda ls: b"".join(ls[:5] + [ls[4]] + ls[5:]), "seq-gap", 6, 5),
    ("reorder-two-lines", lambda ls: b"".join(ls[:3] + [ls[4], ls[3]] + ls[5:]), "seq-gap", 4, 5),
    (
        "insert-forged-line-with-its-own-hash",  # a plausible seq 5, linked to seq 4, slotted in
        lambda ls: b"".join(ls[:4] + [forged_at(5, run_recorded(77), parse_line(ls[3]).hash)] + ls[4:]),
        "seq-gap",
        6,
        5,
    ),
    (
        "replace-line-with-forged-line-with-its-own-hash",
        lambda ls: put(ls, 4, forged_at(5, run_recorded(77), parse_line(ls[3]).hash)),
        "broken-link",
        6,
        6,
    ),
    (
        "unknown-field-rechained",  # every link and hash recomputed, but not an event this build reads
        lambda ls: rechain(
            events_of(ls[:6]) + [edit(events_of(ls)[6], b'"body":{', b'"body":{"extra":1,')] + events_of(ls[7:])
        ),
        "unreadable",  # as a newer build's event would fail: never verified, said with both readings
        7,
        7,
    ),
    (
        "duplicate-id-rechained",
        lambda ls: rechain(events_of(ls[:7]) + [with_seq(events_of(ls)[3], 8)]),
        "duplicate-id",
        8,
        8,
    ),
    (
        "seq-1-not-genesis-rechained",
        lambda ls: rechain([with_seq(e, i) for i, e in enumerate(events_of(ls[1:]), start=1)]),
        "genesis",
        1,
        1,
    ),
    (
        "second-genesis-rechained",
        lambda ls: rechain(events_of(ls) + [with_seq(encoding.encode(ledger_created("b")), 9)]),
        "genesis",
        9,
        9,
    ),
    ("torn-tail", lambda ls: b"".join(ls[:-1]) + ls[-1][:57], "torn-tail", 8, 8),
    # Edits outside the hashed event bytes that leave the same JSON meaning: the line is no longer
    # the one the store wrote, and verification must say so rather than pass it.
    ("space-inserted-in-envelope", lambda ls: put(ls, 3, edit(ls[3], b'{"event":', b'{"event": ')), "undecodable", 4, 4),
    ("envelope-keys-reordered", lambda ls: put(ls, 3, reorder_envelope(ls[3])), "undecodable", 4, 4),
    ("hash-digit-escaped", lambda ls: put(ls, 3, escape_hash_digit(ls[3])), "undecodable", 4, 4),
]


@pytest.mark.parametrize("name, tamper, kind, line, seq", CASES, ids=[c[0] for c in CASES])
def test_replay_verify_names_the_seq_and_the_kind(
    ledger: Path, name: str, tamper: Tamper, kind: str, line: int, seq: int
) -> None:
    assert verify_chain(ledger).ok
    original = split(ledger)
    tampered = tamper(original)
    assert tampered != b"".join(original)
    ledger.write_bytes(tampered)

    result = run_cli(["replay", "--verify", "--chain-only", "--ledger", ledger])
    code, state = (9, "NOT READ") if kind == "unreadable" else (1, "BROKEN")
    assert result.exit_code == code, result.output
    assert f"chain {state}: {ledger}: " in result.stderr  # the file named, as every finding names one
    assert f"{kind} at line {line} (seq {seq}," in result.stderr, result.stderr
    if kind == "seq-gap":
        assert f"expected seq {line}, found {seq}" in result.stderr

    as_json = run_cli(["replay", "--verify", "--chain-only", "--json", "--ledger", ledger])
    assert as_json.exit_code == code
    chain = json.loads(as_json.stdout)["chain"]
    assert chain["ok"] is False
    problem = chain["problem"]
    assert (problem["kind"], problem["line"], problem["seq"]) == (kind, line, seq)
    assert chain["head"]["seq"] == line - 1  # the last event that still verifies


UNLINKED = {
    "last-line-copied": (lambda ls: b"".join(ls) + ls[-1], "seq 8 again (a line copied or moved)"),
    "line-removed": (lambda ls: b"".join(ls[:4] + ls[5:]), "seq 5 is missing (a line removed)"),
    "lines-swapped": (lambda ls: b"".join(ls[:4] + [ls[5], ls[4]] + ls[6:]), "seq 5 is missing (a line removed)"),
}


@pytest.mark.parametrize("name", list(UNLINKED))
def test_a_line_copied_removed_or_moved_by_hand_is_refused_by_an_append_and_a_read(ledger: Path, name: str) -> None:
    """A duplicated last line was read past (its seq not after the head) and appended after: the
    append chained new events onto a ledger `replay --verify` refuses, and `watch` published them."""
    tamper, why = UNLINKED[name]
    ledger.write_bytes(tamper(split(ledger)))
    before = ledger.read_bytes()
    appended = run_cli(["append", "-", "--ledger", ledger], input=draft_json(run_retracted(2)))
    assert appended.exit_code != 0 and why in appended.stderr, appended.stderr
    assert ledger.read_bytes() == before
    listed = run_cli(["log", "--ledger", ledger])
    assert listed.exit_code != 0 and why in listed.stderr, listed.stderr
    verified = run_cli(["replay", "--verify", "--chain-only", "--ledger", ledger])
    assert verified.exit_code == 1 and "seq-gap" in verified.stderr  # verify names it in its own terms


def test_the_untampered_ledger_verifies(ledger: Path) -> None:
    """The control for every case above: the same fixture, untouched, passes."""
    result = run_cli(["replay", "--verify", "--chain-only", "--ledger", ledger])
    assert result.exit_code == 0, result.output
    assert "chain ok: 8 events" in result.stdout


def test_an_empty_file_is_not_a_ledger(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    path.write_bytes(b"")
    result = run_cli(["replay", "--verify", "--chain-only", "--ledger", path])
    assert result.exit_code == 1
    assert "genesis" in result.stderr


def test_a_missing_ledger_is_a_usage_error(tmp_path: Path) -> None:
    result = run_cli(["replay", "--verify", "--chain-only", "--ledger", tmp_path / "nope.jsonl"])
    assert result.exit_code == 2
    assert "no ledger" in result.stderr


def test_a_full_rewrite_changes_the_head_hash(ledger: Path) -> None:
    """What a chain alone cannot catch: rewriting an event and recomputing every later link. The
    defence is the published head hash, so the head must change and be printed."""
    before = run_cli(["replay", "--verify", "--chain-only", "--ledger", ledger])
    lines = split(ledger)
    events = events_of(lines)
    events[3] = edit(events[3], b"linux-x86_64", b"linux-x86_65")
    ledger.write_bytes(rechain(events))
    after = run_cli(["replay", "--verify", "--chain-only", "--ledger", ledger])
    assert before.exit_code == after.exit_code == 0
    head_before = before.stdout.split("head seq 8 ")[1].split()[0]
    head_after = after.stdout.split("head seq 8 ")[1].split()[0]
    assert len(head_before) == 64 and head_before != head_after


def _respaced(data: bytes) -> bytes:
    return data.replace(b'":', b'": ', 1)


def _reordered(data: bytes) -> bytes:
    return json.dumps(dict(reversed(list(json.loads(data).items()))), separators=(",", ":")).encode()


def _escaped(data: bytes) -> bytes:
    at = data.index(b'"runner"')  # a letter of an actor kind, as a \\u escape: the same string
    return data[:at + 1] + b"\\u0072" + data[at + 2:]


@pytest.mark.parametrize("rewrite", [_respaced, _reordered, _escaped], ids=["spacing", "key-order", "escape"])
def test_an_event_rewritten_in_another_encoding_of_the_same_json_is_caught(ledger: Path, rewrite) -> None:
    """A forger who re-chains after rewriting an event's bytes without changing what they mean
    (the tail after the last checkpoint can always be re-chained) still leaves an event that is
    not in its one encoding: the ledger holds one byte string per event, and verify says so."""
    events = events_of(split(ledger))
    target = 5  # seq 6, a run.recorded
    changed = rewrite(events[target])
    assert changed != events[target] and msgspec.json.decode(changed) == msgspec.json.decode(events[target])
    events[target] = changed
    ledger.write_bytes(rechain(events))
    report = verify_chain(ledger)
    assert report.problem is not None
    assert (report.problem.kind, report.problem.seq) == ("undecodable", 6)
    assert "one encoding" in report.problem.message and report.events == 5


def test_an_event_stored_before_a_defaulted_field_existed_is_still_canonical(ledger: Path) -> None:
    """The typed event re-encodes with its defaulted fields filled in; the plain-JSON check is
    what accepts such an event (committed ledgers hold run.recorded events of version 1)."""
    events = events_of(split(ledger))
    plain = json.loads(events[3])  # seq 4, a run.recorded at the current version
    body = plain["body"]
    assert body["runnerNote"] is None
    del body["runnerNote"]  # a field with a default: as an event written before it existed
    data = msgspec.json.Encoder(order="sorted").encode(plain)
    assert encoding.decode(data).body.runner_note is None
    assert encoding.encode_value(encoding.decode(data)) != data  # the typed path alone would refuse it
    events[3] = data
    ledger.write_bytes(rechain(events))
    assert verify_chain(ledger).ok


@pytest.mark.parametrize("change", ["version", "type", "field"])
def test_an_event_of_a_newer_build_is_said_to_need_an_upgrade_never_only_damage(ledger: Path, change: str) -> None:
    """An event a newer cbledger wrote (a new version of a type, a new type, an optional field
    added) was `chain BROKEN`, exit 1, "the ledger is damaged", and `repair` advised restoring a
    copy, which would drop the newer build's events."""
    lines = split(ledger)
    event = events_of(lines)[-1]
    newer = {
        "version": edit(event, b'"type":"run.retracted"', b'"type":"run.retracted","version":2'),
        "type": edit(event, b'"type":"run.retracted"', b'"type":"run.reopened"'),
        "field": edit(event, b'"body":{', b'"body":{"since":"2027-01-01",'),
    }[change]
    ledger.write_bytes(rechain(events_of(lines[:-1]) + [newer]))
    result = run_cli(["replay", "--verify", "--chain-only", "--ledger", ledger])
    assert result.exit_code == 9, result.output
    assert f"chain NOT READ: {ledger}: unreadable at line 8 (seq 8," in result.stderr
    assert "a newer cbledger may have written it" in result.stderr and "upgrade cbledger" in result.stderr
    shown = run_cli(["log", "--ledger", ledger])
    assert shown.exit_code != 0 and "seq 8: this build cannot read the stored event" in shown.stderr, shown.output
    assert "a newer cbledger may have written it" in shown.stderr and "damaged at that point" not in shown.stderr
    repaired = run_cli(["repair", "--truncate-torn-tail", "--ledger", ledger])
    assert "this build cannot read the ledger" in repaired.stderr and "restore it from a copy" not in repaired.stderr


@pytest.mark.parametrize("change", [(b'"type":"run.retracted"', b'"type":"run.reopened"'), (b'"body":{', b'"body":{"note":"x",')])
def test_an_edited_line_that_looks_like_a_newer_builds_event_is_still_broken(ledger: Path, change: tuple[bytes, bytes]) -> None:
    """The newer-build reading is only for a line whose link holds: one edited in place (a field
    added, a type changed) without re-chaining is tampering, exit 1, whatever its decode says."""
    lines = split(ledger)
    lines[-1] = edit(lines[-1], *change)
    ledger.write_bytes(b"".join(lines))
    result = run_cli(["replay", "--verify", "--chain-only", "--ledger", ledger])
    assert result.exit_code == 1 and f"chain BROKEN: {ledger}: undecodable at line 8 (seq 8," in result.stderr, result.output
    shown = run_cli(["log", "--ledger", ledger])
    assert "damaged at that point" in shown.stderr and "a newer cbledger may have written it" not in shown.stderr


def test_a_line_edited_mid_chain_with_its_own_hash_redone_is_broken_not_a_newer_builds(ledger: Path) -> None:
    """Only the edited line's own link was asked: a field added to line 6 with its hash recomputed
    read as a newer build's event (exit 9), and line 7, which no longer links to it, was never read."""
    lines = split(ledger)
    parsed = parse_line(lines[5])
    data = edit(bytes(parsed.event), b'"body":{', b'"body":{"extra":1,')
    lines[5] = format_line(data, link_hash(parsed.prev, 6, data), parsed.prev)
    ledger.write_bytes(b"".join(lines))
    result = run_cli(["replay", "--verify", "--chain-only", "--ledger", ledger])
    assert result.exit_code == 1, result.output
    assert f"chain BROKEN: {ledger}: broken-link at line 7 (seq 7," in result.stderr, result.stderr
    assert "after seq 6, which this build could not read: the ledger is damaged there" in result.stderr
    assert "last good: seq 5 " in result.stderr


def test_past_a_newer_builds_event_the_lines_that_link_are_read_and_a_torn_tail_is_no_damage(ledger: Path) -> None:
    """A newer build's event mid-chain, the lines after it linking: exit 9 at that line, last good
    the one before. A newer build's checkpoint was decoded for the Merkle tree and the verify died
    with exit 2; a tail cut short after such an event was called damage (exit 1)."""
    lines = split(ledger)
    events = events_of(lines)
    newer = edit(events[5], b'"body":{', b'"body":{"since":"2027-01-01",')
    ledger.write_bytes(rechain(events[:5] + [newer] + events[6:]))
    result = run_cli(["replay", "--verify", "--chain-only", "--ledger", ledger])
    assert result.exit_code == 9 and f"chain NOT READ: {ledger}: unreadable at line 6 (seq 6," in result.stderr, result.output
    assert "last good: seq 5 " in result.stderr
    # a newer build's checkpoint, which the tree's own decode of checkpoints once met
    checkpoint = edit(events[7], b'"type":"run.retracted"', b'"type":"checkpoint.published","version":9')
    ledger.write_bytes(rechain(events[:7] + [checkpoint]))
    result = run_cli(["replay", "--verify", "--chain-only", "--ledger", ledger])
    assert result.exit_code == 9 and "unreadable at line 8 (seq 8," in result.stderr, result.output
    # an append cut short after a newer build's event: repair's business, not damage
    ledger.write_bytes(rechain(events[:5] + [newer] + events[6:])[:-30])
    result = run_cli(["replay", "--verify", "--chain-only", "--ledger", ledger])
    assert "torn-tail at line 8" in result.stderr and "damaged" not in result.stderr, result.output
    assert "which this build cannot read: upgrade cbledger, then repair" in result.stderr
