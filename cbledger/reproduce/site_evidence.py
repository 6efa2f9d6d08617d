"""Gathers what each run's page shows from the preserved bundles and the ledger: the I/O edge of
the site, so `projections.site` renders from data alone.

A run is restored the way `replay --verify` restores it (the seed rebuilt from the fixture of the
suite version it was made under, its bundle fetched), then read: the transcript into turns, the
end state against the baseline as a unified diff, the kicad-cli reports into counts. A run that
cannot be restored gets a page that says why; nothing here raises for one run's evidence.
Everything read is fixed by the ledger (the bundle's BLAKE3 and the kept definitions are
recorded), so the gathered data, and the pages, are the same on every machine that has them.
"""

from __future__ import annotations

import json
import shutil
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import msgspec
import pygit2

from cbledger import scratch as scratch_dir
from cbledger.errors import UserError
from cbledger.grading.evidence import bundle
from cbledger.grading.evidence.transcript import RUNS_PREFIX, Transcript, classify_tool_result
from cbledger.kicad.reports import parse_report
from cbledger.ledger.events import RunRecorded
from cbledger.ledger.recorder import CorruptRecord
from cbledger.ledger.store import LedgerStore
from cbledger.projections.fold import LedgerState, PassEntry, RunEntry
from cbledger.projections.site.evidence import ChainLink, ReportCounts, RunEvidence, ToolCall, Turn
from cbledger.reproduce import evidence_cache
from cbledger.reproduce.restore import RestoredRun, restore_run
from cbledger.reproduce.runs import Suites, restore_catalog
from cbledger.reproduce.verify import prepare_suites
from cbledger.tasks.catalog import Catalog, Fixture
from cbledger.workspace import Workspace

#: A turn's text and a diff are cut here: a page is for reading, the bundle keeps every byte.
TURN_LIMIT = 20_000
DIFF_LIMIT = 300_000
_RUN_TYPES = {"run.recorded", "grade.recorded", "run.retracted", "rubric.scored", "cassette.attached"}


def _cut(text: str, limit: int = TURN_LIMIT) -> tuple[str, bool]:
    return (text, False) if len(text) <= limit else (text[:limit], True)


def _json(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False)


def turns(transcript: Transcript) -> list[Turn]:
    """The transcript as a conversation: the request, each answer with its tool calls, each tool
    result (with copperhead's error category, if it is one), and every other event by type."""
    out: list[Turn] = []
    for ev in transcript.events:
        data = ev.data
        if ev.type == "run-start":
            text, cut = _cut(str(data.get("request", "")))
            out.append(Turn(kind="request", title="request", text=text, truncated=cut))
        elif ev.type == "assistant":
            calls = [
                ToolCall(name=str(c.get("name")), args=_cut(_json(c.get("args", {})))[0])
                for c in data.get("toolCalls") or [] if isinstance(c, dict)
            ]
            text, cut = _cut(str(data.get("text") or ""))
            out.append(Turn(kind="assistant", title="assistant", text=text, calls=calls, truncated=cut))
        elif ev.type == "tool":
            result = data.get("result")
            raw = result if isinstance(result, str) else _json(result)
            text, cut = _cut(raw)
            out.append(Turn(kind="tool", title=str(data.get("name")), text=text, args=_cut(_json(data.get("args", {})))[0],
                            error=classify_tool_result(raw), truncated=cut))
        else:
            text, cut = _cut(_json(data))
            out.append(Turn(kind="event", title=ev.type, text=text, truncated=cut))
    return out


def report_counts(data: bytes, source: str) -> ReportCounts:
    report = parse_report(json.loads(data), source)
    by_type = Counter(f"{v.source}:{v.type}" for v in report.violations if v.severity in ("error", "warning"))
    return ReportCounts(
        errors=sum(1 for v in report.violations if v.severity == "error"),
        warnings=sum(1 for v in report.violations if v.severity == "warning"),
        by_type=sorted(by_type.items()),
    )


def unified_diff(repo: pygit2.Repository, baseline_sha: str, capture_sha: str, limit: int | None = DIFF_LIMIT) -> tuple[str, bool]:
    """The end state against the baseline, the transcript directory left out (the page shows it
    as a conversation)."""
    old = repo[baseline_sha].peel(pygit2.Commit).tree
    new = repo[capture_sha].peel(pygit2.Commit).tree
    diff = old.diff_to_tree(new, context_lines=3)
    parts = [p.text or "" for p in diff if p is not None and not p.delta.new_file.path.startswith(RUNS_PREFIX)]
    text = "".join(parts)
    return (text, False) if limit is None else _cut(text, limit)


def _counts(reports: dict[str, bytes | None], where: str) -> dict[str, ReportCounts]:
    out = {}
    for kind in ("erc", "drc"):
        data = reports.get(kind)
        if data is None:
            continue
        try:
            out[kind] = report_counts(data, f"{where} {kind}.json")
        except (UserError, ValueError):
            continue
    return out


def from_restored(restored: RestoredRun, run: RunRecorded, diff_limit: int | None = DIFF_LIMIT) -> RunEvidence:
    """The page's evidence from a run already restored: `replay --verify` restores each run once
    and hands the same repository to the re-grade and to this (`cbledger.reproduce.runs`)."""
    try:
        if restored.repo is None or not restored.complete or restored.failures:
            # a bundle that does not match its recorded digest is not shown as the run's evidence
            why = "; ".join(f.message if f.file is None or f.file in f.message else f"{f.message}: {f.file}"
                            for f in restored.failures) or "the bundle could not be restored"
            return RunEvidence(problem=why, here_only=restored.unmaterialized and len(restored.failures) == 1)
        s = run.sandbox
        ev = bundle.from_repo(restored.repo, baseline_sha=s.baseline_sha, head_sha=s.head_sha,
                              capture_sha=s.capture_sha, evidence_sha=s.evidence_sha)
        diff, cut = unified_diff(restored.repo, s.baseline_sha, s.capture_sha, diff_limit)
        fixture: Fixture | None = restored.fixture
        before = _counts({k: fixture.baseline_report(k) for k in ("erc", "drc")}, "baseline") if fixture else {}
        return RunEvidence(
            turns=turns(ev.transcript), malformed=list(ev.transcript.malformed), diff=diff, diff_truncated=cut,
            before=before, after=_counts(dict(ev.reports), "end state"),
        )
    except (UserError, pygit2.GitError, OSError, KeyError, ValueError) as exc:
        return RunEvidence(problem=f"the preserved run could not be read: {exc}")


def _one(
    workspace: Workspace, catalog: Catalog, run: RunRecorded, seq: int, scratch: Path, diff_limit: int | None = DIFF_LIMIT
) -> RunEvidence:
    try:
        return from_restored(restore_run(workspace, catalog, run, seq, scratch / run.run_id), run, diff_limit)
    finally:
        shutil.rmtree(scratch / run.run_id, ignore_errors=True)


def _kept_or_read(
    workspace: Workspace, catalog: Catalog, run: RunRecorded, seq: int, scratch: Path, diff_limit: int | None,
    cache: evidence_cache.EvidenceCache | None,
) -> RunEvidence:
    key = None
    if cache is not None:
        try:
            key = cache.key(run, catalog.fixture(run.fixture.id))
        except UserError:  # no such fixture: the restore says so
            key = None
        kept = cache.get(key) if key is not None else None
        if kept is not None:
            return kept
    found = _one(workspace, catalog, run, seq, scratch, diff_limit)
    if cache is not None and key is not None:
        cache.put(key, found)
    return found


def chain_links(workspace: Workspace, run_ids: set[str]) -> dict[str, list[ChainLink]]:
    """Each run's own events (recorded, graded, scored, retracted) with their links, in order.
    Every event read is held to its link, whatever its type (a type edited in place would else
    hide it): the site names links, and a fold resumed from a snapshot never read the bytes
    before it, so this is where an edit there shows (`watch` stops publishing on it)."""
    out: dict[str, list[ChainLink]] = {}
    for stored in LedgerStore(workspace.ledger).read():
        if not stored.hashes_to_link():
            raise CorruptRecord(f"seq {stored.seq}: the stored event does not hash to its link (edited in place?)")
        if stored.type not in _RUN_TYPES:
            continue
        run_id = getattr(getattr(stored.event, "body", None), "run_id", None)
        if run_id in run_ids:
            out.setdefault(run_id, []).append(ChainLink(seq=stored.seq, type=stored.type, hash=stored.hash, prev=stored.prev))
    return out


def catalogs(workspace: Workspace, state: LedgerState, run_ids: list[str], scratch: Path) -> dict[str, Catalog]:
    """The catalog each run is restored from: its suite version's kept definitions, laid out under
    `scratch`, or the working tree where there are none (a seed mismatch then says so)."""
    # a later feedback pass is restored like any run
    every: dict[str, RunEntry | PassEntry] = {**state.runs, **state.later_passes}
    versions = {every[r].run.comparability.suite_version for r in run_ids}
    suites: Suites
    suites, _problems = prepare_suites(workspace, state, versions, scratch)
    # as `replay --verify` restores it, so the site and the verification see the same evidence
    return {run_id: restore_catalog(workspace, every[run_id].run, suites) for run_id in run_ids}


def gather(
    workspace: Workspace, state: LedgerState, run_ids: Iterable[str] | None = None, *, diff_limit: int | None = DIFF_LIMIT,
    on_step: Callable[[int, int, str], None] | None = None, known: Mapping[str, RunEvidence] | None = None,
    cached: bool = False,
) -> dict[str, RunEvidence]:
    """The evidence of `run_ids` (default: every recorded run); `diff_limit` None keeps all of each diff.
    Restoring every bundle is the slow part of a first build, so `on_step(done, total, run_id)`
    hears each run read, for the command line's progress. A run in `known` (read from the
    restore `replay --verify` made for its re-grade) is not restored again; its chain is added.
    `cached`: read and keep each run's evidence in `$CBLEDGER_SITE_EVIDENCE_CACHE` when it names
    a directory (`evidence_cache`; never for verification)."""
    # a later feedback pass has a page too (`projections.site.render`)
    every: dict[str, RunEntry | PassEntry] = {**state.runs, **state.later_passes}
    wanted = sorted(every if run_ids is None else {r for r in run_ids if r in every})
    if not wanted:
        return {}
    known = known or {}
    links = chain_links(workspace, set(wanted))
    scratch = scratch_dir.mkdtemp("cbledger-site-")
    try:
        chosen = catalogs(workspace, state, [r for r in wanted if r not in known], scratch / "suites")
        kept_in = evidence_cache.directory() if cached else None
        cache = evidence_cache.EvidenceCache(kept_in, workspace, diff_limit) if kept_in is not None else None
        out: dict[str, RunEvidence] = {}
        for done, run_id in enumerate(wanted, start=1):
            entry = every[run_id]
            try:
                found = known[run_id] if run_id in known else _kept_or_read(
                    workspace, chosen[run_id], entry.run, entry.seq, scratch / "runs", diff_limit, cache)
            except (UserError, pygit2.GitError, OSError, KeyError, ValueError) as exc:
                found = RunEvidence(problem=f"the preserved run could not be read: {exc}")
            out[run_id] = msgspec.structs.replace(found, chain=links.get(run_id, []))
            if on_step is not None:
                on_step(done, len(wanted), run_id)
        return out
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


#: what `source` returns and `regenerate_all(site_evidence=…)` takes
SiteEvidenceSource = Callable[[LedgerState, Iterable[str] | None], dict[str, RunEvidence]]


def source(workspace: Workspace, on_step: Callable[[int, int, str], None] | None = None) -> SiteEvidenceSource:
    """`gather` bound to a workspace: what `regenerate_all(site_evidence=…)` takes."""
    return lambda state, run_ids: gather(workspace, state, run_ids, on_step=on_step, cached=True)
