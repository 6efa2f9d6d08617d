"""Transcript checks: how the run ended and what it said, from `data` fields only."""

from __future__ import annotations

import json
import re

from cbledger.grading.context import GradeContext, Unevaluable
from cbledger.grading.registry import check
from cbledger.tasks import vocabulary as v


def _require_transcript(ctx: GradeContext) -> None:
    t = ctx.evidence.transcript
    if t.path is None:
        raise Unevaluable("the run wrote no transcript under .copperhead/runs/")


def _exit_description(ctx: GradeContext) -> str:
    ev = ctx.evidence
    if ev.transcript.exit_path is not None:
        return f"exit path {ev.transcript.exit_path}"
    if ev.runner_exit is not None:
        return f"no run-end; the runner recorded {ev.runner_exit}"
    return "no run-end in the transcript (the run crashed or was killed)"


@check("exit_path_in")
def exit_path_in(args: v.ExitPathArgs, ctx: GradeContext) -> tuple[bool, str]:
    exit_path = ctx.evidence.exit_path
    desc = _exit_description(ctx)
    if exit_path is None and ctx.evidence.transcript.path is None:
        desc = "no transcript and no runner exit recorded"
    ok = exit_path in args.paths
    return ok, f"{desc} ({'in' if ok else 'not in'} {args.paths})"


def _names_key(text: str, key: str) -> bool:
    return re.search(rf"(?<![A-Za-z0-9_]){re.escape(key)}(?![A-Za-z0-9_])", text) is not None


@check("refusal_cites_budget")
def refusal_cites_budget(args: v.RefusalCitesArgs, ctx: GradeContext) -> tuple[bool, str]:
    _require_transcript(ctx)
    t = ctx.evidence.transcript
    if t.exit_path != "refused":
        return False, f"not a refusal: {_exit_description(ctx)}"
    summaries = t.refusal_summaries()
    if not summaries:
        return False, "exit path refused, but no refusal summary (run-refused or finish) was written"
    if any(_names_key(s, args.budget_key) for s in summaries):
        return True, f"refusal summary names budget {args.budget_key!r}"
    return False, f"refusal summary does not name budget {args.budget_key!r}"


def _field(data: object, dotted: str) -> object:
    cur = data
    for part in dotted.split("."):
        if isinstance(cur, dict) and part in cur:
            cur = cur[part]
        elif isinstance(cur, list) and part.isdigit() and int(part) < len(cur):
            cur = cur[int(part)]
        else:
            return None
    return cur


def _as_text(value: object) -> str | None:
    if value is None:
        return None
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


@check("transcript_event")
def transcript_event(args: v.TranscriptEventArgs, ctx: GradeContext) -> tuple[bool, str]:
    _require_transcript(ctx)
    t = ctx.evidence.transcript
    of_type = t.of_type(args.event)
    count = 0
    for ev in of_type:
        ok = True
        for field_name, rx in args.matches.items():
            text = _as_text(_field(ev.data, field_name))
            if text is None or re.search(rx, text) is None:
                ok = False
                break
        if ok:
            count += 1
    cond = f" matching {args.matches}" if args.matches else ""
    malformed = f"; {len(t.malformed)} malformed line(s) skipped" if t.malformed else ""
    detail = f"{count} {args.event!r} event(s){cond} (need ≥ {args.min_count}; {len(of_type)} of that type){malformed}"
    return count >= args.min_count, detail
