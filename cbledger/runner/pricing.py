"""Price tables and the cost of a run.

Prices are USD per million tokens, kept as decimal strings; a run's cost is computed exactly in
`Decimal` and stored as integer micro-dollars (tokens × price-per-million is already micro-USD),
together with the table version, so a later price change never rewrites history. Routes with
no honest token price (saved-login CLIs, self-hosted weights) cost null, by rule.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from decimal import ROUND_HALF_EVEN, Decimal
from pathlib import Path

import msgspec

from cbledger.errors import UserError
from cbledger.inputs import MiB, read_regular
from cbledger.ledger.events import ModelPrice, PricingPublished
from cbledger.ledger.types import MAX_COUNT, Pinning, Segment

#: Far above any real price table (a few kB).
MAX_TABLE_BYTES = 4 * MiB


def load_table(path: Path) -> PricingPublished:
    """Reads a price table file; `$comment` keys are dropped, numbers are kept as exact decimals."""
    try:
        raw = json.loads(read_regular(path, MAX_TABLE_BYTES, "a price table"), parse_float=Decimal, parse_int=Decimal)
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
        return msgspec.convert(data, PricingPublished)
    except msgspec.ValidationError as exc:
        raise UserError(f"{path}: {exc}") from None


@dataclass(frozen=True)
class Route:
    segment: Segment
    pinning: Pinning
    price: ModelPrice | None  # None for null-cost routes


def route(model_id: str, table: PricingPublished | None) -> Route | None:
    """The model's segment, pinning and price; null-cost routes match by id or by the id's
    provider prefix (`codex`, `claude-code:…`)."""
    if table is None:
        return None
    if model_id in table.models:
        p = table.models[model_id]
        return Route(p.segment, p.pinning, p)
    prefix = model_id.split(":", 1)[0]
    for name in (model_id, prefix):
        if name in table.null_cost_routes:
            r = table.null_cost_routes[name]
            return Route(r.segment, r.pinning, None)
    return None


def usd_micros(price: ModelPrice | None, tokens_in: int, tokens_out: int) -> int | None:
    if price is None or price.input is None or price.output is None:
        return None
    micros = Decimal(tokens_in) * Decimal(price.input) + Decimal(tokens_out) * Decimal(price.output)
    value = int(micros.quantize(Decimal(1), rounding=ROUND_HALF_EVEN))
    return value if value <= MAX_COUNT else None  # beyond any real cost: unknown, never an overflow
