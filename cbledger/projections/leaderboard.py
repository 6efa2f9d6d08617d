"""`LEADERBOARD.md`: a pure rendering of the metrics of one suite version.

Byte-identical for the same ledger on any machine: the snapshot date is the time of the last
ledger event (never the wall clock), every number goes through `format`, every list is sorted
by an explicit key, and nothing depends on dict order from outside the fold (which is ledger
order). Headline numbers follow the standard: strict pass rate and cost per passing task, per
tier and per model; everything else is labelled a diagnostic or sits in its own section.
"""

from __future__ import annotations

import base64
from fractions import Fraction

from cbledger.ledger import surfaces
from cbledger.ledger.events import SCHEMA_VERSION
from cbledger.projections import (
    anchor,
    card,
    env_failures,
    harness_findings,
    lanes_part,
    passes_part,
)
from cbledger.projections import format as fmt
from cbledger.projections.aggregates import Views
from cbledger.projections.conditions import DEFAULT
from cbledger.projections.fold import (
    ImportEntry,
    LedgerState,
    any_run,
    suite_bump,
    unrecorded_spend,
)
from cbledger.projections.metrics import (
    ALL_TIERS,
    COSTED_SEGMENTS,
    TIERS,
    UNCOSTED_SEGMENTS,
    AblationRow,
    GroupMetrics,
    RowMetrics,
    SuiteMetrics,
)
from cbledger.projections.provenance import (
    NO_REAL_MODEL,
    NON_CLAIMS,
    NOT_RECORDED,
    EnvironmentRow,
)
from cbledger.projections.records import is_replay, record_paths

BEGIN = (
    "<!-- BEGIN GENERATED: cbledger project leaderboard. Do not edit by hand; "
    "regenerate with `cbledger project leaderboard` and check with "
    "`cbledger project leaderboard --check`. -->"
)
END = "<!-- END GENERATED -->"
POOLED = "all tiers (pooled by run: each run weighs 1)"

_TIER_ORDER = {t: i for i, t in enumerate((*TIERS, ALL_TIERS))}


def _tier_label(tier: str) -> str:
    return POOLED if tier == ALL_TIERS else tier


_SEGMENT_ORDER = {s: i for i, s in enumerate((*COSTED_SEGMENTS, *UNCOSTED_SEGMENTS))}


def rank_key(r: RowMetrics) -> tuple[int, Fraction, int, bool, Fraction | int, str, str]:
    """Pass rate first; ties break by cost within a segment, never by USD across segments."""
    rate = r.rate if r.rate is not None else Fraction(-1)
    cpp = r.cost_per_pass_micros
    return (
        _TIER_ORDER[r.tier], -rate, _SEGMENT_ORDER.get(r.segment, len(_SEGMENT_ORDER)), cpp is None,
        cpp if cpp is not None else 0, r.model, r.segment,
    )


def _cost_text(cpp: Fraction | None, uncosted: int, runs: int, tasks_passed: int, total: int | None) -> str:
    if cpp is not None:
        return fmt.usd_micros(cpp)
    if uncosted:
        return f"n/a: {uncosted} of {runs} runs uncosted"
    if tasks_passed == 0:
        return f"— (no task passed; {fmt.usd_micros(total)} spent)"
    return "—"


def _cost_cell(r: RowMetrics) -> str:
    return _cost_text(r.cost_per_pass_micros, r.uncosted_runs, r.runs, r.tasks_passed, r.usd_micros_total)


def _segments(segments: list[str]) -> list[str]:
    """The costed segments present, in the standard's order: one USD column each."""
    present = set(segments)
    return [s for s in COSTED_SEGMENTS if s in present]


def _segment_cells(segment: str, columns: list[str], cell: str) -> list[str]:
    """`cell` under the row's own segment's column, the other segments' columns left empty."""
    return [cell if segment == c else "" for c in columns]


def _rate_cell(r: RowMetrics) -> str:
    return f"{fmt.pct(r.rate)} ({r.passes}/{r.runs}; {fmt.interval(r.wilson_low, r.wilson_high)})"


def _k(r: RowMetrics) -> str:
    return str(r.repeats_max) if r.repeats_min == r.repeats_max else f"{r.repeats_min}–{r.repeats_max}"


def _pass_hat_k(r: RowMetrics) -> str:
    return f"{fmt.pct(r.pass_hat_k)} ({r.tasks_all_passed}/{r.tasks} tasks, k={_k(r)})"


def _spread(r: RowMetrics) -> str:
    rates = [Fraction(x.passes, x.runs) for x in r.repeat_rates if x.runs]
    if not rates:
        return "—"
    n = len(rates)
    return f"{fmt.pct(min(rates))}–{fmt.pct(max(rates))} across {n} repeat index{'es' if n != 1 else ''}"


def _rows_section(rows: list[RowMetrics], costed: bool) -> list[str]:
    if costed:
        columns = _segments([r.segment for r in rows])
        header = [
            "Tier", "Model", "Segment", "Strict pass rate (passes/runs; 95% CI)",
            *(f"Cost per passing task, {c} (USD / tasks passed)" for c in columns),
            "pass@1", "pass^k", "Spread across repeats",
        ]
        body = [
            [
                _tier_label(r.tier), f"`{r.model}`", r.segment, _rate_cell(r),
                *_segment_cells(r.segment, columns, _cost_cell(r)),
                fmt.pct(r.pass_at_1), _pass_hat_k(r), _spread(r),
            ]
            for r in sorted(rows, key=rank_key)
        ]
    else:
        header = [
            "Tier", "Model", "Segment", "Pinning", "Strict pass rate (passes/runs; 95% CI)",
            "Tokens in / out", "pass@1", "pass^k", "Spread across repeats",
        ]
        body = [
            [
                _tier_label(r.tier), f"`{r.model}`", r.segment, r.pinning, _rate_cell(r),
                f"{r.tokens_in} / {r.tokens_out}", fmt.pct(r.pass_at_1), _pass_hat_k(r), _spread(r),
            ]
            for r in sorted(rows, key=rank_key)
        ]
    return fmt.table(header, body)


def _single_section(rows: list[RowMetrics]) -> list[str]:
    columns = _segments([r.segment for r in rows])
    header = ["Tier", "Model", "Segment", "Runs", "Passes", *(f"Cost of all runs, {c}" for c in columns)]
    if len(columns) < len({r.segment for r in rows}):
        header.append("Uncosted")
    body = []
    for r in sorted(rows, key=lambda r: (_TIER_ORDER[r.tier], r.model, r.segment)):
        if r.usd_micros_total is not None:
            spent = fmt.usd_micros(r.usd_micros_total)
        else:  # a sum of the costed runs alone would read as the cost of all of them
            spent = f"n/a: {r.uncosted_runs} of {r.runs} runs uncosted" if r.uncosted_runs else "uncosted"
        cells = [_tier_label(r.tier), f"`{r.model}`", r.segment, str(r.runs), str(r.passes)]
        cells += _segment_cells(r.segment, columns, spent)
        if len(header) > len(cells):
            cells.append("" if r.segment in columns else "uncosted")
        body.append(cells)
    return fmt.table(header, body)


def _under(condition: str) -> str:
    """What a cell adds for a run made under an ablation condition (nothing for the default)."""
    return "" if condition == DEFAULT else f" under `{condition}`"


def _section(level: str, title: str, body: list[str], note: str | None = None) -> list[str]:
    """A heading, an optional quoted note, the body, each followed by a blank line."""
    return [f"{level} {title}", "", *([f"> {note}", ""] if note else []), *body, ""]


def _repeated(g: GroupMetrics) -> list[RowMetrics]:
    return [r for r in g.default_rows() if not r.single_repeat]


def _pooled(g: GroupMetrics) -> list[RowMetrics]:
    return sorted((r for r in g.default_rows() if r.tier == ALL_TIERS), key=lambda r: (r.model, r.segment))


def _costed_section(g: GroupMetrics, level: str) -> list[str]:
    rows = [r for r in _repeated(g) if r.segment in COSTED_SEGMENTS]
    if not (rows or g.main):
        return []
    body = _rows_section(rows, costed=True) if rows else ["No repeated agent runs in these segments."]
    return _section(level, f"Headline: costed segments ({', '.join(COSTED_SEGMENTS)})", body)


def _uncosted_section(g: GroupMetrics, level: str) -> list[str]:
    rows = [r for r in _repeated(g) if r.segment in UNCOSTED_SEGMENTS]
    if not (rows or g.main):
        return []
    body = _rows_section(rows, costed=False) if rows else ["No repeated agent runs on these routes."]
    note = (
        "Not costed, by rule: USD is null for these routes. Self-hosted open weights are "
        "honestly costed in GPU-hours, not tokens; saved-login CLIs are weakly pinned (the model "
        "behind the login may change under it). Their pass rates never share a USD column; "
        "tokens are shown instead."
    )
    return _section(level, f"Uncosted routes ({', '.join(UNCOSTED_SEGMENTS)})", body, note)


def _other_segments_section(g: GroupMetrics, level: str) -> list[str]:
    rows = [r for r in _repeated(g) if r.segment not in COSTED_SEGMENTS + UNCOSTED_SEGMENTS]
    if not rows:
        return []
    return _section(level, "Other segments", _rows_section(rows, costed=False))


def _single_repeat_section(g: GroupMetrics, level: str) -> list[str]:
    rows = [r for r in g.default_rows() if r.single_repeat]
    if not rows:
        return []
    note = (
        "Every task in these rows ran once. A single run is not a result: listed for the "
        "record, unranked, and never compared."
    )
    return _section(level, "Single-repeat results (not a comparison)", _single_section(rows), note)


def _ablation_table(rows: list[AblationRow]) -> list[str]:
    columns = _segments([a.segment for a in rows if a.costed])
    header = [
        "Tier", "Model", "Segment", "Tasks (paired)", "Under the condition", "Default, same tasks",
        "Difference", *(f"Cost per passing task, {c} (condition / default)" for c in columns),
        "Failure categories (condition)", "Not paired (no default run)",
    ]
    body = []
    for a in rows:
        if not a.paired_tasks:
            body.append([
                _tier_label(a.tier), f"`{a.model}`", a.segment, "0", "—", "—", "—", *_segment_cells(a.segment, columns, "—"),
                "—", ", ".join(a.unpaired_tasks),
            ])
            continue
        diff = a.difference
        cost = " / ".join(
            _cost_text(cpp, unc, runs, passed, total)
            for cpp, unc, runs, passed, total in (
                (a.cost_per_pass_micros, a.uncosted_runs, a.runs, a.tasks_passed, a.usd_micros_total),
                (a.default_cost_per_pass_micros, a.default_uncosted_runs, a.default_runs, a.default_tasks_passed,
                 a.default_usd_micros_total),
            )
        )
        body.append([
            _tier_label(a.tier), f"`{a.model}`", a.segment, str(a.paired_tasks),
            _ratio(a.passes, a.runs), _ratio(a.default_passes, a.default_runs),
            f"{float(diff) * 100:+.1f} pts" if diff is not None else "—",
            *_segment_cells(a.segment, columns, cost),
            ", ".join(f"{k} {v}" for k, v in a.failure_categories.items()) or "-",
            ", ".join(a.unpaired_tasks) or "-",
        ])
    return fmt.table(header, body)


def _ablation_section(g: GroupMetrics, level: str) -> list[str]:
    conditions = g.conditions()
    if not (conditions or g.main):
        return []
    note = (
        "Runs made with a runner flag (prompt variant, turn budget, tool subset, repair-cycle cap) "
        "are an experiment on the default, not samples of it: they enter no table above, no "
        "gate and no cost per passing task. Each condition is compared with the same model's "
        "default-condition runs on the tasks both ran."
    )
    if not conditions:
        return _section(level, "Ablation conditions (each against the default on the same tasks)",
                        ["No runs under an ablation condition."], note)
    body: list[str] = []
    for condition in conditions:
        rows = [a for a in g.ablations if a.condition == condition]
        body += [f"Condition `{condition}`:", "", *_ablation_table(rows), ""]
    return _section(level, "Ablation conditions (each against the default on the same tasks)", body[:-1], note)


def _value(v: str | None) -> str:
    return f"`{v}`" if v else NOT_RECORDED


def _environment_table(rows: list[EnvironmentRow]) -> list[str]:
    return fmt.table(
        ["kicad-cli", "copperhead", "copperhead commit", "Node", "Platform", "OS", "Records"],
        [
            [
                _value(e.environment.kicad_cli), _value(e.environment.copperhead), _value(e.environment.copperhead_commit),
                _value(e.environment.node), _value(e.environment.platform), _value(e.environment.os), str(e.records),
            ]
            for e in rows
        ],
    )


def _environment_section(g: GroupMetrics, level: str) -> list[str]:
    if not g.environments:
        return []
    many = len(g.environments) > 1
    note = (
        "The environment these records were produced in, as each run recorded it. "
        + ("They come from more than one: each is listed with its records. " if many else "")
        + f"A value a run did not record says \"{NOT_RECORDED}\"."
    )
    return _section(level, "Reference environment", _environment_table(g.environments), note)


def _echo_section(g: GroupMetrics, level: str) -> list[str]:
    if not g.echoes:
        return []
    body = fmt.table(
        ["Requested model", "Model id(s) the provider named", "Runs"],
        [[f"`{e.model}`", ", ".join(f"`{m}`" for m in e.named), str(e.runs)] for e in g.echoes],
    )
    note = (
        "The provider's answers named a model other than the one requested (for a `compat:` "
        "route, the id after the prefix). The rows above are keyed by the requested id."
    )
    return _section(level, "Provider-named model ids that differ from the requested ones", body, note)


def _at_turn(turn: int | None) -> str:
    return f" (model call {turn})" if turn is not None else ""


def _environment_failures_section(g: GroupMetrics, level: str) -> list[str]:
    if not g.environment_failures:
        return []
    body = fmt.table(
        ["Model", "Route", "Environment-failure rate", "Kinds"],
        [[f"`{r.model}`", r.route, _ratio(r.failures, r.runs), env_failures.kinds_text(r)]
         for r in g.environment_failures],
    )
    note = (
        "Of each model's and route's runs through the real harness, the share its environment "
        "ended rather than the model (a provider's error status, a broken or hung connection, "
        "a signal the runner did not send, a harness that never reached the model; "
        "docs/RUNNER.md, section 1). Those runs are listed below and enter no model row, so "
        "this rate is read beside the model's pass rate, never folded into it."
    )
    return _section(level, "Environment failures by model and route", body, note)


def _ratio(part: int, whole: int) -> str:
    return f"{fmt.pct(Fraction(part, whole) if whole else None)} ({part}/{whole})"


def _refusal_section(g: GroupMetrics, level: str) -> list[str]:
    pooled = _pooled(g)
    if not (pooled or g.main):
        return []
    header = [
        "Model",
        "Correct-refusal rate (refusal-task runs that ended `refused`)",
        "False-refusal rate (edit-task runs that ended `refused`)",
        "Repeats",
    ]
    rows = [
        [
            f"`{r.model}`",
            _ratio(r.correct_refusals, r.refusal_runs),
            _ratio(r.false_refusals, r.edit_runs),
            "single repeat" if r.single_repeat else f"k={_k(r)}",
        ]
        for r in pooled
    ]
    body = fmt.table(header, rows) if rows else ["No agent runs."]
    return _section(level, "Refusal behaviour (diagnostic; pooled over tiers by run)", body)


def _variant_section(g: GroupMetrics, level: str) -> list[str]:
    if not (g.variant_gaps or g.orphan_variants or g.main):
        return []
    if g.variant_gaps:
        body = fmt.table(
            ["Model", "Original <- variant", "Originals", "Variants", "Gap (original − variant)"],
            [
                [
                    f"`{v.model}`", "; ".join(v.pairs),
                    _ratio(v.original_passes, v.original_runs),
                    _ratio(v.variant_passes, v.variant_runs),
                    f"{float(v.gap) * 100:+.1f} pts" if v.gap is not None else "—",
                ]
                for v in g.variant_gaps
            ],
        )
    else:
        body = ["No model ran both an original and its variant."]
    if g.orphan_variants:
        body += ["", "Variants whose original this model did not run (listed, not computed):", ""]
        body += fmt.table(
            ["Model", "Variant", "Original", "Runs", "Passes"],
            [[f"`{o.model}`", o.variant, o.original, str(o.runs), str(o.passes)] for o in g.orphan_variants],
        )
    return _section(level, "Variant gap (memorization; pooled over tiers by run)", body)


def _categories(r: RowMetrics) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(r.failure_categories.items(), key=lambda kv: (-kv[1], kv[0])))


def _limit_stops(r: RowMetrics) -> str:
    return (f"; {r.limit_stopped} of the runs stopped by a money limit (--max-cost-usd or --budget-usd), counted as "
            "the model's as a turn cap's stop is" if r.limit_stopped else "")


def _failure_section(g: GroupMetrics, level: str) -> list[str]:
    failing = [r for r in _pooled(g) if r.failure_categories]
    if not (failing or g.main):
        return []
    body = fmt.table(
        ["Model", "Failed runs", "Categories"],
        [[f"`{r.model}`", str(r.runs - r.passes), _categories(r) + _limit_stops(r)] for r in failing],
    ) if failing else ["No failed run of a model in this group's rows (scripted and harness runs, which never enter "
                       "a headline row, have their own sections: Real harness, scripted model, and Harness "
                       "discrimination check, each shown when the group holds such runs)."]
    note = (
        "Categories as `docs/GRADING.md` defines them, which reads some of the standard's more widely: "
        "`turn-budget` includes a run killed at its wall-clock cap, `stalled` any stop short of finishing, "
        "`commit-failed` a run that made no commit or more than the task allows, `constraint-violation` "
        "a scope or ERC/DRC check failed, and `credential-leak` and "
        "`end-state-unreadable` are the runner's own two beside the standard's eleven."
    ) if failing and g.main else None  # said once, in the main group's
    return _section(level, "Failure categories (diagnostic; pooled over tiers by run)", body, note)


def _mode_suffix(mode: str) -> str:
    """A task's copperhead surface beside its id; `do`, the default and every committed run's
    mode until sync was driven, is left unsaid."""
    return "" if mode == "do" else f" ({mode})"


def _modes_section(g: GroupMetrics, level: str) -> list[str]:
    """Per model and task mode: shown once a group holds runs of more than one mode."""
    rows = g.mode_rows()
    if not rows:
        return []
    body = fmt.table(
        ["Model", "Kind", "Mode", "Runs", "Passes", "Failure categories"],
        [
            [f"`{m.model}`", m.kind, m.mode, str(m.runs), str(m.passes),
             ", ".join(f"{c} {n}" for c, n in m.categories.items()) or "-"]
            for m in rows
        ],
    )
    note = (
        "Default condition, pooled over tiers by run. A diagnostic: modes differ in length and in "
        "what they ask, so a mode's pass rate is never a headline; `scripted` rows measure no model."
    )
    return _section(level, "Task modes (diagnostic; pooled over tiers by run)", body, note)


def _harness_section(g: GroupMetrics, level: str) -> list[str]:
    if not (g.harness or g.main):
        return []
    body = fmt.table(
        ["Tier", "Task", "Expected outcome", "gold (passes/runs)", "noop (passes/runs)", "Check"],
        [
            [
                h.tier, h.task_id + _mode_suffix(h.mode) + _under(h.condition), h.expected_outcome, f"{h.gold_passes}/{h.gold_runs}",
                f"{h.noop_passes}/{h.noop_runs}", "; ".join(h.problems) if h.problems else "ok",
            ]
            for h in g.harness
        ],
    ) if g.harness else ["No harness runs."]
    note = (
        "`harness:gold` applies the reference solution and should pass every task; "
        "`harness:noop` changes nothing and should fail every edit and refusal task (a flag "
        "task's noop runs are listed, but a noop pass of one is not counted as a problem). "
        "These runs never enter a model row."
    )
    return _section(level, "Harness discrimination check", body, note)


def _scripted_section(g: GroupMetrics, level: str) -> list[str]:
    if not g.scripted:
        return []
    body = fmt.table(
        ["Tier", "Task", "Expected outcome", "Session model", "copperhead build", "Passes/runs", "Failure categories"],
        [
            [
                r.tier, r.task_id + _mode_suffix(r.mode), r.expected_outcome, f"`{r.model}`" + _under(r.condition),
                f"`{r.build}`", f"{r.passes}/{r.runs}",
                ", ".join(f"{c} {n}" for c, n in r.categories.items()) or "-",
            ]
            for r in g.scripted
        ],
    )
    note = (
        "The real copperhead CLI driven by a session script served from a loopback endpoint "
        "(`cbledger run --session`): no model took part. These runs prove the harness, the "
        "runner and the grading end to end; they never enter a model row. Each copperhead build "
        "has rows of its own (a build whose files are not the installed release's has its commit "
        "unknown), so a new build is read against the last one here."
    )
    return _section(level, "Real harness, scripted model", body, note)


def _not_the_models_section(g: GroupMetrics, level: str) -> list[str]:
    if not g.not_the_models:
        return []
    body = fmt.table(
        ["Run", "Task", "Model", "Reason", "Evidence"],
        [[f"`{r.run_id}`", r.task_id, f"`{r.model}`", f"{r.kind}{_at_turn(r.turn)}: {r.detail}", f"`results/{r.path}`"]
         for r in g.not_the_models],
    )
    note = (
        "The harness or its environment ended these runs, not the model: before the model ever "
        "answered (a preflight refusal, a provider configuration error, a missing key), at any "
        "turn (a provider's error status, a broken or hung connection, a signal the runner did "
        "not send; the kind says which and at which model call), or git could not commit for "
        "want of an identity. They are kept with their evidence and graded, but they measured "
        "nothing about the model, so no model metric counts them."
    )
    return _section(level, "Runs ended by the harness or its environment", body, note)


def _replay_section(g: GroupMetrics, level: str) -> list[str]:
    if not g.replays:
        return []
    body = fmt.table(
        ["Model", "Task", "Runs", "Passes"],
        [[f"`{r.model}`" + _under(r.condition), r.task_id, str(r.runs), str(r.passes)] for r in g.replays],
    )
    note = (
        "A replay re-materializes a preserved run's end state and grades it again without "
        "calling the model (it carries the original run's cost), so it is never counted as a "
        "run of that model."
    )
    return _section(level, "Replayed sessions (not a model sample)", body, note)


#: A group's sections in the order they appear. The main group shows every section (an empty one
#: says so); a separate group shows only the sections it has something for.
_GROUP_SECTIONS = (
    _environment_section,
    _costed_section,
    _uncosted_section,
    _other_segments_section,
    _single_repeat_section,
    _echo_section,
    _ablation_section,
    _refusal_section,
    _variant_section,
    _failure_section,
    _modes_section,
    _harness_section,
    _scripted_section,
    _environment_failures_section,
    _not_the_models_section,
    _replay_section,
)


def _group_body(g: GroupMetrics, level: str) -> list[str]:
    return [line for section in _GROUP_SECTIONS for line in section(g, level)]


def _stamp_line(sm: SuiteMetrics) -> str:
    ref = sm.reference
    sources = sorted({t.manifest_source for t in ref.tasks.values()})
    where = (
        f"`suite.bumped` seq {ref.bump_seq}" if sources == ["suite.bumped"]
        else ("the hash most records carry" if sources == ["most records"]
              else f"`suite.bumped` seq {ref.bump_seq} where it names the task, else the hash most records carry")
    )
    major = "absent" if ref.kicad_major == "none" else ref.kicad_major
    return (
        f"Stamp shared by every record in this group: schemaVersion `{ref.schema_version}`, "
        f"suiteVersion `{sm.suite_version}`, kicad-cli major `{major}`, and for each of "
        f"{len(ref.tasks)} task(s) the task manifest and fixture hashes from {where}."
    )


_INTRO = (
    "Two headline numbers, per tier and per model, under the default condition (no ablation "
    "flag): **strict pass rate** (passing runs / runs, with a 95% Wilson score interval) and "
    "**cost per passing task** (USD of every run in the row, repeats and failures included, / "
    "the tasks it passed at least once), each costed segment in a USD column of its own. "
    "pass@1, pass^k, the spread, refusal rates, the variant gap and failure categories are "
    "diagnostics. Rows are ranked by strict pass rate, then cost per passing task within a "
    "segment. A row pooled over tiers says so and weighs each run equally. Harness, scripted, "
    "replayed, ablated and imported runs, and runs the harness or its environment ended, never enter a "
    "headline row. Definitions: `docs/PROJECTIONS.md`."
)


def _non_claims() -> list[str]:
    lead, items = NON_CLAIMS
    return ["## What these numbers do not claim", "", lead, "", *(f"- {item}" for item in items), ""]


def render(state: LedgerState, suite_version: str | None = None, views: Views | None = None) -> str:
    """The whole file. `suite_version` defaults to the current suite (latest `suite.bumped`).
    `views` are the aggregates kept current as the state folded (`aggregates.Views.attach`);
    without them they are computed here in full, by the same code."""
    if views is None:
        views = Views(state)
    suite = suite_version or views.current_suite()
    sv = views.suite(suite) if suite is not None else None
    sm = sv.metrics() if sv is not None else None
    counts = views.record_counts()
    out: list[str] = [BEGIN, "", "# copperbench leaderboard", ""]
    out += _snapshot(state, suite, sm, counts, views)
    out += ["", _INTRO, ""]
    if not views.model_runs:
        out += [NO_REAL_MODEL, ""]
    out += _non_claims()
    out += harness_findings.render(views.harness_versions)
    if suite is not None and sv is not None:
        out += card.render_acc(state, suite, sv.card)
    if sm is not None:
        out += _main_group_part(sm)
        out += _other_groups_part(sm)
    if suite is not None:
        out += passes_part.render(state, suite, views.attempt_firsts)
    if sv is not None and sm is not None:
        out += lanes_part.render_acc(state, sm, sv.lanes)
    out += _suite_versions_part(state, suite, counts, views)
    out += _listing("Imported / reviewer-supplied evidence — not re-gradable, not project-owned", _imports(state))
    out += _listing("Grade conflicts", _conflicts(state))
    out += _listing("Retracted runs", _retracted(state))
    unrecorded = _unrecorded(state)
    if unrecorded:  # only a ledger of killed runs has any
        out += _listing("Spend no run records: runs killed with their driver", unrecorded)
    out += _listing("Runs recorded without the agent sandbox", _unsandboxed(views))
    anomalies = _anomalies(state, views)
    if anomalies:
        out += ["## Ledger anomalies", "", *fmt.table(["Seq", "Kind", "Detail"], anomalies), ""]
    out.append(END)
    return "\n".join(out) + "\n"


def _suite_reason(state: LedgerState, suite: str | None, views: Views) -> str:
    """Why this suite version is the one shown."""
    current = views.current_suite()
    if suite is None:
        return "no suite version yet"
    if suite == current and state.suites:
        return f"the current suite: latest `suite.bumped`, seq {state.suites[-1].seq}"
    if suite == current:
        return "the current suite: no `suite.bumped` yet, so the highest version graded"
    return f"requested; the current suite is `{current}`"


def _snapshot(
    state: LedgerState, suite: str | None, sm: SuiteMetrics | None, counts: dict[str, int], views: Views
) -> list[str]:
    how = _suite_reason(state, suite, views)
    all_records = sum(counts.values())
    return fmt.table(
        ["Snapshot", "Value"],
        [
            ["Suite version", f"`{suite}` ({how})" if suite else how],
            ["Snapshot date", f"{fmt.utc_date(state.last_at)} (time of the last ledger event: {fmt.utc_stamp(state.last_at)})"],
            ["Records", f"{sm.records if sm else 0} graded under this suite version; {all_records} across all suite versions"],
            ["Ledger head", f"seq {state.head_seq}, `{state.head_hash or 'not read from a ledger file'}`"],
            ["Signed checkpoint", _checkpoint_cell(state)],
            ["Result schema", f"`{SCHEMA_VERSION}`"],
        ],
    )


def _checkpoint_cell(state: LedgerState) -> str:
    """Which signed checkpoint this page can be held to, and exactly which events it covers."""
    found = anchor.latest(state)
    if found is None:
        return "none yet: no event is held to a signature (`cbledger checkpoint`; docs/CHECKPOINTS.md)"
    cp = found.checkpoint
    root = base64.b64encode(bytes.fromhex(cp.root_hash)).decode()
    cell = f"`{found.path}`: origin `{cp.origin}`, size {cp.tree_size} (covers seq 1–{cp.tree_size}), root `{root}`"
    after = cp.tree_size + 1
    if found.uncovered <= 0:
        return cell
    if found.uncovered == 1 and cp.seq == after:
        return cell + f"; seq {after} is its own record, covered by the next checkpoint"
    return cell + f"; seq {after}–{state.head_seq} (its own record at seq {cp.seq} among them) are not covered yet"


def _main_group_part(sm: SuiteMetrics) -> list[str]:
    out = ["## Main comparability group", ""]
    main = sm.main_group()
    if sm.records == 0:
        return out + ["No run has been graded under this suite version yet.", ""]
    if main is None:
        return out + ["No record of this suite version matches the reference stamp.", ""]
    return out + [_stamp_line(sm) + f" {main.records} record(s).", "", *_group_body(main, "###")]


def _other_groups_part(sm: SuiteMetrics) -> list[str]:
    others = [g for g in sm.groups if not g.main]
    out = ["## Other comparability groups (never averaged into the main group)", ""]
    if not others:
        out += ["None: every record of this suite version shares the main group's stamp.", ""]
    for g in others:
        out += [f"### Separate group: {g.label}", ""]
        out += [f"Not comparable with the main group because: {'; '.join(g.reasons)}. {g.records} record(s).", ""]
        out += _group_body(g, "####")
    return out


def _suite_versions_part(state: LedgerState, suite: str | None, counts: dict[str, int], views: Views) -> list[str]:
    versions = views.suite_versions()
    out = ["## Suite versions in the ledger", ""]
    if not versions:
        return out + ["None.", ""]
    rows = []
    for v in reversed(versions):
        bump = suite_bump(state, v)
        rows.append(
            [
                f"`{v}`" + (" (shown)" if v == suite else ""),
                str(counts.get(v, 0)),
                f"seq {bump.seq}, {fmt.utc_date(bump.at)}" if bump else "no `suite.bumped`",
                bump.body.reason if bump else "—",
            ]
        )
    out += fmt.table(["Suite version", "Records", "Bumped", "Reason"], rows)
    return out + ["", "Another version's tables: `cbledger project leaderboard --suite VERSION --out FILE`.", ""]


def _listing(title: str, body: list[str]) -> list[str]:
    """A second-level section that says "None." when it has nothing to list."""
    return [f"## {title}", "", *(body or ["None."]), ""]


def _import_row(imp: ImportEntry) -> list[str]:
    body, summary = imp.body, imp.body.summary
    surface = surfaces.import_surface(body)
    return [
        str(imp.seq), surface, surfaces.catalog().get(surface).ownership, body.source, body.format, summary.task_id or "—", summary.model or "—",
        summary.verdict or "—", summary.suite_version or "—", summary.run_date or "—", f"`{body.sha256[:12]}`",
    ]


def _imports(state: LedgerState) -> list[str]:
    if not state.imports:
        return []
    note = (
        "> Produced outside this project's runner. Shown as supplied; never re-graded, never "
        "relabelled as a project-owned run, never in a model row."
    )
    header = ["Seq", "Surface", "Ownership (the surface's)", "Source", "Format", "Task", "Model", "Verdict (as supplied)", "Suite", "Run date", "sha256"]
    return [note, "", *fmt.table(header, [_import_row(imp) for imp in state.imports])]


def _conflicts(state: LedgerState) -> list[str]:
    if not state.conflicts:
        return []
    note = (
        "> A later grade for a (run, suite version) pair that differs from the first. The first "
        "grade stands (records are written once); the conflict needs a maintainer."
    )
    return [note, "", *fmt.table(
        ["Run", "Suite version", "Kept grade (seq)", "Conflicting grade (seq)", "Fields that differ"],
        [
            [c.run_id, c.suite_version, str(c.kept_seq), str(c.conflicting_seq), ", ".join(c.fields)]
            for c in state.conflicts
        ],
    )]


def _unrecorded(state: LedgerState) -> list[str]:
    """Every `spend.unrecorded`: billed by the provider, in no run's cost and so in no table above."""
    entries = unrecorded_spend(state)
    if not entries:
        return []
    total = sum(e.body.usd_micros for e in entries)
    note = (
        f"> {fmt.usd_micros(total)} in all, over {len(entries)} run(s). A run killed with its driver (Ctrl-C, "
        "SIGTERM, SIGKILL) is never recorded, but the provider billed every call it answered; the campaign's "
        "spend journal kept each, and the next invocation of the campaign (or the interrupt itself) recorded "
        "the sum as `spend.unrecorded`. In no table, cost figure or lane above; a call still in flight at the "
        "kill is in no journal (docs/RUNNER.md section 7). The operator's figure: `replay --verify` cannot "
        "re-derive it, and says so; the last column says who recorded each."
    )
    return [note, "", *fmt.table(
        ["Campaign", "Run", "Batch", "Model", "USD", "Recorded at seq", "Recorded by"],
        [[f"`{e.body.campaign}`", f"`{e.body.run_id}`", f"`{e.body.batch}`" if e.body.batch else "—", f"`{e.body.model}`",
          fmt.usd_micros(e.body.usd_micros), str(e.seq), f"`{e.actor}`"] for e in entries],
    )]


def _retracted(state: LedgerState) -> list[str]:
    if not state.retracted:
        return []
    note = (
        "> Out of every table, metric and gate above. The runs stay in the ledger, and their "
        "published records stay where they are, unchanged, each beside a `run-<n>.retracted.json` "
        "that says it was retracted and why."
    )
    return [note, "", *fmt.table(
        ["Run", "Retracted at seq", "Reason", "USD (out of every figure, not off the bill)", "Records"],
        [
            [r.run_id, str(r.seq), r.reason, _retracted_cost(state, r.run_id),
             ", ".join(f"`results/{path}`" for path, _, _ in record_paths(state, r.run_id)) or "none (never graded)"]
            for r in state.retracted.values()
        ],
    )]


def _retracted_cost(state: LedgerState, run_id: str) -> str:
    entry = any_run(state, run_id)
    if entry is None:
        return "—"
    if is_replay(entry):
        return "— (a replay bills nothing)"
    return fmt.usd_micros(entry.run.cost.usd_micros)


_UNSANDBOXED_NOTE = (
    "> Their processes ran as the operator, with the operator's files in reach: nothing kept such "
    "an agent from reading a gold solution or writing outside its sandbox. `before the sandbox`: "
    "recorded by a runner that had none (the event does not state it); `--unsandboxed`: run "
    "without it on purpose. Counted over the whole ledger, every suite version's runs (the benchmark "
    "card counts the runs of the suite it describes). docs/RUNNER.md, section 5."
)


def _unsandboxed(views: Views) -> list[str]:
    counts = views.unsandboxed
    if not counts:
        return []
    rows = [[f"`{model}`", mode, str(n), f"`{why}`"] for (model, mode, why), n in sorted(counts.items())]
    return [_UNSANDBOXED_NOTE, "", *fmt.table(["Model", "Run mode", "Runs", "Why"], rows)]


def _anomalies(state: LedgerState, views: Views) -> list[list[str]]:
    """The fold's anomalies, the tallied ones of runs and grades (`Views.anomaly_rows`) and those
    of the short lists (imports, retractions), in seq order."""
    rows = [[str(a.seq), a.kind, a.message] for a in state.anomalies]
    rows += views.anomaly_rows
    for imp in state.imports:
        surface, claimed = surfaces.named_surface(imp.body.surface, surfaces.import_surface(imp.body))
        owner = surfaces.catalog().get(surface).ownership
        if claimed is not None or imp.body.ownership != owner:
            rows.append([str(imp.seq), "surface-mismatch",
                         f"import claims {claimed or surface} / {imp.body.ownership}; its surface {surface} is {owner}"])
    for run_id, r in state.retracted.items():
        if run_id not in state.runs and run_id not in state.later_passes:
            rows.append([str(r.seq), "retraction-without-run", f"retraction of unknown run {run_id}"])
    return sorted(rows, key=lambda row: (int(row[0]), row[1], row[2]))
