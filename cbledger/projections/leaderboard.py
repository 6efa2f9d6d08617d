"""`LEADERBOARD.md`: a pure rendering of the metrics of one suite version.

Byte-identical for the same ledger on any machine: the snapshot date is the time of the last
ledger event (never the wall clock), every number goes through `format`, every list is sorted
by an explicit key, and nothing depends on dict order from outside the fold (which is ledger
order). Headline numbers follow the standard: strict pass rate and cost per passing task, per
tier and per model; everything else is labelled a diagnostic or sits in its own section.
"""

from __future__ import annotations

from fractions import Fraction

from cbledger.ledger.events import SCHEMA_VERSION
from cbledger.projections import format as fmt
from cbledger.projections.fold import LedgerState, current_suite, suite_bump, suite_versions
from cbledger.projections.metrics import (
    ALL_TIERS,
    COSTED_SEGMENTS,
    TIERS,
    UNCOSTED_SEGMENTS,
    GroupMetrics,
    RowMetrics,
    SuiteMetrics,
    first_rubric_scores,
    suite_metrics,
)
from cbledger.projections.records import live_record_counts

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


def _rank_key(r: RowMetrics) -> tuple:
    rate = r.rate if r.rate is not None else Fraction(-1)
    cpp = r.cost_per_pass_micros
    return (_TIER_ORDER[r.tier], -rate, cpp is None, cpp if cpp is not None else 0, r.model, r.segment)


def _cost_cell(r: RowMetrics) -> str:
    cpp = r.cost_per_pass_micros
    if cpp is not None:
        return fmt.usd_micros(cpp)
    if r.uncosted_runs:
        return f"n/a: {r.uncosted_runs} of {r.runs} runs uncosted"
    if r.passes == 0:
        return f"— (no pass; {fmt.usd_micros(r.usd_micros_total)} spent)"
    return "—"


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


def _rubric(r: RowMetrics) -> str:
    if r.rubric_mean is None:
        return "—"
    return f"{r.rubric_mean:.2f} (n={r.rubric_runs})"


def _rows_section(rows: list[RowMetrics], costed: bool) -> list[str]:
    if costed:
        header = [
            "Tier", "Model", "Segment", "Strict pass rate (passes/runs; 95% CI)",
            "Cost per passing task", "pass@1", "pass^k", "Spread across repeats",
            "Rubric (model-judged)",
        ]
        body = [
            [
                _tier_label(r.tier), f"`{r.model}`", r.segment, _rate_cell(r), _cost_cell(r),
                fmt.pct(r.pass_at_1), _pass_hat_k(r), _spread(r), _rubric(r),
            ]
            for r in sorted(rows, key=_rank_key)
        ]
    else:
        header = [
            "Tier", "Model", "Segment", "Pinning", "Strict pass rate (passes/runs; 95% CI)",
            "Tokens in / out", "pass@1", "pass^k", "Spread across repeats", "Rubric (model-judged)",
        ]
        body = [
            [
                _tier_label(r.tier), f"`{r.model}`", r.segment, r.pinning, _rate_cell(r),
                f"{r.tokens_in} / {r.tokens_out}", fmt.pct(r.pass_at_1), _pass_hat_k(r), _spread(r),
                _rubric(r),
            ]
            for r in sorted(rows, key=_rank_key)
        ]
    return fmt.table(header, body)


def _single_section(rows: list[RowMetrics]) -> list[str]:
    header = ["Tier", "Model", "Segment", "Runs", "Passes", "Cost of all runs"]
    body = [
        [
            _tier_label(r.tier), f"`{r.model}`", r.segment, str(r.runs), str(r.passes),
            fmt.usd_micros(r.usd_micros_total) if r.usd_micros_total is not None else "uncosted",
        ]
        for r in sorted(rows, key=lambda r: (_TIER_ORDER[r.tier], r.model, r.segment))
    ]
    return fmt.table(header, body)


def _group_body(g: GroupMetrics, level: str) -> list[str]:
    """One group's sections. The main group shows every section (an empty one says so); a
    separate group shows only the sections it has something for."""
    full = g.main
    out: list[str] = []
    repeated = [r for r in g.rows if not r.single_repeat]
    single = [r for r in g.rows if r.single_repeat]
    costed = [r for r in repeated if r.segment in COSTED_SEGMENTS]
    uncosted = [r for r in repeated if r.segment in UNCOSTED_SEGMENTS]
    other = [r for r in repeated if r.segment not in COSTED_SEGMENTS + UNCOSTED_SEGMENTS]

    if costed or full:
        out += [f"{level} Headline: costed segments ({', '.join(COSTED_SEGMENTS)})", ""]
        out += _rows_section(costed, costed=True) if costed else ["No repeated agent runs in these segments."]
        out.append("")
    if uncosted or full:
        out += [f"{level} Uncosted routes ({', '.join(UNCOSTED_SEGMENTS)})", ""]
        out += [
            "> Not costed, by rule: USD is null for these routes. Self-hosted open weights are "
            "honestly costed in GPU-hours, not tokens; saved-login CLIs are weakly pinned (the model "
            "behind the login may change under it). Their pass rates never share a USD column; "
            "tokens are shown instead.",
            "",
        ]
        out += _rows_section(uncosted, costed=False) if uncosted else ["No repeated agent runs on these routes."]
        out.append("")
    if other:
        out += [f"{level} Other segments", ""]
        out += _rows_section(other, costed=False)
        out.append("")
    if single:
        out += [f"{level} Single-repeat results (not a comparison)", ""]
        out += [
            "> Every task in these rows ran once. A single run is not a result: listed for the "
            "record, unranked, and never compared.",
            "",
        ]
        out += _single_section(single)
        out.append("")

    pooled = sorted((r for r in g.rows if r.tier == ALL_TIERS), key=lambda r: (r.model, r.segment))
    if pooled or full:
        out += [f"{level} Refusal behaviour (diagnostic; pooled over tiers by run)", ""]
        refusal_rows = [
            [
                f"`{r.model}`",
                f"{fmt.pct(Fraction(r.correct_refusals, r.refusal_runs) if r.refusal_runs else None)} "
                f"({r.correct_refusals}/{r.refusal_runs})",
                f"{fmt.pct(Fraction(r.false_refusals, r.edit_runs) if r.edit_runs else None)} "
                f"({r.false_refusals}/{r.edit_runs})",
                "single repeat" if r.single_repeat else f"k={_k(r)}",
            ]
            for r in pooled
        ]
        out += fmt.table(
            [
                "Model",
                "Correct-refusal rate (refusal-task runs that passed)",
                "False-refusal rate (edit-task runs that ended `refused`)",
                "Repeats",
            ],
            refusal_rows,
        ) if refusal_rows else ["No agent runs."]
        out.append("")

    if g.variant_gaps or g.orphan_variants or full:
        out += [f"{level} Variant gap (memorization; pooled over tiers by run)", ""]
        if g.variant_gaps:
            out += fmt.table(
                ["Model", "Original <- variant", "Originals", "Variants", "Gap (original − variant)"],
                [
                    [
                        f"`{v.model}`", "; ".join(v.pairs),
                        f"{fmt.pct(Fraction(v.original_passes, v.original_runs))} ({v.original_passes}/{v.original_runs})",
                        f"{fmt.pct(Fraction(v.variant_passes, v.variant_runs))} ({v.variant_passes}/{v.variant_runs})",
                        f"{float(v.gap) * 100:+.1f} pts" if v.gap is not None else "—",
                    ]
                    for v in g.variant_gaps
                ],
            )
        else:
            out.append("No model ran both an original and its variant.")
        out.append("")
        if g.orphan_variants:
            out += ["Variants whose original this model did not run (listed, not computed):", ""]
            out += fmt.table(
                ["Model", "Variant", "Original", "Runs", "Passes"],
                [[f"`{o.model}`", o.variant, o.original, str(o.runs), str(o.passes)] for o in g.orphan_variants],
            )
            out.append("")

    failing = [r for r in pooled if r.failure_categories]
    if failing or full:
        out += [f"{level} Failure categories (diagnostic; pooled over tiers by run)", ""]
        out += fmt.table(
            ["Model", "Failed runs", "Categories"],
            [
                [
                    f"`{r.model}`", str(r.runs - r.passes),
                    ", ".join(
                        f"{k} {v}" for k, v in sorted(r.failure_categories.items(), key=lambda kv: (-kv[1], kv[0]))
                    ),
                ]
                for r in failing
            ],
        ) if failing else ["No failed agent runs."]
        out.append("")

    if g.harness or full:
        out += [f"{level} Harness discrimination check", ""]
        out += [
            "> `harness:gold` applies the reference solution and should pass every task; "
            "`harness:noop` changes nothing and should fail every edit and refusal task (a flag "
            "task is not checked for noop). These runs never enter a model row.",
            "",
        ]
        out += fmt.table(
            ["Tier", "Task", "Expected outcome", "gold (passes/runs)", "noop (passes/runs)", "Check"],
            [
                [
                    h.tier, h.task_id, h.expected_outcome, f"{h.gold_passes}/{h.gold_runs}",
                    f"{h.noop_passes}/{h.noop_runs}", "; ".join(h.problems) if h.problems else "ok",
                ]
                for h in g.harness
            ],
        ) if g.harness else ["No harness runs."]
        out.append("")
    if g.replays:
        out += [f"{level} Replayed sessions (not a model sample)", ""]
        out += [
            "> A replay re-materializes a preserved run's end state and grades it again without "
            "calling the model (it carries the original run's cost), so it is never counted as a "
            "run of that model.",
            "",
        ]
        out += fmt.table(
            ["Model", "Task", "Runs", "Passes"],
            [[f"`{r.model}`", r.task_id, str(r.runs), str(r.passes)] for r in g.replays],
        )
        out.append("")
    return out


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


def render(state: LedgerState, suite_version: str | None = None) -> str:
    """The whole file. `suite_version` defaults to the current suite (latest `suite.bumped`)."""
    current = current_suite(state)
    suite = suite_version or current
    rubric = first_rubric_scores(state)
    sm = suite_metrics(state, suite, rubric) if suite is not None else None
    counts = live_record_counts(state)
    all_records = sum(counts.values())
    out: list[str] = [BEGIN, "", "# copperbench leaderboard", ""]

    if suite is None:
        how = "no suite version yet"
    elif suite == current and state.suites:
        how = f"the current suite: latest `suite.bumped`, seq {state.suites[-1].seq}"
    elif suite == current:
        how = "the current suite: no `suite.bumped` yet, so the highest version graded"
    else:
        how = f"requested; the current suite is `{current}`"
    out += fmt.table(
        ["Snapshot", "Value"],
        [
            ["Suite version", f"`{suite}` ({how})" if suite else how],
            ["Snapshot date", f"{fmt.utc_date(state.last_at)} (time of the last ledger event: {fmt.utc_stamp(state.last_at)})"],
            ["Records", f"{sm.records if sm else 0} graded under this suite version; {all_records} across all suite versions"],
            ["Ledger head", f"seq {state.head_seq}, `{state.head_hash or 'not read from a ledger file'}`"],
            ["Result schema", f"`{SCHEMA_VERSION}`"],
        ],
    )
    out.append("")
    out.append(
        "Two headline numbers, per tier and per model: **strict pass rate** (passing runs / runs, "
        "with a 95% Wilson score interval) and **cost per passing task** (USD of every run in the "
        "row / its passing runs). pass@1, pass^k, the spread, refusal rates, the variant gap and "
        "failure categories are diagnostics. Rows are ranked by strict pass rate, then cost per "
        "passing task. A row pooled over tiers says so and weighs each run equally. Harness, "
        "replayed and imported runs never enter a model row. Definitions: `docs/PROJECTIONS.md`."
    )
    out.append("")

    if sm is not None:
        main = sm.main_group()
        out += ["## Main comparability group", ""]
        if sm.records == 0:
            out += ["No run has been graded under this suite version yet.", ""]
        elif main is None:
            out += ["No record of this suite version matches the reference stamp.", ""]
        else:
            out += [_stamp_line(sm) + f" {main.records} record(s).", ""]
            out += _group_body(main, "###")
        others = [g for g in sm.groups if not g.main]
        out += ["## Other comparability groups (never averaged into the main group)", ""]
        if not others:
            out += ["None: every record of this suite version shares the main group's stamp.", ""]
        for g in others:
            out += [f"### Separate group: {g.label}", ""]
            out.append(f"Not comparable with the main group because: {'; '.join(g.reasons)}. {g.records} record(s).")
            out.append("")
            out += _group_body(g, "####")

    versions = suite_versions(state)
    out += ["## Suite versions in the ledger", ""]
    if versions:
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
        out.append("")
        out.append("Another version's tables: `cbledger project leaderboard --suite VERSION --out FILE`.")
    else:
        out.append("None.")
    out.append("")

    out += ["## Imported / reviewer-supplied evidence — not re-gradable, not project-owned", ""]
    if state.imports:
        out.append(
            "> Produced outside this project's runner. Shown as supplied; never re-graded, never "
            "relabelled as a project-owned run, never in a model row."
        )
        out.append("")
        rows = []
        for imp in state.imports:
            b, s = imp.body, imp.body.summary
            rows.append(
                [
                    str(imp.seq), b.ownership, b.source, b.format, s.task_id or "—", s.model or "—",
                    s.verdict or "—", s.suite_version or "—", s.run_date or "—", f"`{b.sha256[:12]}`",
                ]
            )
        out += fmt.table(
            ["Seq", "Ownership", "Source", "Format", "Task", "Model", "Verdict (as supplied)", "Suite", "Run date", "sha256"],
            rows,
        )
    else:
        out.append("None.")
    out.append("")

    out += ["## Grade conflicts", ""]
    if state.conflicts:
        out.append(
            "> A later grade for a (run, suite version) pair that differs from the first. The first "
            "grade stands (records are written once); the conflict needs a maintainer."
        )
        out.append("")
        out += fmt.table(
            ["Run", "Suite version", "Kept grade (seq)", "Conflicting grade (seq)", "Fields that differ"],
            [
                [c.run_id, c.suite_version, str(c.kept_seq), str(c.conflicting_seq), ", ".join(c.fields)]
                for c in state.conflicts
            ],
        )
    else:
        out.append("None.")
    out.append("")

    out += ["## Retracted runs", ""]
    if state.retracted:
        out.append("> Dropped from every table above; the runs stay in the ledger.")
        out.append("")
        out += fmt.table(
            ["Run", "Retracted at seq", "Reason"],
            [[r.run_id, str(r.seq), r.reason] for r in state.retracted.values()],
        )
    else:
        out.append("None.")
    out.append("")

    anomalies = _anomalies(state)
    if anomalies:
        out += ["## Ledger anomalies", ""]
        out += fmt.table(["Seq", "Kind", "Detail"], anomalies)
        out.append("")
    out.append(END)
    return "\n".join(out) + "\n"


def _anomalies(state: LedgerState) -> list[list[str]]:
    rows = [[str(a.seq), a.kind, a.message] for a in state.anomalies]
    for run_id, per_run in state.grades.items():
        if run_id not in state.runs:
            for suite, g in per_run.items():
                rows.append([str(g.seq), "grade-without-run", f"grade of unknown run {run_id} under {suite}"])
    for run_id, items in state.rubric.items():
        if run_id not in state.runs:
            rows.append([str(items[0].seq), "rubric-without-run", f"rubric score of unknown run {run_id}"])
    for run_id, r in state.retracted.items():
        if run_id not in state.runs:
            rows.append([str(r.seq), "retraction-without-run", f"retraction of unknown run {run_id}"])
    return sorted(rows, key=lambda row: (int(row[0]), row[1], row[2]))
