"""What the append path does instead of the obvious: the seq spliced into a draft's canonical
bytes (the same bytes encoding the event with its seq gives), the file's descriptor kept open
between appends (opened again for a replaced file or a forked child), each event's bytes decoded
once on the way, and neither the size limits nor the credential check decoding anything for an
event that cannot need it."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import msgspec
import pytest

from cbledger import credentials
from cbledger.errors import UserError
from cbledger.ledger import encoding, limits
from cbledger.ledger.credential_guard import may_hold_credential
from cbledger.ledger.intake import parse_drafts
from cbledger.ledger.store import LedgerStore, with_seq
from cbledger.ledger.verify import verify_chain
from cbledger.ledger.versions import CURRENT
from tests.factories import RUNNER, draft_json, one_of_each, run_recorded, runs_and_grades

COMMITTED = Path(__file__).resolve().parent.parent / "results" / "ledger" / "events.jsonl"


def test_splicing_the_seq_gives_the_bytes_of_encoding_the_event_with_it():
    """Every event of the committed ledger (every type, versions 1 and 2): its draft's bytes
    with the seq spliced back are the event's bytes (the bytes stored, unless it was stored at an
    older version and is read upcast)."""
    stored = list(LedgerStore(COMMITTED).read())
    assert len({s.type for s in stored}) >= 5
    as_stored = 0
    for s in stored:
        event = encoding.decode(s.raw)
        draft = encoding.encode_value(msgspec.structs.replace(event, seq=0))
        assert with_seq(draft, s.seq) == encoding.encode_value(event), s.id
        as_stored += encoding.encode_value(event) == s.raw
    assert as_stored > len(stored) // 2


def test_bytes_that_do_not_end_as_an_event_are_not_spliced():
    assert with_seq(b'{"seq":0}', 3) is None
    assert with_seq(b'{"body":{"seq":0,"type":"x"},"id":"a"}', 3) is None
    assert with_seq(b'{"id":"a","seq":0,"type":"run.recorded","x":1}', 3) is None


def test_appends_reuse_one_descriptor_and_follow_a_replaced_file(tmp_path):
    path = tmp_path / "events.jsonl"
    store = LedgerStore(path)
    store.init("t", RUNNER)
    store.append([run_recorded(1)])
    fd = store.recorder._kept[0]
    store.append([run_recorded(2)])
    assert store.recorder._kept[0] == fd
    # the ledger replaced by a copy of itself (a restore): appends go to the file the path names
    copy = tmp_path / "copy.jsonl"
    shutil.copyfile(path, copy)
    os.replace(copy, path)
    store.append([run_recorded(3)])
    assert os.fstat(store.recorder._kept[0]).st_ino == os.stat(path).st_ino
    report = verify_chain(path)
    assert report.ok and report.events == 4
    store.recorder.close()
    assert store.recorder._kept is None
    store.append(runs_and_grades(2, start=10))
    assert verify_chain(path).events == 6


def test_a_forked_child_opens_its_own_descriptor(tmp_path):
    path = tmp_path / "events.jsonl"
    store = LedgerStore(path)
    store.init("t", RUNNER)
    store.append([run_recorded(1)])
    parent_fd = store.recorder._kept[0]
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: append, report whether it used a descriptor of its own
        try:
            store.append([run_recorded(2)])
            own = store.recorder._kept[1] == os.getpid()
            os.write(write, b"own" if own else b"shared")
        finally:
            os._exit(0)
    os.close(write)
    _, status = os.waitpid(pid, 0)
    assert os.read(read, 16) == b"own" and status == 0
    assert store.recorder._kept[0] == parent_fd
    os.fstat(parent_fd)  # the child did not close the parent's
    store.append([run_recorded(3)])
    assert verify_chain(path).events == 4


class _CountingDecoder:
    """The schema's typed decoder, counting the bytes it is given."""

    def __init__(self, inner: msgspec.json.Decoder) -> None:
        self.inner, self.calls = inner, 0

    def decode(self, data: bytes) -> object:
        self.calls += 1
        return self.inner.decode(data)


def test_each_event_is_decoded_once_on_its_way_to_the_ledger(tmp_path, monkeypatch):
    """Submitted as JSON Lines (the typed decode of the input is the validation; the canonical
    bytes are not decoded again) and built in Python (the decode of its canonical bytes is)."""
    store = LedgerStore(tmp_path / "events.jsonl")
    store.init("t", RUNNER)
    counting = _CountingDecoder(CURRENT._typed)
    monkeypatch.setattr(CURRENT, "_typed", counting)
    submitted = runs_and_grades(3) + one_of_each(7)
    drafts = parse_drafts(b"\n".join(draft_json(e) for e in submitted), "batch.jsonl")
    store.append(drafts)
    assert counting.calls == len(submitted)
    built = runs_and_grades(3, start=20)
    store.append(built)
    assert counting.calls == len(submitted) + len(built)
    monkeypatch.undo()
    report = verify_chain(tmp_path / "events.jsonl")
    assert report.ok and report.events == 1 + len(submitted) + len(built)
    stored = [s.raw for s in store.read(since=1)]
    assert stored[: len(submitted)] == [d.data.replace(b',"seq":0,', b',"seq":%d,' % (i + 2)) for i, d in enumerate(drafts)]


def test_canonical_bytes_of_a_read_event_decode_back_to_it():
    """What lets the store skip decoding them again, over every committed event."""
    for s in LedgerStore(COMMITTED).read():
        draft = encoding.read_canonical(s.raw)
        assert encoding.decode(draft.data) == draft.event
        assert draft.data == encoding.encode_value(draft.event)


def test_no_text_short_enough_to_be_left_undecoded_can_break_a_limit(monkeypatch):
    """The shortest JSON over each limit is longer than what `limit_problem` leaves unread."""
    over = [
        msgspec.json.encode("x" * (limits.MAX_TEXT_CHARS + 1)),
        msgspec.json.encode({"k" * (limits.MAX_TEXT_CHARS + 1): 0}),
        msgspec.json.encode([0] * (limits.MAX_ITEMS + 1)),
    ]
    for data in over:
        assert len(data) > limits._TOO_SHORT_TO_BREAK
        assert limits.limit_problem(data) is not None
    monkeypatch.setattr(limits.msgspec.json, "decode", lambda *_: (_ for _ in ()).throw(AssertionError("decoded")))
    longest = b"[" + b"0," * ((limits._TOO_SHORT_TO_BREAK - 3) // 2) + b"0]"
    assert len(longest) >= limits._TOO_SHORT_TO_BREAK - 1
    assert limits.limit_problem(longest) is None


def test_the_committed_events_are_cleared_of_credentials_without_undoing_an_escape(monkeypatch):
    """Most hold escapes (JSON inside a string) and no anchor: no escape of theirs can spell
    one, so the check rules them out from the bytes as written."""
    escaped = [bytes(s.raw) for s in LedgerStore(COMMITTED).read() if b"\\" in s.raw]
    assert len(escaped) > 100
    monkeypatch.setattr(credentials, "unescaped", lambda _: (_ for _ in ()).throw(AssertionError("undone")))
    assert not any(may_hold_credential(raw) for raw in escaped)


def test_a_line_an_encoder_wrote_skips_the_json_check_and_any_other_line_takes_it(monkeypatch):
    """The check of repeated keys and nesting reads a line through the standard library's
    decoder; a line that is the event's own encoding (sorted, or in field order as a runner
    writes it) cannot hold what it looks for, anything else is checked as before."""
    import json

    from cbledger.ledger import intake

    checked: list[bytes] = []
    real = intake.json_problem
    monkeypatch.setattr(intake, "json_problem", lambda data, **kw: checked.append(data) or real(data, **kw))
    events = runs_and_grades(2) + one_of_each(5)
    sorted_lines = [encoding.encode_value(e).replace(b'"seq":0,', b"") for e in events]
    parse_drafts(b"\n".join(draft_json(e) for e in events) + b"\n" + b"\n".join(sorted_lines), "runner.jsonl")
    assert checked == []
    spaced = [json.dumps(json.loads(draft_json(e)), indent=None).encode() for e in events]
    parse_drafts(b"\n".join(spaced), "spaced.jsonl")
    assert checked == spaced
    repeated = draft_json(events[0]).replace(b'{"type"', b'{"id":"x","type"', 1)
    with pytest.raises(UserError, match="duplicate key id"):
        parse_drafts(repeated, "repeated.jsonl")


def test_the_example_line_docs_ledger_shows_appends_to_a_copy_of_the_committed_ledger(tmp_path):
    """docs/LEDGER.md shows one line to append (its only JSON block): a stranger copies it."""
    import re

    from tests.factories import run_cli

    doc = (COMMITTED.parent.parent.parent / "docs" / "LEDGER.md").read_text()
    (line,) = re.findall(r"^```json\n(.*?)\n```$", doc, re.MULTILINE | re.DOTALL)
    results = tmp_path / "results"
    (results / "ledger").mkdir(parents=True)
    shutil.copyfile(COMMITTED, results / "ledger" / "events.jsonl")
    (tmp_path / "review.jsonl").write_text(line + "\n")
    result = run_cli(["--results", results, "append", tmp_path / "review.jsonl"])
    assert result.exit_code == 0, result.output
    assert "review.recorded" in result.stdout
    assert verify_chain(results / "ledger" / "events.jsonl").ok
