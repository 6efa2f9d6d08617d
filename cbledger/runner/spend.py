"""What a run's answered model requests used, read off its cassette.

copperhead sums its tokens into `run-end`, and only there: a run killed at the cap, killed from
outside or crashed writes none, yet the provider billed every request it answered. The recording
proxy kept each answer as the provider sent it, usage included, so the spend of such a run is
the sum over its cassette's answered model calls — what a provider's invoice would say, never
an estimate.
"""

from __future__ import annotations

from dataclasses import dataclass

from cbledger.runner import budget
from cbledger.runner.cassette import Cassette, Recorded, model_calls


@dataclass(frozen=True)
class Usage:
    tokens_in: int
    tokens_out: int
    #: how many model calls were answered with a usage block
    calls: int


def from_cassette(cassette: Cassette | None, *, cache: bool = True) -> Usage | None:
    """The usage the cassette's answered model calls state; None when none states any.
    `cache=False`: as runs recorded before cache tokens were counted read it (`budget.usage`)."""
    if cassette is None:
        return None
    tin = tout = calls = 0
    for ex in model_calls(cassette):
        counted = _usage(ex, cache)
        if counted is None:
            continue
        tin, tout, calls = tin + counted[0], tout + counted[1], calls + 1
    return Usage(tin, tout, calls) if calls else None


def _usage(ex: Recorded, cache: bool = True) -> tuple[int, int] | None:
    """What one answered call used, read as the meter reads it as it is answered
    (`budget.usage`: cache reads and writes are input, as copperhead counts them), so a run's
    recorded cost and what its limits counted are one figure."""
    if ex.status >= 300:
        return None
    return budget.usage(ex.body, ex.events, cache=cache)


def unreported(cassette: Cassette | None) -> int:
    """How many answered model calls reported no usage at all (an OpenAI stream asked without
    `include_usage`, a gateway that drops it): copperhead's `run-end` sums what was reported, so
    with one such answer it understates what the provider billed."""
    if cassette is None:
        return 0
    return sum(1 for ex in model_calls(cassette) if ex.status < 300 and budget.usage(ex.body, ex.events) is None)
