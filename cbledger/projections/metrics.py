"""Headline numbers and diagnostics, per suite version, comparability group, tier and model.

Pure functions of a `LedgerState`. Definitions (docs/PROJECTIONS.md repeats them for readers):

* **runs / passes**: records of agent runs (not harness, not replay, not imported evidence) graded
  under the suite, in the group. A run counts once per suite version (its first grade).
* **condition**: the run's ablation flags (`conditions.condition_key`). Every row is keyed by
  condition, tier, model and segment; the headline numbers are the `default` condition's, and each
  other condition is compared with the default on the tasks both ran (`AblationRow`).
* **strict pass rate** = passes / runs, with a 95% Wilson score interval (z = 1.959963984540054).
* **cost per passing task** = total USD of every run in the row / the number of tasks it passed,
  where a task is passed when at least one of the row's runs of it passed (repeats and failures
  all count in the USD, and a task passed twice is one task passed); defined only when every run
  in the row carries a cost and at least one task passed. Rows of null-cost segments
  (`saved-login`, `open-weight-self-hosted`) are never costed; they carry tokens instead.
* **pass@1** = the mean, over repeat indices, of the pass rate of the runs with that index; the
  **spread** is the per-index rates (min..max shown); **pass^k** = tasks whose every run passed /
  tasks, with k the runs per task (a range when tasks differ). A row whose every task has a single
  run is `single_repeat` and is never presented as a comparison.
* **correct-refusal rate** = runs of `refusal` tasks whose run ended with exit path `refused` /
  runs of `refusal` tasks, as the standard defines it (refusal tasks answered with a refusal);
  whether the refusal also cited its budget and changed nothing is the task's pass rate.
* **false-refusal rate** = runs of `edit` tasks whose run ended with exit path `refused` / runs
  of `edit` tasks (a run without stats did not end with a refusal).
* **variant gap** per model = pass rate on originals minus pass rate on their `variantOf`
  variants, pooled by run over all tiers, counting only originals that have a variant run by that
  model and variants whose original was run by it; other variants are listed, not computed.
  Default-condition runs only: an ablated variant run is not a memorization sample.
* **failure categories**: counts of the failed runs' categories.
* Scripted runs (the real harness against a session script) and runs the harness ended before the
  model took part (`harnessFailure`) are listed in sections of their own and counted in none of
  the above.
* **rubric**: mean of each run's first `rubric.scored` score; model-judged, moves nothing else.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from msgspec import Struct, UnsetType

from cbledger.ledger.events import GradeRecorded
from cbledger.ledger.types import Outcome, Tier
from cbledger.projections import env_failures
from cbledger.projections.comparability import Partition, Reference, partition
from cbledger.projections.conditions import DEFAULT, order_key
from cbledger.projections.fold import LedgerState
from cbledger.projections.provenance import (
    EchoTally,
    Environment,
    EnvironmentRow,
    ProviderEcho,
    count_environment,
    echo_add,
    environment_rows,
    merge_echoes,
)
from cbledger.projections.records import (
    RecordEntry,
    harness_mode,
    is_harness,
    is_replay,
    is_scripted,
    not_the_models,
    record_entries,
)

Z95 = 1.959963984540054
TIERS = ("simple", "medium", "hard")
ALL_TIERS = "all"
COSTED_SEGMENTS = ("api-frontier", "api-cheap", "open-weight-hosted")
UNCOSTED_SEGMENTS = ("open-weight-self-hosted", "saved-login")


def wilson(passes: int, runs: int, z: float = Z95) -> tuple[float, float] | None:
    """95% Wilson score interval: honest at 0/n and n/n, where the normal interval collapses."""
    if runs == 0:
        return None
    p = passes / runs
    z2 = z * z
    denom = 1 + z2 / runs
    centre = (p + z2 / (2 * runs)) / denom
    half = z * math.sqrt(p * (1 - p) / runs + z2 / (4 * runs * runs)) / denom
    lo = 0.0 if passes == 0 else max(0.0, centre - half)  # exact at the edges, not 5e-17
    hi = 1.0 if passes == runs else min(1.0, centre + half)
    return lo, hi


class RepeatRate(Struct, frozen=True, kw_only=True):
    repeat: int
    runs: int
    passes: int


class RowMetrics(Struct, frozen=True, kw_only=True):
    tier: str  # simple | medium | hard | all ("all" = pooled by run, each run weighs 1)
    model: str
    segment: str
    pinning: str
    costed: bool
    runs: int
    passes: int
    wilson_low: float | None
    wilson_high: float | None
    tasks: int
    #: tasks with at least one passing run: the denominator of cost per passing task
    tasks_passed: int
    tasks_all_passed: int
    repeats_min: int
    repeats_max: int
    repeat_rates: list[RepeatRate]
    single_repeat: bool
    usd_micros_total: int | None
    costed_runs: int
    uncosted_runs: int
    tokens_in: int
    tokens_out: int
    refusal_runs: int
    correct_refusals: int
    edit_runs: int
    false_refusals: int
    failure_categories: dict[str, int]
    rubric_runs: int
    rubric_mean: float | None
    condition: str = DEFAULT
    #: runs a money limit stopped (`costCap`): counted as the model's, as a turn cap's stop is,
    #: and said beside its failure categories so that an operator's budget is not read as the model's
    limit_stopped: int = 0

    @property
    def rate(self) -> Fraction | None:
        return Fraction(self.passes, self.runs) if self.runs else None

    @property
    def cost_per_pass_micros(self) -> Fraction | None:
        """Exact micro-dollars per passing task; None when undefined (see the module docstring)."""
        return cost_per_passing_task(self.costed, self.uncosted_runs, self.usd_micros_total, self.tasks_passed)

    @property
    def pass_at_1(self) -> Fraction | None:
        rates = [Fraction(r.passes, r.runs) for r in self.repeat_rates if r.runs]
        return sum(rates, Fraction(0)) / len(rates) if rates else None

    @property
    def pass_hat_k(self) -> Fraction | None:
        return Fraction(self.tasks_all_passed, self.tasks) if self.tasks else None


def cost_per_passing_task(costed: bool, uncosted_runs: int, usd_micros_total: int | None, tasks_passed: int) -> Fraction | None:
    """All the USD of a row over the tasks it passed, exactly; None when a run has no cost, the
    segment is not costed, or no task passed (a model that passed nothing has no such cost)."""
    if not costed or uncosted_runs or not tasks_passed or usd_micros_total is None:
        return None
    return Fraction(usd_micros_total, tasks_passed)


class AblationRow(Struct, frozen=True, kw_only=True):
    """One model's runs under one ablation condition against its default-condition runs, on the
    tasks both ran (per tier and pooled). Tasks run only under the condition are named, never
    compared; the default runs of tasks the condition did not run are left out of both sides."""

    condition: str
    tier: str
    model: str
    segment: str
    costed: bool
    paired_tasks: int
    unpaired_tasks: list[str]
    runs: int
    passes: int
    tasks_passed: int
    usd_micros_total: int | None
    uncosted_runs: int
    default_runs: int
    default_passes: int
    default_tasks_passed: int
    default_usd_micros_total: int | None
    default_uncosted_runs: int
    failure_categories: dict[str, int]

    @property
    def rate(self) -> Fraction | None:
        return Fraction(self.passes, self.runs) if self.runs else None

    @property
    def default_rate(self) -> Fraction | None:
        return Fraction(self.default_passes, self.default_runs) if self.default_runs else None

    @property
    def difference(self) -> Fraction | None:
        """Condition minus default, in pass rate on the same tasks."""
        if self.rate is None or self.default_rate is None:
            return None
        return self.rate - self.default_rate

    @property
    def cost_per_pass_micros(self) -> Fraction | None:
        return cost_per_passing_task(self.costed, self.uncosted_runs, self.usd_micros_total, self.tasks_passed)

    @property
    def default_cost_per_pass_micros(self) -> Fraction | None:
        return cost_per_passing_task(
            self.costed, self.default_uncosted_runs, self.default_usd_micros_total, self.default_tasks_passed
        )


class VariantGap(Struct, frozen=True, kw_only=True):
    model: str
    pairs: list[str]  # "original <- variant"
    original_runs: int
    original_passes: int
    variant_runs: int
    variant_passes: int

    @property
    def gap(self) -> Fraction | None:
        if not self.original_runs or not self.variant_runs:
            return None
        return Fraction(self.original_passes, self.original_runs) - Fraction(
            self.variant_passes, self.variant_runs
        )


class OrphanVariant(Struct, frozen=True, kw_only=True):
    model: str
    variant: str
    original: str
    runs: int
    passes: int


class HarnessCheck(Struct, frozen=True, kw_only=True):
    task_id: str
    tier: str
    expected_outcome: str
    #: the copperhead surface the task drives (`do`, `sync`, …)
    mode: str = "do"
    gold_runs: int
    gold_passes: int
    noop_runs: int
    noop_passes: int
    problems: list[str]
    condition: str = DEFAULT


class ScriptedRow(Struct, frozen=True, kw_only=True):
    """The real harness against session scripts, per task and session: it proves the harness
    and the grading end to end, and measures no model."""

    task_id: str
    tier: str
    expected_outcome: str
    model: str
    runs: int
    passes: int
    categories: dict[str, int]
    condition: str = DEFAULT
    mode: str = "do"
    #: the copperhead build the runs were made with (`0.9.0 a2471b3`): checking a new build
    #: against a session script is what these runs are for, so two builds never share a row
    build: str = ""


def build_label(version: str | None, commit: str | None) -> str:
    """A copperhead build as a reader tells builds apart: its version and short commit, `commit
    unknown` for a build whose files are not the release's (`CopperheadCli.commit`)."""
    return f"{version or 'version unknown'} {commit[:7] if commit else 'commit unknown'}"


class ModeRow(Struct, frozen=True, kw_only=True):
    """One model's runs of one task mode under the default condition, pooled over tiers by run: a
    diagnostic (modes differ in length and difficulty), never a headline."""

    model: str
    #: `agent` (a model) or `scripted` (the real harness against a session script)
    kind: str
    mode: str
    runs: int
    passes: int
    categories: dict[str, int]


class NotTheModels(Struct, frozen=True, kw_only=True):
    """A run the harness ended before the model took part, with the reason."""

    run_id: str
    task_id: str
    model: str
    kind: str
    detail: str
    path: str
    #: the model call an environment failure struck
    turn: int | None = None


class ReplayRow(Struct, frozen=True, kw_only=True):
    model: str
    task_id: str
    runs: int
    passes: int
    condition: str = DEFAULT


class GroupMetrics(Struct, frozen=True, kw_only=True):
    key: str
    main: bool
    label: str
    reasons: list[str]
    records: int
    rows: list[RowMetrics]
    variant_gaps: list[VariantGap]
    orphan_variants: list[OrphanVariant]
    harness: list[HarnessCheck]
    replays: list[ReplayRow]
    scripted: list[ScriptedRow] = []
    not_the_models: list[NotTheModels] = []
    #: every non-default condition against the default on the same tasks
    ablations: list[AblationRow] = []
    #: every environment the group's records were produced in, with counts
    environments: list[EnvironmentRow] = []
    #: models whose provider named another id in its answers (agent and scripted runs)
    echoes: list[ProviderEcho] = []
    #: per model and route, the share of its harness runs that were not the model's
    environment_failures: list[env_failures.EnvironmentFailureRow] = []
    #: agent and scripted runs per model and task mode (`ModeRow`)
    modes: list[ModeRow] = []

    def mode_rows(self) -> list[ModeRow]:
        """The per-mode diagnostic's rows, once the group holds runs of more than one task mode
        (a group of `do` runs alone, as every run before sync was driven, shows none)."""
        return self.modes if len({m.mode for m in self.modes}) > 1 else []

    def default_rows(self) -> list[RowMetrics]:
        """The headline rows: the default condition's."""
        return [r for r in self.rows if r.condition == DEFAULT]

    def conditions(self) -> list[str]:
        """Every ablation condition with agent runs in this group, default excluded."""
        return sorted({r.condition for r in self.rows if r.condition != DEFAULT}, key=order_key)


class SuiteMetrics(Struct, frozen=True, kw_only=True):
    suite_version: str
    reference: Reference
    records: int
    groups: list[GroupMetrics]

    def main_group(self) -> GroupMetrics | None:
        return next((g for g in self.groups if g.main), None)


# --------------------------------------------------------------------------- accumulation


class _Acc:
    __slots__ = (
        "categories",
        "correct_refusals",
        "costed",
        "edit_runs",
        "false_refusals",
        "limit_stopped",
        "micros",
        "passes",
        "pinning",
        "refusal_runs",
        "repeats",
        "rubric",
        "runs",
        "tasks",
        "tin",
        "tout",
        "uncosted",
    )

    def __init__(self) -> None:
        self.runs = 0
        self.passes = 0
        self.tasks: dict[str, list[int]] = {}
        self.repeats: dict[int, list[int]] = {}
        self.micros = 0
        self.costed = 0
        self.uncosted = 0
        self.limit_stopped = 0
        self.tin = 0
        self.tout = 0
        self.refusal_runs = 0
        self.correct_refusals = 0
        self.edit_runs = 0
        self.false_refusals = 0
        self.categories: dict[str, int] = {}
        self.rubric: list[float] = []
        self.pinning: set[str] = set()

    def add(self, rec: RecordEntry, rubric: float | None) -> None:
        run = rec.run.run
        passed = rec.verdict == "pass"
        self.runs += 1
        self.passes += passed
        t = self.tasks.setdefault(run.task.id, [0, 0])
        t[0] += 1
        t[1] += passed
        r = self.repeats.setdefault(run.repeat, [0, 0])
        r[0] += 1
        r[1] += passed
        self.limit_stopped += bool(run.cost_cap)
        if run.cost.usd_micros is None:
            self.uncosted += 1
        else:
            self.costed += 1
            self.micros += run.cost.usd_micros
        if run.stats is not None:
            self.tin += run.stats.tokens_in
            self.tout += run.stats.tokens_out
        outcome = run.task.expected_outcome
        if outcome == "refusal":
            self.refusal_runs += 1
            self.correct_refusals += run.stats is not None and run.stats.exit_path == "refused"
        elif outcome == "edit":
            self.edit_runs += 1
            self.false_refusals += run.stats is not None and run.stats.exit_path == "refused"
        cat = rec.failure_category
        if cat is not None:
            self.categories[cat] = self.categories.get(cat, 0) + 1
        if rubric is not None:
            self.rubric.append(rubric)
        self.pinning.add(run.model.pinning)

    def merge(self, other: _Acc) -> None:
        """Adds another tally's records after this one's: the same tallies as adding them one
        by one, dictionaries' orders included (the ablations pool tasks' tallies this way)."""
        for name in ("runs", "passes", "micros", "costed", "uncosted", "limit_stopped", "tin", "tout", "refusal_runs",
                     "correct_refusals", "edit_runs", "false_refusals"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        for mine, theirs in ((self.tasks, other.tasks), (self.repeats, other.repeats)):
            for key, (runs, passes) in theirs.items():
                pair = mine.setdefault(key, [0, 0])  # type: ignore[arg-type]
                pair[0] += runs
                pair[1] += passes
        for cat, n in other.categories.items():
            self.categories[cat] = self.categories.get(cat, 0) + n
        self.rubric.extend(other.rubric)
        self.pinning.update(other.pinning)

    def freeze(self, tier: str, model: str, segment: str, condition: str = DEFAULT) -> RowMetrics:
        interval = wilson(self.passes, self.runs)
        per_task = [v[0] for v in self.tasks.values()]
        costed = segment in COSTED_SEGMENTS
        return RowMetrics(
            tier=tier,
            model=model,
            segment=segment,
            pinning=next(iter(self.pinning)) if len(self.pinning) == 1 else "mixed",
            costed=costed,
            runs=self.runs,
            passes=self.passes,
            wilson_low=interval[0] if interval else None,
            wilson_high=interval[1] if interval else None,
            tasks=len(self.tasks),
            tasks_passed=sum(1 for v in self.tasks.values() if v[1] > 0),
            tasks_all_passed=sum(1 for v in self.tasks.values() if v[0] == v[1]),
            repeats_min=min(per_task),
            repeats_max=max(per_task),
            repeat_rates=[
                RepeatRate(repeat=k, runs=v[0], passes=v[1]) for k, v in sorted(self.repeats.items())
            ],
            single_repeat=max(per_task) == 1,
            usd_micros_total=self.micros if costed and self.costed and not self.uncosted else None,  # never a part
            costed_runs=self.costed,
            uncosted_runs=self.uncosted,
            limit_stopped=self.limit_stopped,
            tokens_in=self.tin,
            tokens_out=self.tout,
            refusal_runs=self.refusal_runs,
            correct_refusals=self.correct_refusals,
            edit_runs=self.edit_runs,
            false_refusals=self.false_refusals,
            failure_categories=dict(sorted(self.categories.items())),
            rubric_runs=len(self.rubric),
            rubric_mean=math.fsum(self.rubric) / len(self.rubric) if self.rubric else None,
            condition=condition,
        )


def first_rubric_scores(state: LedgerState) -> dict[str, float]:
    """Each run's first model-judged score (a later re-judging does not move the column)."""
    return {run_id: items[0].rubric.score for run_id, items in state.rubric.items() if items}


_TIER_INDEX = {t: i for i, t in enumerate((*TIERS, ALL_TIERS))}


def _rows(state: LedgerState, members: list[RecordEntry], rubric: dict[str, float]) -> list[RowMetrics]:
    """One row per (condition, tier, model, segment): runs of different conditions never pool."""
    accs: dict[tuple[str, str, str, str], _Acc] = {}
    for rec in members:
        run = rec.run.run
        score = rubric.get(run.run_id)
        for tier in (run.task.tier, ALL_TIERS):
            accs.setdefault((rec.condition, run.model.id, run.model.segment, tier), _Acc()).add(rec, score)
    keys = sorted(accs, key=lambda k: (order_key(k[0]), _TIER_INDEX[k[3]], k[1], k[2]))
    return [accs[k].freeze(k[3], k[1], k[2], k[0]) for k in keys]


#: (condition, model, segment) -> task -> (its tier, the tally of its records in record order)
_AblationIndex = dict[tuple[str, str, str], dict[str, tuple[str, _Acc]]]


def _row_keys(rec: RecordEntry) -> tuple[tuple[str, str, str, str], ...]:
    """The headline rows a record counts in: its tier's and every tier's."""
    run = rec.run.run
    return tuple((rec.condition, run.model.id, run.model.segment, tier) for tier in (run.task.tier, ALL_TIERS))


def _ablation_index_add(by: _AblationIndex, rec: RecordEntry) -> None:
    run = rec.run.run
    tasks = by.setdefault((rec.condition, run.model.id, run.model.segment), {})
    held = tasks.get(run.task.id)
    if held is None:
        held = tasks[run.task.id] = (run.task.tier, _Acc())
    held[1].add(rec, None)


def _ablations_from(by: _AblationIndex) -> list[AblationRow]:
    """Each non-default condition of each (model, segment) against the default, per tier and
    pooled, on the tasks both conditions ran."""
    out: list[AblationRow] = []
    for (condition, model, segment), tasks in by.items():
        if condition == DEFAULT:
            continue
        default = by.get((DEFAULT, model, segment), {})
        unpaired = sorted(t for t in tasks if t not in default)
        paired = sorted(t for t in tasks if t in default)
        for tier in (*TIERS, ALL_TIERS):
            chosen = [t for t in paired if tier == ALL_TIERS or tasks[t][0] == tier]
            lonely = [t for t in unpaired if tier == ALL_TIERS or tasks[t][0] == tier]
            if not chosen and not lonely:
                continue
            cond, base = _Acc(), _Acc()
            for t in chosen:  # task by task, as adding each task's records in turn would
                cond.merge(tasks[t][1])
                base.merge(default[t][1])
            costed = segment in COSTED_SEGMENTS
            out.append(
                AblationRow(
                    condition=condition, tier=tier, model=model, segment=segment, costed=costed,
                    paired_tasks=len(chosen), unpaired_tasks=lonely,
                    runs=cond.runs, passes=cond.passes, tasks_passed=_tasks_passed(cond),
                    usd_micros_total=cond.micros if costed and cond.costed and not cond.uncosted else None, uncosted_runs=cond.uncosted,
                    default_runs=base.runs, default_passes=base.passes, default_tasks_passed=_tasks_passed(base),
                    default_usd_micros_total=base.micros if costed and base.costed and not base.uncosted else None,
                    default_uncosted_runs=base.uncosted,
                    failure_categories=dict(sorted(cond.categories.items())),
                )
            )
    return sorted(out, key=lambda a: (order_key(a.condition), _TIER_INDEX[a.tier], a.model, a.segment))


def _tasks_passed(acc: _Acc) -> int:
    return sum(1 for v in acc.tasks.values() if v[1] > 0)


def _variant_add(per_model: dict[str, dict[str, list[int]]], variant_of: dict[str, str], rec: RecordEntry) -> None:
    task = rec.run.run.task
    if task.variant_of is not None:
        variant_of[task.id] = task.variant_of
    counts = per_model.setdefault(rec.run.run.model.id, {}).setdefault(task.id, [0, 0])
    counts[0] += 1
    counts[1] += rec.verdict == "pass"


def _variants_from(
    per_model: dict[str, dict[str, list[int]]], variant_of: dict[str, str]
) -> tuple[list[VariantGap], list[OrphanVariant]]:
    gaps: list[VariantGap] = []
    orphans: list[OrphanVariant] = []
    for model in sorted(per_model):
        tasks = per_model[model]
        pairs: list[str] = []
        originals: set[str] = set()
        vr = vp = 0
        for variant in sorted(t for t in tasks if t in variant_of):
            original = variant_of[variant]
            if original in tasks:
                pairs.append(f"{original} <- {variant}")
                originals.add(original)
                vr += tasks[variant][0]
                vp += tasks[variant][1]
            else:
                orphans.append(
                    OrphanVariant(
                        model=model,
                        variant=variant,
                        original=original,
                        runs=tasks[variant][0],
                        passes=tasks[variant][1],
                    )
                )
        if pairs:
            gaps.append(
                VariantGap(
                    model=model,
                    pairs=pairs,
                    original_runs=sum(tasks[o][0] for o in originals),
                    original_passes=sum(tasks[o][1] for o in originals),
                    variant_runs=vr,
                    variant_passes=vp,
                )
            )
    return gaps, orphans


@dataclass
class _HarnessTally:
    """One task's harness runs: [runs, passes] by scripted mode."""

    tier: Tier
    outcome: Outcome
    mode: str = "do"
    runs: dict[str, list[int]] = field(
        default_factory=lambda: {"gold": [0, 0], "noop": [0, 0], "unknown": [0, 0]}
    )
    #: gold runs failed only on assertions that could not be evaluated (evidence the run lacks)
    gold_unevaluable: int = 0


_HarnessTallies = dict[tuple[str, str], _HarnessTally]


def _harness_add(tasks: _HarnessTallies, rec: RecordEntry) -> None:
    task = rec.run.run.task
    mode = harness_mode(rec.run) or "unknown"
    t = tasks.setdefault((task.id, rec.condition), _HarnessTally(task.tier, task.expected_outcome, task.mode))
    t.runs[mode][0] += 1
    t.runs[mode][1] += rec.verdict == "pass"
    if mode == "gold" and rec.verdict == "fail" and _unevaluable(rec.graded.grade):
        t.gold_unevaluable += 1


#: how the grader words an assertion it could not evaluate for want of evidence the run did not
#: capture (`grading/grader.py`, `evaluate`; `grading/context.py`, `checks_kicad.check_clean`):
#: a missing file or bad JSON the run wrote is "could not be evaluated" too, and is the run's doing
UNEVALUABLE = re.compile(r"^could not be evaluated: .*\bwas captured when this run ended\b")


def _unevaluable(grade: GradeRecorded) -> bool:
    """Every required assertion the run failed, it failed for want of evidence it did not
    capture: a run recorded before the suite read that evidence (re-scored under a later
    version), not a gold that misses."""
    failed = [a for a in grade.assertions if a.required and a.status == "fail"]
    return bool(failed) and all(UNEVALUABLE.match(a.detail) for a in failed)


def _harness_from(tasks: _HarnessTallies) -> list[HarnessCheck]:
    """Per (task, condition): a gold or noop run made under a runner flag is checked apart."""
    order = {t: i for i, t in enumerate(TIERS)}
    out = []
    for task_id, condition in sorted(tasks, key=lambda k: (order[tasks[k].tier], k[0], order_key(k[1]))):
        t = tasks[(task_id, condition)]
        (gr, gp), (nr, np_) = t.runs["gold"], t.runs["noop"]
        problems = []
        if gr == 0:
            problems.append("no gold run")
        elif gp < gr and t.gold_unevaluable == gr - gp:
            problems.append(f"gold failed {gr - gp} of {gr}, each only on assertions that could not be evaluated: "
                            "those runs lack evidence the suite now reads (recorded before it was captured?), "
                            "which says nothing of whether the task is solvable")
        elif gp < gr:
            unevaluable = f" ({t.gold_unevaluable} only on assertions that could not be evaluated)" if t.gold_unevaluable else ""
            problems.append(f"gold failed {gr - gp} of {gr}{unevaluable}: the task may not be solvable as graded")
        if nr == 0:
            problems.append("no noop run")
        elif np_ and t.outcome in ("edit", "refusal"):
            problems.append(f"noop passed {np_} of {nr}: the task does not discriminate")
        if t.runs["unknown"][0]:
            problems.append(f"{t.runs['unknown'][0]} harness run(s) neither gold nor noop")
        out.append(
            HarnessCheck(
                task_id=task_id,
                tier=t.tier,
                expected_outcome=t.outcome,
                gold_runs=gr,
                gold_passes=gp,
                noop_runs=nr,
                noop_passes=np_,
                problems=problems,
                condition=condition,
                mode=t.mode,
            )
        )
    return out


_ReplayTallies = dict[tuple[str, str, tuple[bool, str]], list[int]]


def _replay_add(rows: _ReplayTallies, rec: RecordEntry) -> None:
    r = rows.setdefault((rec.run.run.model.id, rec.run.run.task.id, order_key(rec.condition)), [0, 0])
    r[0] += 1
    r[1] += rec.verdict == "pass"


def _replays_from(rows: _ReplayTallies) -> list[ReplayRow]:
    return [
        ReplayRow(model=m, task_id=t, runs=v[0], passes=v[1], condition=c[1]) for (m, t, c), v in sorted(rows.items())
    ]


_ScriptedTallies = dict[tuple[str, str, tuple[bool, str], str], dict[str, Any]]


def _scripted_add(rows: _ScriptedTallies, rec: RecordEntry) -> None:
    run = rec.run.run
    build = build_label(run.comparability.copperhead_version, run.comparability.copperhead_commit)
    r = rows.setdefault(
        (run.task.id, run.model.id, order_key(rec.condition), build),
        {"task": run.task, "runs": 0, "passes": 0, "categories": {}},
    )
    r["runs"] += 1
    r["passes"] += rec.verdict == "pass"
    if rec.failure_category:
        r["categories"][rec.failure_category] = r["categories"].get(rec.failure_category, 0) + 1


def _scripted_from(rows: _ScriptedTallies) -> list[ScriptedRow]:
    order = {t: i for i, t in enumerate(TIERS)}
    return [
        ScriptedRow(
            task_id=task_id, tier=r["task"].tier, expected_outcome=r["task"].expected_outcome, model=model,
            runs=r["runs"], passes=r["passes"], categories=dict(sorted(r["categories"].items())), condition=cond[1],
            mode=r["task"].mode, build=build,
        )
        for (task_id, model, cond, build), r in sorted(rows.items(), key=lambda kv: (order[kv[1]["task"].tier], kv[0]))
    ]


_ModeTallies = dict[tuple[str, str, str], dict[str, Any]]


def _mode_add(rows: _ModeTallies, rec: RecordEntry, kind: str) -> None:
    if rec.condition != DEFAULT:
        return
    run = rec.run.run
    r = rows.setdefault((run.model.id, kind, run.task.mode), {"runs": 0, "passes": 0, "categories": {}})
    r["runs"] += 1
    r["passes"] += rec.verdict == "pass"
    if rec.failure_category:
        r["categories"][rec.failure_category] = r["categories"].get(rec.failure_category, 0) + 1


def _modes_from(rows: _ModeTallies) -> list[ModeRow]:
    return [
        ModeRow(model=model, kind=kind, mode=mode, runs=r["runs"], passes=r["passes"],
                categories=dict(sorted(r["categories"].items())))
        for (model, kind, mode), r in sorted(rows.items())
    ]


def _not_the_model(rec: RecordEntry) -> NotTheModels:
    run = rec.run.run
    failure = run.harness_failure
    assert failure is not None
    return NotTheModels(run_id=run.run_id, task_id=run.task.id, model=run.model.id,
                        kind=failure.kind, detail=failure.detail, path=rec.path,
                        turn=None if isinstance(failure.turn, UnsetType) else failure.turn)


class GroupAcc:
    """One comparability group's figures, built one record at a time in record order.

    Why a step form: every figure of a group is a sum, a count or a first/last-seen value over
    its records, so a group that gains a record at the end of the order is brought up to date
    by adding that record alone (`cbledger.projections.aggregates` does this as events fold), and
    a full rebuild is the same `add` over every record: the two cannot drift apart. `result` reads
    the tallies without changing them, and re-freezes only the rows a new record touched.
    """

    def __init__(self, key: str, main: bool, label: str, reasons: list[str]) -> None:
        self.key, self.main, self.label, self.reasons = key, main, label, reasons
        self.records = 0
        self.rows: dict[tuple[str, str, str, str], _Acc] = {}
        self.frozen: dict[tuple[str, str, str, str], RowMetrics] = {}
        self.ablation_index: _AblationIndex = {}
        self.ablated = False
        self.per_model: dict[str, dict[str, list[int]]] = {}
        self.variant_of: dict[str, str] = {}
        self.harness: _HarnessTallies = {}
        self.replays: _ReplayTallies = {}
        self.scripted: _ScriptedTallies = {}
        self.stopped: list[NotTheModels] = []
        self.env_failures: env_failures.Tally = {}
        self.envs: dict[Environment, int] = {}
        self.echo_agent: EchoTally = {}
        self.modes: _ModeTallies = {}
        self._result: GroupMetrics | None = None

    def add(self, rec: RecordEntry, rubric: float | None) -> None:
        self._result = None
        self.records += 1
        run = rec.run.run
        count_environment(self.envs, run)
        env_failures.add(self.env_failures, run)
        if not_the_models(rec.run):
            self.stopped.append(_not_the_model(rec))
        elif is_scripted(rec.run):
            _scripted_add(self.scripted, rec)  # what a session script names is never a provider's naming
            _mode_add(self.modes, rec, "scripted")
        elif is_harness(rec.run):
            _harness_add(self.harness, rec)
        elif is_replay(rec.run):
            _replay_add(self.replays, rec)
        else:
            condition = rec.condition
            for key in _row_keys(rec):
                self.rows.setdefault(key, _Acc()).add(rec, rubric)
                self.frozen.pop(key, None)
            _ablation_index_add(self.ablation_index, rec)
            self.ablated = self.ablated or condition != DEFAULT
            if condition == DEFAULT:
                _variant_add(self.per_model, self.variant_of, rec)
            _mode_add(self.modes, rec, "agent")
            echo_add(self.echo_agent, run)

    def add_rubric(self, rec: RecordEntry, rubric: float) -> None:
        """The first rubric score of a record added before it was scored: the headline rows that
        record went to take it, as they would have had it been scored first (a mean over a list
        summed with `math.fsum`, whose order does not matter)."""
        if not_the_models(rec.run) or is_scripted(rec.run) or is_harness(rec.run) or is_replay(rec.run):
            return  # as `add`: only a headline row reads a rubric score
        self._result = None
        for key in _row_keys(rec):
            self.rows[key].rubric.append(rubric)
            self.frozen.pop(key, None)

    def _row(self, k: tuple[str, str, str, str]) -> RowMetrics:
        row = self.frozen.get(k)
        if row is None:
            row = self.frozen[k] = self.rows[k].freeze(k[3], k[1], k[2], k[0])
        return row

    def result(self) -> GroupMetrics:
        if self._result is not None:
            return self._result
        keys = sorted(self.rows, key=lambda k: (order_key(k[0]), _TIER_INDEX[k[3]], k[1], k[2]))
        gaps, orphans = _variants_from(self.per_model, self.variant_of)
        self._result = GroupMetrics(
            key=self.key,
            main=self.main,
            label=self.label,
            reasons=self.reasons,
            records=self.records,
            rows=[self._row(k) for k in keys],
            variant_gaps=gaps,
            orphan_variants=orphans,
            harness=_harness_from(self.harness),
            replays=_replays_from(self.replays),
            scripted=_scripted_from(self.scripted),
            not_the_models=list(self.stopped),
            ablations=_ablations_from(self.ablation_index) if self.ablated else [],
            environments=environment_rows(self.envs),
            echoes=merge_echoes(self.echo_agent, {}),
            environment_failures=env_failures.rows(self.env_failures),
            modes=_modes_from(self.modes),
        )
        return self._result


def group_metrics(
    state: LedgerState,
    records: list[RecordEntry],
    part: Partition,
    rubric: dict[str, float],
) -> list[GroupMetrics]:
    out = []
    for g in part.groups:
        acc = GroupAcc(g.key, g.main, g.label, g.reasons)
        for i in g.members:
            rec = records[i]
            acc.add(rec, rubric.get(rec.run_id))
        out.append(acc.result())
    return out


def suite_metrics(state: LedgerState, suite_version: str, rubric: dict[str, float] | None = None) -> SuiteMetrics:
    records = record_entries(state, suite_version, build=False)
    part = partition(state, suite_version, records)
    return SuiteMetrics(
        suite_version=suite_version,
        reference=part.reference,
        records=len(records),
        groups=group_metrics(state, records, part, rubric if rubric is not None else first_rubric_scores(state)),
    )
