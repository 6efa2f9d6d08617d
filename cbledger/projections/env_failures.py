"""Environment-failure rates: per model and route, how many of its harness runs were ended by
something other than the model (`run.recorded.harnessFailure`: a provider's error status, a broken
or hung connection, an outside signal, a harness that never reached the model).

Those runs enter no model row, so a model's pass rate says nothing about them; a route that
fails one run in three must still be visible, next to the model, as a rate of its own.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from msgspec import Struct

from cbledger.ledger.events import RunRecorded

#: the run modes whose runs the attribution rule decides (the real harness, against a model or a
#: session script)
ATTRIBUTED_MODES = ("agent", "scripted")


@dataclass
class _Count:
    runs: int = 0
    failures: int = 0
    kinds: dict[str, int] = field(default_factory=dict)


#: (model id, route) -> its counts
Tally = dict[tuple[str, str], _Count]


class EnvironmentFailureRow(Struct, frozen=True, kw_only=True):
    model: str
    #: the provider the run's model was reached through
    route: str
    runs: int
    failures: int
    #: how many of each kind
    kinds: dict[str, int]


def add(tally: Tally, run: RunRecorded) -> None:
    if run.run_mode not in ATTRIBUTED_MODES:
        return
    entry = tally.setdefault((run.model.id, run.model.provider), _Count())
    entry.runs += 1
    if run.harness_failure is not None:
        entry.failures += 1
        entry.kinds[run.harness_failure.kind] = entry.kinds.get(run.harness_failure.kind, 0) + 1


def rows(tally: Tally) -> list[EnvironmentFailureRow]:
    """Every model and route of the group, when any of their runs failed so; none otherwise (a
    group with no such failure shows no table)."""
    if not any(c.failures for c in tally.values()):
        return []
    return [
        EnvironmentFailureRow(model=model, route=route, runs=c.runs, failures=c.failures, kinds=dict(sorted(c.kinds.items())))
        for (model, route), c in sorted(tally.items())
    ]


def kinds_text(row: EnvironmentFailureRow) -> str:
    return ", ".join(f"{k} {n}" for k, n in row.kinds.items()) or "—"
