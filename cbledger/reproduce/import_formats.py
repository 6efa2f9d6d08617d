"""The reference implementation's published result records, in the two layouts it has used.

`copperbench-result/<schemaVersion>` is the layout of its `schema/result.schema.json` (verdict a
string, `pass | fail | unscoreable`; assertion `status`; `fixture` and `comparability` objects).
`copperbench-result/legacy-2026-08` is the older one its August 2026 records use (`verdict:
{pass, partialCredit}`, an `environment` object, a `failure` object, `passed` per assertion).

Only what the summary needs is decoded, with types, so a record that is not what it claims to be
is refused with its file and field; the record itself is kept verbatim, never re-encoded. The
verdict is taken as given — an imported `unscoreable` stays `unscoreable` — because imported
evidence is shown, not re-judged.
"""

from __future__ import annotations

import datetime as _dt
import re
from dataclasses import dataclass
from typing import Literal

import msgspec
from msgspec import Struct

from cbledger import inputs
from cbledger.errors import UserError
from cbledger.ledger.events import ImportSummary

LEGACY_FORMAT = "copperbench-result/legacy-2026-08"
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_RUN_FILE = re.compile(r"^run-([1-9][0-9]*)\.json$")


class _S(Struct, rename="camel"):
    """Lenient on fields we do not read: the published layout is the publisher's to define."""


# --------------------------------------------------------------------------- current layout


class _Task(_S):
    id: str


class _Fixture(_S):
    id: str
    sha256: str


class _Run(_S):
    model: str
    repeat: int
    run_mode: str


class _Assertion(_S):
    id: str
    type: str
    status: Literal["pass", "fail", "unevaluable"]


class CurrentRecord(_S):
    schema_version: str
    suite_version: str
    task: _Task
    fixture: _Fixture
    run: _Run
    verdict: Literal["pass", "fail", "unscoreable"]
    partial_credit: float
    assertions: list[_Assertion]
    comparability: dict


# --------------------------------------------------------------------------- legacy layout


class _LegacyTask(_S):
    id: str
    fixture_sha256: str | None = None


class _LegacyModel(_S):
    id: str


class _LegacyRun(_S):
    repeat_index: int
    started_at: str | None = None


class _LegacyVerdict(Struct):
    partialCredit: float  # the publisher's spelling
    pass_: bool = msgspec.field(name="pass")


class _LegacyAssertion(_S):
    id: str
    type: str
    passed: bool


class LegacyRecord(_S):
    schema_version: str
    suite_version: str
    task: _LegacyTask
    model: _LegacyModel
    environment: dict
    run: _LegacyRun
    verdict: _LegacyVerdict
    assertions: list[_LegacyAssertion]


@dataclass(frozen=True)
class Recognized:
    format: str
    summary: ImportSummary


def _path_facts(relpath: str) -> tuple[str | None, int | None]:
    """(run date, repeat) from `<date>/<model>/<task>/run-<n>.json`, where the layout has them."""
    parts = relpath.split("/")
    date = next((p for p in parts if _DATE.match(p)), None)
    m = _RUN_FILE.match(parts[-1])
    return date, (int(m[1]) if m else None)


def _utc_date(stamp: str | None) -> str | None:
    if not stamp:
        return None
    try:
        when = _dt.datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return None
    if when.tzinfo is None:
        return None
    try:
        return when.astimezone(_dt.UTC).date().isoformat()
    except OverflowError:
        return None


def _decode(kind: type, data: bytes, where: str, layout: str):
    """`data` as `kind`; refused naming the layout the record claims (never the class that reads it)."""
    try:
        return msgspec.json.decode(data, type=kind)
    except msgspec.ValidationError as exc:
        raise UserError(f"{where}: not a result record in the {layout} layout: {exc}") from None


def recognize(data: bytes, relpath: str, where: str) -> Recognized:
    """Which layout `data` is in and its summary; refuses anything that is neither."""
    problem = inputs.json_problem(data)
    if problem is not None:
        raise UserError(f"{where}: {problem}")
    try:
        doc = msgspec.json.decode(data)
    except msgspec.DecodeError as exc:
        raise UserError(f"{where}: not JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise UserError(f"{where}: not a result record (a JSON object is expected) - at `$`")
    path_date, path_repeat = _path_facts(relpath)
    if isinstance(doc.get("verdict"), dict) and "environment" in doc:
        rec = _decode(LegacyRecord, data, where, LEGACY_FORMAT)
        return Recognized(
            LEGACY_FORMAT,
            ImportSummary(
                task_id=rec.task.id, model=rec.model.id, verdict="pass" if rec.verdict.pass_ else "fail",
                suite_version=rec.suite_version, fixture_sha256=rec.task.fixture_sha256,
                run_date=_utc_date(rec.run.started_at) or path_date, repeat=rec.run.repeat_index,
            ),
        )
    if isinstance(doc.get("verdict"), str) and "comparability" in doc:
        cur = _decode(CurrentRecord, data, where, "copperbench-result/<schemaVersion>")
        return Recognized(
            f"copperbench-result/{cur.schema_version}",
            ImportSummary(
                task_id=cur.task.id, model=cur.run.model, verdict=cur.verdict, suite_version=cur.suite_version,
                fixture_sha256=cur.fixture.sha256, run_date=path_date, repeat=cur.run.repeat or path_repeat,
            ),
        )
    raise UserError(
        f"{where}: not a copperbench result record in either known layout "
        f"(copperbench-result/<schemaVersion>: verdict a string and a comparability object; "
        f"{LEGACY_FORMAT}: verdict an object and an environment object)"
    )
