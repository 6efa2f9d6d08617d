"""End-state checks over the project's documents and copperhead's constraint registry."""

from __future__ import annotations

import json
import re

from cbledger.grading.context import GradeContext, Unevaluable
from cbledger.grading.registry import check
from cbledger.kicad.markdown import cell_text, tables
from cbledger.tasks import vocabulary as v

CONSTRAINTS_PATH = ".copperhead/constraints.json"


def _snippet(text: str, limit: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


@check("doc_contains")
def doc_contains(args: v.DocContainsArgs, ctx: GradeContext) -> tuple[bool, str]:
    text = ctx.doc_text(args.doc)
    m = re.search(args.pattern, text, re.MULTILINE)
    if args.absent:
        if m is None:
            return True, f"{args.doc} does not match /{args.pattern}/"
        line = text.count("\n", 0, m.start()) + 1
        return False, f"{args.doc}:{line} still matches /{args.pattern}/: {_snippet(m.group(0))!r}"
    if m is None:
        return False, f"{args.doc} does not match /{args.pattern}/"
    line = text.count("\n", 0, m.start()) + 1
    return True, f"{args.doc}:{line} matches /{args.pattern}/"


@check("doc_row_matches")
def doc_row_matches(args: v.DocRowArgs, ctx: GradeContext) -> tuple[bool, str]:
    text = ctx.doc_text(args.doc)
    found_column = False
    for table in tables(text):
        col = table.column(args.column)
        if col is None:
            continue
        found_column = True
        row = next((r for r in table.rows if cell_text(r[0]) == args.key.strip()), None)
        if row is None:
            continue
        cell = cell_text(row[col])
        if re.search(args.pattern, cell):
            return True, f"{args.doc}: row {args.key!r} column {args.column!r} is {cell!r}, matches /{args.pattern}/"
        return False, f"{args.doc}: row {args.key!r} column {args.column!r} is {cell!r}, does not match /{args.pattern}/"
    if not found_column:
        return False, f"{args.doc}: no table has a column {args.column!r}"
    return False, f"{args.doc}: no table row whose first cell is {args.key!r}"


@check("constraint_registered")
def constraint_registered(args: v.ConstraintArgs, ctx: GradeContext) -> tuple[bool, str]:
    raw = ctx.evidence.end.read(CONSTRAINTS_PATH)
    if raw is None:
        return False, f"{CONSTRAINTS_PATH} does not exist in the end state"
    try:
        registry = json.loads(raw)
    except ValueError as exc:
        raise Unevaluable(f"{CONSTRAINTS_PATH} is not valid JSON: {exc}") from None
    if not isinstance(registry, dict):
        raise Unevaluable(f"{CONSTRAINTS_PATH} is not a JSON object")
    entry = registry.get(args.key)
    if not isinstance(entry, dict):
        return False, f"constraint {args.key!r} is not registered"
    if args.source is not None:
        source = entry.get("source")
        if not isinstance(source, str) or not re.search(args.source, source):
            return False, f"constraint {args.key!r} has source {source!r}, not matching /{args.source}/"
    if args.affects:
        listed = entry.get("affects")
        have = listed if isinstance(listed, list) else []
        missing = [a for a in args.affects if a not in have]
        if missing:
            return False, f"constraint {args.key!r} does not list affects {missing}"
    bounds = {k: entry[k] for k in ("min", "max", "value", "forbidden") if k in entry}
    return True, f"constraint {args.key!r} is registered {json.dumps(bounds, sort_keys=True)}"
