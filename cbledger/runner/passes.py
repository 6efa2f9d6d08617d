"""Feedback passes: one attempt at a task as up to N runs on one sandbox, each graded.

Pass 1 is an ordinary run. When it fails and the attempt may take another pass, each failed
assertion becomes a hint (`cbledger.grading.hints`, which never says what an assertion
expects), and the agent revises the sandbox as pass 1 left it, told only the original request
and the hints. Every pass is its own run: its own id, bundle and `run.recorded` (with
`passes`: its index, the allowance, pass 1's id and the hints it was given) and
`grade.recorded`, graded against the attempt's one baseline, so replay re-grades each pass's
end state exactly as it re-grades any run.

The route is a new `copperhead do` per pass. copperhead 0.9.0 has no resume, and its `repl`
with stdin not a terminal runs the request given on its command line and exits without reading
stdin, so a second message cannot reach one session (docs/RUNNER.md, section 12).

"As the previous pass left it": a pass that committed leaves its commits; one that failed was
rolled back by copperhead, which stashed its work. That stash is the work, so before the next
pass the runner applies it and commits everything the tree then differs by as a commit of its
own (`carry_over`) — copperhead's preflight refuses a dirty tree, so uncommitted work cannot be
handed on any other way. The attempt stops at the first pass that passes, at the allowance, or
at a pass whose end state had to be redacted or could not be preserved (nothing safe to go on
from).
"""

from __future__ import annotations

import datetime as _dt
import os
import secrets
import shutil
import subprocess
import time
from pathlib import Path

import pygit2

from cbledger.errors import UserError
from cbledger.grading import hints as hints_mod
from cbledger.ledger.events import PassRef
from cbledger.runner import execute as steps
from cbledger.runner import isolation, preserve
from cbledger.runner.plan import PlannedRun

#: where copperhead keeps its own record of each run (transcript, summary)
HARNESS_RUNS = ".copperhead/runs"
#: who makes the commit that carries a rolled-back pass's work into the next pass
CARRY_SIGNATURE = ("cbledger runner", "runner@copperbench.invalid")


def pass_run_id(first_run_id: str, index: int, in_campaign: bool = False) -> str:
    """Pass k's id: pass 1's with `-p<k>` and a suffix of its own, so passes sort together; in a
    campaign no suffix, since the id is its slot's (`runner.campaign.run_id`)."""
    return f"{first_run_id}-p{index}" if in_campaign else f"{first_run_id}-p{index}-{secrets.token_hex(2)}"


def _git(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [preserve.git_cli(), "-c", f"user.name={CARRY_SIGNATURE[0]}", "-c", f"user.email={CARRY_SIGNATURE[1]}",
         "-c", "core.hooksPath=/dev/null", *args],
        cwd=cwd, capture_output=True, text=True, stdin=subprocess.DEVNULL,
        env={**os.environ, "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C", "GIT_CONFIG_GLOBAL": os.devnull,
             "GIT_CONFIG_NOSYSTEM": "1"},
    )


def exclude_run_records(workdir: Path) -> list[str]:
    """copperhead commits its run record with the work of a run that commits; one that refused or
    failed leaves its record untracked, and the next `copperhead do` refuses that as a dirty tree.
    The record is the harness's log, not the agent's work, so it is neither committed nor moved:
    each one the tree holds untracked is named in the repository's own `.git/info/exclude`
    (part of no commit), and stays in the tree, where every later capture still holds it; a
    tracked one written after its commit is marked unchanged in the index, and stays so too."""
    runs = workdir / HARNESS_RUNS
    if runs.is_symlink() or not runs.is_dir():
        return []
    listed = _git(["ls-files", "-z", "--others", "--", HARNESS_RUNS + "/"], workdir)
    depth = HARNESS_RUNS.count("/") + 2  # .copperhead/runs/<stamp>
    names = sorted({"/".join(p.split("/")[:depth]) for p in listed.stdout.split("\0") if p.count("/") >= depth})
    if names:
        info = workdir / ".git" / "info"
        info.mkdir(exist_ok=True)
        with open(info / "exclude", "a", encoding="utf-8") as f:
            f.writelines(f"/{name}/\n" for name in names)
    # a run that committed committed its record too, and copperhead writes the record's last
    # lines after its commit: that tail is the log as well, and not the next pass's to find dirty
    tracked = _git(["ls-files", "-z", "--modified", "--", HARNESS_RUNS + "/"], workdir)
    written = [p for p in tracked.stdout.split("\0") if p]
    if written:
        _git(["update-index", "--assume-unchanged", "--", *written], workdir)
    return names


def carry_over(workdir: Path, index: int) -> bool:
    """Readies the sandbox for pass `index`: the previous pass's stash (a failed copperhead run's
    work) applied and dropped, and whatever the tree differs from HEAD by committed by the
    runner, so preflight sees a clean tree. The runner's own traces of the previous pass (its
    stash ref, the harness logs) are removed so the next pass's evidence holds only its own.
    Returns whether a commit was made."""
    repo = pygit2.Repository(str(workdir))
    if "refs/stash" in repo.references:
        applied = _git(["stash", "apply"], workdir)
        if applied.returncode != 0:
            raise UserError(f"pass {index}: the previous pass's stash does not apply: {applied.stderr.strip()[:300]}")
        _git(["stash", "drop"], workdir)
    if preserve.STASH_REF in repo.references:
        repo.references.delete(preserve.STASH_REF)
    shutil.rmtree(workdir / ".git" / preserve.AGENT_LOG_DIR, ignore_errors=True)
    exclude_run_records(workdir)
    status = _git(["status", "--porcelain"], workdir)
    if status.returncode != 0:
        raise UserError(f"pass {index}: git status failed: {status.stderr.strip()[:300]}")
    if not status.stdout.strip():
        return False
    for args in (["add", "-A"], ["commit", "--quiet", "--no-verify", "-m", f"runner: the work of pass {index - 1}, carried into pass {index}"]):
        done = _git(args, workdir)
        if done.returncode != 0:
            raise UserError(f"pass {index}: git {args[0]} failed: {done.stderr.strip()[:300]}")
    return True


def observed(graded: steps.Graded) -> hints_mod.Observed:
    evidence = graded.evidence
    return hints_mod.Observed(
        exit_path=evidence.exit_path, changed_paths=tuple(evidence.diff.paths), commits=len(evidence.commits),
    )


def _budget_spent(settings: steps.RunSettings) -> bool:
    """Whether the campaign's `--budget-usd` is spent: a pass started then would be refused at its
    first model call and recorded as a run the model never answered."""
    guard = getattr(getattr(settings, "agent", None), "money", None)
    return guard is not None and guard.purse.exhausted()


def execute_passes(settings: steps.RunSettings, planned: PlannedRun, allowed: int) -> list[steps.RunOutput]:
    """Steps 1–9 and 11 of a run (docs/RUNNER.md §2), with steps 4–9 repeated once per pass on
    the same sandbox. Returns every pass's output in order; publishing is the caller's."""
    task = planned.task
    outputs: list[steps.RunOutput] = []
    with steps.prepared_sandbox(settings, planned) as ready:
        start = ready.start
        run_start, ref = start, PassRef(index=1, allowed=allowed)
        options: dict[str, object] = {}
        for index in range(1, allowed + 1):
            isolation.give_up()  # after Ctrl-C (`--jobs N`), no further pass starts: the attempt is abandoned
            if index > 1 and _budget_spent(settings):
                break  # no further run starts once the campaign's budget is spent, a pass included
            try:
                agent_run = steps.run_agent(settings, planned, ready.fixture, run_start, ready.baseline, options)
            except Exception:
                if not outputs:
                    raise
                break  # the passes already made stand; this one never ran
            output, graded = steps.finish_or_record(settings, planned, ready, run_start, agent_run, ref)
            outputs.append(output)
            if graded is None:  # recorded from its baseline, failed; nothing to go on from
                break
            redacted = any(a.id == "credential-backstop" for a in output.grade.assertions)
            if output.grade.verdict == "pass" or redacted or index == allowed:
                break
            found = hints_mod.hints(task.assertions, output.grade.assertions, observed(graded))
            if not found:
                break
            carried = carry_over(run_start.workdir, index + 1)
            started = _dt.datetime.now(_dt.UTC)
            run_start = steps.RunStart(pass_run_id(start.run_id, index + 1, planned.campaign is not None), start.workdir, started, time.perf_counter())
            prompt = task.manifest.request.prompt or ""
            options = {"pass": index + 1, "message": hints_mod.message(prompt, found, carried)}
            ref = PassRef(
                index=index + 1, allowed=allowed, first=start.run_id, previous=output.run.run_id,
                hints=[h.text for h in found], carried_over=carried,
            )
    return outputs
