"""The site's pages, rendered from a folded state and each run's gathered evidence.

Pure: `render` returns (path under `results/site/`, bytes) pairs and reads nothing. Byte-identical
for the same inputs, like every projection: the snapshot time is the last event's, every number
goes through `format`, every list is sorted by an explicit key. Jinja2 autoescapes every value,
so text an agent wrote (a transcript, a diff, a tool result) is shown, never run; the only markup
passed through unescaped is the SVG that `svg.py` builds from escaped labels.

Self-contained: one stylesheet inline in every page, no script and no external resource, so the
site opens from `file://` as well as from a web server.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping
from fractions import Fraction
from typing import Any

import jinja2
from markupsafe import Markup

from cbledger.ledger.events import RunRecorded
from cbledger.projections import format as fmt
from cbledger.projections import gate, passes_part, workqueue
from cbledger.projections.conditions import DEFAULT
from cbledger.projections.fold import GradeEntry, LedgerState, PassEntry, RunEntry, current_suite
from cbledger.projections.metrics import ALL_TIERS, TIERS, GroupMetrics, RowMetrics, suite_metrics
from cbledger.projections.provenance import NO_REAL_MODEL, real_model_run
from cbledger.projections.records import harness_mode, record_entries, usd_from_micros
from cbledger.projections.selection import Selection
from cbledger.projections.site import svg
from cbledger.projections.site.evidence import RunEvidence

INDEX = "index.html"
RUNS = "runs.html"
REGRESSIONS = "regressions.html"
QUEUE = "workqueue.html"

_ENV = jinja2.Environment(
    loader=jinja2.PackageLoader("cbledger.projections.site", "templates"),
    autoescape=True,
    undefined=jinja2.StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
    keep_trailing_newline=True,
)


def run_page(run_id: str) -> str:
    """A run's page relative to the site root (run ids are safe path segments)."""
    return f"runs/{run_id}.html"


def _page(template: str, **context: Any) -> bytes:
    return _ENV.get_template(template).render(**context).encode("utf-8")


def _tier_label(tier: str) -> str:
    return "all tiers (pooled by run)" if tier == ALL_TIERS else tier


def _cost(cpp: Fraction | None, r: RowMetrics) -> str:
    if cpp is not None:
        return fmt.usd_micros(cpp)
    if r.uncosted_runs:
        return f"n/a: {r.uncosted_runs} of {r.runs} runs uncosted"
    return "—"


def _row(r: RowMetrics) -> dict[str, Any]:
    rate = r.rate
    return {
        "model": r.model, "segment": r.segment, "pinning": r.pinning, "runs": r.runs, "passes": r.passes,
        "tasks": r.tasks, "tasks_passed": r.tasks_passed, "condition": r.condition,
        "rate": fmt.pct(rate), "interval": fmt.interval(r.wilson_low, r.wilson_high),
        "rate_pct": f"{float(rate) * 100:.1f}" if rate is not None else "0",
        "low_pct": f"{(r.wilson_low or 0) * 100:.1f}",
        "width_pct": f"{((r.wilson_high or 0) - (r.wilson_low or 0)) * 100:.1f}",
        "cost": _cost(r.cost_per_pass_micros, r),
        "tokens": f"{r.tokens_in} in / {r.tokens_out} out",
    }


def _tiers(g: GroupMetrics) -> list[dict[str, Any]]:
    order = {t: i for i, t in enumerate((*TIERS, ALL_TIERS))}
    rows = [r for r in g.rows if r.condition == DEFAULT]
    out = []
    for tier in sorted({r.tier for r in rows}, key=lambda t: order.get(t, 99)):
        tier_rows = sorted(
            (r for r in rows if r.tier == tier),
            key=lambda r: (-(r.rate if r.rate is not None else Fraction(-1)), r.model, r.segment),
        )
        points = [
            svg.Point(
                label=r.model,
                cost_usd=float(r.cost_per_pass_micros) / 1e6 if r.cost_per_pass_micros is not None else None,
                rate=float(r.rate or 0), low=r.wilson_low or 0.0, high=r.wilson_high or 0.0,
            )
            for r in tier_rows
        ]
        chart = Markup(svg.scatter(points, f"cost against pass rate, tier {_tier_label(tier)}"))
        out.append({"tier": _tier_label(tier), "rows": [_row(r) for r in tier_rows], "chart": chart})
    return out


def _heatmap(state: LedgerState, suite: str) -> Markup:
    cells: dict[tuple[str, str], list[int]] = {}
    for e in record_entries(state, suite, build=False):
        c = cells.setdefault((e.run.run.task.id, e.run.run.model.id), [0, 0])
        c[1] += 1
        c[0] += e.graded.grade.verdict == "pass"
    tasks = sorted({t for t, _ in cells})
    models = sorted({m for _, m in cells})
    data = {k: svg.Cell(passes=v[0], runs=v[1]) for k, v in cells.items()}
    return Markup(svg.heatmap(tasks, models, data, f"pass rate by task and model, suite {suite}"))


def _verdict(state: LedgerState, run_id: str) -> tuple[GradeEntry | None, str]:
    grades = state.grades.get(run_id) or {}
    latest = list(grades.values())[-1] if grades else None
    if run_id in state.retracted:
        return latest, "retracted"
    return latest, latest.grade.verdict if latest else "ungraded"


def _run_summary(state: LedgerState, entry: RunEntry | PassEntry) -> dict[str, Any]:
    run = entry.run
    graded, verdict = _verdict(state, run.run_id)
    return {
        "id": run.run_id, "href": run_page(run.run_id), "seq": entry.seq, "task": run.task.id, "tier": run.task.tier,
        "model": run.model.id, "mode": harness_mode(entry) or run.run_mode, "verdict": verdict,
        "category": (graded.grade.failure_category if graded else None) or "",
        "suite": graded.grade.suite_version if graded else "",
        "cost": fmt.usd_micros(run.cost.usd_micros), "started": fmt.utc_stamp(run.timings.started_at),
    }


def _snapshot(state: LedgerState) -> dict[str, Any]:
    return {
        "ledger": state.ledger_name or "", "head_seq": state.head_seq, "head_hash": state.head_hash or "",
        "at": fmt.utc_stamp(state.last_at), "suite": current_suite(state) or "—",
        "checkpoint": (f"tree size {state.checkpoints[-1].tree_size}, root {state.checkpoints[-1].root_hash}"
                       if state.checkpoints else "none"),
        "runs": len(state.runs), "retracted": len(state.retracted),
    }


def _imports(state: LedgerState) -> list[dict[str, Any]]:
    return [
        {"seq": i.seq, "at": fmt.utc_stamp(i.at), "actor": i.actor, "source": getattr(i.body, "source", ""),
         "body": i.body}
        for i in state.imports
    ]


def index_page(state: LedgerState) -> bytes:
    suite = current_suite(state)
    groups = []
    heat: Markup | None = None
    if suite is not None:
        sm = suite_metrics(state, suite)
        for g in sm.groups:
            groups.append({"label": g.label, "main": g.main, "reasons": g.reasons, "records": g.records,
                           "tiers": _tiers(g), "harness": g.harness})
        heat = _heatmap(state, suite)
    header, body = passes_part.table(state, suite) if suite is not None else ([], [])
    passes = {"title": passes_part.TITLE, "header": header, "rows": [[c.strip("`") for c in r] for r in body]}
    no_model = None if any(real_model_run(e.run) for e in state.runs.values()) else NO_REAL_MODEL.replace("**", "")
    return _page("index.html", title="Leaderboard", snap=_snapshot(state), groups=groups, heatmap=heat,
                 imports=_imports(state), passes=passes if body else None, root="", no_model=no_model)


def runs_page(state: LedgerState) -> bytes:
    runs = [_run_summary(state, e) for e in sorted(state.runs.values(), key=lambda e: e.seq)]
    return _page("runs.html", title="Runs", snap=_snapshot(state), runs=runs, root="")


def _report_rows(ev: RunEvidence) -> list[dict[str, Any]]:
    out = []
    for kind in ("erc", "drc"):
        b, a = ev.before.get(kind), ev.after.get(kind)
        if b is None and a is None:
            continue
        out.append({"kind": kind.upper(), "before": b, "after": a})
    return out


def _attempt(state: LedgerState, run: RunRecorded) -> list[dict[str, Any]]:
    """Every pass of the attempt `run` belongs to, pass 1 first, for a run page's links between
    them (empty for a run made without passes)."""
    if not run.passes:
        return []
    first = run.passes.first or run.run_id
    runs = [e.run for e in state.runs.values()] + [e.run for e in state.later_passes.values()]
    by_index = {r.passes.index: r for r in runs if r.passes and (r.passes.first or r.run_id) == first}
    return [{"index": i, "href": run_page(r.run_id), "id": r.run_id,
             "verdict": _verdict(state, r.run_id)[1], "here": r.run_id == run.run_id}
            for i, r in sorted(by_index.items())]


def run_html(state: LedgerState, entry: RunEntry | PassEntry, ev: RunEvidence | None) -> bytes:
    run = entry.run
    grades = [
        {"suite": suite, "seq": g.seq, "grade": g.grade, "credit": fmt.pct(g.grade.partial_credit)}
        for suite, g in (state.grades.get(run.run_id) or {}).items()
    ]
    retraction = state.retracted.get(run.run_id)
    return _page(
        "run.html", title=f"Run {run.run_id}", summary=_run_summary(state, entry), run=run, grades=grades,
        retraction=retraction, ev=ev or RunEvidence(problem="the preserved run was not read"),
        reports=_report_rows(ev) if ev else [], cost=fmt.usd_micros(run.cost.usd_micros),
        usd=usd_from_micros(run.cost.usd_micros), attempt=_attempt(state, run), root="../",
    )


def _regressions(state: LedgerState) -> dict[str, Any]:
    """The gate between each pair of consecutive copperhead versions of the current suite's agent
    runs: what `project compare` says for `copperhead=A` against `copperhead=B`."""
    suite = current_suite(state)
    versions: set[str] = set()
    for e in record_entries(state, suite, build=False):
        v = e.run.run.comparability.copperhead_version
        if e.run.run.run_mode == "agent" and v is not None:
            versions.add(v)
    ordered = sorted(versions, key=lambda v: [int(p) if p.isdigit() else p for p in v.replace("-", ".").split(".")])
    comparisons = []
    for before, after in itertools.pairwise(ordered):
        c = gate.compare(gate.build_snapshot(state, Selection(copperhead=(before,))),
                         gate.build_snapshot(state, Selection(copperhead=(after,))), suite)
        comparisons.append({"before": before, "after": after, "c": c})
    return {"suite": suite, "versions": ordered, "comparisons": comparisons}


def regressions_page(state: LedgerState) -> bytes:
    return _page("regressions.html", title="Regressions", snap=_snapshot(state), reg=_regressions(state), root="")


def queue_page(state: LedgerState) -> bytes:
    q = workqueue.work_queue(state, current_suite(state))
    return _page("workqueue.html", title="Work queue", snap=_snapshot(state), q=q, root="")


def render(
    state: LedgerState, evidence: Mapping[str, RunEvidence], runs: Iterable[str] | None = None
) -> list[tuple[str, bytes]]:
    """Every page (with `runs`, the pages of those runs only, beside the aggregate pages, which
    every event can change). A run's page depends on nothing but its own events and evidence."""
    out = [
        (INDEX, index_page(state)),
        (RUNS, runs_page(state)),
        (REGRESSIONS, regressions_page(state)),
        (QUEUE, queue_page(state)),
    ]
    # a later feedback pass has a page of its own, as every pass is preserved and graded, though
    # no table lists it: its attempt's pass-1 page links to it
    pages: dict[str, RunEntry | PassEntry] = {**state.later_passes, **state.runs}
    wanted = pages.keys() if runs is None else [r for r in runs if r in pages]
    for run_id in sorted(wanted):
        out.append((run_page(run_id), run_html(state, pages[run_id], evidence.get(run_id))))
    return out
