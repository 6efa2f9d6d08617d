"""`replay --verify`: the chain, every preserved run re-graded, every projection regenerated.

The reproduction promise is that a stranger with the repository, the ledger and the preserved
runs gets every published number back, offline. This checks the three things that promise rests
on, in the order in which each depends on the one before: the log is the log that was written
(the chain), each run's evidence is the evidence that was graded and today's grader still grades
it the same (the runs), and what is published is what the log folds to (the projections).

A broken chain stops verification there: every later check would compare against events that
can no longer be trusted, and the one finding that matters is where the chain broke.

Every grade is re-graded under the definitions of its own suite version (`results/suites/`,
recorded by `suite.archived`), and a recorded run or grade that could not be reproduced is not
silence: it is a *skip*, named with its reason, and it fails verification with its own exit
code unless the maintainer passes `--allow-skipped`.

Exit codes (documented in `cbledger replay --help` and docs/REPRODUCE.md): 0 verified; 1 the
chain is broken; 5 the ledger is not an extension of a signed checkpoint (`--checkpoint`, or one
it records: `reproduce/checkpoints.py`); 7 a suite version's kept definitions are missing or
differ from what the ledger recorded, or the working tree differs from the current suite's;
3 a run does not reproduce (a bundle, seed or evidence digest, or a re-grade, differs; evidence
reused by two runs; a grade without its run); 4 a projection differs from a regeneration; 6 a
recorded run or grade was not reproduced (skipped) and `--allow-skipped` was not given; 2
(raised as a usage error) bad options or no ledger. When several fail, the first of 1, 5, 7, 3,
4, 6 wins, in that order; after 1 or 5 nothing else is checked.
"""

from __future__ import annotations

import dataclasses
import re
import shutil
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, cast

from cbledger import invocation
from cbledger import scratch as scratch_dir
from cbledger.errors import UserError
from cbledger.ledger.events import GradeRecorded, GradeRecordedEvent
from cbledger.ledger.keys import VerifierKey
from cbledger.ledger.signed_checkpoint import SignedCheckpoint
from cbledger.ledger.store import LedgerStore
from cbledger.ledger.verify import ChainReport
from cbledger.projections import format as fmt
from cbledger.projections.fold import (
    LedgerState,
    PassEntry,
    RunEntry,
    current_suite,
    semver_key,
    suite_bump,
    unrecorded_spend,
)
from cbledger.projections.records import in_model_metrics
from cbledger.projections.writers import load_state
from cbledger.reproduce import worker
from cbledger.reproduce.checkpoints import (
    CheckpointsCheck,
    chain_and_checkpoints,
    none_by_named_keys,
    open_given,
    published_beside,
    self_brought,
    self_vouched,
    trusted_keys,
)
from cbledger.reproduce.figures import cost_findings
from cbledger.reproduce.findings import Finding, RunCheck
from cbledger.reproduce.imports import import_findings
from cbledger.reproduce.outputs import OutputsCheck, check_outputs, check_site, check_tables
from cbledger.reproduce.rubrics import rubric_findings, scored_versions
from cbledger.reproduce.runs import Suites, cassette_findings, check_run
from cbledger.tasks.definitions import differences
from cbledger.tasks.suite_archive import kept_definitions, on_disk, open_kept
from cbledger.workspace import Workspace

EXIT_OK = 0
EXIT_CHAIN = 1
EXIT_USAGE = 2
EXIT_RUNS = 3
EXIT_PROJECTIONS = 4
EXIT_CHECKPOINT = 5
EXIT_SKIPPED = 6
EXIT_DEFINITIONS = 7
#: an event this build cannot read as a newer cbledger's would fail (`versions.from_a_newer_build`):
#: not verified, and not called broken, since the remedy is an upgrade, not a restore
EXIT_UNREADABLE = 9

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
    allow_skipped: bool = False
    #: re-grade only runs after the newest signed checkpoint the ledger extends (`since` is set from it)
    since_checkpoint: bool = False


@dataclass(frozen=True)
class SinceCheckpoint:
    """The checkpoint `--since-checkpoint` resumed after: the runs it covers were verified by the
    chain and the checkpoint, not re-graded."""

    path: str | None
    size: int

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "size": self.size}


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
    #: the kept definitions of each suite version, and the working tree against the current one
    suite_failures: list[Finding] = field(default_factory=list)
    #: failures that belong to no run checked: a grade whose run was never recorded, an import not
    #: as it states, the cassette of a run --since left out
    orphan_failures: list[Finding] = field(default_factory=list)
    #: with --since-checkpoint: the checkpoint re-grading started after (None: there was none)
    since_checkpoint: SinceCheckpoint | None = None
    seconds: float = 0.0

    @property
    def run_failures(self) -> list[Finding]:
        return [f for r in self.runs for f in r.failures] + self.orphan_failures

    @property
    def skips(self) -> list[Finding]:
        return [f for r in self.runs for f in r.skips]

    @property
    def failures(self) -> list[Finding]:
        out = []
        if self.chain.problem is not None:
            p = self.chain.problem
            out.append(Finding(check="chain", kind=p.kind, message=p.message, seq=p.seq, line=p.line,
                               file=self.ledger))
        out += self.checkpoints.failures
        out += self.suite_failures
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
            unreadable = self.chain.problem is not None and self.chain.problem.kind == "unreadable"
            return EXIT_UNREADABLE if unreadable else EXIT_CHAIN
        if self.checkpoints.failures:
            return EXIT_CHECKPOINT
        if self.suite_failures:
            return EXIT_DEFINITIONS
        if self.run_failures:
            return EXIT_RUNS
        if self.outputs is not None and self.outputs.failures:
            return EXIT_PROJECTIONS
        if self.skips and not self.options.allow_skipped:
            return EXIT_SKIPPED
        return EXIT_OK

    def counts(self) -> dict[str, int]:
        c = {"selected": len(self.runs), "notSelected": self.runs_not_selected}
        for status in ("reproduced", "skipped", "failed", "retracted"):
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
                        "checkpoints": [str(p) for p in o.checkpoints], "allowSkipped": o.allow_skipped,
                        "sinceCheckpoint": o.since_checkpoint},
            "sinceCheckpoint": None if self.since_checkpoint is None else self.since_checkpoint.to_dict(),
            "chain": self.chain.to_dict(),
            "checkpoints": self.checkpoints.to_dict(),
            "runs": None if not self.runs_checked else {
                "counts": self.counts(),
                "results": [r.to_dict() for r in self.runs],
            },
            "projections": None if self.outputs is None else self.outputs.to_dict(),
            "failures": [f.to_dict() for f in self.failures],
            "skipped": [f.to_dict() for f in self.skips],
            "notes": [n.to_dict() for n in self.all_notes],
            "seconds": round(self.seconds, 3),
        }


@dataclass(frozen=True)
class _Job:
    run: Any
    seq: int
    grades: list
    #: (seq, reference) of the cassette attached to the run later, if any
    attached: tuple[int, Any] | None = None


def all_grades(workspace: Workspace) -> dict[str, list[tuple[int, GradeRecorded]]]:
    """Every `grade.recorded`, by run, in ledger order: a fold keeps only the first grade of a
    (run, suite version), and verification must re-grade every one."""
    out: dict[str, list[tuple[int, GradeRecorded]]] = {}
    for stored in LedgerStore(workspace.ledger).read(types={"grade.recorded"}):
        event = stored.event
        if isinstance(event, GradeRecordedEvent):
            out.setdefault(event.body.run_id, []).append((event.seq, event.body))
    return out


#: what one preserved run owns alone: a second run naming any of these copied another's evidence
_OWNED = (
    ("sandbox.store", lambda r: r.sandbox.store),
    ("sandbox.storeBlake3", lambda r: r.sandbox.store_blake3),
    ("sandbox.captureSha", lambda r: r.sandbox.capture_sha),
    ("sandbox.evidenceSha", lambda r: r.sandbox.evidence_sha),
)
_TRANSCRIPT = ("evidence.transcript", lambda r: r.evidence["transcript"].blake3 if "transcript" in r.evidence else None)


def reused_evidence(state: LedgerState) -> dict[str, list[Finding]]:
    """Runs that name a bundle, capture or evidence commit, or transcript an earlier run already
    owns. Copying a passing run's events under new ids, with byte copies of its bundle, would
    otherwise multiply one pass into many; the first run recorded keeps it, retracted or not.

    A transcript is owned only by a model's session: a scripted or harness session, a replay, or
    a run the harness ended before the model spoke writes the same transcript byte for byte each
    time it starts in the same second (that is what makes it re-executable), so two repeats of
    one can share it honestly. Their bundles and commits still differ (the capture names its run)."""
    owners: dict[tuple[str, str], str] = {}
    found: dict[str, list[Finding]] = {}
    every = _every_run(state)
    for rid, entry in sorted(every.items(), key=lambda kv: kv[1].seq):
        # the classifiers read only `entry.run`, which a later pass has too
        owned = (*_OWNED, _TRANSCRIPT) if in_model_metrics(cast(RunEntry, entry)) else _OWNED
        for name, get in owned:
            value = get(entry.run)
            if value is None:
                continue
            first = owners.setdefault((name, value), rid)
            if first != rid:
                found.setdefault(rid, []).append(Finding(
                    check="run", kind="evidence-reused", seq=entry.seq, run_id=rid, field=name, actual=value,
                    message=f"{name} {value} belongs to run {first} (seq {every[first].seq}); "
                            "a preserved run's evidence is one run's alone",
                ))
    return found


def _every_run(state: LedgerState) -> dict[str, RunEntry | PassEntry]:
    """Every recorded run, a feedback pass after the first included: each is preserved, so each
    is re-graded."""
    return {**state.runs, **state.later_passes}


def _operators_figures(state: LedgerState) -> list[Finding]:
    """What no check here re-derives, said rather than passed over: the spend of runs killed with
    their driver is the spend journal's, which is not preserved evidence (and an append by hand
    records any figure)."""
    spent = unrecorded_spend(state)
    if not spent:
        return []
    by = sorted({e.actor for e in spent})
    return [Finding(check="chain", kind="spend-not-rederived",
                    message=f"{len(spent)} spend.unrecorded figure(s), {fmt.usd_micros(sum(e.body.usd_micros for e in spent))} in "
                            f"all, recorded by {', '.join(by)}, are the operator's: no preserved evidence re-derives them")]


def unrecorded_bundles(state: LedgerState, workspace: Workspace) -> list[Finding]:
    """Bundles under the results' `runs/` that no run of the ledger names and no pending append
    waits for. A ledger whose last events were removed (with its records and outputs regenerated)
    is a valid chain that verified clean, yet its runs' bundles stay behind: said, for a cut no
    checkpoint covers shows nowhere else. A note, not a failure: a driver killed between writing
    a bundle and its append leaves one too, until its campaign runs again."""
    known = set(state.runs) | set(state.later_passes) | set(workspace.pending_run_ids(""))
    stray = sorted(path for run_id, path in workspace.bundles().items() if run_id not in known)
    if not stray:
        return []
    return [Finding(check="run", kind="bundle-unrecorded", file=workspace.shown_path(stray[0]),
                    message=f"{len(stray)} bundle(s) under {workspace.shown_path(workspace.runs)}/ name no run the ledger "
                            "records and wait for no append (the first is named): a ledger whose last events were "
                            "removed leaves its runs' bundles behind, and a run killed before its append leaves one "
                            "until its campaign runs again; a checkpoint published elsewhere says whether events are missing")]


def _graded_after(options: Options, grades: Iterable[tuple[int, GradeRecorded]]) -> bool:
    """With --since-checkpoint, a run the checkpoint covers is still re-graded when a grade of it
    landed after (a re-score): that grade is work no checkpoint has seen verified."""
    return options.since_checkpoint and options.since is not None and any(seq > options.since for seq, _ in grades)


def plan_runs(
    state: LedgerState, options: Options, grades: dict[str, list[tuple[int, GradeRecorded]]] | None = None
) -> tuple[list[_Job], list[RunCheck], int, list[Finding]]:
    """(runs to re-grade, retracted runs, runs left out by --since/--run, notes)."""
    every = _every_run(state)
    unknown = [rid for rid in options.run_ids if rid not in every]
    if unknown:
        raise UserError(f"--run: no run.recorded for {', '.join(unknown)}")
    if grades is None:
        grades = {rid: [(g.seq, g.grade) for g in per.values()] for rid, per in state.grades.items()}
    wanted = set(options.run_ids)
    jobs, skipped, not_selected = [], [], 0
    for rid, entry in every.items():
        if (wanted and rid not in wanted) or (options.since is not None and entry.seq <= options.since
                                              and not _graded_after(options, grades.get(rid, ()))):
            not_selected += 1
            continue
        if rid in state.retracted:
            r = state.retracted[rid]
            check = RunCheck(rid, entry.seq, entry.run.task.id, entry.run.model.id, entry.run.run_mode, status="retracted")
            check.note(Finding(check="run", kind="retracted", seq=r.seq, run_id=rid,
                               message=f"retracted at seq {r.seq} ({r.reason}); not in any view, not re-graded"))
            skipped.append(check)
            continue
        att = state.attachments.get(rid)
        jobs.append(_Job(entry.run, entry.seq, grades.get(rid, []), (att.seq, att.body.cassette) if att else None))
    notes = [
        Finding(check="run", kind="imported", seq=imp.seq,
                message=f"evidence.imported ({imp.body.ownership}, {imp.body.source}: {imp.body.original_path}) "
                        "is not a project-owned run and is not re-gradable; skipped")
        for imp in state.imports
    ]
    return jobs, skipped, not_selected, notes


def _cassettes_not_regraded(workspace: Workspace, state: LedgerState, jobs: list[_Job]) -> list[Finding]:
    """The cassettes of the runs `--since` (`--since-checkpoint`) does not re-grade: a checkpoint
    vouches for the events that record their digests, not for the files, and a cassette is what
    a re-execution serves. A digest costs little beside a re-grade, so every one is held to it."""
    chosen = {j.run.run_id for j in jobs}
    out: list[Finding] = []
    for rid, entry in _every_run(state).items():
        if rid in chosen or rid in state.retracted:
            continue
        att = state.attachments.get(rid)
        out += cassette_findings(workspace, entry.run, entry.seq, (att.seq, att.body.cassette) if att else None)
    return out


def orphan_grades(state: LedgerState, grades: dict[str, list[tuple[int, GradeRecorded]]]) -> list[Finding]:
    """Grades naming a run the ledger never recorded: nothing can reproduce them."""
    return [
        Finding(check="run", kind="grade-orphan", seq=gseq, run_id=rid, suite_version=g.suite_version,
                message=f"grade.recorded names run {rid}, which no run.recorded records")
        for rid, per in grades.items() if rid not in state.runs and rid not in state.later_passes
        for gseq, g in per
    ]


def prepare_suites(
    workspace: Workspace, state: LedgerState, versions: set[str], into: Path
) -> tuple[Suites, list[Finding]]:
    """Each suite version's kept definitions, checked against the ledger and laid out under
    `into`; a version without them is named with the reason its grades cannot be re-graded."""
    suites: Suites = {}
    failures: list[Finding] = []
    for version in sorted(versions, key=semver_key):
        bump = suite_bump(state, version)
        kept = state.archives.get(version)
        if bump is None:
            suites[version] = f"suite {version} was never recorded (no suite.bumped)"
            continue
        if kept is None:
            suites[version] = (f"suite {version} (seq {bump.seq}) has no kept definitions (no suite.archived): "
                               f"keep them with `{invocation.command('suite', 'archive', version, '--from-commit', 'REV')}`")
            continue
        opened = open_kept(workspace, kept.body, bump.body, into / version)
        for kind, message, file in opened.problems:
            failures.append(Finding(check="suite", kind=kind, seq=kept.seq, suite_version=version, file=file,
                                    message=message))
        damaged = _damaged_parts(opened.problems)
        if opened.catalog is not None and damaged is not None:
            # a damaged file grades nothing, but only the tasks it defines (or whose board it
            # is) are left un-regraded: every other grade of the version is still checked
            suites[version] = dataclasses.replace(opened.catalog, damaged=damaged)
        else:
            suites[version] = f"suite {version}'s kept definitions do not verify ({len(opened.problems)} problem(s))"
    return suites, failures


_PART = re.compile(r"(?:^|: )((?:tasks|fixtures)/[^/]+)/")


def _damaged_parts(problems: list[tuple[str, str, str | None]]) -> dict[str, str] | None:
    """"tasks/<id>" or "fixtures/<id>" -> why, for problems that each name a file of one task or
    fixture (a kept copy damaged or missing, a real board's baseline changed); None when any
    problem is the whole version's (its manifest, a named suite)."""
    parts: dict[str, str] = {}
    for _kind, message, file in problems:
        found = _PART.search(file or "")
        if found is None:
            return None
        parts.setdefault(found.group(1), message)
    return parts


def working_tree_check(workspace: Workspace, state: LedgerState) -> list[Finding]:
    """The working tree against the current suite version's kept definitions: an edit to a task,
    its gold/, a fixture's baseline or fixture.json without a bump would grade new runs under a
    suite version that does not describe them."""
    current = current_suite(state)
    if current is None or current not in state.archives:
        return []
    kept = state.archives[current]
    if not (workspace.root / "tasks").is_dir():
        # not a project (a command run outside one): one line saying so, not every task "removed"
        return [Finding(check="suite", kind="no-working-tree", seq=kept.seq, suite_version=current,
                        message=f"{workspace.root} holds no tasks/: the working tree was not compared with suite "
                                f"{current} (run from the project, or pass --root DIR)")]
    try:
        recorded = kept_definitions(workspace, kept.body)
        now = on_disk(workspace)
    except UserError as exc:
        return [Finding(check="suite", kind="definitions-differ", seq=kept.seq, suite_version=current, message=str(exc))]
    return [
        Finding(check="suite", kind="definitions-differ", seq=kept.seq, suite_version=current,
                message=f"the working tree differs from suite {current} without a bump: {d}")
        for d in differences(recorded, now)
    ]


def _run_all(
    workspace: Workspace, jobs: list[_Job], suites: Suites, pool: worker.WorkerPool | None, progress: RunProgress | None,
    evidence: bool = False,
) -> list[RunCheck]:
    """`evidence`: each run's site evidence is read from the restore its re-grade uses."""
    results: list[RunCheck] = []
    total = len(jobs)
    if pool is None or total <= 1:
        for job in jobs:
            results.append(check_run(workspace, job.run, job.seq, job.grades, suites, job.attached, evidence))
            if progress:
                progress(len(results), total, results[-1])
        return results
    futures = [worker.check(pool, workspace, job.run, job.seq, job.grades, suites, job.attached, evidence) for job in jobs]
    for fut in as_completed(futures):
        results.append(fut.result())
        if progress:
            progress(len(results), total, results[-1])
    # Every run is back: the workers may wind down (an interpreter's exit takes a while) while
    # the parent finishes its own work; verify() joins them at the end.
    pool.wind_down()
    return results


def _outputs_ahead(state: LedgerState, workspace: Workspace) -> Future[OutputsCheck]:
    """The projections' check but the site's, started on a thread of the parent while the
    workers re-grade.

    It needs nothing from the runs, and it is most of what the parent does: run serially after
    the last run came back, it took as long as the runs' whole share of a `--jobs 2` verify,
    which was then no faster than the serial one. On its thread it costs the parent's idle time
    waiting for the workers (the wait releases the GIL). The site's check waits for the runs:
    it reads each page's evidence from the restore the run's re-grade made."""
    ahead = ThreadPoolExecutor(max_workers=1, thread_name_prefix="cbledger-outputs")
    future = ahead.submit(check_tables, state, workspace)
    ahead.shutdown(wait=False)  # the submitted check still runs to its end
    return future


def _after_checkpoint(
    report: VerifyReport, options: Options, notes: list[Finding], own: frozenset[VerifierKey] | set[VerifierKey] = frozenset(),
) -> Options:
    """`--since-checkpoint`: the options with `since` at the newest signed checkpoint the ledger
    was just shown to extend (every one given passed, or verification stopped before this); with
    none, every run is re-graded and a note says so. A checkpoint signed only by keys the results
    directory brings itself (`own`) is no place to start: a copy handed over, a grade forged and
    re-signed with a key generated into it, would then be re-graded by nobody."""
    def self_signed(c: SignedCheckpoint) -> bool:
        return bool(own) and all(k in own for k in c.signers)

    given = [(path, c) for path, c in report.checkpoints.given if not self_signed(c)]
    dropped = [c.size for _, c in report.checkpoints.given if self_signed(c)]
    if dropped:
        skipped = max(dropped)
        notes.append(Finding(
            check="checkpoint", kind="self-trusted-key",
            message=f"--since-checkpoint: the checkpoint of size {skipped} is signed only by a key this results "
                    "directory brings under its own keys/, so re-grading does not start after it (pass the "
                    "publisher's key with --key)",
        ))
    if not given:
        why = ("every one is signed only by a key of this results directory (above)" if dropped else
               "none kept beside the ledger, none given with --checkpoint")
        notes.append(Finding(
            check="checkpoint", kind="no-checkpoint",
            message=f"--since-checkpoint: no signed checkpoint to start after ({why}): every run is re-graded",
        ))
        return options
    path, newest = max(given, key=lambda pc: pc[1].size)
    report.since_checkpoint = SinceCheckpoint(path=path, size=newest.size)
    return replace(options, since=newest.size)


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
    if options.since_checkpoint and (options.since is not None or options.run_ids):
        raise UserError("--since-checkpoint chooses the runs itself: give it without --since or --run")
    # Processes, not threads: grading parses schematics in Python and holds the GIL. `spawn`, not
    # `fork`: the parent may run a progress thread, which a fork would copy mid-lock. Not
    # `forkserver` either: its server does not take the parent's sys.path, so a `cbledger/` in the
    # working directory could shadow the grader the parent runs; a spawned worker gets that path.
    pool = worker.start_pool(options.jobs) if options.jobs > 1 and not options.chain_only else None
    try:
        return _verify(workspace, options, pool, chain_progress, run_progress, on_runs_planned)
    finally:
        if pool is not None:
            pool.shutdown(cancel_futures=True)


def _verify(
    workspace: Workspace,
    options: Options,
    pool: worker.WorkerPool | None,
    chain_progress: Callable[[int, int], None] | None,
    run_progress: RunProgress | None,
    on_runs_planned: Callable[[int], None] | None,
) -> VerifyReport:
    started = time.perf_counter()
    keys = trusted_keys(workspace, options.keys)
    given = open_given(options.checkpoints, keys)
    beside: list[Finding] = []
    broken: list[Finding] = []
    if not given:
        given, beside, broken = published_beside(workspace, keys)
    chain, anchored = chain_and_checkpoints(workspace, given, keys, progress=chain_progress)
    anchored.notes[:0] = beside + self_vouched(workspace, options.keys, given)
    anchored.failures[:0] = broken
    report = VerifyReport(ledger=LedgerStore(workspace.ledger).location, root=str(workspace.root), options=options, chain=chain,
                          checkpoints=anchored)
    # no checkpoint by the named keys is a failure, but says nothing against the ledger's content:
    # its runs and outputs are still checked (a ledger with no checkpoint yet is one of those)
    unvouched = none_by_named_keys(options.keys, anchored)
    if not chain.ok or anchored.failures or options.chain_only:
        anchored.failures += unvouched
        if not options.chain_only and (not chain.ok or anchored.failures):
            unread = chain.problem is not None and chain.problem.kind == "unreadable"
            what = (f"the chain was not read past seq {chain.head.seq}" if unread
                    else "the chain is broken" if not chain.ok else "the ledger is not the one that was signed")
            report.notes.append(Finding(check="chain", kind="not-checked",
                                        message=f"runs and projections were not checked: {what}"))
        report.seconds = time.perf_counter() - started
        return report
    anchored.failures += unvouched
    early: list[Finding] = []
    if options.since_checkpoint:
        options = report.options = _after_checkpoint(report, options, early, self_brought(workspace, options.keys))
        # the state resumes from the latest snapshot the ledger confirms, as `cbledger project` does
        state = load_state(workspace.ledger, workspace.snapshots, lambda line: early.append(
            Finding(check="projection", kind="snapshot-ignored", message=line)))
    else:
        state = load_state(workspace.ledger)
    grades = all_grades(workspace)
    jobs, skipped, report.runs_not_selected, report.notes = plan_runs(state, options, grades)
    report.notes[:0] = early
    if not options.run_ids:
        report.notes += unrecorded_bundles(state, workspace)
        report.notes += _operators_figures(state)
    if state.head_seq != chain.head.seq:
        report.notes.insert(0, Finding(
            check="chain", kind="ledger-grew", seq=state.head_seq,
            message=f"events were appended while verifying: the chain was verified to seq {chain.head.seq}, "
                    f"runs and projections are checked against seq {state.head_seq}; run again for a quiet ledger",
        ))
    versions = {g.suite_version for job in jobs for _, g in job.grades}
    versions |= {job.run.comparability.suite_version for job in jobs}
    versions |= scored_versions(state)
    scratch = scratch_dir.mkdtemp("cbledger-suites-")
    try:
        suites, report.suite_failures = prepare_suites(workspace, state, versions, scratch)
        report.suite_failures += working_tree_check(workspace, state)
        report.suite_failures += rubric_findings(state, suites)
        if not options.run_ids and options.since is None:
            report.orphan_failures = orphan_grades(state, grades)
        if not options.run_ids:
            report.orphan_failures += import_findings(state, workspace)
        if not options.run_ids and options.since is not None:
            report.orphan_failures += _cassettes_not_regraded(workspace, state, jobs)
        if on_runs_planned:
            on_runs_planned(len(jobs))
        parallel = pool is not None and len(jobs) > 1
        outputs = _outputs_ahead(state, workspace) if parallel and options.projections else None
        checked = _run_all(workspace, jobs, suites, pool, run_progress, evidence=options.projections)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    # each run was restored once: its page's evidence came back with its check
    known = {c.run_id: c.evidence for c in checked if c.evidence is not None}
    for c in checked:
        c.evidence = None
    if outputs is not None:
        report.outputs = outputs.result()  # before anything else reads the state it reads
        check_site(state, workspace, report.outputs, known)
    reused, costs = reused_evidence(state), cost_findings(state)
    for check in checked:
        for f in reused.get(check.run_id, []) + costs.get(check.run_id, []):
            check.fail(f)
    report.runs = sorted(checked + skipped, key=lambda r: r.seq)
    report.runs_checked = True
    if options.projections and outputs is None:
        report.outputs = check_outputs(state, workspace, known)
    report.seconds = time.perf_counter() - started
    return report
