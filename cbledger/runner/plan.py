"""The run plan: which (task, model, repeat) sandboxes a `cbledger run` will create.

Planning is pure and cheap so `--dry-run` can show exactly what a run would cost in sandboxes
before anything executes, and so preflight can refuse a bad plan before the first run starts.
"""

from __future__ import annotations

from dataclasses import dataclass

import msgspec

from cbledger import credentials
from cbledger.errors import UserError, did_you_mean
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
    #: the campaign the run fills a slot of (`runner.campaign`), its slot (the task's k-th
    #: repeat in the campaign) and the attempt at it; None: a run outside any campaign
    campaign: str | None = None
    slot: int = 0
    attempt: int = 1


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
    """A model id becomes a directory name (`:` → `-`), so it must be a safe path segment; it is
    recorded on every run, so it must not be a credential either."""
    _refuse_credential("--model", model)
    if not conforms(model, ModelId):
        raise UserError(
            f"model id {credentials.printable(model)!r} is not a safe path segment: use letters, digits and . _ : + - "
            "(no '/', no '..', at most 128 characters)"
        )


#: each ablation's flag, by its field in `run.recorded.ablations`
ABLATION_FLAGS = {
    "prompt_variant": "--prompt-variant",
    "max_turns": "--max-turns",
    "max_repair_cycles": "--max-repair-cycles",
    "tool_subset": "--tool-subset",
}


def check_ablations(ablations: Ablations) -> None:
    """Refuses, before any sandbox exists, an ablation `run.recorded` could not carry: a value
    outside its range (`--max-turns 0`), or a credential in a free-text one (it would be written
    on every run). Without this the run would execute and only its append would fail."""
    for name, flag in ABLATION_FLAGS.items():
        value = getattr(ablations, name)
        for text in (value if isinstance(value, list) else [value]):
            if isinstance(text, str):
                _refuse_credential(flag, text)
    try:
        msgspec.convert(msgspec.to_builtins(ablations), Ablations)
    except msgspec.ValidationError as exc:
        field = str(exc).rsplit("`$.", 1)[-1].rstrip("`").split("[", 1)[0]
        name = next((n for n in ABLATION_FLAGS if _camel(n) == field), "")
        flag = ABLATION_FLAGS.get(name, "an ablation")
        value = getattr(ablations, name) if name else None
        raise UserError(
            f"{flag} {credentials.printable(str(value))}: not a value run.recorded.ablations.{field} can hold "
            f"({str(exc).split(' - at ', 1)[0]}); nothing was run"
        ) from None


def check_jobs(jobs: int) -> None:
    if jobs < 1:
        raise UserError(f"--jobs {jobs}: at least one run must be able to run (--jobs 1 or more); nothing was run")


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def _refuse_credential(flag: str, value: str) -> None:
    found = credentials.scan_text(value, flag)
    if found:
        raise UserError(
            f"{flag} holds a credential ({', '.join(sorted({m.kind for m in found}))}): it would be recorded on every run; "
            "nothing was run"
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
        listed = f"{catalog.suites_dir / f'{suite}.json'}: tasks[{ids.index(missing[0])}]: " if suite else ""
        raise UserError(f"{listed}unknown task(s): {', '.join(missing)} (under {catalog.tasks_dir})"
                        f"{did_you_mean(missing[0], known)}")
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
    check_ablations(ablations)
    runs: list[PlannedRun] = []
    for task in select_tasks(catalog, suite, task_ids):
        n = repeats or task.manifest.default_repeats
        runs.extend(PlannedRun(task, model_id, r, n) for r in range(1, n + 1))
    return Plan(agent, model_id, ablations, tuple(runs))
