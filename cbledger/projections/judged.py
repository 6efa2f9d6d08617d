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
from cbledger.ledger.events import LaneUsage, RubricScored, RunRecorded
from cbledger.projections import passes_part
from cbledger.projections.fold import LedgerState
from cbledger.projections.records import (
    RecordEntry,
    is_harness,
    is_replay,
    not_the_models,
    row_kind,
)


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
    #: the price tables the row's costs were priced under, each with how many runs and passes it priced
    price_tables: list[tuple[str, int]]
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
    """A model's rows per run kind: a row's spend and its cost per passing task (the default
    condition's) must be of one set of runs."""
    return rec.run.run.model.id, row_kind(rec.run)


class _Judged:
    __slots__ = ("criteria", "judges", "runs", "scores")

    def __init__(self) -> None:
        self.runs = 0
        self.scores: list[float] = []
        self.criteria: dict[str, list[int]] = {}
        self.judges: set[str] = set()


class _Lane:
    __slots__ = ("jcalls", "jin", "jmicros", "jmodels", "jout", "juncosted", "micros", "runs", "smodels", "tables",
                 "tin", "tout", "uncosted", "via")

    def __init__(self) -> None:
        self.runs = self.tin = self.tout = self.micros = 0
        self.uncosted = False
        self.jcalls = self.jin = self.jout = self.jmicros = 0
        self.juncosted = False
        self.jmodels: set[str] = set()
        self.smodels: set[str] = set()
        self.via: set[str] = set()
        self.tables: dict[str, int] = {}


class LanesAcc:
    """The model-judged rows, the billed lanes and the audit of a suite's records, a record at a
    time: every figure is a count, a sum or a set, so a record added at the end of the order is
    folded in alone, and the full computation is the same `add` over every record. A record's
    rubric scores and reviews are read when it is added (a later one means starting again)."""

    def __init__(self) -> None:
        self.judged: dict[tuple[str, str], _Judged] = {}
        self.lanes: dict[tuple[str, str], _Lane] = {}
        self.audit_runs: dict[tuple[str, str], int] = {}
        self.audit_models: dict[tuple[str, str], set[str]] = {}
        self.audit_statuses: dict[tuple[str, str], set[str]] = {}
        #: pass 1's run id -> its later passes, and how many later passes the state held then
        self._later: tuple[int, dict[str, list[tuple[int, str]]]] = (-1, {})

    def add(self, state: LedgerState, rec: RecordEntry) -> None:
        key = _key(rec)
        run = rec.run.run
        j = self.judged.get(key)
        if j is None:
            j = self.judged[key] = _Judged()
        j.runs += 1
        items = state.rubric.get(rec.run_id)
        if items:
            _score(j, items[0].rubric)
        lane = self.lanes.get(key)
        if lane is None:
            lane = self.lanes[key] = _Lane()
        lane.runs += 1
        if run.run_mode != "scripted":  # what a session script names is not a provider's naming
            lane.smodels.update(run.provider_models)
        lane.via.add(surfaces.run_surface(run))
        # every feedback pass of the attempt was billed to the system under test, not pass 1 alone;
        # a replay calls no model (the cost it carries is its original's, billed once, there)
        for billed in () if is_replay(rec.run) else (run, *self._later_passes(state, rec.run_id)):
            _bill_system(lane, billed)
        for usage in _judge_usages(state, rec.run_id):
            _bill(lane, usage)
        if key[1] not in ("harness", "not the model's"):
            self.add_to_audit(rec)

    def bill_pass(self, rec: RecordEntry, later: RunRecorded) -> None:
        """A later pass of the attempt a record added before it began: billed as `add` bills it."""
        _bill_system(self.lanes[_key(rec)], later)

    def judge(self, rec: RecordEntry, first: RubricScored | None, usage: LaneUsage | None) -> None:
        """A rubric score (`first`: the record's first) or a review of a record added before it:
        what `add` would have counted of it. Every figure it touches is a count, a sum of integers,
        a set or a list summed with `math.fsum`, so the order it comes in does not matter."""
        key = _key(rec)
        if first is not None:
            _score(self.judged[key], first)
        if usage is not None:
            _bill(self.lanes[key], usage)

    def _later_passes(self, state: LedgerState, run_id: str) -> list[RunRecorded]:
        """The live later passes of the attempt `run_id` began, in index order (a retracted pass
        ends it, as in the passes table)."""
        if self._later[0] != len(state.later_passes):
            self._later = (len(state.later_passes), passes_part.later_by_first(state))
        out = []
        for _index, pid in sorted(self._later[1].get(run_id, [])):
            if pid in state.retracted:
                break
            out.append(state.later_passes[pid].run)
        return out

    def add_to_audit(self, rec: RecordEntry) -> None:
        run = rec.run.run
        for a in rec.graded.grade.assertions:
            akey = (run.task.id, a.id)
            self.audit_runs[akey] = self.audit_runs.get(akey, 0) + 1
            self.audit_models.setdefault(akey, set()).add(run.model.id)
            self.audit_statuses.setdefault(akey, set()).add(a.status)

    def judged_rows(self) -> list[JudgedRow]:
        out: list[JudgedRow] = []
        for (model, kind), j in sorted(self.judged.items()):
            if not j.scores:
                continue
            out.append(JudgedRow(
                model=model, kind=kind, runs=j.runs, judged=len(j.scores), mean=math.fsum(j.scores) / len(j.scores),
                criteria=[CriterionMean(id=k, runs=v[0], points=v[1], max_points=v[2]) for k, v in sorted(j.criteria.items())],
                judges=sorted(j.judges),
            ))
        return out

    def lane_rows(self) -> list[LaneRow]:
        return [
            LaneRow(
                model=model, kind=kind, runs=x.runs, system_tokens_in=x.tin, system_tokens_out=x.tout,
                system_usd_micros=None if x.uncosted else x.micros, system_models=sorted(x.smodels),
                price_tables=sorted(x.tables.items()),
                surfaces=sorted(x.via), judge_calls=x.jcalls, judge_tokens_in=x.jin, judge_tokens_out=x.jout,
                judge_usd_micros=None if x.juncosted else x.jmicros, judge_models=sorted(x.jmodels),
            )
            for (model, kind), x in sorted(self.lanes.items())
        ]

    def audit(self) -> list[AuditFlag]:
        return [
            AuditFlag(task_id=k[0], assertion_id=k[1], runs=self.audit_runs[k], models=len(self.audit_models[k]),
                      always=next(iter(self.audit_statuses[k])))
            for k in sorted(self.audit_runs)
            if len(self.audit_models[k]) >= 2 and len(self.audit_statuses[k]) == 1
        ]


def _score(j: _Judged, first: RubricScored) -> None:
    j.scores.append(first.score)
    j.judges.add(first.judge_model)
    for c in first.criteria if first.criteria is not UNSET else []:
        acc = j.criteria.setdefault(c.id, [0, 0, 0])
        acc[0] += 1
        acc[1] += c.points
        acc[2] += c.max_points


def _bill_system(lane: _Lane, billed: RunRecorded) -> None:
    if billed.stats is not None:
        lane.tin += billed.stats.tokens_in
        lane.tout += billed.stats.tokens_out
    if billed.cost.usd_micros is None:
        lane.uncosted = True
    else:
        lane.micros += billed.cost.usd_micros
        table = billed.cost.price_table_version
        if table is not None:
            lane.tables[table] = lane.tables.get(table, 0) + 1


def _bill(lane: _Lane, usage: LaneUsage) -> None:
    lane.jcalls += 1
    lane.jin += usage.tokens_in
    lane.jout += usage.tokens_out
    lane.jmodels.update(usage.provider_models)
    if usage.cost.usd_micros is None:
        lane.juncosted = True
    else:
        lane.jmicros += usage.cost.usd_micros


def lanes_of(state: LedgerState, records: Iterable[RecordEntry]) -> LanesAcc:
    acc = LanesAcc()
    for rec in records:
        acc.add(state, rec)
    return acc


def judged_rows(state: LedgerState, records: Iterable[RecordEntry]) -> list[JudgedRow]:
    return lanes_of(state, records).judged_rows()


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
    return lanes_of(state, records).lane_rows()


def audit(records: Iterable[RecordEntry]) -> list[AuditFlag]:
    """Assertions whose outcome never varied across the runs of two or more models."""
    acc = LanesAcc()
    for rec in records:
        if not (is_harness(rec.run) or not_the_models(rec.run)):
            acc.add_to_audit(rec)
    return acc.audit()


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
