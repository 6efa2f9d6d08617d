"""A task's gold solution taken from a run of the real harness, so it is one copperhead can make.

A gold solution written by hand can be a run no harness would produce: edits without the change
proposal copperhead demands before it unlocks its edit tools, a commit without the `.history/`
line its commit step adds to `.gitignore`, a transcript in a shape it never writes. Taken from a
sandbox a scripted session drove to the correct end state (`cbledger run --session …
--keep-sandboxes`), the gold is exactly what the real harness left: every file the run changed
against its baseline (`gold/files/`), every file it removed (`gold/delete.txt`), and its own
transcript with the tokens zeroed and the install path dropped (`gold/transcript.jsonl`: no
model, and no copperhead, runs for the gold agent).
copperhead's run directory `.copperhead/runs/` is left out; the gold agent writes the transcript
there itself.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pygit2

from cbledger.errors import UserError
from cbledger.grading.evidence import transcript as transcript_mod
from cbledger.grading.evidence.bundle import BASELINE_REF
from cbledger.grading.evidence.tree import snapshot_directory, view
from cbledger.runner.sandbox import seed_message, seed_of
from cbledger.tasks.catalog import Task
from cbledger.tasks.fixtures.install import TreeFile, install_tree


@dataclass(frozen=True)
class GoldCapture:
    files: list[str]
    deleted: list[str]
    transcript_events: int


def _scrub(event: dict) -> dict:
    """No model ran for the gold agent and no copperhead either: the tokens are zeroed and the
    run-start's `versions` (which name the machine's install path) left for the gold agent to
    fill in."""
    data = event.get("data")
    if event.get("type") == "run-start" and isinstance(data, dict):
        return {**event, "data": {k: v for k, v in data.items() if k != "versions"}}
    if event.get("type") == "run-end" and isinstance(data, dict):
        data = dict(data)
        data["tokensIn"] = data["tokensOut"] = 0
        data["perTurn"] = [{**t, "in": 0, "out": 0} for t in data.get("perTurn") or [] if isinstance(t, dict)]
        return {**event, "data": data}
    return event


def _require_a_run_of(task: Task, sandbox: Path, repo: pygit2.Repository, baseline_sha: str, events: list) -> None:
    """Refuses a sandbox another task's run left: its seed names another fixture (the seed commit
    says which, `runner/sandbox.py`), or its harness was asked another prompt. Any sandbox once
    replaced the gold with that run's files, and a failing noop's emptied it."""
    seed = seed_of(repo, baseline_sha) if repo.get(baseline_sha) is not None else None
    expected = seed_message(task.manifest.fixture.id, task.manifest.fixture.sha256).strip()
    if seed is None or seed.message.strip() != expected:
        found = seed.message.strip() if seed is not None else "no seed commit"
        raise UserError(f"{sandbox}: not a run of {task.id}: its seed is {found!r}, {task.id}'s would be {expected!r}; "
                        "nothing replaced")
    prompt = task.manifest.request.prompt
    start = next((e.get("data") for e in events if e.get("type") == "run-start"), None)
    asked = start.get("request") if isinstance(start, dict) else None
    if task.manifest.mode == "sync":
        # copperhead asks its own fixed request of a sync run; the task's prompt never reaches it
        command = start.get("command") if isinstance(start, dict) else None
        if command != "sync":
            ran = f"ran {command!r}" if isinstance(command, str) else "names no command"
            raise UserError(f"{sandbox}: not a run of {task.id}: its harness {ran}, a sync task runs 'sync'; "
                            "nothing replaced")
    elif prompt and isinstance(asked, str) and asked != prompt:
        raise UserError(f"{sandbox}: not a run of {task.id}: its harness was asked {asked[:80]!r}…, not the task's prompt; "
                        "nothing replaced")


def capture(task: Task, sandbox: Path) -> GoldCapture:
    """Replaces `task`'s gold with what the run in `sandbox` left (see the module docstring)."""
    if not sandbox.is_dir():
        raise UserError(f"{sandbox}: no such directory (a run made with --keep-sandboxes or --draft names its sandbox)")
    try:
        repo = pygit2.Repository(str(sandbox))
        baseline_sha = str(repo.references[BASELINE_REF].target)
    except (pygit2.GitError, KeyError):
        raise UserError(f"{sandbox}: not a kept sandbox (no {BASELINE_REF}); run with --keep-sandboxes") from None
    before = view(repo, baseline_sha).files()
    end_view = view(repo, snapshot_directory(repo, sandbox))
    after = end_view.files()
    runs = transcript_mod.RUNS_PREFIX
    changed = sorted(p for p, e in after.items() if not p.startswith(runs) and (p not in before or before[p].oid != e.oid))
    deleted = sorted(p for p in before if p not in after and not p.startswith(runs))
    path, _ = transcript_mod.locate(end_view, view(repo, baseline_sha))
    if path is None:
        raise UserError(f"{sandbox}: the run wrote no transcript")
    events = [json.loads(line) for line in (end_view.read(path) or b"").decode().splitlines() if line.strip()]
    _require_a_run_of(task, sandbox, repo, baseline_sha, events)

    # the new gold staged whole and renamed over the old (`install_tree`): an interrupted capture
    # leaves the old gold or the new one, never a mix, and is run again from the same sandbox
    files = [TreeFile(f"files/{rel}", end_view.read(rel) or b"") for rel in changed]
    if deleted:
        files.append(TreeFile("delete.txt", "".join(f"{p}\n" for p in deleted).encode("utf-8")))
    lines = (json.dumps(_scrub(ev), ensure_ascii=False, separators=(",", ":")) + "\n" for ev in events)
    files.append(TreeFile("transcript.jsonl", "".join(lines).encode("utf-8")))
    install_tree(files, task.gold_dir)
    return GoldCapture(files=changed, deleted=deleted, transcript_events=len(events))
