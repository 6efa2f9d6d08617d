"""Reading events submitted by runners and people: one JSON object, a JSON array, or JSON Lines.

Every event of the input is decoded and validated before the store sees any of them, so a bad
line anywhere means nothing is written. Messages name the input, the line (or array index) and
the JSON path msgspec reports, e.g. `run.jsonl: line 3: Expected `str`, got `int` - at `$.id``.
A submitted event is bytes like a stored one, so it is read through the same schema: a draft
written at an older version of its type is upcast (`cbledger.ledger.versions`). That typed
decode is the only one its bytes get on the way to the ledger: `parse_drafts` hands the store
each event with its canonical bytes (`encoding.Canonical`).
"""

from __future__ import annotations

from typing import Any

import msgspec

from cbledger.errors import UserError
from cbledger.inputs import json_problem
from cbledger.ledger.credential_guard import redact
from cbledger.ledger.encoding import Canonical, read_canonical
from cbledger.ledger.limits import limit_problem
from cbledger.ledger.versions import CURRENT, EventSchema, InvalidEvent

_ITEMS = msgspec.json.Decoder(list[msgspec.Raw])
_ERRORS = (msgspec.ValidationError, msgspec.DecodeError)


#: The largest input `append` reads: a batch of many thousands of runs is tens of megabytes.
MAX_INPUT_BYTES = 256 * 1024 * 1024


def parse_drafts(data: bytes, source: str, schema: EventSchema = CURRENT) -> list[Canonical]:
    """Parses `data` (named `source` in messages) into validated draft events, each with its
    canonical bytes, for `LedgerStore.append`. Nesting is bounded and a repeated key in an
    object refused before the typed decode, which would keep the last of two equal keys
    silently (`cbledger.inputs`); an input with no event is refused."""
    if len(data) > MAX_INPUT_BYTES:
        raise UserError(f"{source}: {len(data)} bytes, over the limit of {MAX_INPUT_BYTES} bytes for one append")
    text = data.lstrip()
    if not text:
        raise UserError(f"{source}: no events in the input")
    if text[:1] == b"[":
        _check_json(data, source)
        listed = _array(data, source, schema)
        if not listed:
            raise UserError(f"{source}: an empty array: no events in the input; nothing written")
        return listed
    lines = data.splitlines()
    if text[:1] == b"{" and len([ln for ln in lines if ln.strip()]) > 1:
        # JSON Lines, unless the whole input is one pretty-printed object. Whether it is one JSON
        # document is decided before validating: ValidationError is a DecodeError too, so an
        # invalid pretty-printed event must not be mistaken for JSON Lines.
        try:
            msgspec.json.decode(data)
        except (msgspec.DecodeError, RecursionError):
            pass
        else:
            _check_json(data, source)
            return [_draft(schema, data, source)]
    events: list[Canonical] = []
    for lineno, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        events.append(_checked_draft(schema, line, f"{source}: line {lineno}"))
    return events


def _checked_draft(schema: EventSchema, line: bytes, where: str) -> Canonical:
    """`_draft` of one line of input, which must be acceptable JSON too (`_check_json`, whose
    finding is named before any other). That check reads the line through the standard
    library's JSON decoder, which costs several times the typed decode, so it is skipped for a
    line it provably has nothing to say about: one an encoder wrote for the very event read."""
    try:
        draft = _draft(schema, line, where)
    except (UserError, RecursionError):
        _check_json(line, where)
        raise
    if not _as_encoded(line, draft):
        _check_json(line, where)
    return draft


#: keys in the types' field order, as a runner's `msgspec.to_builtins` gives them
_FIELD_ORDER = msgspec.json.Encoder()
_DRAFT_SEQ = b'"seq":0,'


def _as_encoded(line: bytes, draft: Canonical) -> bool:
    """Whether `line` is the draft's canonical bytes, or its encoding in field order, without its
    seq: JSON an encoder wrote for a struct repeats no key and nests no deeper than the types."""
    line = line.strip()
    if line == draft.data.replace(_DRAFT_SEQ, b"", 1):
        return True
    return line == _FIELD_ORDER.encode(draft.event).replace(_DRAFT_SEQ, b"", 1)


class _Seq(msgspec.Struct):
    seq: Any = msgspec.UNSET


_SEQ = msgspec.json.Decoder(_Seq)


def _draft(schema: EventSchema, raw: bytes | msgspec.Raw, where: str) -> Canonical:
    """One draft event: within the size limits, carrying no `seq` (not even 0, which the typed
    decode could not tell from an omitted one), and valid against the schema."""
    data = bytes(raw)
    problem = limit_problem(data)
    if problem is not None:
        raise UserError(redact(f"{where}: {problem}"))
    if _may_state_seq(data):
        try:
            stated = _SEQ.decode(data).seq
        except _ERRORS:
            stated = msgspec.UNSET  # not an object: the typed decode says why
        if stated is not msgspec.UNSET:
            raise UserError(f"{where}: seq is assigned by the ledger; omit it - at `$.seq`")
    try:
        return read_canonical(data, schema)._replace(where=where)
    except InvalidEvent as exc:
        raise UserError(f"{where}: {exc}") from None


def _may_state_seq(data: bytes) -> bool:
    """False when no key of `data` can be `seq`: the key spelt out, or with a letter escaped
    (which only a `\\u` escape can do), is not in the bytes at all."""
    return b"seq" in data or b"\\u" in data


def _check_json(data: bytes, where: str) -> None:
    problem = json_problem(data, syntax=False)  # a syntax error is msgspec's to name, with its position
    if problem is not None:
        raise UserError(redact(f"{where}: {problem}"))


def _array(data: bytes, source: str, schema: EventSchema) -> list[Canonical]:
    """A JSON array of events, each item read as one draft (messages name its index)."""
    try:
        items = _ITEMS.decode(data)
    except _ERRORS as exc:
        raise UserError(redact(f"{source}: {exc}")) from None
    events: list[Canonical] = []
    for index, item in enumerate(items):
        try:
            events.append(_draft(schema, item, f"{source}: item {index}"))
        except UserError as exc:
            # the item's own path, as one typed decode of the whole array would name it
            raise UserError(str(exc).replace("at `$", f"at `$[{index}]")) from None
    return events
