"""Per-type schema versions: an event stored at an old version of its type is read as the current
type through the registered upcasters, while its stored bytes, and so the chain, never change.

The evolved types here exist only in this test: `run.retracted` at version 2 (its free-text
reason split into a code and a detail) and at version 3 (a `reviewed` flag added), each with the
real version-1 events the current code writes as their history.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import msgspec
import pytest

from cbledger.errors import ConflictError, UserError
from cbledger.ledger.events import (
    EVENT_CLASSES,
    Body,
    EventBase,
    RunRetractedEvent,
)
from cbledger.ledger.store import LedgerStore
from cbledger.ledger.types import NonEmpty, RunId
from cbledger.ledger.verify import verify_chain
from cbledger.ledger.versions import CURRENT, UPCASTERS, EventSchema, InvalidEvent, Upcaster
from tests.factories import (
    MAINTAINER,
    at,
    draft_json,
    new_ledger,
    parse_events,
    run_recorded,
    run_retracted,
)


class RetractedV2(Body, frozen=True, kw_only=True):
    run_id: RunId
    code: Literal["duplicate", "harness-fault", "other"]
    detail: NonEmpty


class RetractedEventV2(EventBase, tag="run.retracted", frozen=True, kw_only=True):
    VERSION: ClassVar[int] = 2
    body: RetractedV2


class RetractedV3(Body, frozen=True, kw_only=True):
    run_id: RunId
    code: Literal["duplicate", "harness-fault", "other"]
    detail: NonEmpty
    reviewed: bool


class RetractedEventV3(EventBase, tag="run.retracted", frozen=True, kw_only=True):
    VERSION: ClassVar[int] = 3
    body: RetractedV3


def v1_to_v2(body: dict[str, Any]) -> dict[str, Any]:
    return {"runId": body["runId"], "code": "other", "detail": body["reason"]}


def v2_to_v3(body: dict[str, Any]) -> dict[str, Any]:
    return {**body, "reviewed": False}


OTHERS = [cls for cls in EVENT_CLASSES if cls is not RunRetractedEvent]


def schema_with(cls: type[EventBase], upcasters: dict[tuple[str, int], Upcaster]) -> EventSchema:
    """The build's own types and upcasters, with `run.retracted` replaced by `cls` and its steps."""
    others = {step: up for step, up in UPCASTERS.items() if step[0] != "run.retracted"}
    return EventSchema([*OTHERS, cls], {**others, **upcasters})


V2 = schema_with(RetractedEventV2, {("run.retracted", 1): v1_to_v2})
V3 = schema_with(RetractedEventV3, {("run.retracted", 1): v1_to_v2, ("run.retracted", 2): v2_to_v3})


def v2_retraction(n: int, detail: str, code: str = "other") -> RetractedEventV2:
    v1 = run_retracted(n)
    return RetractedEventV2(
        id=v1.id, at=v1.at, actor=v1.actor, body=RetractedV2(run_id=v1.body.run_id, code=code, detail=detail)
    )


@pytest.fixture
def path(tmp_path):
    """A ledger written by today's code: run.retracted at version 1 among other types."""
    path = tmp_path / "events.jsonl"
    new_ledger(path).append([run_recorded(1), run_retracted(1), run_recorded(2)])
    return path


def test_a_v1_event_is_read_by_the_v2_type(path) -> None:
    stored_bytes = path.read_bytes()
    events = list(LedgerStore(path, schema=V2).read())
    retraction = next(s for s in events if s.type == "run.retracted")
    assert b'"version"' not in retraction.raw  # stored at version 1, by omission
    event = retraction.event
    assert isinstance(event, RetractedEventV2) and event.version == 2
    assert event.body == RetractedV2(run_id="run-000001", code="other", detail=run_retracted(1).body.reason)
    assert (event.id, event.seq, event.at) == (run_retracted(1).id, 3, run_retracted(1).at)
    # every other type reads as it does today, and nothing was rewritten
    assert [s.event for s in events if s.type != "run.retracted"] == [
        s.event for s in LedgerStore(path).read() if s.type != "run.retracted"
    ]
    assert path.read_bytes() == stored_bytes
    assert verify_chain(path).ok
    assert LedgerStore(path, schema=V2).find(3).event == event  # type: ignore[union-attr]


def test_upcasters_run_in_order_from_the_stored_version(path) -> None:
    calls: list[str] = []

    def spy(name: str, step: Upcaster) -> Upcaster:
        def run(body: dict[str, Any]) -> dict[str, Any]:
            calls.append(name)
            return step(body)

        return run

    v3 = schema_with(
        RetractedEventV3,
        {("run.retracted", 1): spy("1->2", v1_to_v2), ("run.retracted", 2): spy("2->3", v2_to_v3)},
    )
    v1_raw = LedgerStore(path).find(3).raw  # type: ignore[union-attr]
    from_v1 = v3.decode(v1_raw)
    assert calls == ["1->2", "2->3"]
    assert isinstance(from_v1, RetractedEventV3) and from_v1.body.reviewed is False

    calls.clear()
    v2_raw = msgspec.json.encode(msgspec.structs.replace(v2_retraction(5, "rerun"), seq=9), order="sorted")
    assert v2_raw.endswith(b',"version":2}')
    from_v2 = v3.decode(v2_raw)
    assert calls == ["2->3"]
    assert from_v2.body.detail == "rerun"  # type: ignore[attr-defined]


def test_an_event_at_the_current_version_is_not_upcast(tmp_path) -> None:
    def refuse(body: dict[str, Any]) -> dict[str, Any]:
        raise AssertionError("an event at the current version went through an upcaster")

    strict_v2 = schema_with(RetractedEventV2, {("run.retracted", 1): refuse})
    path = tmp_path / "events.jsonl"
    store = LedgerStore(path, schema=strict_v2)
    store.init("v2", MAINTAINER)
    [appended] = store.append([v2_retraction(1, "duplicate of run 2", code="duplicate")])
    raw = store.find(appended.seq).raw  # type: ignore[union-attr]
    assert raw.endswith(b',"version":2}')  # written at its class's version
    assert store.find(appended.seq).event.body.code == "duplicate"  # type: ignore[union-attr]
    assert verify_chain(path).problem is not None  # today's build cannot read a v2 event...
    with pytest.raises(InvalidEvent, match="version 2 is newer than this build reads"):
        CURRENT.decode(raw)  # ...and says why


def test_the_upcast_result_is_decoded_strictly(path) -> None:
    broken = schema_with(RetractedEventV2, {("run.retracted", 1): lambda b: {**v1_to_v2(b), "code": "oops"}})
    with pytest.raises(InvalidEvent, match=r"after upcasting run.retracted from version 1") as err:
        broken.decode(LedgerStore(path).find(3).raw)  # type: ignore[union-attr]
    assert "$.body.code" in str(err.value)


def test_version_1_is_written_by_omission_only(path) -> None:
    raw = LedgerStore(path).find(3).raw  # type: ignore[union-attr]
    explicit = raw[:-1] + b',"version":1}'
    for schema in (CURRENT, V2):
        with pytest.raises(InvalidEvent, match=r"\$\.version"):
            schema.decode(explicit)


@pytest.mark.parametrize(
    "cls, upcasters, message",
    [
        (RetractedEventV2, {}, "no upcaster from version 1"),
        (RetractedEventV3, {("run.retracted", 1): v1_to_v2}, "no upcaster from version 2"),
        (RetractedEventV2, {("run.retracted", 1): v1_to_v2, ("run.retracted", 2): v2_to_v3}, "no such step"),
        (RetractedEventV2, {("run.retracted", 1): v1_to_v2, ("run.forgotten", 1): v1_to_v2}, "no such step"),
    ],
    ids=["missing", "missing-second", "past-the-current", "unknown-type"],
)
def test_a_registry_with_a_missing_or_extra_step_is_refused(cls, upcasters, message) -> None:
    with pytest.raises(ValueError, match=message):
        schema_with(cls, upcasters)


def test_the_default_registry_matches_the_current_types() -> None:
    assert {tag: CURRENT.version(tag) for tag in CURRENT.classes} == {
        tag: cls.VERSION for tag, cls in CURRENT.classes.items()
    }
    assert CURRENT.evolved == frozenset(t for t, c in CURRENT.classes.items() if c.VERSION > 1)


def test_idempotency_compares_an_old_event_as_read_today(path) -> None:
    before = path.read_bytes()
    store = LedgerStore(path, schema=V2)
    same = v2_retraction(1, run_retracted(1).body.reason)  # the v1 event, upcast
    [again] = store.append([same])
    assert (again.seq, again.created) == (3, False)
    with pytest.raises(ConflictError):
        store.append([v2_retraction(1, "a different reason")])
    assert path.read_bytes() == before


def test_a_submitted_v1_draft_is_upcast_like_a_stored_one() -> None:
    v1 = run_retracted(4)
    for data in (draft_json(v1), b"[" + draft_json(v1) + b"," + draft_json(run_recorded(4)) + b"]"):
        parsed = parse_events(data, "old-runner.json", schema=V2)
        assert isinstance(parsed[0], RetractedEventV2)
        assert parsed[0].body.detail == v1.body.reason and parsed[0].seq == 0
    bad = draft_json(v1).replace(b'"reason":', b'"reasn":')
    with pytest.raises(UserError, match=r"old-runner.json: item 0: not a version 1 run.retracted body"):
        parse_events(b"[" + bad + b"]", "old-runner.json", schema=V2)


def test_python_built_events_are_at_their_class_version() -> None:
    assert run_retracted(1).version is msgspec.UNSET  # version 1: never written
    assert v2_retraction(1, "x").version == 2
    with pytest.raises(ValueError, match="version 3"):
        RetractedEventV2(id="x1", at=at(), actor=MAINTAINER, body=v2_retraction(1, "x").body, version=3)
