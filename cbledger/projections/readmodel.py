"""The SQLite read model: the views as tables, for ad-hoc questions and browsing.

`build_tables` is pure (state -> rows, sorted by primary key); `write` is the only I/O: it builds
a new database file beside the target and `os.replace`s it in, so a reader never sees a half-built
model. Browse it read-only with `datasette serve --immutable results/cbledger.db` (datasette is an
optional extra: `pip install '.[browse]'`).

`canonical_dump` renders a database's content (not its bytes: SQLite page layout is not a
contract) as text with tables, columns and rows in a fixed order; `canonical_dump_tables` renders
freshly built tables the same way, so `replay --verify` can compare a committed read model with
a regeneration.
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path
from typing import Any

import sqlite_utils
from msgspec import Struct

from cbledger.ledger.events import SCHEMA_VERSION
from cbledger.projections import format as fmt
from cbledger.projections.comparability import partition
from cbledger.projections.fold import LedgerState, current_suite, suite_versions
from cbledger.projections.metrics import all_suite_metrics
from cbledger.projections.records import is_harness, is_replay, record_entries, usd_from_micros


class Table(Struct, frozen=True, kw_only=True):
    name: str
    columns: dict[str, type]
    pk: tuple[str, ...]
    rows: list[dict[str, Any]]


def _t(name: str, pk: tuple[str, ...], columns: dict[str, type], rows: list[dict[str, Any]]) -> Table:
    for row in rows:
        if row.keys() != columns.keys():
            raise AssertionError(f"{name}: row columns {sorted(row)} != {sorted(columns)}")
    return Table(name=name, columns=columns, pk=pk, rows=sorted(rows, key=lambda r: tuple(r[k] for k in pk)))


def build_tables(state: LedgerState) -> list[Table]:
    """Every table of the read model; retracted runs appear only in `retractions`."""
    live = {rid: e for rid, e in state.runs.items() if rid not in state.retracted}
    records = record_entries(state, build=False)
    by_pair = {(r.run_id, r.suite_version): r for r in records}

    group_of: dict[tuple[str, str], tuple[str, str]] = {}
    incomparable = []
    for suite in suite_versions(state):
        recs = [r for r in records if r.suite_version == suite]
        for g in partition(state, suite, recs).groups:
            for i in g.members:
                r = recs[i]
                group_of[(r.run_id, suite)] = (g.key, g.label)
                if not g.main:
                    incomparable.append(
                        {
                            "suite_version": suite, "record_path": r.path, "run_id": r.run_id,
                            "group_key": g.key, "reasons": "; ".join(g.reasons),
                        }
                    )

    runs = []
    for rid, e in live.items():
        run, c, s = e.run, e.run.comparability, e.run.stats
        runs.append(
            {
                "run_id": rid, "seq": e.seq, "task_id": run.task.id, "tier": run.task.tier,
                "mode": run.task.mode, "expected_outcome": run.task.expected_outcome,
                "variant_of": run.task.variant_of, "fixture_id": run.fixture.id,
                "fixture_sha256": run.fixture.sha256, "model_id": run.model.id,
                "provider": run.model.provider, "segment": run.model.segment,
                "pinning": run.model.pinning, "repeat": run.repeat,
                "repeats_planned": run.repeats_planned, "run_mode": run.run_mode,
                "kind": "harness" if is_harness(e) else ("replay" if is_replay(e) else "agent"),
                "exit_path": s.exit_path if s else None, "runner_exit": run.runner_exit,
                "turns_used": s.turns_used if s else None, "tokens_in": s.tokens_in if s else None,
                "tokens_out": s.tokens_out if s else None, "usd_micros": run.cost.usd_micros,
                "usd": usd_from_micros(run.cost.usd_micros),
                "price_table_version": run.cost.price_table_version,
                "started_at": fmt.utc_stamp(run.timings.started_at), "date": e.date,
                "ordinal": e.ordinal, "duration_ms": run.timings.duration_ms,
                "schema_version": c.schema_version, "run_suite_version": c.suite_version,
                "task_manifest_hash": c.task_manifest_hash,
                "copperhead_version": c.copperhead_version, "copperhead_commit": c.copperhead_commit,
                "kicad_cli_version": c.kicad_cli_version, "node_version": c.node_version,
                "runtime": c.runtime, "platform": c.platform,
                "baseline_sha": run.sandbox.baseline_sha, "sandbox_store": run.sandbox.store,
            }
        )

    grades, outcomes = [], []
    for rid in live:
        for suite, g in state.grades.get(rid, {}).items():
            gr = g.grade
            key, label = group_of.get((rid, suite), ("", ""))
            grades.append(
                {
                    "run_id": rid, "suite_version": suite, "seq": g.seq,
                    "grader_version": gr.grader_version, "task_manifest_hash": gr.task_manifest_hash,
                    "verdict": gr.verdict, "partial_credit": gr.partial_credit,
                    "first_failed_required": gr.first_failed_required,
                    "failure_category": gr.failure_category,
                    "dominant_tool_error": gr.dominant_tool_error,
                    "record_path": by_pair[(rid, suite)].path,
                    "comparability_group": key, "main_group": int(key == "main"),
                }
            )
            for pos, a in enumerate(gr.assertions):
                outcomes.append(
                    {
                        "run_id": rid, "suite_version": suite, "position": pos,
                        "assertion_id": a.id, "type": a.type, "status": a.status,
                        "weight": a.weight, "required": int(a.required),
                        "evidence_source": a.evidence_source, "detail": a.detail,
                    }
                )

    board = []
    for sm in all_suite_metrics(state):
        for g in sm.groups:
            for r in g.rows:
                cpp = r.cost_per_pass_micros
                board.append(
                    {
                        "suite_version": sm.suite_version, "group_key": g.key, "group_label": g.label,
                        "main_group": int(g.main), "tier": r.tier, "model": r.model,
                        "segment": r.segment, "pinning": r.pinning, "costed": int(r.costed),
                        "runs": r.runs, "passes": r.passes,
                        "strict_pass_rate": r.passes / r.runs, "wilson_low": r.wilson_low,
                        "wilson_high": r.wilson_high,
                        "cost_per_passing_task_usd": usd_from_micros(round(cpp)) if cpp is not None else None,
                        "usd_micros_total": r.usd_micros_total, "costed_runs": r.costed_runs,
                        "uncosted_runs": r.uncosted_runs, "tokens_in": r.tokens_in,
                        "tokens_out": r.tokens_out,
                        "pass_at_1": float(r.pass_at_1) if r.pass_at_1 is not None else None,
                        "pass_hat_k": float(r.pass_hat_k) if r.pass_hat_k is not None else None,
                        "tasks": r.tasks, "repeats_min": r.repeats_min, "repeats_max": r.repeats_max,
                        "single_repeat": int(r.single_repeat),
                        "refusal_runs": r.refusal_runs, "correct_refusals": r.correct_refusals,
                        "edit_runs": r.edit_runs, "false_refusals": r.false_refusals,
                        "failure_categories": json.dumps(r.failure_categories, sort_keys=True),
                        "rubric_model_judged_mean": r.rubric_mean, "rubric_runs": r.rubric_runs,
                    }
                )

    imports = []
    for imp in state.imports:
        b, s = imp.body, imp.body.summary
        imports.append(
            {
                "seq": imp.seq, "at": fmt.utc_stamp(imp.at), "actor": imp.actor,
                "ownership": b.ownership, "source": b.source, "original_path": b.original_path,
                "format": b.format, "sha256": b.sha256, "task_id": s.task_id, "model": s.model,
                "verdict": s.verdict, "suite_version": s.suite_version,
                "fixture_sha256": s.fixture_sha256, "run_date": s.run_date, "repeat": s.repeat,
                "variant": s.variant, "benchmark": s.benchmark, "surface_id": s.surface_id,
                "files": json.dumps([f.stored_path for f in b.files]),
            }
        )

    rubric = [
        {
            "seq": item.seq, "run_id": rid, "judge_model": item.rubric.judge_model,
            "prompt_sha256": item.rubric.prompt_sha256, "score": item.rubric.score,
            "rationale": item.rubric.rationale,
        }
        for rid, items in state.rubric.items()
        if rid in live
        for item in items
    ]
    conflicts = [
        {
            "run_id": c.run_id, "suite_version": c.suite_version, "kept_seq": c.kept_seq,
            "conflicting_seq": c.conflicting_seq, "fields": ", ".join(c.fields),
        }
        for c in state.conflicts
    ]
    retractions = [{"run_id": r.run_id, "seq": r.seq, "reason": r.reason} for r in state.retracted.values()]
    meta = [
        {"key": k, "value": v}
        for k, v in {
            "head_seq": str(state.head_seq),
            "head_hash": state.head_hash or "",
            "snapshot_at": fmt.utc_stamp(state.last_at),
            "current_suite": current_suite(state) or "",
            "schema_version": SCHEMA_VERSION,
            "ledger_name": state.ledger_name or "",
            "duplicate_grades": str(len(state.duplicate_grades)),
        }.items()
    ]

    S, I, F = str, int, float
    return [
        _t("meta", ("key",), {"key": S, "value": S}, meta),
        _t("runs", ("run_id",), {
            "run_id": S, "seq": I, "task_id": S, "tier": S, "mode": S, "expected_outcome": S,
            "variant_of": S, "fixture_id": S, "fixture_sha256": S, "model_id": S, "provider": S,
            "segment": S, "pinning": S, "repeat": I, "repeats_planned": I, "run_mode": S, "kind": S,
            "exit_path": S, "runner_exit": S, "turns_used": I, "tokens_in": I, "tokens_out": I,
            "usd_micros": I, "usd": F, "price_table_version": S, "started_at": S, "date": S,
            "ordinal": I, "duration_ms": I, "schema_version": S, "run_suite_version": S,
            "task_manifest_hash": S, "copperhead_version": S, "copperhead_commit": S,
            "kicad_cli_version": S, "node_version": S, "runtime": S, "platform": S,
            "baseline_sha": S, "sandbox_store": S,
        }, runs),
        _t("grades", ("run_id", "suite_version"), {
            "run_id": S, "suite_version": S, "seq": I, "grader_version": S, "task_manifest_hash": S,
            "verdict": S, "partial_credit": F, "first_failed_required": S, "failure_category": S,
            "dominant_tool_error": S, "record_path": S, "comparability_group": S, "main_group": I,
        }, grades),
        _t("assertion_outcomes", ("run_id", "suite_version", "position"), {
            "run_id": S, "suite_version": S, "position": I, "assertion_id": S, "type": S,
            "status": S, "weight": F, "required": I, "evidence_source": S, "detail": S,
        }, outcomes),
        _t("leaderboard_rows", ("suite_version", "group_key", "tier", "model", "segment"), {
            "suite_version": S, "group_key": S, "group_label": S, "main_group": I, "tier": S,
            "model": S, "segment": S, "pinning": S, "costed": I, "runs": I, "passes": I,
            "strict_pass_rate": F, "wilson_low": F, "wilson_high": F,
            "cost_per_passing_task_usd": F, "usd_micros_total": I, "costed_runs": I,
            "uncosted_runs": I, "tokens_in": I, "tokens_out": I, "pass_at_1": F, "pass_hat_k": F,
            "tasks": I, "repeats_min": I, "repeats_max": I, "single_repeat": I, "refusal_runs": I,
            "correct_refusals": I, "edit_runs": I, "false_refusals": I, "failure_categories": S,
            "rubric_model_judged_mean": F, "rubric_runs": I,
        }, board),
        _t("incomparable_records", ("suite_version", "record_path"), {
            "suite_version": S, "record_path": S, "run_id": S, "group_key": S, "reasons": S,
        }, incomparable),
        _t("imports", ("seq",), {
            "seq": I, "at": S, "actor": S, "ownership": S, "source": S, "original_path": S,
            "format": S, "sha256": S, "task_id": S, "model": S, "verdict": S, "suite_version": S,
            "fixture_sha256": S, "run_date": S, "repeat": I, "variant": S, "benchmark": S,
            "surface_id": S, "files": S,
        }, imports),
        _t("rubric_scores", ("seq",), {
            "seq": I, "run_id": S, "judge_model": S, "prompt_sha256": S, "score": F, "rationale": S,
        }, rubric),
        _t("grade_conflicts", ("conflicting_seq",), {
            "run_id": S, "suite_version": S, "kept_seq": I, "conflicting_seq": I, "fields": S,
        }, conflicts),
        _t("retractions", ("run_id",), {"run_id": S, "seq": I, "reason": S}, retractions),
    ]


# --------------------------------------------------------------------------- I/O


def write(tables: list[Table], path: Path) -> Path:
    """Builds the database in a temporary file beside `path`, then atomically replaces it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    if tmp.exists():
        tmp.unlink()
    try:
        conn = sqlite3.connect(tmp)
        db = sqlite_utils.Database(conn)
        for t in tables:
            db[t.name].create(t.columns, pk=t.pk[0] if len(t.pk) == 1 else t.pk)  # type: ignore[union-attr]
            if t.rows:
                db[t.name].insert_all(t.rows, batch_size=1000)  # type: ignore[union-attr]
        conn.commit()
        conn.close()
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    return path


def _dump_lines(name: str, columns: list[str], pk: list[str], rows: list[tuple]) -> list[str]:
    out = [f"table {name} ({', '.join(columns)}) pk ({', '.join(pk)}) rows {len(rows)}"]
    out.extend(json.dumps(list(r), ensure_ascii=False, separators=(",", ":")) for r in rows)
    return out


def canonical_dump_tables(tables: list[Table]) -> str:
    out: list[str] = []
    for t in sorted(tables, key=lambda t: t.name):
        cols = list(t.columns)
        rows = [tuple(_norm(r[c]) for c in cols) for r in t.rows]
        out += _dump_lines(t.name, cols, list(t.pk), sorted(rows, key=lambda r: tuple(r[cols.index(k)] for k in t.pk)))
    return "\n".join(out) + "\n"


def canonical_dump(path: Path) -> str:
    """The content of a read-model database in the `canonical_dump_tables` format."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        db = sqlite_utils.Database(conn)
        out: list[str] = []
        for name in sorted(db.table_names()):
            table = db[name]
            cols = [c.name for c in table.columns]  # type: ignore[union-attr]
            pk = table.pks  # type: ignore[union-attr]
            order = ", ".join(f'"{k}"' for k in pk)
            rows = [tuple(_norm(v) for v in row) for row in conn.execute(f'SELECT * FROM "{name}" ORDER BY {order}')]
            out += _dump_lines(name, cols, pk, rows)
        return "\n".join(out) + "\n"
    finally:
        conn.close()


def _norm(v: Any) -> Any:
    """Booleans are stored as 0/1 and integral REALs come back as floats: compare like for like."""
    if isinstance(v, bool):
        return int(v)
    return v
