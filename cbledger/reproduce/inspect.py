"""One recorded run, for a person: what `cbledger show RUN` prints and what `cbledger restore RUN
DIR` lays out.

`summary` is a pure reading of the folded state (the run, its grades, a retraction); the
transcript and the diff come from the preserved bundle through the site's gatherer, so the command
and the run's page show the same thing. `restore` rebuilds the run's repository as `replay
--verify` does and turns it into an ordinary git working copy: the agent's commits on a branch,
the baseline on another, and the captured end state checked out, ready to open in KiCad.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import msgspec
import pygit2

from cbledger import invocation
from cbledger.errors import UserError
from cbledger.grading.evidence.bundle import BASELINE_REF, CAPTURE_REF, EVIDENCE_REF
from cbledger.ledger.events import RunRecorded
from cbledger.projections import format as fmt
from cbledger.projections.fold import LedgerState, PassEntry, RunEntry, any_run
from cbledger.projections.records import record_paths
from cbledger.reproduce.restore import restore_run
from cbledger.reproduce.site_evidence import catalogs, gather
from cbledger.runner import pricing
from cbledger.runner.preserve import git_cli
from cbledger.workspace import Workspace, record_name

#: The branches a restored run has: the agent's last commit and the commit it started from.
RUN_BRANCH = "run"
BASELINE_BRANCH = "baseline"


def entry(state: LedgerState, run_id: str) -> RunEntry | PassEntry:
    """The run, a later feedback pass included (shown and restored like any run)."""
    found: RunEntry | PassEntry | None = any_run(state, run_id)
    if found is None:
        raise UserError(f"no run {run_id!r} is recorded in this ledger (`{invocation.command('log')}` lists the runs)")
    return found


def run_key(state: LedgerState, key: str) -> str:
    """The run id a user meant: the id itself, or the event id `run:<id>` that `show` and `log`
    print for its `run.recorded` event."""
    if key not in state.runs and key not in state.later_passes and key.startswith("run:"):
        return key.removeprefix("run:")
    return key


def summary(state: LedgerState, run_id: str) -> dict[str, Any]:
    """The run and every grade of it, camelCase like the records."""
    e = entry(state, run_id)
    run = e.run
    grades = state.grades.get(run_id) or {}
    retraction = state.retracted.get(run_id)
    latest = list(grades.values())[-1].grade if grades else None
    stats = run.stats
    return {
        "runId": run_id,
        "seq": e.seq,
        "task": {"id": run.task.id, "tier": run.task.tier, "mode": run.task.mode, "expectedOutcome": run.task.expected_outcome},
        "model": {"id": run.model.id, "segment": run.model.segment, "pinning": run.model.pinning},
        "runMode": run.run_mode,
        "verdict": "retracted" if retraction else (latest.verdict if latest else "ungraded"),
        "failureCategory": latest.failure_category if latest else None,
        "costUsdMicros": run.cost.usd_micros,
        "cost": fmt.usd_micros(run.cost.usd_micros),
        "priceTable": price_used(state, run),
        "tokensIn": stats.tokens_in if stats else None,
        "tokensOut": stats.tokens_out if stats else None,
        "turnsUsed": stats.turns_used if stats else None,
        "exitPath": stats.exit_path if stats else None,
        #: why the run is not the model's (the harness or its environment ended it), if it is not
        "harnessFailure": msgspec.to_builtins(run.harness_failure) if run.harness_failure is not None else None,
        #: the money limit that stopped the run, and what the runner noted of it
        "costCap": msgspec.to_builtins(run.cost_cap) if run.cost_cap else None,
        "runnerNote": run.runner_note,
        "startedAt": fmt.utc_stamp(run.timings.started_at),
        "suiteVersion": run.comparability.suite_version,
        "bundle": run.sandbox.store,
        "baselineSha": run.sandbox.baseline_sha,
        "headSha": run.sandbox.head_sha,
        "records": [record_name(p) for p, _s, _g in record_paths(state, run_id)],
        "retracted": None if retraction is None else {"seq": retraction.seq, "reason": retraction.reason},
        "grades": [
            {"suiteVersion": suite, "seq": g.seq, **msgspec.to_builtins(g.grade)} for suite, g in grades.items()
        ],
        **({"passes": msgspec.to_builtins(run.passes)} if run.passes else {}),
    }


def price_used(state: LedgerState, run: RunRecorded) -> dict[str, Any] | None:
    """The table a run was priced by (with what it inherited) and the rates it applied."""
    version = run.cost.price_table_version
    if version is None:
        return None
    # the tables published before the run, as the runner read them and `replay --verify` merges them
    entry = any_run(state, run.run_id)
    before = [p.body for p in state.pricing if entry is None or p.seq < entry.seq]
    table = pricing.as_of(before, version)
    found = pricing.route(run.model.id, table) if table is not None else None
    price = found.price if found is not None else None
    return {
        "version": version, "effectiveDate": table.effective_date.isoformat() if table is not None else None,
        "inputPerMTok": price.input if price else None, "outputPerMTok": price.output if price else None,
    }


def evidence(workspace: Workspace, state: LedgerState, run_id: str) -> dict[str, Any]:
    """The run's conversation and its whole diff against the baseline, from its bundle."""
    entry(state, run_id)
    ev = gather(workspace, state, [run_id], diff_limit=None)[run_id]
    if ev.problem is not None:
        raise UserError(f"run {run_id}: {ev.problem}")
    return msgspec.to_builtins(ev)


def _git(args: list[str], cwd: Path) -> None:
    proc = subprocess.run(
        [git_cli(), *args], cwd=cwd, capture_output=True, text=True, stdin=subprocess.DEVNULL,
        env={**os.environ, "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"},
    )
    if proc.returncode != 0:
        raise UserError(f"git {' '.join(args[:2])} in {cwd}: {proc.stderr.strip() or f'exit {proc.returncode}'}")


def restore(workspace: Workspace, state: LedgerState, run_id: str, into: Path) -> dict[str, str]:
    """Lays the run out at `into` (which must not exist, or be empty) as a git working copy: branch
    `run` at the agent's last commit, branch `baseline` at the commit it started from, the captured
    end state (uncommitted edits included) in the working tree and the index."""
    e = entry(state, run_id)
    if into.exists() and (not into.is_dir() or any(into.iterdir())):
        raise UserError(f"{into}: exists and is not an empty directory; restore writes a new one")
    s = e.run.sandbox
    made = not into.exists()
    scratch = Path(tempfile.mkdtemp(prefix="cbledger-restore-"))
    try:
        catalog = catalogs(workspace, state, [run_id], scratch)[run_id]
        into.mkdir(parents=True, exist_ok=True)
        restored = restore_run(workspace, catalog, e.run, e.seq, into / ".git")
        if restored.repo is None or not restored.complete:
            raise UserError(f"run {run_id}: " + ("; ".join(f.message for f in restored.failures) or "not restorable"))
        restored.repo.config["core.bare"] = False
        restored.repo.references.create(f"refs/heads/{BASELINE_BRANCH}", pygit2.Oid(hex=s.baseline_sha), force=True)
        # the refs a live sandbox has, from the run's record (older bundles carry none), so that
        # `cbledger grade TASK DIR` grades the restored run as recorded with no flags
        for ref, sha in ((BASELINE_REF, s.baseline_sha), (CAPTURE_REF, s.capture_sha), (EVIDENCE_REF, s.evidence_sha)):
            restored.repo.references.create(ref, pygit2.Oid(hex=sha), force=True)
        _git(["checkout", "-q", "-B", RUN_BRANCH, s.head_sha], into)
        _git(["restore", f"--source={s.capture_sha}", "--worktree", "--staged", "--", "."], into)
    except BaseException:
        if made:
            shutil.rmtree(into, ignore_errors=True)
        else:
            for child in into.iterdir():
                shutil.rmtree(child) if child.is_dir() else child.unlink()
        raise
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return {"runId": run_id, "directory": str(into), "branch": RUN_BRANCH, "headSha": s.head_sha,
            "baselineBranch": BASELINE_BRANCH, "baselineSha": s.baseline_sha, "endState": s.capture_sha}
