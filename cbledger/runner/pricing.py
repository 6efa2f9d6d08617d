"""Price tables and the cost of a run.

Prices are USD per million tokens, kept as decimal strings; a run's cost is computed exactly in
`Decimal` and stored as integer micro-dollars (tokens × price-per-million is already micro-USD),
together with the table version, so a later price change never rewrites history. Routes with
no honest token price (saved-login CLIs, self-hosted weights) cost null, by rule.

A table takes effect on its `effectiveDate`, not when it was published, and lists only what it
changes: the table in effect on a day is every table effective by then, applied in date order
(ledger order within a day), each one's models and null-cost routes replacing the earlier
ones' and inheriting the rest. A run records the version of the newest of them. A table that
would change the price of a run already recorded (one that started on or after its date, of a
model it names) is refused at publish: a price change never reaches back.
"""

from __future__ import annotations

import datetime as _dt
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from decimal import ROUND_HALF_EVEN, Decimal
from pathlib import Path

import msgspec
import msgspec.inspect

from cbledger.errors import UserError
from cbledger.inputs import MiB, json_problem, read_regular
from cbledger.ledger.events import (
    ModelPrice,
    NullCostRoute,
    PricingPublished,
    RunRecorded,
    price_table_problems,
)
from cbledger.ledger.types import MAX_COUNT, DecimalStr, ModelId, Pinning, Segment

#: Far above any real price table (a few kB).
MAX_TABLE_BYTES = 4 * MiB


def load_table(path: Path) -> PricingPublished:
    """Reads a price table file; `$comment` keys are dropped, numbers are kept as exact decimals."""
    data_bytes = read_regular(path, MAX_TABLE_BYTES, "a price table")
    # a model listed twice was read as its last entry, silently: which price was meant?
    problem = json_problem(data_bytes, syntax=False)
    if problem is not None:
        raise UserError(f"{path}: {problem}")
    try:
        raw = json.loads(data_bytes, parse_float=Decimal, parse_int=Decimal)
    except ValueError as exc:
        raise UserError(f"{path}: not JSON: {exc}") from None

    def clean(value):
        if isinstance(value, dict):
            return {k: clean(v) for k, v in value.items() if not k.startswith("$")}
        if isinstance(value, list):
            return [clean(v) for v in value]
        if isinstance(value, Decimal):
            return format(value, "f")
        return value

    data = clean(raw)
    try:
        table = msgspec.convert(data, PricingPublished)
    except msgspec.ValidationError as exc:
        raise UserError(f"{path}: {_readable(_entry_named(data, str(exc)))}") from None
    return table


#: what each pattern a table's fields are held to asks for, in words
_PATTERNS_SAID = (
    (DecimalStr, "a non-negative decimal amount as a string, like \"3.00\" (no sign, no exponent)"),
    (ModelId, "a model id: a letter or digit, then letters, digits and . _ : + - (never two dots in a row)"),
)


def _readable(message: str) -> str:
    """A pattern, as msgspec quotes it, said in words: an author reads what to write, not a
    regular expression."""
    for kind, said in _PATTERNS_SAID:
        info = msgspec.inspect.type_info(kind)
        if isinstance(info, msgspec.inspect.Metadata) and isinstance(info.type, msgspec.inspect.StrType) and info.type.pattern:
            message = message.replace(f"Expected `str` matching regex {info.type.pattern!r}", f"Expected {said}")
    return message


def _entry_named(data: object, message: str) -> str:
    """msgspec names an entry of a mapping `[...]`; the reader needs the model (or route) whose
    entry is wrong to find it in the file."""
    for name, kind in (("models", ModelPrice), ("nullCostRoutes", NullCostRoute)):
        entries = data.get(name) if isinstance(data, dict) else None
        if f"$.{name}[...]" not in message or not isinstance(entries, dict):
            continue
        for key, value in entries.items():
            try:
                msgspec.convert(value, kind)
            except msgspec.ValidationError:
                return message.replace(f"$.{name}[...]", f"$.{name}[{json.dumps(key)}]")
    return message


@dataclass(frozen=True)
class Route:
    segment: Segment
    pinning: Pinning
    price: ModelPrice | None  # None for null-cost routes


def route(model_id: str, table: PricingPublished | None) -> Route | None:
    """The model's segment, pinning and price: its own entry, else the null-cost route whose key
    is the id or the longest key the id begins with (`compat:local-` for `compat:local-llama`,
    `codex` for `codex:gpt-5`; see `covers`)."""
    if table is None:
        return None
    if model_id in table.models:
        p = table.models[model_id]
        return Route(p.segment, p.pinning, p)
    keys = [key for key in table.null_cost_routes if covers(key, model_id)]
    if not keys:
        return None
    r = table.null_cost_routes[max(keys, key=len)]
    return Route(r.segment, r.pinning, None)


#: a route key ending in one of these covers every id it begins; any other, the ids it begins
#: up to a `:` (`codex` covers `codex:gpt-5`, not `codexa`)
_SEPARATORS = ":-/._@"


def covers(key: str, model_id: str) -> bool:
    """Whether null-cost route `key` applies to `model_id`: the same id, or a prefix of it."""
    if not key or not model_id.startswith(key):
        return False
    return len(model_id) == len(key) or key[-1] in _SEPARATORS or model_id[len(key)] == ":"


def usd_micros(price: ModelPrice | None, tokens_in: int, tokens_out: int) -> int | None:
    if price is None or price.input is None or price.output is None:
        return None
    micros = Decimal(tokens_in) * Decimal(price.input) + Decimal(tokens_out) * Decimal(price.output)
    value = int(micros.quantize(Decimal(1), rounding=ROUND_HALF_EVEN))
    return value if value <= MAX_COUNT else None  # beyond any real cost: unknown, never an overflow


def _in_order(tables: Sequence[PricingPublished]) -> list[PricingPublished]:
    """Effective-date order; ledger order within a day (sorted() is stable)."""
    return sorted(tables, key=lambda t: t.effective_date)


def _merged(applicable: list[PricingPublished], both_ways: bool = True) -> PricingPublished | None:
    """`both_ways=False`: the merge runs were priced under before a later table's route replaced
    an earlier price (`replay --verify` accepts the figure either gives)."""
    if not applicable:
        return None
    models: dict = {}
    routes: dict = {}
    for t in applicable:
        # a later table wins over an earlier one both ways: a route it lists takes the models it
        # covers out of the priced ones, and a model it prices takes its own id out of the routes
        for key in t.null_cost_routes if both_ways else ():
            for model_id in [m for m in models if covers(key, m)]:
                del models[model_id]
        for model_id in t.models if both_ways else ():
            routes.pop(model_id, None)
        models.update(t.models)
        routes.update(t.null_cost_routes)
    newest = applicable[-1]
    return msgspec.structs.replace(newest, models=models, null_cost_routes=routes)


def in_effect(tables: Sequence[PricingPublished], day: _dt.date) -> PricingPublished | None:
    """The table in effect on `day`: every table effective by then, later ones amending earlier
    ones; it carries the newest one's version and date. None when no table is in effect yet."""
    return _merged([t for t in _in_order(tables) if t.effective_date <= day])


def as_of(tables: Sequence[PricingPublished], version: str, *, both_ways: bool = True) -> PricingPublished | None:
    """The table a run that recorded `version` was priced under: that table with everything it
    inherited (the tables effective before it, and those of its day published before it)."""
    ordered = _in_order(tables)
    for i, t in enumerate(ordered):
        if t.table_version == version:
            return _merged(ordered[: i + 1], both_ways)
    return None


def today() -> _dt.date:
    return _dt.datetime.now(_dt.UTC).date()


def names(table: PricingPublished, model_id: str) -> bool:
    """Whether `table` itself (not what it inherits) prices `model_id`."""
    return route(model_id, table) is not None


def repriced(table: PricingPublished, tables: Sequence[PricingPublished], runs: Iterable[RunRecorded]) -> list[RunRecorded]:
    """The recorded runs whose price `table` would change: a run that started on or after its
    effective date, of a model it names with a price other than the one the run was priced by."""
    out = []
    for run in runs:
        if run.run_mode != "agent" or run.timings.started_at.date() < table.effective_date or not names(table, run.model.id):
            continue
        before = in_effect(tables, run.timings.started_at.date())
        after = in_effect([*tables, table], run.timings.started_at.date())
        old, new = route(run.model.id, before), route(run.model.id, after)
        if old != new:
            out.append(run)
    return out


def refuse_publishing(
    table: PricingPublished, tables: Sequence[PricingPublished], runs: Iterable[RunRecorded], what: str, *, rules: bool = True,
) -> None:
    """Refuses a table that reuses a published version with other prices or dates, or would
    re-price a recorded (not retracted) run; the same table again passes (a no-op append).
    `pricing publish` and `append` alike: by hand, an append put a table in that re-priced a
    day's runs, and the same model's later runs that day were priced at it in the same row.
    `rules`: also the entries a table must not hold (`append` checks those with every event's
    other rules); a table published before a rule was made stays a no-op to publish again."""
    if table in tables:
        return
    if rules and (problems := price_table_problems(table)):
        raise UserError(f"{what}: " + "; ".join(f"$.{at}: {why}" for at, why in problems))
    if any(t.table_version == table.table_version and t != table for t in tables):
        raise UserError(f"{what}: $.tableVersion: {table.table_version!r} is already published with other prices or dates; "
                        "a table is never changed once published: give this one a tableVersion of its own")
    refuse_repricing(table, tables, runs, what)


def refuse_repricing(table: PricingPublished, tables: Sequence[PricingPublished], runs: Iterable[RunRecorded], what: str) -> None:
    """Refuses a table that would re-price recorded runs, naming the first and the way out."""
    hit = sorted(repriced(table, tables, runs), key=lambda r: r.timings.started_at)
    if hit:
        last = max(r.timings.started_at for r in hit).date()
        raise UserError(
            f"{what}: effectiveDate {table.effective_date} would re-price {len(hit)} recorded run(s) "
            f"(first {hit[0].run_id}, {hit[0].model.id}, started {hit[0].timings.started_at.date()}); "
            f"a price change never reaches back: give it an effectiveDate after {last}"
        )


def usd(micros: int | None) -> str:
    """Micro-dollars as the runner's messages print them (exact, four places)."""
    if micros is None:
        return "unknown"
    return f"${(Decimal(micros) / 1_000_000).quantize(Decimal('0.0001'), rounding=ROUND_HALF_EVEN)}"


def usd_limit(micros: int) -> str:
    """A money limit as given: four places, or the six a finer limit needs (`usd` would print
    a cap of $0.137001 as $0.1370)."""
    shown = usd(micros)
    return shown if Decimal(shown[1:]) * 1_000_000 == micros else f"${Decimal(micros) / 1_000_000:.6f}"
