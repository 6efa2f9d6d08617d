"""The work queue (standard section 11): failure categories ranked by frequency x mean run cost.

frequency x mean run cost is the USD a category burned, which is what fixing it is roughly worth.
Runs with a null cost (self-hosted, saved-login, or an unpriced run) have no USD to contribute, and
imputing one would invent money, so:

* `score_usd` = (costed runs of the category) x (their mean cost) = the category's costed USD;
* categories rank by `score_usd` (descending), then by total frequency, then by name; a category
  seen only in uncosted runs ranks after every costed one, by frequency;
* every entry shows its uncosted frequency beside the costed one.

Scope: agent runs only (harness, replay and imported evidence never enter), the records of one
suite version, across all comparability groups — the queue is a backlog, not a comparison — and
of one ablation condition, the default unless asked: a run made with two turns or half the tools
fails for reasons the flag put there, which are not the backlog of the harness as it ships. The
failed runs of every other condition are counted beside the queue, so none goes unseen.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

from msgspec import Struct

from cbledger.projections.conditions import DEFAULT, order_key
from cbledger.projections.fold import LedgerState
from cbledger.projections.records import in_model_metrics, record_entries, usd_from_micros


class Occurrence(Struct, rename="camel", frozen=True, kw_only=True):
    name: str
    runs: int


class QueueEntry(Struct, rename="camel", frozen=True, kw_only=True):
    rank: int
    category: str
    runs: int
    costed_runs: int
    uncosted_runs: int
    mean_run_usd: float | None
    score_usd: float | None
    tasks: list[Occurrence]
    models: list[Occurrence]


class WorkQueue(Struct, rename="camel", frozen=True, kw_only=True):
    suite_version: str | None
    failed_runs: int
    entries: list[QueueEntry]
    condition: str = DEFAULT
    #: failed agent runs of the other ablation conditions, which this queue leaves out
    other_conditions: dict[str, int] = {}


@dataclass
class _Tally:
    """One category's failed runs, counted as they are read."""

    costed: int = 0
    uncosted: int = 0
    micros: int = 0
    tasks: dict[str, int] = field(default_factory=dict)
    models: dict[str, int] = field(default_factory=dict)


def work_queue(state: LedgerState, suite_version: str | None, condition: str = DEFAULT) -> WorkQueue:
    if suite_version is None:
        return WorkQueue(suite_version=None, failed_runs=0, entries=[], condition=condition)
    cats: dict[str, _Tally] = {}
    others: dict[str, int] = {}
    failed = 0
    for rec in record_entries(state, suite_version, build=False):
        entry = rec.run
        if not in_model_metrics(entry):
            continue
        category = rec.failure_category
        if category is None:
            continue
        if rec.condition != condition:
            others[rec.condition] = others.get(rec.condition, 0) + 1
            continue
        failed += 1
        c = cats.setdefault(category, _Tally())
        micros = entry.run.cost.usd_micros
        if micros is None:
            c.uncosted += 1
        else:
            c.costed += 1
            c.micros += micros
        c.tasks[entry.run.task.id] = c.tasks.get(entry.run.task.id, 0) + 1
        c.models[entry.run.model.id] = c.models.get(entry.run.model.id, 0) + 1

    def key(name: str) -> tuple[bool, int, int, str]:
        c = cats[name]
        costed = c.costed > 0
        return (not costed, -c.micros, -(c.costed + c.uncosted), name)

    entries = []
    for rank, name in enumerate(sorted(cats, key=key), start=1):
        c = cats[name]
        mean = usd_from_micros(round(Fraction(c.micros, c.costed))) if c.costed else None
        entries.append(
            QueueEntry(
                rank=rank,
                category=name,
                runs=c.costed + c.uncosted,
                costed_runs=c.costed,
                uncosted_runs=c.uncosted,
                mean_run_usd=mean,
                score_usd=usd_from_micros(c.micros) if c.costed else None,
                tasks=_occurrences(c.tasks),
                models=_occurrences(c.models),
            )
        )
    return WorkQueue(
        suite_version=suite_version, failed_runs=failed, entries=entries, condition=condition,
        other_conditions={k: others[k] for k in sorted(others, key=order_key)},
    )


def conditions(state: LedgerState, suite_version: str | None) -> list[str]:
    """The conditions the suite's agent runs were made under (the default always among them)."""
    found = {DEFAULT}
    if suite_version is not None:
        found.update(rec.condition for rec in record_entries(state, suite_version, build=False) if in_model_metrics(rec.run))
    return sorted(found, key=order_key)


def _occurrences(counts: dict[str, int]) -> list[Occurrence]:
    return [Occurrence(name=k, runs=v) for k, v in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]


def render_text(queue: WorkQueue) -> str:
    lines = [
        f"work queue, suite {queue.suite_version or '(none)'}, condition {queue.condition}: "
        f"{queue.failed_runs} failed agent runs",
        "rank  category               runs (costed+uncosted)  mean run USD   score USD",
    ]
    for e in queue.entries:
        mean = f"{e.mean_run_usd:.6f}" if e.mean_run_usd is not None else "-"
        score = f"{e.score_usd:.6f}" if e.score_usd is not None else "-"
        lines.append(
            f"{e.rank:>4}  {e.category:<22} {e.runs:>4} ({e.costed_runs}+{e.uncosted_runs}){'':<12}"
            f"{mean:>12}  {score:>10}"
        )
        lines.append("      tasks:  " + ", ".join(f"{o.name} ({o.runs})" for o in e.tasks))
        lines.append("      models: " + ", ".join(f"{o.name} ({o.runs})" for o in e.models))
    for other, n in queue.other_conditions.items():
        lines.append(f"not in this queue: {n} failed run(s) under condition {other} (--condition '{other}')")
    return "\n".join(lines) + "\n"
