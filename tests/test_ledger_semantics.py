"""`cbledger append` refuses events that contradict the log: a retraction, a grade or a rubric
score of a run nobody recorded, and an event stamped ahead of the clock (ledger/semantics.py).
Each refusal names the event and writes nothing."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import msgspec
import pytest

from cbledger.errors import UserError
from cbledger.ledger import semantics
from cbledger.ledger.store import LedgerStore
from tests.factories import (
    cassette_attached,
    draft_json,
    grade_recorded,
    new_ledger,
    review_recorded,
    rubric_scored,
    run_cli,
    run_recorded,
    run_retracted,
)


@pytest.fixture
def ledger(tmp_path) -> Path:
    path = tmp_path / "events.jsonl"
    store = new_ledger(path)
    store.append([run_recorded(1), grade_recorded(1)])
    return path


def append(ledger: Path, *events) -> tuple[int, str]:
    data = b"\n".join(draft_json(e) for e in events)
    r = run_cli(["append", "--ledger", ledger, "-"], input=data)
    return r.exit_code, r.stderr


@pytest.mark.parametrize(
    "build", [run_retracted, grade_recorded, rubric_scored, review_recorded, cassette_attached],
    ids=["retraction", "grade", "rubric", "review", "cassette"],
)
def test_an_event_naming_a_run_that_was_never_recorded_is_refused(ledger, build):
    before = ledger.read_bytes()
    code, err = append(ledger, build(7))
    assert code == 2
    assert "names run 'run-000007', which no run.recorded event in the ledger or before it in this input carries" in err
    assert "nothing appended" in err and ledger.read_bytes() == before


@pytest.mark.parametrize(
    "build", [run_retracted, rubric_scored, review_recorded, cassette_attached], ids=["retraction", "rubric", "review", "cassette"],
)
def test_an_event_naming_a_recorded_run_is_appended(ledger, build):
    code, err = append(ledger, build(1))
    assert code == 0, err


def test_a_run_and_its_grade_in_one_batch(ledger):
    code, err = append(ledger, run_recorded(2), grade_recorded(2))
    assert code == 0, err
    # the order within the batch matters: a grade before its run names nothing yet
    code, err = append(ledger, grade_recorded(3), run_recorded(3))
    assert code == 2 and "<stdin>: line 1 (grade.recorded:run-000003:1.1.0): names run 'run-000003'" in err


def test_a_refusal_names_the_input_file_and_line_of_the_event(ledger, tmp_path):
    """It once named the ledger and the event's place in the batch from 0 ("event 4"), which a
    blank line in the input makes drift from the line a reader looks at."""
    source = tmp_path / "mine.jsonl"
    source.write_bytes(draft_json(run_recorded(2)) + b"\n\n" + draft_json(grade_recorded(5)) + b"\n")
    before = ledger.read_bytes()
    r = run_cli(["append", "--ledger", ledger, source])
    assert r.exit_code == 2 and f"{source}: line 3 (grade.recorded:run-000005:1.1.0): names run 'run-000005'" in r.stderr, r.stderr
    assert f"nothing appended to {ledger}" in r.stderr and ledger.read_bytes() == before


def test_the_run_is_found_under_the_runners_id_too(tmp_path):
    store = new_ledger(tmp_path / "events.jsonl")
    store.append([run_recorded(4, id="run:run-000004")])
    semantics.check_batch(store, [run_retracted(4)])  # found by one lookup, no scan
    with pytest.raises(UserError, match="names run 'run-000005'"):
        semantics.check_batch(store, [run_retracted(5)])


def stamped(event, when: dt.datetime):
    return msgspec.structs.replace(event, at=when)


def test_a_timestamp_ahead_of_the_clock_beyond_the_skew_is_refused(ledger):
    now = dt.datetime.now(dt.UTC)
    before = ledger.read_bytes()
    code, err = append(ledger, stamped(run_retracted(1), now + dt.timedelta(hours=3)))
    assert code == 2 and "is ahead of the clock" in err and "by more than 5 minutes" in err
    assert ledger.read_bytes() == before
    code, err = append(ledger, stamped(run_retracted(1), now + dt.timedelta(minutes=1)))
    assert code == 0, err


def test_every_problem_of_a_batch_is_named(tmp_path):
    store = LedgerStore(tmp_path / "events.jsonl")
    new_ledger(tmp_path / "events.jsonl")
    clock = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    late = stamped(run_retracted(8), clock + dt.timedelta(minutes=6))
    with pytest.raises(UserError) as info:
        semantics.check_batch(store, [late, rubric_scored(9)], now=clock)
    message = str(info.value)
    assert "event 0 (run.retracted:run-000008): at 2026-01-01T00:06:00+00:00 is ahead of the clock" in message
    assert "event 0 (run.retracted:run-000008): names run 'run-000008'" in message
    assert "event 1 (rubric.scored:run-000009): names run 'run-000009'" in message


def test_a_surface_the_catalog_does_not_hold_is_refused_naming_the_closest(ledger):
    """A typo'd surface was once appended for good, to surface later only as an anomaly."""
    import msgspec

    event = run_recorded(2)
    typo = msgspec.structs.replace(event, body=msgspec.structs.replace(event.body, surface="scripted-harness-agent"))
    before = ledger.read_bytes()
    code, err = append(ledger, typo)
    assert code == 2 and "surface 'scripted-harness-agent' is not in cbledger/ledger/surfaces.json (did you mean 'scripted-harness-agents'" in err, err
    assert ledger.read_bytes() == before
    known = msgspec.structs.replace(event, body=msgspec.structs.replace(event.body, surface="scripted-harness-agents"))
    assert append(ledger, known)[0] == 0
