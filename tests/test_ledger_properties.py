"""Properties of the encoding and the chain over generated events.

The strategies are derived from the event types themselves (through `msgspec.inspect`), honouring
their patterns, lengths and ranges, so a field added to a body is generated without touching this
file. The one hand-written strategy is for grades, whose verdict must agree with their
assertions."""

from __future__ import annotations

import datetime as dt
import json
import random
import re
import tempfile
from functools import cache
from pathlib import Path
from typing import Any

import msgspec
import msgspec.inspect as mi
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from cbledger import credentials
from cbledger.ledger import encoding
from cbledger.ledger.checkpoint import Checkpoint
from cbledger.ledger.credential_guard import may_hold_credential
from cbledger.ledger.events import (
    EVENT_CLASSES,
    AssertionOutcome,
    CheckpointPublished,
    CriterionScore,
    Event,
    EventBase,
    GradeRecorded,
    LedgerCreatedEvent,
    RubricScored,
    event_type,
)
from cbledger.ledger.intake import parse_drafts
from cbledger.ledger.keys import SigningKey
from cbledger.ledger.signed_checkpoint import sign as sign_checkpoint
from cbledger.ledger.store import LedgerStore
from cbledger.ledger.verify import verify_chain
from tests.factories import new_ledger, one_of_each, runs_and_grades

INT64_MAX = 2**63 - 1
OFFSETS = st.integers(-14 * 60, 14 * 60).map(lambda m: dt.timezone(dt.timedelta(minutes=m)))


def _text(t: mi.StrType) -> st.SearchStrategy[str]:
    if t.pattern is not None:
        # msgspec checks patterns with re.search; fullmatch keeps the generated value inside it
        s = st.from_regex(re.compile(t.pattern), fullmatch=True)
        if t.max_length is not None:
            s = s.filter(lambda v, n=t.max_length: len(v) <= n)
        if t.min_length is not None:
            s = s.filter(lambda v, n=t.min_length: len(v) >= n)
        return s
    return st.text(min_size=t.min_length or 0, max_size=min(t.max_length or 40, 40))


def _int(t: mi.IntType) -> st.SearchStrategy[int]:
    lo = t.ge if t.ge is not None else (t.gt + 1 if t.gt is not None else -INT64_MAX)
    hi = t.le if t.le is not None else (t.lt - 1 if t.lt is not None else INT64_MAX)
    return st.integers(lo, hi)


def _float(t: mi.FloatType) -> st.SearchStrategy[float]:
    return st.floats(
        min_value=t.ge if t.ge is not None else t.gt,
        max_value=t.le if t.le is not None else t.lt,
        exclude_min=t.gt is not None,
        exclude_max=t.lt is not None,
        allow_nan=False,
        allow_infinity=False,
    )


def strategy(t: mi.Type) -> st.SearchStrategy[Any]:
    """A strategy for values that decode as `t`."""
    if isinstance(t, mi.Metadata):
        return strategy(t.type)
    if isinstance(t, mi.StrType):
        return _text(t)
    if isinstance(t, mi.IntType):
        return _int(t)
    if isinstance(t, mi.FloatType):
        return _float(t)
    if isinstance(t, mi.BoolType):
        return st.booleans()
    if isinstance(t, mi.NoneType):
        return st.none()
    if isinstance(t, mi.LiteralType):
        return st.sampled_from(t.values)
    if isinstance(t, mi.UnionType):
        return st.one_of(*(strategy(x) for x in t.types))
    if isinstance(t, mi.ListType):
        return st.lists(strategy(t.item_type), min_size=t.min_length or 0, max_size=3)
    if isinstance(t, mi.DictType):
        return st.dictionaries(strategy(t.key_type), strategy(t.value_type), max_size=3)
    if isinstance(t, mi.DateTimeType):
        return st.datetimes(
            min_value=dt.datetime(1970, 1, 2), max_value=dt.datetime(2200, 1, 1), timezones=OFFSETS
        )
    if isinstance(t, mi.DateType):
        return st.dates()
    if isinstance(t, mi.StructType):
        return struct_strategy(t.cls)
    raise NotImplementedError(f"no strategy for {t!r}: extend tests/test_ledger_properties.py")


@cache
def struct_strategy(cls: type) -> st.SearchStrategy[Any]:
    if cls is GradeRecorded:
        return grade_strategy()
    if cls is CheckpointPublished:
        return checkpoint_strategy()
    if cls is CriterionScore:  # points are at most the criterion's maximum
        return st.integers(1, 1000).flatmap(lambda m: st.builds(
            CriterionScore, id=st.text(min_size=1, max_size=10), points=st.integers(0, m), max_points=st.just(m),
        ))
    if cls is RubricScored:  # the score is its criteria's points over their maximum, when it has criteria
        return _fields(cls).map(lambda kw: cls(**{k: v for k, v in _scored(kw).items() if v is not ...}))
    return _fields(cls).map(lambda kw: cls(**{k: v for k, v in kw.items() if v is not ...}))


def _scored(kw: dict[str, Any]) -> dict[str, Any]:
    criteria = kw.get("criteria", ...)
    if criteria is not ... and criteria:
        kw = {**kw, "score": sum(c.points for c in criteria) / sum(c.max_points for c in criteria)}
    return kw


def _fields(cls: type) -> st.SearchStrategy[dict[str, Any]]:
    """Every field of `cls` drawn from its type (`...`: left to its default)."""
    info = mi.type_info(cls)
    assert isinstance(info, mi.StructType)
    fields: dict[str, st.SearchStrategy[Any]] = {}
    for f in info.fields:
        if f.name == "seq":
            fields[f.name] = st.just(0)  # a draft; tests that want seqs set them
        elif f.name == "version":
            fields[f.name] = st.just(...)  # built in Python: at its class's version
        elif f.required:
            fields[f.name] = strategy(f.type)
        else:  # sometimes left to its default, so defaults are exercised too
            fields[f.name] = st.one_of(st.just(...), strategy(f.type))
    return st.fixed_dictionaries(fields)


def grade_strategy() -> st.SearchStrategy[GradeRecorded]:
    """Grades whose verdict, first failed required assertion and category agree."""
    info = mi.type_info(GradeRecorded)
    base = {
        f.name: strategy(f.type)
        for f in info.fields
        if f.name
        not in {"assertions", "verdict", "first_failed_required", "failure_category", "dominant_tool_error"}
    }
    category = next(f.type for f in info.fields if f.name == "failure_category")
    category_values = next(x for x in category.types if isinstance(x, mi.LiteralType)).values

    @st.composite
    def build(draw) -> GradeRecorded:
        kw = draw(st.fixed_dictionaries(base))
        assertions = draw(st.lists(struct_strategy(AssertionOutcome), min_size=1, max_size=4))
        failed = [a.id for a in assertions if a.required and a.status == "fail"]
        return GradeRecorded(
            **kw,
            assertions=assertions,
            verdict="fail" if failed else "pass",
            first_failed_required=failed[0] if failed else None,
            failure_category=draw(st.sampled_from(category_values)) if failed else None,
            dominant_tool_error=draw(st.none() | st.text(max_size=20)),
        )

    return build()


def checkpoint_strategy() -> st.SearchStrategy[CheckpointPublished]:
    """Checkpoint records whose fields are what their signed note states (the event checks that)."""
    key = SigningKey.from_seed("test.example/ledger", bytes(range(32)))
    origin = st.text(st.characters(min_codepoint=0x20, exclude_categories=("Cs",)), min_size=1, max_size=20)

    @st.composite
    def build(draw) -> CheckpointPublished:
        cp = Checkpoint(draw(origin), draw(st.integers(1, INT64_MAX)), draw(st.binary(min_size=32, max_size=32)))
        note = sign_checkpoint(cp, [key])
        return CheckpointPublished(origin=cp.origin, tree_size=cp.size, root_hash=cp.root_hex, note=note)

    return build()


EVENTS = st.one_of(*(struct_strategy(cls) for cls in EVENT_CLASSES))
APPENDABLE = st.one_of(*(struct_strategy(cls) for cls in EVENT_CLASSES if cls is not LedgerCreatedEvent))

PROPS = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def clean(event: EventBase) -> bool:
    return not credentials.scan_json(msgspec.to_builtins(event), "$")


# --------------------------------------------------------------------------- the encoding


@PROPS
@given(EVENTS, st.integers(0, INT64_MAX))
def test_encode_then_decode_is_the_identity(event: EventBase, seq: int) -> None:
    event = msgspec.structs.replace(event, seq=seq)
    data = encoding.encode(event)
    back = encoding.decode(data)
    assert back == event
    assert type(back) is type(event) and event_type(back) == event_type(event)
    assert encoding.encode(back) == data  # the bytes are a fixed point
    # compact, one line, keys sorted at every level, timestamps in UTC
    assert b"\n" not in data
    assert data == msgspec.json.encode(msgspec.json.decode(data), order="sorted")
    assert json.loads(data)["at"].endswith("Z")
    assert back.at.utcoffset() == dt.timedelta(0)


@PROPS
@given(EVENTS, st.randoms(use_true_random=False))
def test_canonical_bytes_do_not_depend_on_input_key_order(event: EventBase, rnd: random.Random) -> None:
    """A runner may submit keys in any order and with any spacing; the stored bytes are the same."""
    canonical = encoding.encode(event)

    def shuffled(value: Any) -> Any:
        if isinstance(value, dict):
            items = list(value.items())
            rnd.shuffle(items)
            return {k: shuffled(v) for k, v in items}
        if isinstance(value, list):
            return [shuffled(v) for v in value]
        return value

    doc = shuffled(json.loads(canonical))
    del doc["seq"]  # a draft states none: the ledger assigns it
    text = json.dumps(doc, indent=rnd.choice([None, 1, 4]), ensure_ascii=rnd.random() < 0.5)
    [draft] = parse_drafts(text.encode(), "generated")
    assert encoding.encode(draft.event) == canonical == draft.data
    # the store appends these bytes without decoding them again: they must decode to the event read
    assert encoding.decode(draft.data) == draft.event
    assert list(json.loads(canonical)) == sorted(json.loads(canonical))


# --------------------------------------------------------------------------- the credential check

_PREFIXES = ["sk-", "sk-proj-", "AIza", "Bearer", "bearer ", "npm_", "ghp_", "gho_", "github_pat_", "gsk_"]
_FRAGMENT = st.one_of(
    st.sampled_from(_PREFIXES),
    st.text(alphabet="aZ09_-./+=", min_size=1, max_size=45),
    st.sampled_from([" ", "\t", "\n", "\r", "\x0b", "\x0c", "\x1c", "\u00a0", "\u2028", '"', "\\", "\x01", "\x7f", "é", "K"]),
    # a prefix hidden behind escapes of the string's own, or spelt with what re folds to ASCII
    st.sampled_from(["\\u0073k-", "\\u0041Iza", "npm\\u005f", "\\\\", "\\\"", "\u017f", "\u212a", "\\u017f",
                     "aws_secret_access_key=", "aw\\u0073_\u017fecret_access_\u212aey:", "https://", "u:p@h",
                     # `/` spelt `\/`, a level or two down: the one escape besides `\u` that spells an anchor's character
                     "https:\\/\\/", ":\\\\/\\\\/", "\\\\u0073k-"]),
)
_TEXT = st.lists(_FRAGMENT, max_size=8).map("".join)
_JSONISH = st.recursive(
    st.one_of(_TEXT, st.integers(), st.none()),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(_TEXT, inner, max_size=3)),
    max_leaves=8,
)


@settings(max_examples=400, deadline=None)
@given(_JSONISH)
def test_the_quick_credential_check_never_misses_what_the_full_scan_finds(value: Any) -> None:
    """The store skips the per-string scan when one search over the canonical JSON finds
    nothing; that is only safe if every string the full scan would flag also trips the search,
    escapes and all."""
    if credentials.scan_json(value):
        assert may_hold_credential(msgspec.json.encode(value, order="sorted"))


# --------------------------------------------------------------------------- the chain


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(APPENDABLE, min_size=1, max_size=6), st.integers(1, 3))
def test_appended_events_verify_and_read_back(events: list[EventBase], batches: int) -> None:
    assume(all(clean(e) for e in events))
    # distinct ids, so every event is written (idempotency has its own tests)
    events = [msgspec.structs.replace(e, id=f"e{i}.{e.id}"[:200]) for i, e in enumerate(events)]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "events.jsonl"
        store = new_ledger(path)
        size = -(-len(events) // batches)
        results = []
        for start in range(0, len(events), size):
            results += store.append(events[start : start + size])
        report = verify_chain(path)
        assert report.ok, report.problem
        assert report.head.seq == len(events) + 1
        stored = list(LedgerStore(path).read(since=1))
        assert [s.event for s in stored] == [
            msgspec.structs.replace(e, seq=r.seq) for e, r in zip(events, results, strict=True)
        ]


@cache
def _sample_ledger() -> bytes:
    """A small ledger holding every event type, built once."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "events.jsonl"
        store = new_ledger(path)
        store.append(one_of_each(1))
        store.append(runs_and_grades(4, start=2))
        return path.read_bytes()


@settings(max_examples=600, deadline=None)
@given(st.data())
def test_any_single_byte_change_fails_verification(data: st.DataObject) -> None:
    """A canonical encoding leaves no byte whose change keeps the meaning, so there is no
    mutation that verification may accept."""
    original = _sample_ledger()
    lines = original.splitlines(keepends=True)
    index = data.draw(st.integers(0, len(lines) - 1), label="line")
    start = sum(len(line) for line in lines[:index])
    position = start + data.draw(st.integers(0, len(lines[index]) - 1), label="byte in line")
    value = data.draw(st.integers(0, 255).filter(lambda b: b != original[position]), label="new byte")
    mutated = original[:position] + bytes([value]) + original[position + 1 :]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "events.jsonl"
        path.write_bytes(mutated)
        report = verify_chain(path)
    assert not report.ok, f"byte {position} ({original[position:position + 1]!r} -> {bytes([value])!r})"
    assert report.problem is not None
    assert report.problem.line <= index + 1  # found no later than the line that changed


def test_the_sample_ledger_itself_verifies(tmp_path: Path) -> None:
    """The control for the mutation property."""
    path = tmp_path / "events.jsonl"
    path.write_bytes(_sample_ledger())
    assert verify_chain(path).ok


@pytest.mark.parametrize("cls", EVENT_CLASSES, ids=lambda c: c.__struct_config__.tag)
def test_the_strategies_reach_every_event_type(cls: type) -> None:
    """Guards the derivation: every type must yield examples that the schema accepts."""

    @settings(max_examples=10, deadline=None)
    @given(struct_strategy(cls))
    def accepted(event: EventBase) -> None:
        assert encoding.decode(encoding.encode(event)) == event

    accepted()
    assert Event.__args__.count(cls) == 1  # type: ignore[attr-defined]
