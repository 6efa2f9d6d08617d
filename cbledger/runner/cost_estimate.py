"""What a plan may cost, before it runs (`cbledger run --dry-run`).

There is no honest single figure: a run's tokens depend on the model's path through the task.
So the estimate is a range, priced under the table in effect today from the tokens the ledger's
past runs of the same tasks actually used: the same model's runs where there are any, else any
model's (each run's own tokens, never an average across tasks). Each planned run contributes the
lowest, the median and the highest of its task's past runs; a task with no past run is named as
not estimated rather than guessed. Only model runs count: a session script's tokens are the
script's, and gold, noop and a run the harness failed spent nothing a model would.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any

from cbledger.ledger.events import Ablations, condition_key
from cbledger.runner import ledger_view, pricing
from cbledger.runner.plan import Plan


@dataclass
class Estimate:
    model_id: str
    table_version: str | None
    rates: tuple[str | None, str | None] | None
    low: int = 0
    median: int = 0
    high: int = 0
    #: past runs the range was read from
    basis: int = 0
    #: planned runs of tasks the ledger has no priced past run of
    unestimated: list[str] = field(default_factory=list)
    estimated: int = 0
    #: the money limits the runs would be made under (docs/RUNNER.md section 7)
    cap: int | None = None
    budget: int | None = None
    #: what the campaign has spent: its recorded runs, and its killed runs no run records
    spent: int = 0
    unrecorded: int = 0

    def as_json(self) -> dict[str, Any]:
        return {
            "model": self.model_id, "priceTable": self.table_version,
            "lowUsdMicros": self.low if self.estimated else None, "medianUsdMicros": self.median if self.estimated else None,
            "highUsdMicros": self.high if self.estimated else None, "pastRuns": self.basis,
            "runsEstimated": self.estimated, "runsNotEstimated": self.unestimated,
            "runCapUsdMicros": self.cap, "budgetUsdMicros": self.budget,
            "spentUsdMicros": self.spent, "unrecordedUsdMicros": self.unrecorded,
            "budgetLeftUsdMicros": self.left, "runsWithinBudgetAtMedian": self.within_budget(),
        }

    @property
    def left(self) -> int | None:
        return None if self.budget is None else max(0, self.budget - self.spent)

    def within_budget(self) -> int | None:
        """How many of the estimated runs the budget left pays for at the median run's cost (None:
        no budget, or nothing estimated)."""
        if self.left is None or not self.estimated:
            return None
        per_run = self.median / self.estimated
        return self.estimated if per_run == 0 else min(self.estimated, int(self.left // per_run))

    def limits_line(self) -> str | None:
        """What the money limits make of the estimate; None without one."""
        if self.cap is None and self.budget is None:
            return None
        parts = []
        if self.cap is not None:
            parts.append(f"each run stops at the --max-cost-usd cap of {pricing.usd_limit(self.cap)} (the range above is held to it; a run can end past it by the call it made last)")
        if self.budget is not None:
            lost = f", {pricing.usd(self.unrecorded)} of it by killed runs no run records" if self.unrecorded else ""
            said = (f"the --budget-usd of {pricing.usd_limit(self.budget)}: {pricing.usd(self.spent)} spent by the campaign "
                    f"so far{lost}, {pricing.usd(self.left or 0)} left")
            fits = self.within_budget()
            if fits is not None and fits < self.estimated:
                said += f"; at the median that pays for about {fits} of the {self.estimated} estimated run(s), and the rest are not run"
            parts.append(said)
        return "money limits: " + "; ".join(parts)

    def line(self) -> str:
        if self.rates is None:
            return f"cost estimate: none — the price table in effect has no token price for {self.model_id}"
        head = (f"cost estimate for {self.model_id} under price table {self.table_version} "
                f"(${self.rates[0]} in, ${self.rates[1]} out per 1M tokens): ")
        if not self.estimated and not self.unestimated:
            body = "$0.0000: no run is left to run"  # not "no past run": the plan is empty
        elif not self.estimated:
            body = "no past model run of these tasks to estimate from (runs of session scripts, gold and noop are not counted)"
        else:
            body = (f"{pricing.usd(self.low)} to {pricing.usd(self.high)} (median {pricing.usd(self.median)}) "
                    f"for {self.estimated} run(s), from {self.basis} past run(s) of the same tasks")
        if self.unestimated:
            body += f"; not estimated (no past model run): {', '.join(sorted(set(self.unestimated)))}"
        return head + body


def past_tokens(
    view: ledger_view.LedgerView, task_id: str, model_id: str, ablations: Ablations | None = None,
) -> list[tuple[int, int]]:
    """The tokens (in, out) of the task's past model runs under the same condition (an ablation
    such as two turns spends a fraction of a default run): the model's own, else any model's."""
    mine: list[tuple[int, int]] = []
    anyone: list[tuple[int, int]] = []
    condition = condition_key(ablations or Ablations())
    for run in view.runs.values():
        if run.task.id != task_id or run.run_mode != "agent" or run.run_id in view.retracted or run.stats is None:
            continue
        if condition_key(run.ablations) != condition:
            continue
        if run.harness_failure is not None or run.stats.tokens_in + run.stats.tokens_out == 0:
            continue
        pair = (run.stats.tokens_in, run.stats.tokens_out)
        anyone.append(pair)
        if run.model.id == model_id:
            mine.append(pair)
    return mine or anyone


def for_plan(
    plan: Plan, view: ledger_view.LedgerView, *, cap: int | None = None, budget: int | None = None,
    spent: int = 0, unrecorded: int = 0,
) -> Estimate:
    """`cap` and `budget` are the money limits in micro-USD; `spent` what the campaign has spent,
    `unrecorded` the part of it killed runs spent that no run records. A run stops at the cap, so
    no past run is counted above it."""
    table = view.pricing
    found = pricing.route(plan.model_id, table)
    price = found.price if found is not None else None
    rates = None if price is None or price.input is None or price.output is None else (price.input, price.output)
    est = Estimate(plan.model_id, table.table_version if table else None, rates,
                   cap=cap, budget=budget, spent=spent, unrecorded=unrecorded)
    if price is None or rates is None:
        return est
    counted: set[str] = set()
    for planned in plan.runs:
        tokens = past_tokens(view, planned.task.id, plan.model_id, plan.ablations)
        costs = sorted(c if cap is None else min(c, cap)
                       for c in (pricing.usd_micros(price, i, o) for i, o in tokens) if c is not None)
        if not costs:
            est.unestimated.append(planned.task.id)
            continue
        est.estimated += 1
        if planned.task.id not in counted:
            counted.add(planned.task.id)
            est.basis += len(costs)
        est.low += costs[0]
        est.high += costs[-1]
        est.median += round(statistics.median(costs))
    return est
