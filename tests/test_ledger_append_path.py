"""What the append path does instead of the obvious: the seq spliced into a draft's canonical
bytes (the same bytes encoding the event with its seq gives), and the file's descriptor kept open
between appends (opened again for a replaced file or a forked child)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import msgspec

from cbledger.ledger import encoding
from cbledger.ledger.store import LedgerStore, with_seq
from cbledger.ledger.verify import verify_chain
from tests.factories import RUNNER, run_recorded, runs_and_grades

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
