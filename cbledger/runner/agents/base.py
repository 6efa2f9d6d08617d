"""The agent interface and the transcript conventions shared by the scripted agents."""

from __future__ import annotations

import datetime as _dt
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from cbledger.ledger.events import Ablations, Cost, ModelIdentity
from cbledger.tasks.catalog import Fixture, Task

#: the fixed identity every commit in a sandbox is made under, the harness's and the scripted
#: agents' alike: never the operator's, so no one's name or e-mail reaches a preserved run
COPPERHEAD_SIGNATURE = ("copperhead", "copperhead@copperbench.invalid")

#: what the runner itself did to end a run, as `run.recorded` spells it
RunnerExit = Literal["cap-exceeded", "agent-error"]


@dataclass(frozen=True)
class AgentInput:
    run_id: str
    sandbox: Path
    task: Task
    fixture: Fixture
    model_id: str
    ablations: Ablations
    started_at: _dt.datetime
    baseline_sha: str
    options: dict[str, Any] = field(default_factory=dict)

    @property
    def max_turns(self) -> int:
        return self.ablations.max_turns or self.task.manifest.caps.turns


@dataclass(frozen=True)
class AgentResult:
    """How the agent stopped, as the runner saw it. The transcript's own `run-end` is evidence;
    these fields only record what the runner did (e.g. killing the run at its cap)."""

    runner_exit: RunnerExit | None = None
    note: str | None = None
    provider: str | None = None
    #: a replay carries the original run's model identity and cost instead of pricing anew
    model: ModelIdentity | None = None
    cost: Cost | None = None
    replay_of: str | None = None
    #: the harness process's exit code (None when killed, or for agents that are not a process)
    exit_code: int | None = None
    #: model ids a provider the runner itself served named in its answers (the loopback endpoint)
    provider_models: tuple[str, ...] = ()
    #: the model exchanges the recording proxy saw (a `cbledger.runner.cassette.Cassette`), when
    #: the run's route could be recorded
    cassette: Any = None
    #: what the loopback endpoint answered, request by request (a re-execution reads it)
    served: tuple = ()
    #: the project's scripted endpoint answered (its mark was on an answer): the run is
    #: recorded as `scripted` whatever the suite run's mode (`cbledger.runner.scripted_mark`)
    scripted: bool = False
    #: the money limit that stopped the run and its spend (`cbledger.runner.budget`)
    cost_cap: Any = None


class Agent(Protocol):
    kind: str  # also the run mode: agent | scripted | gold | noop | replay

    def run(self, inp: AgentInput) -> AgentResult: ...


def run_stamp(when: _dt.datetime) -> str:
    """copperhead's run directory name: the ISO start time with `:` and `.` replaced by `-`."""
    iso = when.astimezone(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{when.microsecond // 1000:03d}Z"
    return iso.replace(":", "-").replace(".", "-")


def iso(when: _dt.datetime) -> str:
    return when.astimezone(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{when.microsecond // 1000:03d}Z"


def write_transcript(sandbox: Path, started: _dt.datetime, events: list[dict]) -> Path:
    """The run directory a scripted agent leaves, as copperhead leaves one: the transcript and,
    beside it, a `summary.md`. Without the summary a gold run changed one path fewer than every
    real run, and a task whose `files_touched_subset` named the transcript alone passed its gold
    and failed every run of the harness."""
    path = sandbox / ".copperhead" / "runs" / run_stamp(started) / "transcript.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        for ev in events:
            f.write(json.dumps(ev, ensure_ascii=False) + "\n")
    start: dict = next((ev.get("data", {}) for ev in events if ev.get("type") == "run-start"), {})
    end: dict = next((ev.get("data", {}) for ev in reversed(events) if ev.get("type") == "run-end"), {})
    summary = [
        "# Run summary", "",
        f"- **Request:** {start.get('request', '')}",
        f"- **Outcome:** {end.get('exitPath', 'unknown')}",
        "- **Tokens:** 0 in / 0 out", "",
        "(a scripted agent's run: no model took part)",
    ]
    (path.parent / "summary.md").write_text("\n".join(summary) + "\n", encoding="utf-8")
    return path


def run_start_data(inp: AgentInput, provider: str) -> dict:
    art = inp.fixture.manifest.artifacts
    cfg = inp.task.manifest.config
    return {
        "request": inp.task.manifest.request.prompt,
        "model": inp.model_id,
        "provider": provider,
        "modelSource": "flag",
        "runId": run_stamp(inp.started_at),
        "startedAt": iso(inp.started_at),
        "command": inp.task.manifest.mode,
        "interactive": False,
        "stage": None,
        "brief": inp.task.manifest.request.brief_path,
        "versions": {"copperhead": None, "installPath": None, "kicadCli": None, "node": None, "platform": None},
        "config": {
            "schematic": art.schematic,
            "board": art.board,
            "docs": "docs",
            "maxTurns": inp.max_turns,
            "maxRepairCycles": cfg.max_repair_cycles,
            "budgets": dict(cfg.budgets),
        },
        "git": {"commit": inp.baseline_sha, "branch": "main", "dirty": False, "uncommittedFiles": [], "preCommitHookInstalled": False},
        "openConstraints": [],
        "priorRuns": [],
    }
