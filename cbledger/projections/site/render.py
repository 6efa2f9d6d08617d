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
from collections.abc import Callable, Iterable, Iterator, Mapping
from fractions import Fraction
from typing import Any

import jinja2
from markupsafe import Markup

from cbledger.ledger.events import RunRecorded
from cbledger.projections import env_failures, gate, passes_part, workqueue
from cbledger.projections import format as fmt
from cbledger.projections.comparability import partition
from cbledger.projections.conditions import DEFAULT, condition_key
from cbledger.projections.fold import (
    GradeEntry,
    LedgerState,
    PassEntry,
    RunEntry,
    any_run,
    current_suite,
)
from cbledger.projections.leaderboard import rank_key
from cbledger.projections.metrics import (
    ALL_TIERS,
    COSTED_SEGMENTS,
    TIERS,
    UNCOSTED_SEGMENTS,
    GroupMetrics,
    RowMetrics,
    suite_metrics,
    wilson,
)
from cbledger.projections.provenance import NO_REAL_MODEL, real_model_run
from cbledger.projections.records import (
    RecordEntry,
    harness_mode,
    in_model_metrics,
    is_replay,
    is_scripted,
    not_the_models,
    record_entries,
    usd_from_micros,
)
from cbledger.projections.selection import Selection
from cbledger.projections.site import svg
from cbledger.projections.site.evidence import RunEvidence
from cbledger.projections.site.paths import model_page, run_page, task_page

__all__ = ["model_page", "run_page", "task_page"]

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


_ENV.globals.update(task_page=task_page, model_page=model_page)


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


def _row(r: RowMetrics, root: str = "") -> dict[str, Any]:
    rate = r.rate
    return {
        "model": r.model, "href": root + model_page(r.model), "segment": r.segment, "pinning": r.pinning,
        "runs": r.runs, "passes": r.passes, "tasks": r.tasks, "tasks_passed": r.tasks_passed, "condition": r.condition,
        "rate": fmt.pct(rate), "interval": fmt.interval(r.wilson_low, r.wilson_high),
        "rate_pct": f"{float(rate) * 100:.1f}" if rate is not None else "0",
        "low_pct": f"{(r.wilson_low or 0) * 100:.1f}",
        "width_pct": f"{((r.wilson_high or 0) - (r.wilson_low or 0)) * 100:.1f}",
        "cost": _cost(r.cost_per_pass_micros, r),
        "spent": fmt.usd_micros(r.usd_micros_total) if r.usd_micros_total is not None else "uncosted",
        "tokens": f"{r.tokens_in} in / {r.tokens_out} out", "single": r.single_repeat,
    }


def _costed_columns(segments: Iterable[str]) -> list[str]:
    """The costed segments present, in the standard's order: one USD column each, as in
    LEADERBOARD.md, so no column or axis adds dollars of two segments."""
    present = set(segments)
    return [s for s in COSTED_SEGMENTS if s in present]


def _ranked(rows: list[RowMetrics], columns: list[str], root: str = "") -> list[dict[str, Any]]:
    """Rows in LEADERBOARD.md's order, numbered, each cost under its own segment's column."""
    out = []
    for rank, r in enumerate(sorted(rows, key=rank_key), 1):
        row = _row(r, root)
        row["rank"] = rank
        row["costs"] = [row["cost"] if r.segment == c else "" for c in columns]
        out.append(row)
    return out


def _tier_tables(rows: list[RowMetrics], root: str = "") -> dict[str, Any]:
    """One tier's rows as LEADERBOARD.md splits them: repeated rows of costed segments ranked with
    a USD column per segment; repeated rows of uncosted routes ranked apart, with tokens; rows
    whose every task ran once listed unranked under their own label."""
    repeated = [r for r in rows if not r.single_repeat]
    costed = [r for r in repeated if r.segment in COSTED_SEGMENTS]
    columns = _costed_columns(r.segment for r in costed)
    single = sorted((r for r in rows if r.single_repeat), key=lambda r: (r.model, r.segment))
    single_columns = _costed_columns(r.segment for r in single)
    singles = []
    for r in single:
        row = _row(r, root)
        row["costs"] = [row["spent"] if r.segment == c else "" for c in single_columns]
        row["uncosted"] = r.segment not in COSTED_SEGMENTS
        singles.append(row)
    return {
        "columns": columns, "costed": _ranked(costed, columns, root),
        "uncosted": _ranked([r for r in repeated if r.segment not in COSTED_SEGMENTS], [], root),
        "single_columns": single_columns, "single": singles,
        "single_uncosted": any(r["uncosted"] for r in singles),
    }


def _tiers(g: GroupMetrics) -> list[dict[str, Any]]:
    order = {t: i for i, t in enumerate((*TIERS, ALL_TIERS))}
    rows = g.default_rows()
    return [
        {"tier": _tier_label(tier), **_tier_tables([r for r in rows if r.tier == tier])}
        for tier in sorted({r.tier for r in rows}, key=lambda t: order.get(t, 99))
    ]


def _frontiers(g: GroupMetrics) -> dict[str, Any]:
    """A cost-against-pass-rate chart per costed segment over the pooled rows; the rows a chart
    cannot place (a run without cost, no task passed) and the uncosted routes are named beside
    it, never drawn at $0."""
    pooled = sorted((r for r in g.default_rows() if r.tier == ALL_TIERS), key=rank_key)
    charts = []
    for segment in _costed_columns(r.segment for r in pooled):
        rows = [r for r in pooled if r.segment == segment]
        drawn = [r for r in rows if r.cost_per_pass_micros is not None]
        points = [
            svg.Point(number=i, label=r.model, cost_usd=float(r.cost_per_pass_micros or 0) / 1e6,
                      rate=float(r.rate or 0), low=r.wilson_low or 0.0, high=r.wilson_high or 0.0,
                      single=r.single_repeat)
            for i, r in enumerate(drawn, 1)
        ]
        title = f"strict pass rate against cost per passing task, segment {segment}, all tiers pooled"
        front = {p.number for p in svg.frontier_points(points)}
        charts.append({
            "segment": segment, "chart": Markup(svg.scatter(points, title)) if points else None,
            "legend": [{"number": p.number, "frontier": p.number in front, **_row(r)}
                       for p, r in zip(points, drawn, strict=True)],
            "apart": [_row(r) for r in rows if r.cost_per_pass_micros is None],
        })
    uncosted = [_row(r) for r in pooled if r.segment not in COSTED_SEGMENTS]
    return {"charts": charts, "uncosted": uncosted, "uncosted_segments": ", ".join(UNCOSTED_SEGMENTS)}


class _Tally:
    """Runs and passes of one (task, model) pair, with what they cost."""

    def __init__(self) -> None:
        self.runs = self.passes = self.uncosted = 0
        self.usd_micros = 0

    def add(self, e: RecordEntry) -> None:
        self.runs += 1
        self.passes += e.graded.grade.verdict == "pass"
        micros = e.run.run.cost.usd_micros
        if micros is None:
            self.uncosted += 1
        else:
            self.usd_micros += micros


def _mode(e: RecordEntry) -> str:
    """The row a record is counted in, kept apart as LEADERBOARD.md keeps it: a run the harness or
    its environment ended is no model's sample, and an ablated one is its condition's."""
    if not_the_models(e.run):
        return "not the model"
    mode = "agent" if in_model_metrics(e.run) else (harness_mode(e.run) or e.run.run.run_mode)
    return mode if e.condition == DEFAULT else f"{mode}, {e.condition}"


def _tallies(state: LedgerState, suite: str | None) -> dict[tuple[str, str, str, str], _Tally]:
    """(task, model, segment, run mode) -> its tally, over the suite's live records."""
    out: dict[tuple[str, str, str, str], _Tally] = {}
    if suite is None:
        return out
    for e in record_entries(state, suite, build=False):
        run = e.run.run
        out.setdefault((run.task.id, run.model.id, run.model.segment, _mode(e)), _Tally()).add(e)
    return out


def _pair_row(t: _Tally, segment: str, columns: list[str]) -> dict[str, Any]:
    """A (task, model) pair's numbers: a single run says so, USD sits under its segment."""
    interval = wilson(t.passes, t.runs)
    spent = ("uncosted" if t.uncosted else fmt.usd_micros(t.usd_micros))
    return {
        "runs": t.runs, "passes": t.passes, "rate": fmt.pct(Fraction(t.passes, t.runs) if t.runs else None),
        "interval": fmt.interval(*interval) if interval else "—", "single": t.runs == 1,
        "costs": [spent if segment == c else "" for c in columns],
        "uncosted": segment not in COSTED_SEGMENTS or bool(t.uncosted),
    }


_SEGMENTS = {s: i for i, s in enumerate((*COSTED_SEGMENTS, *UNCOSTED_SEGMENTS))}


def _pair_key(mode: str, t: _Tally, segment: str, name: str) -> tuple[bool, bool, Fraction, int, str]:
    """Agent rows first, a repeated pair above any single run, then by pass rate, a tie in the
    standard's segment order (costed first), as LEADERBOARD.md ranks."""
    return mode != "agent", t.runs == 1, -Fraction(t.passes, t.runs or 1), _SEGMENTS.get(segment, len(_SEGMENTS)), name


def _heatmap(state: LedgerState, suite: str) -> Markup:
    cells: dict[tuple[str, str], list[int]] = {}
    pages: dict[str, str] = {}
    for e in record_entries(state, suite, build=False):
        if not_the_models(e.run) or is_replay(e.run) or e.condition != DEFAULT:
            # no sample of the model, a replay of one under its model's id (counted twice else),
            # or a sample of an ablation: in no cell, as in no LEADERBOARD.md row
            continue
        model = e.run.run.model.id
        # a session script's runs may carry a real model's id: a column of their own, as a row
        column = f"{model} (scripted)" if is_scripted(e.run) else model
        pages[column] = model_page(model)
        c = cells.setdefault((e.run.run.task.id, column), [0, 0])
        c[1] += 1
        c[0] += e.graded.grade.verdict == "pass"
    tasks = sorted({t for t, _ in cells})
    models = sorted({m for _, m in cells})
    data = {k: svg.Cell(passes=v[0], runs=v[1]) for k, v in cells.items()}
    return Markup(svg.heatmap(tasks, models, data, f"pass rate by task and model, suite {suite}",
                              {t: task_page(t) for t in tasks}, pages))


def _verdict(state: LedgerState, run_id: str) -> tuple[GradeEntry | None, str]:
    grades = state.grades.get(run_id) or {}
    latest = list(grades.values())[-1] if grades else None
    if run_id in state.retracted:
        return latest, "retracted"
    return latest, latest.grade.verdict if latest else "ungraded"


def _run_mode(entry: RunEntry | PassEntry) -> str:
    """A run's mode as its lists and page show it, with what keeps it out of the model's default
    rate: its condition, and the harness or environment that ended it (the record says both)."""
    run = entry.run
    mode: str = harness_mode(entry) or run.run_mode
    condition = condition_key(run.ablations)
    if condition != DEFAULT:
        mode = f"{mode}, {condition}"
    if run.harness_failure is not None:
        mode = f"{mode}; not the model ({run.harness_failure.kind})"
    return mode


def _run_summary(state: LedgerState, entry: RunEntry | PassEntry) -> dict[str, Any]:
    run = entry.run
    graded, verdict = _verdict(state, run.run_id)
    return {
        "id": run.run_id, "href": run_page(run.run_id), "seq": entry.seq, "task": run.task.id, "tier": run.task.tier,
        "task_href": task_page(run.task.id), "model_href": model_page(run.model.id),
        "model": run.model.id, "segment": run.model.segment, "mode": _run_mode(entry), "verdict": verdict,
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
                           "tiers": _tiers(g), "frontiers": _frontiers(g), "harness": g.harness, "modes": g.mode_rows(),
                           "environment_failures": [
                               {"model": e.model, "route": e.route, "runs": e.runs, "failures": e.failures,
                                "rate": fmt.pct(Fraction(e.failures, e.runs)),
                                "kinds": env_failures.kinds_text(e)}
                               for e in g.environment_failures
                           ]})
        heat = _heatmap(state, suite)
    header, body = passes_part.table(state, suite) if suite is not None else ([], [])
    passes = {"title": passes_part.TITLE, "header": header, "rows": [[c.strip("`") for c in r] for r in body]}
    no_model = None if any(real_model_run(e.run) for e in state.runs.values()) else NO_REAL_MODEL.replace("**", "")
    return _page("index.html", title="Leaderboard", snap=_snapshot(state), groups=groups, heatmap=heat,
                 imports=_imports(state), passes=passes if body else None, root="", no_model=no_model)


def runs_page(state: LedgerState) -> bytes:
    runs = _runs_of(state, lambda _run: True)
    return _page("runs.html", title="Runs", snap=_snapshot(state), runs=runs, root="")


def _names(state: LedgerState) -> tuple[list[str], list[str]]:
    """Every task and model with a run (or a later pass): each has a page, so every link from a
    run page resolves."""
    entries = _entries(state)
    return sorted({e.run.task.id for e in entries}), sorted({e.run.model.id for e in entries})


def _entries(state: LedgerState) -> list[RunEntry | PassEntry]:
    return list(_iter_entries(state))


def _iter_entries(state: LedgerState) -> Iterator[RunEntry | PassEntry]:
    yield from state.runs.values()
    yield from state.later_passes.values()


def _runs_of(state: LedgerState, keep: Callable[[RunRecorded], bool]) -> list[dict[str, Any]]:
    return [_run_summary(state, e) for e in sorted(state.runs.values(), key=lambda e: e.seq) if keep(e.run)]


def task_html(state: LedgerState, task_id: str, tallies: Mapping[tuple[str, str, str, str], _Tally]) -> bytes:
    """One task across models: each model's runs and passes of it under the current suite, ranked
    as the leaderboard ranks (agents first, never a single run above a repeated one)."""
    mine = {k: t for k, t in tallies.items() if k[0] == task_id}
    columns = _costed_columns(k[2] for k in mine)
    rows = []
    for (_, model, segment, mode), t in sorted(mine.items(), key=lambda kv: _pair_key(kv[0][3], kv[1], kv[0][2], kv[0][1])):
        rows.append({"model": model, "href": model_page(model), "segment": segment, "mode": mode,
                     **_pair_row(t, segment, columns)})
    runs = _runs_of(state, lambda r: r.task.id == task_id)
    task = next((e.run.task for e in _entries(state) if e.run.task.id == task_id), None)
    return _page("task.html", title=f"Task {task_id}", snap=_snapshot(state), task=task, task_id=task_id,
                 columns=columns, rows=rows, runs=runs, root="../")


def model_html(state: LedgerState, model: str, tallies: Mapping[tuple[str, str, str, str], _Tally]) -> bytes:
    """One model across tasks: its leaderboard rows per tier, then each task's runs and passes."""
    suite = current_suite(state)
    summary = []
    if suite is not None:
        for g in suite_metrics(state, suite).groups:
            own = [r for r in g.default_rows() if r.model == model]
            if own:
                summary.append({"label": g.label, "main": g.main, "rows": [
                    {"tier": _tier_label(r.tier), **_row(r)} for r in sorted(own, key=rank_key)]})
    mine = {k: t for k, t in tallies.items() if k[1] == model}
    columns = _costed_columns(k[2] for k in mine)
    tiers = {e.run.task.id: e.run.task.tier for e in state.runs.values()}
    rows = [{"task": task, "href": task_page(task), "tier": tiers.get(task, "—"), "segment": segment, "mode": mode,
             **_pair_row(t, segment, columns)}
            for (task, _, segment, mode), t in sorted(mine.items(), key=lambda kv: _pair_key(kv[0][3], kv[1], kv[0][2], kv[0][0]))]
    runs = _runs_of(state, lambda r: r.model.id == model)
    about = next((e.run.model for e in _entries(state) if e.run.model.id == model), None)
    return _page("model.html", title=f"Model {model}", snap=_snapshot(state), model=about, model_id=model,
                 summary=summary, columns=columns, rows=rows, runs=runs, root="../")


def _report_rows(ev: RunEvidence) -> list[dict[str, Any]]:
    out = []
    for kind in ("erc", "drc"):
        b, a = ev.before.get(kind), ev.after.get(kind)
        if b is None and a is None:
            continue
        out.append({"kind": kind.upper(), "before": b, "after": a})
    return out


def _attempt_key(run: RunRecorded) -> str | None:
    """The id of pass 1 of the attempt `run` belongs to; None for a run made without passes."""
    return (run.passes.first or run.run_id) if run.passes else None


def with_attempts(state: LedgerState, run_ids: Iterable[str]) -> set[str]:
    """`run_ids` and every other pass of their attempts: a run's page shows each pass's verdict,
    so a new pass or grade of one changes the pages of all of them."""
    wanted = set(run_ids)
    named = (any_run(state, rid) for rid in wanted)  # the runs named, not every run: a watch calls this per update
    firsts = {_attempt_key(e.run) for e in named if e is not None} - {None}
    if firsts:
        wanted |= {e.run.run_id for e in _iter_entries(state) if _attempt_key(e.run) in firsts}
    return wanted


def _attempt(state: LedgerState, run: RunRecorded) -> list[dict[str, Any]]:
    """Every pass of the attempt `run` belongs to, pass 1 first, for a run page's links between
    them (empty for a run made without passes)."""
    first = _attempt_key(run)
    if first is None:
        return []
    by_index = {r.passes.index: r for r in (e.run for e in _entries(state)) if r.passes and _attempt_key(r) == first}
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
    if suite is not None:
        # the versions the gate can compare: a version whose runs are all in another comparability
        # group (another kicad-cli, say) is not one, and once split the pair around it apart
        records = record_entries(state, suite, build=False)
        main = partition(state, suite, records).main_group()
        for i in main.members if main is not None else []:
            v = records[i].run.run.comparability.copperhead_version
            if in_model_metrics(records[i].run) and v is not None:
                versions.add(v)
    ordered = sorted(versions, key=version_order)
    comparisons = []
    for before, after in itertools.pairwise(ordered):
        c = gate.compare(gate.build_snapshot(state, Selection(copperhead=(before,), text=f"copperhead={before}")),
                         gate.build_snapshot(state, Selection(copperhead=(after,), text=f"copperhead={after}")), suite)
        command = f"cbledger project compare --baseline-select copperhead={before} --candidate-select copperhead={after}"
        comparisons.append({"before": before, "after": after, "c": c, "command": command,
                            "exit": 1 if c.regressions else 0})
    return {"suite": suite, "versions": ordered, "comparisons": comparisons}


def version_order(version: str) -> tuple[tuple[int, int | str], ...]:
    """Semantic-version order, total over any string: the release's numbers, then a release before
    its pre-releases' absence (`0.9.1-rc.1` before `0.9.1`), identifiers numeric before words. The
    earlier key mixed ints and strings in one position and raised on `0.9.1-1` against `0.9.1-dev`."""
    core, _, pre = version.partition("+")[0].partition("-")

    def part(p: str) -> tuple[int, int | str]:
        return (0, int(p)) if p.isdigit() else (1, p)

    release = tuple(part(p) for p in core.split("."))
    if not pre:
        return (*release, (2, ""))  # a release sorts after every pre-release of it
    return (*release, (1, ""), *(part(p) for p in pre.split(".")))


def regressions_page(state: LedgerState) -> bytes:
    return _page("regressions.html", title="Regressions", snap=_snapshot(state), reg=_regressions(state), root="")


def queue_page(state: LedgerState) -> bytes:
    q = workqueue.work_queue(state, current_suite(state))
    return _page("workqueue.html", title="Work queue", snap=_snapshot(state), q=q, root="")


def render(
    state: LedgerState, evidence: Mapping[str, RunEvidence], runs: Iterable[str] | None = None
) -> list[tuple[str, bytes]]:
    """Every page (with `runs`, the pages of those runs only, beside the aggregate pages, the task
    and model pages among them, which every event can change). A run's page depends on nothing
    but its own events and evidence, and its attempt's other passes (`with_attempts`). The front
    page, which names the head the site was made at, comes last: written last, it never names a
    head whose pages are not all in place."""
    out = [
        (RUNS, runs_page(state)),
        (REGRESSIONS, regressions_page(state)),
        (QUEUE, queue_page(state)),
    ]
    tallies = _tallies(state, current_suite(state))
    tasks, models = _names(state)
    out += [(task_page(t), task_html(state, t, tallies)) for t in tasks]
    out += [(model_page(m), model_html(state, m, tallies)) for m in models]
    # a later feedback pass has a page of its own, as every pass is preserved and graded, though
    # no table lists it: its attempt's pass-1 page links to it
    pages: dict[str, RunEntry | PassEntry] = {**state.later_passes, **state.runs}
    wanted = pages.keys() if runs is None else [r for r in runs if r in pages]
    for run_id in sorted(wanted):
        out.append((run_page(run_id), run_html(state, pages[run_id], evidence.get(run_id))))
    out.append((INDEX, index_page(state)))
    return out
