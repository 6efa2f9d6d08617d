"""The fenced and report-only lanes: rubric scores, the two billed lanes, reviews, the audit.

Everything here is shown beside the deterministic tables and read by none of them. The headline
numbers, the gate, partial credit and cost per passing task come from `metrics.py`, which reads
grades and runs only; this module reads `rubric.scored` and `review.recorded` besides, and no
function in `metrics.py`, `gate.py` or `records.py`' verdict fields calls into it
(`tests/test_judge_fence.py` checks the rendered bytes).

* **Model-judged**: per model and run kind, the mean of each judged run's first overall score and
  each criterion's mean points; a later re-judging of a run is billed (it is in the judge lane)
  but does not move the mean.
* **Billed lanes**: the system under test (each run's own tokens and USD) and harness-judge (every
  judge and review call made about the model's runs, re-judgings included), summed apart.
* **Audit**: for each task, an assertion that passed in every graded run, or failed in every one,
  across at least two models, is listed as possibly vacuous or possibly over-strict. Harness runs
  (gold and noop, which pass or fail by design) are left out; nothing here changes a grade.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from msgspec import UNSET, Struct

from cbledger.ledger import surfaces
from cbledger.ledger.events import LaneUsage
from cbledger.projections.fold import LedgerState
from cbledger.projections.records import RecordEntry, is_harness, is_scripted, not_the_models


def run_kind(rec: RecordEntry) -> str:
    """What a record's run measured: a model (`agent`), a session script, the harness."""
    if is_harness(rec.run):
        return "harness"
    if not_the_models(rec.run):
        return "never reached the model"
    if is_scripted(rec.run):
        return "scripted"
    return "agent"


class CriterionMean(Struct, frozen=True, kw_only=True):
    id: str
    runs: int
    points: int
    max_points: int


class JudgedRow(Struct, frozen=True, kw_only=True):
    model: str
    kind: str
    runs: int
    judged: int
    mean: float | None
    criteria: list[CriterionMean]
    judges: list[str]


class LaneRow(Struct, frozen=True, kw_only=True):
    model: str
    kind: str
    runs: int
    system_tokens_in: int
    system_tokens_out: int
    #: None when a run of the row has no cost
    system_usd_micros: int | None
    #: the model ids the provider named in the runs' answers
    system_models: list[str]
    #: the surfaces the runs came through (`ledger/surfaces.json`)
    surfaces: list[str]
    judge_calls: int
    judge_tokens_in: int
    judge_tokens_out: int
    #: None when a judge call of the row has no cost; 0 with no call
    judge_usd_micros: int | None
    judge_models: list[str]


class AuditFlag(Struct, frozen=True, kw_only=True):
    task_id: str
    assertion_id: str
    runs: int
    models: int
    always: str  # "pass" | "fail"


class ReviewRow(Struct, frozen=True, kw_only=True):
    seq: int
    run_id: str
    task_id: str
    model: str
    author: str
    narrative: str


def _key(rec: RecordEntry) -> tuple[str, str]:
    return rec.run.run.model.id, run_kind(rec)


def judged_rows(state: LedgerState, records: Iterable[RecordEntry]) -> list[JudgedRow]:
    by: dict[tuple[str, str], list[RecordEntry]] = {}
    for rec in records:
        by.setdefault(_key(rec), []).append(rec)
    out: list[JudgedRow] = []
    for (model, kind), recs in sorted(by.items()):
        scores: list[float] = []
        criteria: dict[str, list[int]] = {}
        judges: set[str] = set()
        for rec in recs:
            items = state.rubric.get(rec.run_id)
            if not items:
                continue
            first = items[0].rubric
            scores.append(first.score)
            judges.add(first.judge_model)
            for c in first.criteria if first.criteria is not UNSET else []:
                acc = criteria.setdefault(c.id, [0, 0, 0])
                acc[0] += 1
                acc[1] += c.points
                acc[2] += c.max_points
        if not scores:
            continue
        out.append(JudgedRow(
            model=model, kind=kind, runs=len(recs), judged=len(scores), mean=math.fsum(scores) / len(scores),
            criteria=[CriterionMean(id=k, runs=v[0], points=v[1], max_points=v[2]) for k, v in sorted(criteria.items())],
            judges=sorted(judges),
        ))
    return out


def _judge_usages(state: LedgerState, run_id: str) -> list[LaneUsage]:
    out: list[LaneUsage] = []
    for item in state.rubric.get(run_id, ()):
        if item.rubric.usage is not UNSET:
            out.append(item.rubric.usage)
    for review in state.reviews.get(run_id, ()):
        if review.review.usage is not None:
            out.append(review.review.usage)
    return out


def lane_rows(state: LedgerState, records: Iterable[RecordEntry]) -> list[LaneRow]:
    """Each (model, run kind)'s two lanes, summed apart; a lane with an uncosted call has no USD."""
    by: dict[tuple[str, str], list[RecordEntry]] = {}
    for rec in records:
        by.setdefault(_key(rec), []).append(rec)
    out: list[LaneRow] = []
    for (model, kind), recs in sorted(by.items()):
        tin = tout = micros = 0
        uncosted = False
        jcalls = jin = jout = jmicros = 0
        juncosted = False
        jmodels: set[str] = set()
        smodels: set[str] = set()
        via: set[str] = set()
        for rec in recs:
            run = rec.run.run
            smodels.update(run.provider_models)
            via.add(surfaces.run_surface(run))
            if run.stats is not None:
                tin += run.stats.tokens_in
                tout += run.stats.tokens_out
            if run.cost.usd_micros is None:
                uncosted = True
            else:
                micros += run.cost.usd_micros
            for usage in _judge_usages(state, rec.run_id):
                jcalls += 1
                jin += usage.tokens_in
                jout += usage.tokens_out
                jmodels.update(usage.provider_models)
                if usage.cost.usd_micros is None:
                    juncosted = True
                else:
                    jmicros += usage.cost.usd_micros
        out.append(LaneRow(
            model=model, kind=kind, runs=len(recs), system_tokens_in=tin, system_tokens_out=tout,
            system_usd_micros=None if uncosted else micros, system_models=sorted(smodels), surfaces=sorted(via), judge_calls=jcalls, judge_tokens_in=jin,
            judge_tokens_out=jout, judge_usd_micros=None if juncosted else jmicros, judge_models=sorted(jmodels),
        ))
    return out


def audit(records: Iterable[RecordEntry]) -> list[AuditFlag]:
    """Assertions whose outcome never varied across the runs of two or more models."""
    runs: dict[tuple[str, str], int] = {}
    models: dict[tuple[str, str], set[str]] = {}
    statuses: dict[tuple[str, str], set[str]] = {}
    for rec in records:
        if is_harness(rec.run) or not_the_models(rec.run):
            continue
        task = rec.run.run.task.id
        for a in rec.graded.grade.assertions:
            key = (task, a.id)
            runs[key] = runs.get(key, 0) + 1
            models.setdefault(key, set()).add(rec.run.run.model.id)
            statuses.setdefault(key, set()).add(a.status)
    return [
        AuditFlag(task_id=k[0], assertion_id=k[1], runs=runs[k], models=len(models[k]), always=next(iter(statuses[k])))
        for k in sorted(runs)
        if len(models[k]) >= 2 and len(statuses[k]) == 1
    ]


def reviews(state: LedgerState) -> list[ReviewRow]:
    out = []
    for run_id, items in state.reviews.items():
        entry = state.runs.get(run_id)
        if entry is None or run_id in state.retracted:
            continue
        for item in items:
            out.append(ReviewRow(
                seq=item.seq, run_id=run_id, task_id=entry.run.task.id, model=entry.run.model.id,
                author=item.review.author, narrative=item.review.narrative,
            ))
    return sorted(out, key=lambda r: r.seq)
