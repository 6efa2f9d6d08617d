"""LEADERBOARD.md's fenced and report-only sections: model-judged scores, the billed lanes,
reviews and the mechanical audit. They come after every deterministic table, and nothing above
them reads what they show (`judged.py` says why and how that is checked)."""

from __future__ import annotations

from cbledger.projections import format as fmt
from cbledger.projections import judged
from cbledger.projections.fold import LedgerState
from cbledger.projections.metrics import ALL_TIERS, SuiteMetrics
from cbledger.projections.records import RecordEntry

JUDGED_TITLE = "Model-judged rubric scores (fenced: no number above reads them)"
_JUDGED_NOTE = (
    "> A judge model's opinion of each run against the task's `rubric.md`, recorded by "
    "`cbledger judge` as `rubric.scored`. Model-judged, not verified: it moves no pass rate, "
    "gate verdict, partial credit or cost per passing task. A run judged again keeps its first "
    "score here; every judge call is billed in the harness-judge lane below."
)
_LANES_NOTE = (
    "> Two independently billed lanes: the system under test (the model's own calls in each run) "
    "and harness-judge (the judge and review calls made about those runs). They are summed apart; "
    "cost per passing task is the headline's, system lane only, with the judge lane beside it. "
    "\"Priced by\" names the price tables (`pricing.published`) the system lane's USD was priced under, each with "
    "the runs and passes it priced: a figure is traced to its prices there, and a row priced under two tables says so. "
    "A replay calls no model: its rows bill nothing (the cost its record carries is its original's, billed there)."
)
_REVIEW_NOTE = "> Root-cause narratives of runs (`review.recorded`). Report-only: no metric reads them."
_AUDIT_NOTE = (
    "> Computed from the grades on every projection, with no model. An assertion that passed in "
    "every run, or failed in every run, of two or more models (harness runs left out) may be "
    "vacuous or over-strict; a maintainer decides. Report-only: no grade or metric reads it."
)


def _usd(micros: int | None) -> str:
    return fmt.usd_micros(micros) if micros is not None else "uncosted"


def _judged(acc: judged.LanesAcc) -> list[str]:
    rows = acc.judged_rows()
    if not rows:
        return ["No run of this suite version has a rubric score."]
    return [_JUDGED_NOTE, "", *fmt.table(
        ["Model", "Run kind", "Runs judged", "Rubric score, model-judged (mean of first scores)", "Criteria (points / max)", "Judge model(s)"],
        [
            [
                f"`{r.model}`", r.kind, f"{r.judged}/{r.runs}", f"{r.mean:.2f}" if r.mean is not None else "—",
                "; ".join(f"{c.id} {c.points}/{c.max_points}" for c in r.criteria) or "—",
                ", ".join(f"`{j}`" for j in r.judges),
            ]
            for r in rows
        ],
    )]


def _lanes(sm: SuiteMetrics, acc: judged.LanesAcc) -> list[str]:
    rows = acc.lane_rows()
    if not rows:
        return ["No runs."]
    main = sm.main_group()
    cpp: dict[str, str] = {}
    if main is not None:
        for r in main.default_rows():
            if r.tier == ALL_TIERS and not r.single_repeat and r.cost_per_pass_micros is not None:
                cpp[r.model] = fmt.usd_micros(r.cost_per_pass_micros)
    return [_LANES_NOTE, "", *fmt.table(
        [
            "Model", "Run kind", "Surface", "Runs", "System under test: tokens in / out", "System under test: USD",
            "System under test: priced by (runs and passes)", "System under test: model(s) the provider named", "Cost per passing task (system lane)", "Harness-judge: calls", "Harness-judge: tokens in / out",
            "Harness-judge: USD", "Judge model(s) the provider named",
        ],
        [
            [
                f"`{r.model}`", r.kind, ", ".join(r.surfaces), str(r.runs), f"{r.system_tokens_in} / {r.system_tokens_out}",
                _usd(r.system_usd_micros), ", ".join(f"`{t}` ({n})" for t, n in r.price_tables) or "—",
                ", ".join(f"`{m}`" for m in r.system_models) or "—", cpp.get(r.model, "—") if r.kind == "agent" else "—",
                str(r.judge_calls), f"{r.judge_tokens_in} / {r.judge_tokens_out}",
                _usd(r.judge_usd_micros) if r.judge_calls else "—",
                ", ".join(f"`{m}`" for m in r.judge_models) or "—",
            ]
            for r in rows
        ],
    )]


def _reviews(state: LedgerState) -> list[str]:
    rows = judged.reviews(state)
    if not rows:
        return []
    return [_REVIEW_NOTE, "", *fmt.table(
        ["Seq", "Run", "Task", "Model", "Author", "Narrative"],
        [[str(r.seq), f"`{r.run_id}`", r.task_id, f"`{r.model}`", r.author, r.narrative] for r in rows],
    )]


def _audit(acc: judged.LanesAcc) -> list[str]:
    flags = acc.audit()
    if not flags:
        return [_AUDIT_NOTE, "", "No assertion had the same outcome in every run of two or more models."]
    tasks: dict[str, dict[str, list[str]]] = {}
    runs: dict[str, tuple[int, int]] = {}
    for f in flags:
        tasks.setdefault(f.task_id, {"pass": [], "fail": []})[f.always].append(f.assertion_id)
        runs[f.task_id] = max(runs.get(f.task_id, (0, 0)), (f.runs, f.models))
    return [_AUDIT_NOTE, "", *fmt.table(
        ["Task", "Runs / models", "Passed in every run (possibly vacuous)", "Failed in every run (possibly over-strict)"],
        [
            [task, f"{runs[task][0]} / {runs[task][1]}", ", ".join(v["pass"]) or "-", ", ".join(v["fail"]) or "-"]
            for task, v in sorted(tasks.items())
        ],
    )]


def render(state: LedgerState, sm: SuiteMetrics, records: list[RecordEntry]) -> list[str]:
    """The sections, each a second-level heading; the review section only when there is one."""
    return render_acc(state, sm, judged.lanes_of(state, records))


def render_acc(state: LedgerState, sm: SuiteMetrics, acc: judged.LanesAcc) -> list[str]:
    out: list[str] = []
    for title, body in (
        (JUDGED_TITLE, _judged(acc)),
        ("Billed lanes (system under test and harness-judge, summed apart)", _lanes(sm, acc)),
        ("Reviews (report-only)", _reviews(state)),
        ("Mechanical audit of the checks (report-only)", _audit(acc)),
    ):
        if body:
            out += [f"## {title}", "", *body, ""]
    return out
