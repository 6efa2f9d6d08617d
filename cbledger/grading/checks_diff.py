"""Diff checks: what the run changed, relative to the baseline commit.

Glob semantics for `files_touched_subset` (wcmatch, GLOBSTAR|DOTGLOB): `*` matches within one
path segment, `**` matches any number of segments including none (so `a/**/b` also matches
`a/b`), and dot-files are matched like any other name.
"""

from __future__ import annotations

from wcmatch import glob

from cbledger import credentials
from cbledger.grading.context import GradeContext
from cbledger.grading.evidence.diff import line_count
from cbledger.grading.evidence.transcript import RUNS_PREFIX
from cbledger.grading.registry import check
from cbledger.tasks import vocabulary as v

GLOB_FLAGS = glob.GLOBSTAR | glob.DOTGLOB


def matches_any(path: str, patterns: list[str]) -> bool:
    return glob.globmatch(path, patterns, flags=GLOB_FLAGS)


def _listing(paths: list[str], limit: int = 5) -> str:
    shown = ", ".join(paths[:limit])
    return shown + (f" and {len(paths) - limit} more" if len(paths) > limit else "")


@check("files_touched_subset")
def files_touched_subset(args: v.FilesTouchedArgs, ctx: GradeContext) -> tuple[bool, str]:
    changed = ctx.evidence.diff.paths
    outside = [p for p in changed if not matches_any(p, args.allowed)]
    if outside:
        return False, f"{len(outside)} of {len(changed)} changed path(s) outside the allowed set: {_listing(outside)}"
    return True, f"{len(changed)} changed path(s), all within the allowed set"


@check("file_unchanged")
def file_unchanged(args: v.PathArgs, ctx: GradeContext) -> tuple[bool, str]:
    change = ctx.evidence.diff.get(args.path)
    if change is None:
        if ctx.evidence.baseline.exists(args.path):
            return True, f"{args.path} is byte-identical to baseline, mode unchanged"
        return True, f"{args.path} is absent at baseline and at the end"
    if change.status == "deleted":
        return False, f"{args.path} was deleted"
    if change.status == "added":
        return False, f"{args.path} was created (absent at baseline)"
    if change.status == "mode":
        return False, f"{args.path} mode changed {change.old_mode:o} → {change.new_mode:o}"
    if change.binary:
        return False, f"{args.path} changed (binary)"
    return False, f"{args.path} changed: +{change.added} -{change.deleted} lines"


@check("diff_ratio_max")
def diff_ratio_max(args: v.DiffRatioArgs, ctx: GradeContext) -> tuple[bool, str]:
    before = ctx.evidence.baseline.read(args.path)
    if before is None:
        return False, f"{args.path} is absent at baseline, so a change ratio has no denominator"
    total = line_count(before)
    change = ctx.evidence.diff.get(args.path)
    if change is None:
        return True, f"0/{total} lines changed (0.00% ≤ {args.ratio:.2%})"
    if change.binary:
        return False, f"{args.path} changed as a binary file; lines cannot be counted"
    changed = change.added + change.deleted
    ratio = changed / total if total else float("inf")
    ok = ratio <= args.ratio
    rel = "≤" if ok else ">"
    shown = f"{ratio:.2%}" if total else "∞"
    return ok, f"{changed}/{total} lines changed (+{change.added} -{change.deleted}; {shown} {rel} {args.ratio:.2%})"


@check("commit_count")
def commit_count(args: v.CommitCountArgs, ctx: GradeContext) -> tuple[bool, str]:
    n = len(ctx.evidence.commits)
    if args.equals is not None:
        return n == args.equals, f"{n} commit(s) since baseline (expected exactly {args.equals})"
    assert args.max is not None
    return n <= args.max, f"{n} commit(s) since baseline (at most {args.max} allowed)"


@check("rollback_byte_identical")
def rollback_byte_identical(args: v.NoArgs, ctx: GradeContext) -> tuple[bool, str]:
    differing = [p for p in ctx.evidence.diff.paths if not p.startswith(RUNS_PREFIX)]
    if differing:
        return False, f"{len(differing)} path(s) differ from baseline: {_listing(differing)}"
    return True, f"tree equals the baseline byte for byte (ignoring {RUNS_PREFIX})"


@check("no_secret")
def no_secret(args: v.NoArgs, ctx: GradeContext) -> tuple[bool, str]:
    ev = ctx.evidence
    scanned = 0
    found: list[credentials.Match] = []
    paths = [c.path for c in ev.diff.changes.values() if c.status != "deleted"]
    transcript_path = ev.transcript.path
    if transcript_path and transcript_path not in paths:
        paths.append(transcript_path)
    for path in sorted(paths):
        data = ev.end.read(path)
        if data is None:
            continue
        scanned += 1
        found.extend(credentials.scan_bytes(data, path))
    if found:
        return False, "credential pattern matched: " + "; ".join(str(m) for m in found[:10])
    return True, f"no credential pattern matched in {scanned} written file(s)"
