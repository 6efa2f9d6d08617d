"""`replay --verify`: the chain, every preserved run re-graded, every projection regenerated.

The reproduction promise is that a stranger with the repository, the ledger and the preserved
runs gets every published number back, offline. This checks the three things that promise rests
on, in the order in which each depends on the one before: the log is the log that was written
(the chain), each run's evidence is the evidence that was graded and today's grader still grades
it the same (the runs), and what is published is what the log folds to (the projections).

A broken chain stops verification there: every later check would compare against events that
can no longer be trusted, and the one finding that matters is where the chain broke.

Exit codes (documented in `cbledger replay --help` and docs/REPRODUCE.md): 0 verified; 1 the
chain is broken; 5 the ledger is not an extension of a signed checkpoint (`--checkpoint`, or one
it records: `reproduce/checkpoints.py`); 3 a run does not reproduce (a bundle, seed or evidence
digest, or a re-grade, differs); 4 a projection differs from a regeneration; 2 (raised as a usage
error) bad options or no ledger. When several fail, the first of 1, 5, 3, 4 wins, in that order;
after 1 or 5 nothing else is checked.
"""

from __future__ import annotations

import multiprocessing
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cbledger.errors import UserError
from cbledger.ledger.store import LedgerStore
from cbledger.ledger.verify import ChainReport
from cbledger.projections.fold import LedgerState
from cbledger.projections.writers import load_state
from cbledger.reproduce.checkpoints import (
    CheckpointsCheck,
    chain_and_checkpoints,
    open_given,
    trusted_keys,
)
from cbledger.reproduce.findings import Finding, RunCheck
from cbledger.reproduce.outputs import OutputsCheck, check_outputs
from cbledger.reproduce.runs import check_run
from cbledger.workspace import Workspace

EXIT_OK = 0
EXIT_CHAIN = 1
EXIT_USAGE = 2
EXIT_RUNS = 3
EXIT_PROJECTIONS = 4
EXIT_CHECKPOINT = 5

RunProgress = Callable[[int, int, RunCheck], None]


@dataclass(frozen=True)
class Options:
    chain_only: bool = False
    since: int | None = None
    run_ids: tuple[str, ...] = ()
    projections: bool = True
    jobs: int = 1
    checkpoints: tuple[Path, ...] = ()
    keys: tuple[Path, ...] = ()


@dataclass
class VerifyReport:
    ledger: str
    root: str
    options: Options
    chain: ChainReport
    checkpoints: CheckpointsCheck = field(default_factory=CheckpointsCheck)
    runs: list[RunCheck] = field(default_factory=list)
    runs_checked: bool = False
    runs_not_selected: int = 0
    outputs: OutputsCheck | None = None
    notes: list[Finding] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def run_failures(self) -> list[Finding]:
        return [f for r in self.runs for f in r.failures]

    @property
    def failures(self) -> list[Finding]:
        out = []
        if self.chain.problem is not None:
            p = self.chain.problem
            out.append(Finding(check="chain", kind=p.kind, message=p.message, seq=p.seq, line=p.line,
                               file=self.ledger))
        out += self.checkpoints.failures
        out += self.run_failures
        if self.outputs is not None:
            out += self.outputs.failures
        return out

    @property
    def all_notes(self) -> list[Finding]:
        return self.notes + self.checkpoints.notes + [n for r in self.runs for n in r.notes]

    @property
    def exit_code(self) -> int:
        if not self.chain.ok:
            return EXIT_CHAIN
        if self.checkpoints.failures:
            return EXIT_CHECKPOINT
        if self.run_failures:
            return EXIT_RUNS
        if self.outputs is not None and self.outputs.failures:
            return EXIT_PROJECTIONS
        return EXIT_OK

    def counts(self) -> dict[str, int]:
        c = {"selected": len(self.runs), "notSelected": self.runs_not_selected}
        for status in ("reproduced", "restored", "failed", "skipped"):
            c[status] = sum(1 for r in self.runs if r.status == status)
        return c

    def to_dict(self) -> dict[str, Any]:
        o = self.options
        return {
            "ok": self.exit_code == EXIT_OK,
            "exitCode": self.exit_code,
            "ledger": self.ledger,
            "root": self.root,
            "options": {"chainOnly": o.chain_only, "since": o.since, "runs": list(o.run_ids),
                        "projections": o.projections, "jobs": o.jobs,
                        "checkpoints": [str(p) for p in o.checkpoints]},
            "chain": self.chain.to_dict(),
            "checkpoints": self.checkpoints.to_dict(),
            "runs": None if not self.runs_checked else {
                "counts": self.counts(),
                "results": [r.to_dict() for r in self.runs],
            },
            "projections": None if self.outputs is None else self.outputs.to_dict(),
            "failures": [f.to_dict() for f in self.failures],
            "notes": [n.to_dict() for n in self.all_notes],
            "seconds": round(self.seconds, 3),
        }


@dataclass(frozen=True)
class _Job:
    run: Any
    seq: int
    grades: list


def plan_runs(state: LedgerState, options: Options) -> tuple[list[_Job], list[RunCheck], int, list[Finding]]:
    """(runs to re-grade, retracted runs skipped, runs left out by --since/--run, notes)."""
    unknown = [rid for rid in options.run_ids if rid not in state.runs]
    if unknown:
        raise UserError(f"--run: no run.recorded for {', '.join(unknown)}")
    wanted = set(options.run_ids)
    jobs, skipped, not_selected = [], [], 0
    for rid, entry in state.runs.items():
        if (wanted and rid not in wanted) or (options.since is not None and entry.seq <= options.since):
            not_selected += 1
            continue
        if rid in state.retracted:
            r = state.retracted[rid]
            check = RunCheck(rid, entry.seq, entry.run.task.id, entry.run.model.id, entry.run.run_mode, status="skipped")
            check.note(Finding(check="run", kind="retracted", seq=r.seq, run_id=rid,
                               message=f"retracted at seq {r.seq} ({r.reason}); not in any view, not re-graded"))
            skipped.append(check)
            continue
        grades = [(g.seq, g.grade) for g in state.grades.get(rid, {}).values()]
        jobs.append(_Job(entry.run, entry.seq, grades))
    notes = [
        Finding(check="run", kind="imported", seq=imp.seq,
                message=f"evidence.imported ({imp.body.ownership}, {imp.body.source}: {imp.body.original_path}) "
                        "is not a project-owned run and is not re-gradable; skipped")
        for imp in state.imports
    ]
    return jobs, skipped, not_selected, notes


def _run_all(workspace: Workspace, jobs: list[_Job], workers: int, progress: RunProgress | None) -> list[RunCheck]:
    results: list[RunCheck] = []
    total = len(jobs)
    if workers <= 1 or total <= 1:
        for job in jobs:
            results.append(check_run(workspace, job.run, job.seq, job.grades))
            if progress:
                progress(len(results), total, results[-1])
        return results
    # Processes, not threads: grading parses schematics in Python and holds the GIL. `spawn`, not
    # `fork`: the parent may run a progress thread, which a fork would copy mid-lock. Not
    # `forkserver` either: its server does not take the parent's sys.path, so a `cbledger/` in the
    # working directory could shadow the grader the parent runs; a spawned worker gets that path.
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
        futures = [pool.submit(check_run, workspace, job.run, job.seq, job.grades) for job in jobs]
        for fut in as_completed(futures):
            results.append(fut.result())
            if progress:
                progress(len(results), total, results[-1])
    return results


def verify(
    workspace: Workspace,
    options: Options,
    *,
    chain_progress: Callable[[int, int], None] | None = None,
    run_progress: RunProgress | None = None,
    on_runs_planned: Callable[[int], None] | None = None,
) -> VerifyReport:
    if options.jobs < 1:
        raise UserError("--jobs must be at least 1")
    if options.since is not None and options.since < 0:
        raise UserError("--since must be a seq (0 or more)")
    started = time.perf_counter()
    keys = trusted_keys(workspace, options.keys)
    given = open_given(options.checkpoints, keys)
    chain, anchored = chain_and_checkpoints(workspace, given, keys, progress=chain_progress)
    report = VerifyReport(ledger=LedgerStore(workspace.ledger).location, root=str(workspace.root), options=options, chain=chain,
                          checkpoints=anchored)
    if not chain.ok or anchored.failures or options.chain_only:
        if not options.chain_only and (not chain.ok or anchored.failures):
            what = "the chain is broken" if not chain.ok else "the ledger is not the one that was signed"
            report.notes.append(Finding(check="chain", kind="not-checked",
                                        message=f"runs and projections were not checked: {what}"))
        report.seconds = time.perf_counter() - started
        return report
    state = load_state(workspace.ledger)
    jobs, skipped, report.runs_not_selected, report.notes = plan_runs(state, options)
    if state.head_seq != chain.head.seq:
        report.notes.insert(0, Finding(
            check="chain", kind="ledger-grew", seq=state.head_seq,
            message=f"events were appended while verifying: the chain was verified to seq {chain.head.seq}, "
                    f"runs and projections are checked against seq {state.head_seq}; run again for a quiet ledger",
        ))
    if on_runs_planned:
        on_runs_planned(len(jobs))
    checked = _run_all(workspace, jobs, options.jobs, run_progress)
    report.runs = sorted(checked + skipped, key=lambda r: r.seq)
    report.runs_checked = True
    if options.projections:
        report.outputs = check_outputs(state, workspace)
    report.seconds = time.perf_counter() - started
    return report
