"""The scripted agents, `gold` and `noop`: the suite's own discrimination check.

`gold` applies `tasks/<id>/gold/` — `files/` (written or replaced at their tree paths),
`delete.txt` (paths to remove) and `transcript.jsonl` (copperhead's real event shape) — and
commits as copperhead would when the transcript says it committed. `noop` changes nothing and
claims `done`: a do-nothing model must fail every edit task and every refusal task's citation,
or the assertions are not measuring anything.

Transcripts are written where copperhead writes them, with run-time fields (`ts`, `runId`,
`startedAt`, `model`, the commit SHA) filled in, so graders read them exactly as they read a
real run's.
"""

from __future__ import annotations

import datetime as _dt
import json
import shutil
from pathlib import Path

import pygit2

from cbledger.credentials import printable
from cbledger.errors import UserError
from cbledger.runner import sandbox as sandbox_mod
from cbledger.runner.agents.base import (
    COPPERHEAD_SIGNATURE,
    AgentInput,
    AgentResult,
    iso,
    run_start_data,
    write_transcript,
)
from cbledger.tasks import gold as gold_rules

RUNS_DIR = ".copperhead/runs/"


def _commit_changes(repo: pygit2.Repository, message: str, when: int) -> tuple[str, list[str]]:
    """Stages every change outside `.copperhead/runs/` and commits it, like copperhead's commit."""
    index = repo.index
    index.read()
    status = repo.status()
    changed = sorted(p for p in status if not p.startswith(RUNS_DIR) and status[p] != pygit2.enums.FileStatus.IGNORED)
    for path in changed:
        if (Path(repo.workdir) / path).exists():
            index.add(path)
        else:
            index.remove(path)
    index.write()
    tree = index.write_tree()
    sig = sandbox_mod.signature(*COPPERHEAD_SIGNATURE, when)
    oid = repo.create_commit("HEAD", sig, sig, message, tree, [repo.head.target])
    return str(oid), changed


def _inside(sandbox: Path, rel: str) -> Path:
    """`rel` under the sandbox, refused when it, or a link on the way to it, leads outside: the
    last word on where a gold solution may write, whatever the checks before it said."""
    why = gold_rules.outside(rel)
    target = sandbox / rel
    root = sandbox.resolve()
    if why is None and root != target.parent.resolve() and root not in target.parent.resolve().parents:
        why = "leads outside the sandbox through a symbolic link"
    if why is not None:
        raise UserError(f"gold path {printable(rel)!r} {why}")
    return target


def _load_gold_transcript(path: Path) -> list[dict]:
    events = []
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError as exc:
            raise UserError(f"{path}:{lineno}: not JSON: {exc}") from None
        if not isinstance(obj, dict) or "type" not in obj:
            raise UserError(f"{path}:{lineno}: a transcript event needs a type")
        obj.setdefault("data", {})
        events.append(obj)
    return events


def _stamp_times(events: list[dict], started: _dt.datetime) -> None:
    for i, ev in enumerate(events):
        ev["ts"] = iso(started + _dt.timedelta(milliseconds=100 * i))


class GoldAgent:
    kind = "gold"

    def run(self, inp: AgentInput) -> AgentResult:
        gold = inp.task.gold_dir
        refused = gold_rules.problems(gold)
        if refused:
            listed = "; ".join(f"gold/{p.file}: {p.message}" for p in refused)
            raise UserError(f"task {inp.task.id}: the gold solution would act outside the sandbox: {listed}")
        transcript_path = gold / gold_rules.TRANSCRIPT
        if not transcript_path.is_file():
            raise UserError(f"{transcript_path}: the gold solution has no transcript")
        events = _load_gold_transcript(transcript_path)
        files = gold / gold_rules.FILES
        if files.is_dir():
            for src in sorted(files.rglob("*")):
                if src.is_file() and not src.is_symlink():
                    dest = _inside(inp.sandbox, src.relative_to(files).as_posix())
                    dest.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(src, dest, follow_symlinks=False)
        for rel in gold_rules.deletions(gold):
            _inside(inp.sandbox, rel).unlink(missing_ok=True)
        repo = pygit2.Repository(str(inp.sandbox))
        when = int(inp.started_at.timestamp())
        for ev in events:
            if ev["type"] == "run-start":
                ev["data"] = {**run_start_data(inp, "harness"), **{
                    k: v for k, v in ev["data"].items() if k not in ("runId", "startedAt", "model", "provider", "git")
                }}
            if ev["type"] == "run-committed":
                commit, changed = _commit_changes(repo, f"copperhead: {inp.task.manifest.request.prompt}\n", when)
                ev["data"] = {**ev["data"], "commit": commit, "files": changed}
        _stamp_times(events, inp.started_at)
        write_transcript(inp.sandbox, inp.started_at, events)
        return AgentResult(provider="harness")


class NoopAgent:
    kind = "noop"

    def run(self, inp: AgentInput) -> AgentResult:
        cfg = inp.task.manifest.config
        events = [
            {"type": "run-start", "data": run_start_data(inp, "harness")},
            {
                "type": "run-end",
                "data": {
                    "exitPath": "done",
                    "turnsUsed": 1,
                    "maxTurns": inp.max_turns,
                    "repairCyclesUsed": 0,
                    "maxRepairCycles": cfg.max_repair_cycles if cfg.max_repair_cycles is not None else 0,
                    "tokensIn": 0,
                    "tokensOut": 0,
                    "perTurn": [{"turn": 1, "in": 0, "out": 0}],
                    "durationMs": 0,
                },
            },
        ]
        _stamp_times(events, inp.started_at)
        write_transcript(inp.sandbox, inp.started_at, events)
        return AgentResult(provider="harness")
