"""`cassette.attached`: how a cassette given to a run after the fact is folded. The first one for
a run without a cassette of its own counts, in the runner's view of the ledger and in the
projections' state alike; any other is ignored and reported, never silently replacing."""

from __future__ import annotations

import msgspec
import pytest

from cbledger.errors import ConflictError
from cbledger.ledger.events import CassetteRef
from cbledger.projections.writers import load_state
from cbledger.runner import ledger_view
from tests.factories import cassette_attached, new_ledger, run_recorded


@pytest.fixture
def ledger(tmp_path):
    path = tmp_path / "events.jsonl"
    store = new_ledger(path)
    own = CassetteRef(path="results/cassettes/" + "c" * 64 + ".json", blake3="c" * 64, bytes=10, exchanges=1)
    with_own = run_recorded(3)
    with_own = msgspec.structs.replace(with_own, body=msgspec.structs.replace(with_own.body, cassette=own))
    store.append([run_recorded(1), run_recorded(2), with_own])
    return path, store, own


def test_the_first_attachment_of_a_run_without_a_cassette_is_its_cassette(ledger):
    path, store, own = ledger
    first = cassette_attached(1)
    store.append([first])
    view = ledger_view.read(path)
    assert view.cassette(view.runs[first.body.run_id]) == first.body.cassette
    assert view.cassette(view.runs[run_recorded(2).body.run_id]) is None
    assert view.cassette(view.runs[run_recorded(3).body.run_id]) == own
    state = load_state(path)
    (entry,) = state.attachments.values()
    assert entry.body == first.body and entry.seq == store.recorder.head().seq
    assert state.anomalies == []


def test_a_second_attachment_or_one_to_a_run_with_its_own_cassette_is_ignored_and_reported(ledger):
    path, store, own = ledger
    first = cassette_attached(1)
    again = cassette_attached(1, id="cassette.attached:again", tape="b")
    onto_own = cassette_attached(3)
    store.append([first, again, onto_own])
    view = ledger_view.read(path)
    assert view.cassette(view.runs[first.body.run_id]) == first.body.cassette
    assert view.cassette(view.runs[onto_own.body.run_id]) == own
    state = load_state(path)
    assert set(state.attachments) == {first.body.run_id}
    assert [(a.kind, a.message) for a in state.anomalies] == [
        ("cassette-not-attached", f"cassette.attached run {first.body.run_id} was given a cassette at seq 5; ignored"),
        ("cassette-not-attached", f"cassette.attached run {onto_own.body.run_id} recorded its own cassette at seq 4; ignored"),
    ]


def test_the_store_refuses_a_second_attachment_under_the_same_id(ledger):
    path, store, _ = ledger
    store.append([cassette_attached(2)])
    before = path.read_bytes()
    with pytest.raises(ConflictError):
        store.append([cassette_attached(2, tape="b")])
    assert path.read_bytes() == before
    store.append([cassette_attached(2)])  # the same event again: a no-op
    assert path.read_bytes() == before


def test_every_live_real_harness_run_of_the_committed_ledger_has_a_cassette():
    """What re-execution in CI rests on: each scripted run (the real copperhead against scripted model
    turns; gold and noop runs call no model) in the committed ledger
    can be served its model exchanges again, its own cassette or one attached after an identical
    re-execution, and that cassette is on disk."""
    from pathlib import Path

    from blake3 import blake3

    repo = Path(__file__).resolve().parent.parent
    state = load_state(repo / "results" / "ledger" / "events.jsonl")
    harness = [e for e in (*state.runs.values(), *state.later_passes.values())
               if e.run.run_mode == "scripted" and e.run.run_id not in state.retracted]
    assert len(harness) >= 45
    for entry in harness:
        own = entry.run.cassette
        attached = state.attachments.get(entry.run.run_id)
        ref = own if own is not msgspec.UNSET else (attached.body.cassette if attached else None)
        assert ref is not None, f"run {entry.run.run_id} has no cassette"
        assert blake3((repo / ref.path).read_bytes()).hexdigest() == ref.blake3, ref.path
