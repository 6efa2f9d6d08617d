"""Regression gating (standard section 11): a snapshot of the headline numbers, and a comparison.

The gate compares per (suite version, tier, model), main comparability group only, never netted
across tiers. It fires when

* the strict pass rate falls by MORE than
  `max(rate_floor, one run's worth, z x SE)`, where one run's worth is `1 / min(runs before,
  runs after)` and SE is the standard error of a difference of two binomial proportions under the
  pooled rate, `sqrt(p(1-p)(1/n_before + 1/n_after))`. Defaults: `rate_floor` 0.10, `z` 2.0.
  A single flipped repeat moves the rate by exactly one run's worth, so it can never fire; the
  floor keeps large tiers from firing on two or three flips; the z x SE term keeps small tiers
  (where one flip is 15-30 points) from firing on what three repeats cannot distinguish.
* the cost per passing task rises by MORE than `max(cost_floor, one pass's worth)` relative to
  the baseline, where one pass's worth is `1 / passes after` (losing one pass at equal spend
  raises cost per pass by exactly that). Default `cost_floor` 0.25.

Rows that are single-repeat on either side are reported and not gated (a single run is not a
result); rows present on one side only are reported and not gated. Snapshots of different suite
versions are not compared at all: their numbers are not comparable.

All arithmetic on rates and costs is exact (fractions of integers); only the z x SE term is a
float, and comparisons between the two are exact.
"""

from __future__ import annotations

import math
from fractions import Fraction

import msgspec
from msgspec import Struct

from cbledger.projections.fold import LedgerState, current_suite
from cbledger.projections.format import pct
from cbledger.projections.metrics import TIERS, SuiteMetrics, all_suite_metrics
from cbledger.projections.records import usd_from_micros

SNAPSHOT_FORMAT = "cbledger-snapshot/1"


class _S(Struct, rename="camel", frozen=True, kw_only=True, forbid_unknown_fields=True):
    pass


class SnapshotRow(_S, frozen=True):
    tier: str
    model: str
    segment: str
    runs: int
    passes: int
    strict_pass_rate: float | None
    usd_micros_total: int | None
    costed_runs: int
    uncosted_runs: int
    cost_per_passing_task_usd: float | None
    repeats_max: int
    single_repeat: bool


class SnapshotSuite(_S, frozen=True):
    suite_version: str
    records: int
    main_group_records: int
    rows: list[SnapshotRow]


class Snapshot(_S, frozen=True):
    format: str
    head_seq: int
    head_hash: str | None
    snapshot_at: str | None
    current_suite: str | None
    suites: list[SnapshotSuite]


def build_snapshot(state: LedgerState, metrics: list[SuiteMetrics] | None = None) -> Snapshot:
    metrics = metrics if metrics is not None else all_suite_metrics(state)
    suites = []
    for sm in metrics:
        main = sm.main_group()
        rows = []
        if main is not None:
            for r in main.rows:
                if r.tier not in TIERS:
                    continue
                cpp = r.cost_per_pass_micros
                rows.append(
                    SnapshotRow(
                        tier=r.tier,
                        model=r.model,
                        segment=r.segment,
                        runs=r.runs,
                        passes=r.passes,
                        strict_pass_rate=r.passes / r.runs if r.runs else None,
                        usd_micros_total=r.usd_micros_total,
                        costed_runs=r.costed_runs,
                        uncosted_runs=r.uncosted_runs,
                        cost_per_passing_task_usd=usd_from_micros(round(cpp)) if cpp is not None else None,
                        repeats_max=r.repeats_max,
                        single_repeat=r.single_repeat,
                    )
                )
        suites.append(
            SnapshotSuite(
                suite_version=sm.suite_version,
                records=sm.records,
                main_group_records=main.records if main is not None else 0,
                rows=rows,
            )
        )
    at = state.last_at.isoformat().replace("+00:00", "Z") if state.last_at else None
    return Snapshot(
        format=SNAPSHOT_FORMAT,
        head_seq=state.head_seq,
        head_hash=state.head_hash,
        snapshot_at=at,
        current_suite=current_suite(state),
        suites=suites,
    )


def render_snapshot(snapshot: Snapshot) -> bytes:
    return msgspec.json.format(msgspec.json.encode(snapshot), indent=2) + b"\n"


def parse_snapshot(data: bytes, source: str) -> Snapshot:
    try:
        snap = msgspec.json.decode(data, type=Snapshot)
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        raise ValueError(f"{source}: not a cbledger snapshot: {exc}") from None
    if snap.format != SNAPSHOT_FORMAT:
        raise ValueError(f"{source}: snapshot format {snap.format!r}, expected {SNAPSHOT_FORMAT!r}")
    return snap


# --------------------------------------------------------------------------- comparison


class Thresholds(Struct, frozen=True, kw_only=True):
    rate_floor: float = 0.10
    z: float = 2.0
    cost_floor: float = 0.25


class Finding(Struct, frozen=True, kw_only=True):
    suite_version: str
    tier: str
    model: str
    metric: str  # "strict pass rate" | "cost per passing task" | "row"
    before: str
    after: str
    delta: str
    threshold: str
    fired: bool
    note: str = ""


class Comparison(Struct, frozen=True, kw_only=True):
    suite_version: str | None
    comparable: bool
    reason: str
    findings: list[Finding]

    @property
    def regressions(self) -> list[Finding]:
        return [f for f in self.findings if f.fired]


def _pts(x: Fraction | float) -> str:
    return f"{float(x) * 100:+.1f} pts"


def rate_threshold(passes_b: int, runs_b: int, passes_a: int, runs_a: int, t: Thresholds) -> Fraction | float:
    """The largest pass-rate drop that does not fire (see the module docstring)."""
    one_run = Fraction(1, min(runs_b, runs_a))
    pooled = (passes_b + passes_a) / (runs_b + runs_a)
    se = math.sqrt(pooled * (1 - pooled) * (1 / runs_b + 1 / runs_a))
    floors: list[Fraction | float] = [Fraction(t.rate_floor).limit_denominator(10**6), one_run, t.z * se]
    return max(floors)


def cost_threshold(passes_a: int, t: Thresholds) -> Fraction:
    """The largest relative rise in cost per passing task that does not fire."""
    return max(Fraction(t.cost_floor).limit_denominator(10**6), Fraction(1, passes_a))


def compare(baseline: Snapshot, current: Snapshot, suite_version: str | None = None, thresholds: Thresholds | None = None) -> Comparison:
    t = thresholds or Thresholds()
    suite = suite_version or current.current_suite
    cur = next((s for s in current.suites if s.suite_version == suite), None)
    base = next((s for s in baseline.suites if s.suite_version == suite), None)
    if suite is None or cur is None or base is None:
        have = ", ".join(s.suite_version for s in baseline.suites) or "none"
        return Comparison(
            suite_version=suite,
            comparable=False,
            reason=f"suite {suite} is not in both snapshots (baseline has: {have}); "
            "numbers from different suite versions are not comparable",
            findings=[],
        )
    findings: list[Finding] = []
    before = {(r.tier, r.model, r.segment): r for r in base.rows}
    after = {(r.tier, r.model, r.segment): r for r in cur.rows}
    order = {tier: i for i, tier in enumerate(TIERS)}
    for key in sorted(set(before) | set(after), key=lambda k: (order.get(k[0], 9), k[1], k[2])):
        tier, model, _ = key
        b, a = before.get(key), after.get(key)
        if b is None or a is None:
            findings.append(
                Finding(
                    suite_version=suite, tier=tier, model=model, metric="row",
                    before="-" if b is None else f"{b.passes}/{b.runs}",
                    after="-" if a is None else f"{a.passes}/{a.runs}",
                    delta="-", threshold="-", fired=False,
                    note="only in the baseline" if a is None else "new in the current snapshot",
                )
            )
            continue
        if b.single_repeat or a.single_repeat:
            findings.append(
                Finding(
                    suite_version=suite, tier=tier, model=model, metric="row",
                    before=f"{b.passes}/{b.runs}", after=f"{a.passes}/{a.runs}",
                    delta="-", threshold="-", fired=False,
                    note="single repeat: not a result, not gated",
                )
            )
            continue
        rb, ra = Fraction(b.passes, b.runs), Fraction(a.passes, a.runs)
        limit = rate_threshold(b.passes, b.runs, a.passes, a.runs, t)
        findings.append(
            Finding(
                suite_version=suite, tier=tier, model=model, metric="strict pass rate",
                before=f"{pct(rb)} ({b.passes}/{b.runs})", after=f"{pct(ra)} ({a.passes}/{a.runs})",
                delta=_pts(ra - rb), threshold=f"-{float(limit) * 100:.1f} pts",
                fired=(rb - ra) > limit,
            )
        )
        if (
            b.usd_micros_total is not None and a.usd_micros_total is not None
            and not b.uncosted_runs and not a.uncosted_runs and b.passes and a.passes
        ):
            cb = Fraction(b.usd_micros_total, b.passes)
            ca = Fraction(a.usd_micros_total, a.passes)
            if cb > 0:
                limit_c = cost_threshold(a.passes, t)
                rise = ca / cb - 1
                findings.append(
                    Finding(
                        suite_version=suite, tier=tier, model=model, metric="cost per passing task",
                        before=f"${float(cb) / 1e6:.4f}", after=f"${float(ca) / 1e6:.4f}",
                        delta=f"{float(rise) * 100:+.1f}%", threshold=f"+{float(limit_c) * 100:.1f}%",
                        fired=rise > limit_c,
                    )
                )
    return Comparison(suite_version=suite, comparable=True, reason="", findings=findings)


def render_comparison(c: Comparison) -> str:
    if not c.comparable:
        return f"not comparable: {c.reason}\n"
    lines = [f"regression gate, suite {c.suite_version}: {len(c.regressions)} regression(s)"]
    for f in c.findings:
        status = "REGRESSION" if f.fired else ("note" if f.metric == "row" else "ok")
        line = (
            f"{status:<10} tier={f.tier} model={f.model} {f.metric}: before {f.before}, "
            f"after {f.after}, delta {f.delta}, threshold {f.threshold}"
        )
        if f.note:
            line += f" ({f.note})"
        lines.append(line)
    return "\n".join(lines) + "\n"
