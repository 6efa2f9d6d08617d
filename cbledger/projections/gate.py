"""Regression gating (standard section 11): a snapshot of a named run set, and a comparison of two.

**What is compared.** Two run sets, each named by a selection (`selection.py`: copperhead version
or commit, model, run ids, batch, dates) or read from a snapshot written earlier. The candidate is
never "the ledger now" by default: old runs would dilute what the new ones did. Only agent runs of
the main comparability group of one suite version count, under one ablation condition (the
default unless asked), and a run may not be on both sides.

**How.** Per (tier, model, segment), never netted across tiers, and paired by task: only tasks
both sides ran are compared, so a candidate that ran other tasks cannot look better or worse for
it (the others are named in the finding). A row fires when

* the strict pass rate on the paired tasks falls by MORE than `max(rate_floor, one run's worth)`
  (one run's worth = `1 / min(runs before, runs after)`: a single flipped repeat moves a rate by at
  most that, so it never fires, however small the tier) AND the exact one-sided test of
  `exact.drop_p_value` gives `p <= alpha`;
* the cost per passing task on the paired tasks (all their USD over the tasks passed at least
  once) rises by MORE than `max(cost_floor, one task's worth)` (one task's worth = `1 / tasks
  passed after`: losing one passed task at equal spend raises it by that much) AND the stratified
  permutation test of `exact.cost_rise_p_value` gives `p <= alpha`. The cost check runs only when
  every run is costed, each side passed a task and each paired task has as many runs on both
  sides (cost per passing task counts every repeat's spend, so it is not comparable across
  repeat counts).

Defaults: `rate_floor` 0.10, `cost_floor` 0.25, `alpha` 0.10. Why both a floor and a test: the
test alone fires on a statistically clear but tiny drop in a large tier; the floor alone fires on
what three repeats cannot tell from noise. `firing_table` shows, for tiers of 1 to 20 tasks at 3
repeats, which drops fire (docs/PROJECTIONS.md holds it, checked by a test).

Rows that are single-repeat on either side, present on one side only, or share no task are
reported and not gated. Snapshots without the suite version are not compared.
"""

from __future__ import annotations

from collections.abc import Iterable
from fractions import Fraction

import msgspec
from msgspec import Struct

from cbledger import invocation
from cbledger.ledger.events import RunRecorded
from cbledger.projections.comparability import partition
from cbledger.projections.conditions import DEFAULT
from cbledger.projections.exact import (
    CostRun,
    CostStratum,
    PassCounts,
    cost_rise_p_value,
    drop_p_value,
)
from cbledger.projections.fold import LedgerState, current_suite, suite_versions
from cbledger.projections.format import pct
from cbledger.projections.metrics import COSTED_SEGMENTS, TIERS, build_label
from cbledger.projections.records import in_model_metrics, record_entries, run_kind, usd_from_micros
from cbledger.projections.selection import Selection

SNAPSHOT_FORMAT = "cbledger-snapshot/2"


class _S(Struct, rename="camel", frozen=True, kw_only=True, forbid_unknown_fields=True):
    pass


class RunCell(_S, frozen=True):
    run_id: str
    passed: bool
    usd_micros: int | None


class TaskCell(_S, frozen=True):
    task: str
    runs: list[RunCell]

    @property
    def passes(self) -> int:
        return sum(r.passed for r in self.runs)


class SnapshotRow(_S, frozen=True):
    condition: str
    tier: str
    model: str
    segment: str
    runs: int
    passes: int
    tasks: int
    tasks_passed: int
    strict_pass_rate: float | None
    usd_micros_total: int | None
    uncosted_runs: int
    cost_per_passing_task_usd: float | None
    repeats_max: int
    single_repeat: bool
    cells: list[TaskCell]


class SnapshotSuite(_S, frozen=True):
    suite_version: str
    #: agent runs of the main group that the selection names (what the rows count)
    selected_runs: int
    rows: list[SnapshotRow]
    #: per condition, the environments the runs were made in (`environment_label`) and how many
    #: runs each: a verdict names what it compared, and a side that pools copperhead builds says
    #: so. Empty in a snapshot written before snapshots kept it
    environments: dict[str, dict[str, int]] = msgspec.field(default_factory=dict)
    #: runs the selection names that no row counts, by why (`scripted`, `harness`, a comparability
    #: group's label, …): an empty side says what it did select. Empty in older snapshots
    left_out: dict[str, int] = msgspec.field(default_factory=dict)


class Snapshot(_S, frozen=True):
    format: str
    head_seq: int
    head_hash: str | None
    snapshot_at: str | None
    current_suite: str | None
    #: the selection's terms (`all` for every run)
    selection: str
    suites: list[SnapshotSuite]

    def run_ids(self) -> set[str]:
        return {c.run_id for s in self.suites for r in s.rows for t in r.cells for c in t.runs}


def _row(condition: str, tier: str, model: str, segment: str, tasks: dict[str, list[RunCell]]) -> SnapshotRow:
    cells = [TaskCell(task=t, runs=runs) for t, runs in sorted(tasks.items())]
    runs = sum(len(c.runs) for c in cells)
    passes = sum(c.passes for c in cells)
    uncosted = sum(1 for c in cells for r in c.runs if r.usd_micros is None)
    costed = segment in COSTED_SEGMENTS
    total = sum(r.usd_micros or 0 for c in cells for r in c.runs) if costed and not uncosted else None  # never a part
    passed_tasks = sum(1 for c in cells if c.passes)
    cpp = Fraction(total, passed_tasks) if total is not None and not uncosted and passed_tasks else None
    per_task = [len(c.runs) for c in cells]
    return SnapshotRow(
        condition=condition, tier=tier, model=model, segment=segment, runs=runs, passes=passes,
        tasks=len(cells), tasks_passed=passed_tasks, strict_pass_rate=passes / runs if runs else None,
        usd_micros_total=total, uncosted_runs=uncosted,
        cost_per_passing_task_usd=usd_from_micros(round(cpp)) if cpp is not None else None,
        repeats_max=max(per_task), single_repeat=max(per_task) == 1, cells=cells,
    )


#: how a run kind no row counts reads in `left_out` (`records.run_kind`)
LEFT_OUT_LABELS = {"harness": "harness checks (gold, noop)", "not the model's": "ended by the harness or its environment",
                   "scripted": "scripted", "replay": "replays"}


def left_out_note(suite: SnapshotSuite) -> str:
    """`; it selects 20 run(s) no row counts: 20 scripted` — what an empty side did select."""
    if not suite.left_out:
        return ""
    total = sum(suite.left_out.values())
    return (f"; it selects {total} run(s) no row counts: "
            + ", ".join(f"{n} {why}" for why, n in suite.left_out.items())
            + " (the gate compares the model runs of the main group: harness, scripted, replayed runs and runs "
              "the harness or its environment ended are in no row)")


def environment_label(run: RunRecorded) -> str:
    """What a run was made with, as a verdict names it: the copperhead build (`build_label`),
    kicad-cli, Node and the OS (the platform tag where no OS was recorded)."""
    c = run.comparability
    return (f"copperhead {build_label(c.copperhead_version, c.copperhead_commit)}; kicad-cli {c.kicad_cli_version or 'none'}; "
            f"node {c.node_version or 'none'}; {c.os or c.platform}")


def build_snapshot(state: LedgerState, selection: Selection | None = None) -> Snapshot:
    """The selected agent runs of each suite version's main group, per (condition, tier, model,
    segment) and task. Without a selection: every run (a baseline of everything so far)."""
    chosen = selection or Selection(everything=True, text="all")
    suites = []
    for suite in suite_versions(state):
        records = record_entries(state, suite, build=False)
        groups = partition(state, suite, records)
        main = groups.main_group()
        by: dict[tuple[str, str, str, str], dict[str, list[RunCell]]] = {}
        selected = 0
        environments: dict[str, dict[str, int]] = {}
        left_out: dict[str, int] = {}
        for group in groups.groups:
            if not group.main:
                for i in group.members:
                    if chosen.matches(records[i].run.run):
                        why = f"another comparability group ({group.label})"
                        left_out[why] = left_out.get(why, 0) + 1
        for i in main.members if main is not None else []:
            rec = records[i]
            run = rec.run.run
            if not chosen.matches(run):
                continue
            if not in_model_metrics(rec.run):
                why = LEFT_OUT_LABELS.get(run_kind(rec.run), run_kind(rec.run))
                left_out[why] = left_out.get(why, 0) + 1
                continue
            selected += 1
            env = environment_label(run)
            of = environments.setdefault(rec.condition, {})
            of[env] = of.get(env, 0) + 1
            key = (rec.condition, run.task.tier, run.model.id, run.model.segment)
            by.setdefault(key, {}).setdefault(run.task.id, []).append(
                RunCell(run_id=run.run_id, passed=rec.verdict == "pass", usd_micros=run.cost.usd_micros)
            )
        order = {t: i for i, t in enumerate(TIERS)}
        rows = [_row(*key, tasks) for key, tasks in sorted(by.items(), key=lambda kv: (kv[0][0] != DEFAULT, kv[0][0], order[kv[0][1]], kv[0][2], kv[0][3]))]
        suites.append(SnapshotSuite(suite_version=suite, selected_runs=selected, rows=rows,
                                    environments={c: dict(sorted(e.items())) for c, e in sorted(environments.items())},
                                    left_out=dict(sorted(left_out.items()))))
    at = state.last_at.isoformat().replace("+00:00", "Z") if state.last_at else None
    return Snapshot(
        format=SNAPSHOT_FORMAT, head_seq=state.head_seq, head_hash=state.head_hash, snapshot_at=at,
        current_suite=current_suite(state), selection=chosen.text, suites=suites,
    )


def render_snapshot(snapshot: Snapshot) -> bytes:
    return msgspec.json.format(msgspec.json.encode(snapshot), indent=2) + b"\n"


def parse_snapshot(data: bytes, source: str) -> Snapshot:
    try:
        head = msgspec.json.decode(data)
    except msgspec.DecodeError as exc:
        raise ValueError(f"{source}: not JSON: {exc}") from None
    fmt = head.get("format") if isinstance(head, dict) else None
    if fmt != SNAPSHOT_FORMAT:
        hint = f" (it has no per-task counts to pair; write a new one with `{invocation.command('project', 'snapshot')}`)" if fmt == "cbledger-snapshot/1" else ""
        raise ValueError(f"{source}: snapshot format {fmt!r}, expected {SNAPSHOT_FORMAT!r}{hint}")
    try:
        return msgspec.json.decode(data, type=Snapshot)
    except msgspec.ValidationError as exc:
        raise ValueError(f"{source}: not a cbledger snapshot: {exc}") from None


# --------------------------------------------------------------------------- comparison


class Thresholds(Struct, frozen=True, kw_only=True):
    rate_floor: Fraction = Fraction(1, 10)
    cost_floor: Fraction = Fraction(1, 4)
    alpha: Fraction = Fraction(1, 10)


class Finding(Struct, rename="camel", frozen=True, kw_only=True):
    suite_version: str
    condition: str
    tier: str
    model: str
    segment: str
    metric: str  # "strict pass rate" | "cost per passing task" | "row"
    before: str
    after: str
    delta: str
    threshold: str
    p_value: float | None
    fired: bool
    paired_tasks: int = 0
    note: str = ""
    #: False when the rule could not decide (a single repeat, nothing to pair, repeats that
    #: differ for cost): such a finding is no pass, and the headline counts it apart
    gated: bool = True


class Comparison(Struct, rename="camel", frozen=True, kw_only=True):
    suite_version: str | None
    condition: str
    comparable: bool
    reason: str
    baseline: str
    candidate: str
    findings: list[Finding]
    #: each side's environments (`SnapshotSuite.environments`) under the compared suite and condition
    baseline_environments: dict[str, int] = msgspec.field(default_factory=dict)
    candidate_environments: dict[str, int] = msgspec.field(default_factory=dict)

    @property
    def regressions(self) -> list[Finding]:
        return [f for f in self.findings if f.fired]

    @property
    def not_gated(self) -> list[Finding]:
        return [f for f in self.findings if not f.gated]


def _pts(x: Fraction) -> str:
    return f"{float(x) * 100:+.1f} pts"


def _p(p: Fraction | None) -> str:
    return "-" if p is None else f"{float(p):.4f}"


def rate_limit(runs_before: int, runs_after: int, t: Thresholds) -> Fraction:
    """The largest pass-rate drop the floor lets pass, whatever the test says."""
    return max(t.rate_floor, Fraction(1, min(runs_before, runs_after)))


def cost_limit(tasks_passed_after: int, t: Thresholds) -> Fraction:
    """The largest relative rise in cost per passing task the floor lets pass."""
    return max(t.cost_floor, Fraction(1, tasks_passed_after))


def rate_fires(strata: list[PassCounts], t: Thresholds) -> tuple[bool, Fraction, Fraction, Fraction]:
    """(fires, drop, limit, p) for one row's paired tasks."""
    pb = sum(s.baseline_passes for s in strata)
    nb = sum(s.baseline_runs for s in strata)
    pa = sum(s.candidate_passes for s in strata)
    na = sum(s.candidate_runs for s in strata)
    drop = Fraction(pb, nb) - Fraction(pa, na)
    limit = rate_limit(nb, na, t)
    p = drop_p_value(strata)
    return drop > limit and p <= t.alpha, drop, limit, p


def _not_gated(
    suite: str, condition: str, key: tuple[str, str, str], before: str, after: str, note: str, *, undecided: bool = True,
) -> Finding:
    """A row the rule did not test. `undecided` (the default): no verdict, and so no pass (a single
    repeat, no task in common, a row the candidate lost); a row only the candidate has is a note."""
    tier, model, segment = key
    return Finding(
        suite_version=suite, condition=condition, tier=tier, model=model, segment=segment, metric="row",
        before=before, after=after, delta="-", threshold="-", p_value=None, fired=False, note=note,
        gated=not undecided,
    )


def _counts(cells: Iterable[TaskCell]) -> str:
    cells = list(cells)
    return f"{sum(c.passes for c in cells)}/{sum(len(c.runs) for c in cells)}"


def compare_rows(
    suite: str, condition: str, key: tuple[str, str, str], b: SnapshotRow, a: SnapshotRow, t: Thresholds
) -> list[Finding]:
    tier, model, segment = key
    if b.single_repeat or a.single_repeat:
        return [_not_gated(suite, condition, key, f"{b.passes}/{b.runs}", f"{a.passes}/{a.runs}",
                           "single repeat: not a result, not gated")]
    before = {c.task: c for c in b.cells}
    after = {c.task: c for c in a.cells}
    paired = sorted(set(before) & set(after))
    left_out = sorted(set(before) ^ set(after))
    note = f"not paired, left out: {', '.join(left_out)}" if left_out else ""
    if not paired:
        return [_not_gated(suite, condition, key, f"{b.passes}/{b.runs}", f"{a.passes}/{a.runs}",
                           "no task in common: nothing to pair")]
    strata = [
        PassCounts(before[x].passes, len(before[x].runs), after[x].passes, len(after[x].runs)) for x in paired
    ]
    fires, drop, limit, p = rate_fires(strata, t)
    rb = Fraction(sum(s.baseline_passes for s in strata), sum(s.baseline_runs for s in strata))
    ra = Fraction(sum(s.candidate_passes for s in strata), sum(s.candidate_runs for s in strata))
    out = [
        Finding(
            suite_version=suite, condition=condition, tier=tier, model=model, segment=segment,
            metric="strict pass rate",
            before=f"{pct(rb)} ({_counts(before[x] for x in paired)})",
            after=f"{pct(ra)} ({_counts(after[x] for x in paired)})",
            delta=_pts(-drop), threshold=f"drop > {float(limit) * 100:.1f} pts and p <= {float(t.alpha):g}",
            p_value=float(p), fired=fires, paired_tasks=len(paired), note=note,
        )
    ]
    cost = _cost_finding(suite, condition, key, [before[x] for x in paired], [after[x] for x in paired], t, note)
    if cost is not None:
        out.append(cost)
    return out


def _cost_finding(
    suite: str, condition: str, key: tuple[str, str, str], before: list[TaskCell], after: list[TaskCell],
    t: Thresholds, note: str,
) -> Finding | None:
    tier, model, segment = key
    if segment not in COSTED_SEGMENTS:
        return None
    runs = [r for c in (*before, *after) for r in c.runs]
    if any(r.usd_micros is None for r in runs):
        return None
    tb = sum(1 for c in before if c.passes)
    ta = sum(1 for c in after if c.passes)
    if not tb or not ta:
        return None
    cb = Fraction(sum(r.usd_micros or 0 for c in before for r in c.runs), tb)
    ca = Fraction(sum(r.usd_micros or 0 for c in after for r in c.runs), ta)
    def finding(delta: str, threshold: str, p: Fraction | None, fired: bool, note: str, gated: bool = True) -> Finding:
        return Finding(
            suite_version=suite, condition=condition, tier=tier, model=model, segment=segment,
            metric="cost per passing task", before=f"${float(cb) / 1e6:.4f}", after=f"${float(ca) / 1e6:.4f}",
            delta=delta, threshold=threshold, p_value=float(p) if p is not None else None, fired=fired,
            paired_tasks=len(before), note=note, gated=gated,
        )

    if any(len(x.runs) != len(y.runs) for x, y in zip(before, after, strict=True)):
        return finding("-", "-", None, False,
                       "repeats differ between the sides: cost per passing task counts every repeat's spend, not gated",
                       gated=False)
    if cb == 0:
        return None
    rise = ca / cb - 1
    limit = cost_limit(ta, t)
    p: Fraction | None = None
    if rise > limit:  # the permutation test is only worth running past the floor
        strata = [
            CostStratum(
                [CostRun(r.passed, r.usd_micros or 0) for r in x.runs], [CostRun(r.passed, r.usd_micros or 0) for r in y.runs]
            )
            for x, y in zip(before, after, strict=True)
        ]
        p, _exact = cost_rise_p_value(strata)
    return finding(
        f"{float(rise) * 100:+.1f}%", f"rise > {float(limit) * 100:.1f}% and p <= {float(t.alpha):g}", p,
        p is not None and p <= t.alpha,
        note if p is not None else (note + "; " if note else "") + "within the floor: not tested",
    )


def compare(
    baseline: Snapshot, candidate: Snapshot, suite_version: str | None = None,
    thresholds: Thresholds | None = None, condition: str = DEFAULT,
) -> Comparison:
    t = thresholds or Thresholds()
    suite = suite_version or candidate.current_suite
    base = next((s for s in baseline.suites if s.suite_version == suite), None)
    cur = next((s for s in candidate.suites if s.suite_version == suite), None)

    def refused(reason: str) -> Comparison:
        return Comparison(suite_version=suite, condition=condition, comparable=False, reason=reason,
                          baseline=baseline.selection, candidate=candidate.selection, findings=[])

    if suite is None or base is None or cur is None:
        have = ", ".join(s.suite_version for s in baseline.suites) or "none"
        if suite is None:
            return refused(f"neither snapshot names a suite version (baseline has: {have}): no suite was bumped and "
                           "no run graded in the candidate; pass --suite V")
        return refused(f"suite {suite} is not in both snapshots (baseline has: {have}); "
                       "numbers from different suite versions are not comparable")
    shared = sorted(baseline.run_ids() & candidate.run_ids())
    if shared:
        return refused(f"the baseline and the candidate share {len(shared)} run(s) ({', '.join(shared[:3])}"
                       f"{', …' if len(shared) > 3 else ''}): a run compared with itself hides a change")
    if not base.selected_runs or not cur.selected_runs:
        side = "baseline" if not base.selected_runs else "candidate"
        sel = baseline.selection if side == "baseline" else candidate.selection
        return refused(f"the {side} ({sel}) holds no agent run of the main group of suite {suite}"
                       + left_out_note(base if side == "baseline" else cur))
    before = {(r.tier, r.model, r.segment): r for r in base.rows if r.condition == condition}
    after = {(r.tier, r.model, r.segment): r for r in cur.rows if r.condition == condition}
    if not before or not after:
        side = "baseline" if not before else "candidate"
        return refused(f"the {side} holds no run under condition {condition}")
    order = {tier: i for i, tier in enumerate(TIERS)}
    findings: list[Finding] = []
    for key in sorted(set(before) | set(after), key=lambda k: (order.get(k[0], 9), k[1], k[2])):
        b, a = before.get(key), after.get(key)
        if b is None or a is None:
            findings.append(_not_gated(
                suite, condition, key, "-" if b is None else f"{b.passes}/{b.runs}", "-" if a is None else f"{a.passes}/{a.runs}",
                "only in the baseline: not compared, no pass" if a is None else "only in the candidate",
                undecided=a is None,  # a row the candidate lost is no pass; one it added is a note
            ))
            continue
        findings += compare_rows(suite, condition, key, b, a, t)
    return Comparison(suite_version=suite, condition=condition, comparable=True, reason="",
                      baseline=baseline.selection, candidate=candidate.selection, findings=findings,
                      baseline_environments=base.environments.get(condition, {}),
                      candidate_environments=cur.environments.get(condition, {}))


def _side(name: str, selection: str, environments: dict[str, int]) -> list[str]:
    """A side's selection, then what its runs were made with: a verdict says which builds and
    environments it compared (the standard asks a published comparison to name them), and a side
    that pools copperhead builds is said to, since its rate is then no one build's."""
    lines = [f"{name}: {selection}"]
    lines += [f"  {n} run(s): {env}" for env, n in environments.items()]
    builds = sorted({env.split(";")[0] for env in environments})
    if len(builds) > 1:
        lines.append(f"  note: the {name} pools {len(builds)} copperhead builds ({', '.join(b.removeprefix('copperhead ') for b in builds)}); "
                     "select one per side (copperhead=V, commit=C) to compare builds")
    return lines


def render_comparison(c: Comparison) -> str:
    if not c.comparable:
        return f"not comparable: {c.reason}\n"
    undecided = len(c.not_gated)
    lines = [
        f"regression gate, suite {c.suite_version}, condition {c.condition}: {len(c.regressions)} regression(s)"
        + (f", {undecided} finding(s) not gated (no verdict, so no pass)" if undecided else ""),
        *_side("baseline", c.baseline, c.baseline_environments),
        *_side("candidate", c.candidate, c.candidate_environments),
    ]
    for f in c.findings:
        status = "REGRESSION" if f.fired else "not gated" if not f.gated else "note" if f.metric == "row" else "ok"
        line = (
            f"{status:<10} tier={f.tier} model={f.model} {f.metric}: before {f.before}, "
            f"after {f.after}, delta {f.delta}, threshold {f.threshold}"
        )
        if f.metric != "row":
            line += f", p {_p(Fraction(f.p_value) if f.p_value is not None else None)}, {f.paired_tasks} task(s) paired"
        if f.note:
            line += f" ({f.note})"
        lines.append(line)
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- the firing table


def _spread(tasks: int, repeats: int, lost: int) -> list[PassCounts]:
    """A tier of `tasks` tasks, all passing before; `lost` passes lost one task at a time in turn."""
    losses = [lost // tasks + (1 if i < lost % tasks else 0) for i in range(tasks)]
    return [PassCounts(repeats, repeats, repeats - x, repeats) for x in losses]


def _concentrated(tasks: int, repeats: int, lost: int) -> list[PassCounts]:
    """The same losses, whole tasks first."""
    out = []
    for _ in range(tasks):
        x = min(repeats, lost)
        lost -= x
        out.append(PassCounts(repeats, repeats, repeats - x, repeats))
    return out


TABLE_TASKS = (1, 2, 3, 5, 7, 10, 20)
TABLE_REPEATS = 3
TABLE_DROPS = 9


def firing_table(t: Thresholds | None = None) -> str:
    """The (tier size, lost passes) pairs that fire, as Markdown: for tiers of 1 to 20 tasks at 3
    repeats whose every run passed before, each cell is the drop, the exact p and the verdict
    when the losses are spread one task at a time (the hardest case to detect), and, where that
    differs, when they fall on whole tasks first."""
    t = t or Thresholds()
    header = ["Tasks (runs per side)", *(f"−{d}" for d in range(1, TABLE_DROPS + 1))]
    rows = []
    for tasks in TABLE_TASKS:
        n = tasks * TABLE_REPEATS
        cells = [f"{tasks} ({n})"]
        for lost in range(1, TABLE_DROPS + 1):
            if lost > n:
                cells.append("")
                continue
            spread_fires, drop, limit, spread_p = rate_fires(_spread(tasks, TABLE_REPEATS, lost), t)
            conc_fires, _, _, conc_p = rate_fires(_concentrated(tasks, TABLE_REPEATS, lost), t)
            if drop <= limit:
                cell = f"no: floor ({float(drop) * 100:.0f} pts)"
            else:
                cell = f"{'**fires**' if spread_fires else 'no'} (p {float(spread_p):.3f})"
                if conc_fires != spread_fires:
                    cell += f"; whole tasks: {'**fires**' if conc_fires else 'no'} (p {float(conc_p):.3f})"
            cells.append(cell)
        rows.append(cells)
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join("---" for _ in header) + " |"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines) + "\n"
