"""The run plan: which (task, model, repeat) sandboxes a `cbledger run` will create.

Planning is pure and cheap so `--dry-run` can show exactly what a run would cost in sandboxes
before anything executes, and so preflight can refuse a bad plan before the first run starts.
"""

from __future__ import annotations

from dataclasses import dataclass

from cbledger.errors import UserError
from cbledger.ledger.events import Ablations
from cbledger.ledger.types import ModelId, conforms
from cbledger.tasks.catalog import Catalog, Task

AGENTS = ("gold", "noop", "copperhead", "replay")


@dataclass(frozen=True)
class PlannedRun:
    task: Task
    model_id: str
    repeat: int
    repeats_planned: int


@dataclass(frozen=True)
class Plan:
    agent: str
    model_id: str
    ablations: Ablations
    runs: tuple[PlannedRun, ...]

    @property
    def tasks(self) -> list[str]:
        return sorted({r.task.id for r in self.runs})


def model_for(agent: str, model: str | None) -> str:
    if agent in ("gold", "noop"):
        if model not in (None, f"harness:{agent}"):
            raise UserError(f"--agent {agent} is the scripted harness; it takes no --model (it records harness:{agent})")
        return f"harness:{agent}"
    if not model:
        raise UserError(f"--agent {agent} needs --model: there is no default model")
    check_model_id(model)
    return model


def check_model_id(model: str) -> None:
    """A model id becomes a directory name (`:` → `-`), so it must be a safe path segment."""
    if not conforms(model, ModelId):
        raise UserError(
            f"model id {model!r} is not a safe path segment: use letters, digits and . _ : + - "
            "(no '/', no '..', at most 128 characters)"
        )


def select_tasks(catalog: Catalog, suite: str | None, task_ids: list[str]) -> list[Task]:
    if suite and task_ids:
        raise UserError("give either --suite or task ids, not both")
    if suite:
        ids = list(catalog.suite(suite).tasks)
    elif task_ids:
        ids = task_ids
    else:
        raise UserError("say what to run: --suite smoke|full or one or more task ids")
    known = set(catalog.task_ids())
    missing = [t for t in ids if t not in known]
    if missing:
        raise UserError(f"unknown task(s): {', '.join(missing)} (under {catalog.tasks_dir})")
    return [catalog.task(t) for t in ids]


def make_plan(
    catalog: Catalog,
    *,
    agent: str,
    model: str | None,
    suite: str | None,
    task_ids: list[str],
    repeats: int | None,
    ablations: Ablations,
) -> Plan:
    if agent not in AGENTS:
        raise UserError(f"--agent must be one of {', '.join(AGENTS)}")
    model_id = model_for(agent, model)
    if repeats is not None and repeats < 1:
        raise UserError("--repeats must be at least 1")
    runs: list[PlannedRun] = []
    for task in select_tasks(catalog, suite, task_ids):
        n = repeats or task.manifest.default_repeats
        runs.extend(PlannedRun(task, model_id, r, n) for r in range(1, n + 1))
    return Plan(agent, model_id, ablations, tuple(runs))
