"""How many feedback passes each task allows: `tasks/passes.json`.

The allowance is not in `task.json`: the standard's task schema is closed (its manifest hash
covers `task.json`, and an unknown field is a validation error for every consumer of the
standard), and a pass changes nothing a grade reads — every pass is graded by the same
assertions, and pass 1, the headline, is exactly the run a task without passes gets. It is not
a file under `tasks/<id>/` either: those are the suite's definitions, so granting a pass would
force a suite bump and split pass-1 runs that are the same runs into two comparability groups.
It is run policy, like `--jobs` or `--repeats`; each run records the allowance it ran under
(`run.recorded.passes.allowed`), so the by-pass figures say what they were made with.

```json
{"format": "cbledger-passes/1", "tasks": {"led-resistor-swap": 2}}
```

A task not listed allows one pass. `cbledger run --passes N` asks for up to N; each task gets
the smaller of N and its allowance.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from cbledger import inputs
from cbledger.errors import UserError
from cbledger.ledger.types import MAX_PASSES

if TYPE_CHECKING:
    from cbledger.tasks.catalog import Catalog

FORMAT = "cbledger-passes/1"
FILE = "passes.json"
MAX_BYTES = 1024 * 1024


def path(tasks_dir: Path) -> Path:
    return tasks_dir / FILE


def allowances(tasks_dir: Path, known: set[str] | None = None, modes: Mapping[str, str] | None = None) -> dict[str, int]:
    """task id -> passes allowed (only the listed tasks). Raises UserError naming the file and
    the field of the first problem `read` finds."""
    out, problems = read(tasks_dir, known, modes)
    if problems:
        field, why = problems[0]
        raise UserError(f"{path(tasks_dir)}: {field}: {why}")
    return out


def read(
    tasks_dir: Path, known: set[str] | None = None, modes: Mapping[str, str] | None = None,
) -> tuple[dict[str, int], list[tuple[str, str]]]:
    """The allowances of the entries that hold, and (field, why) for every entry that does not:
    an allowance out of 1..MAX_PASSES, (with `known`) a task that does not exist, or (with
    `modes`, task id -> mode) more than one pass for a task that is not a `do` task: a feedback
    pass is told its hints in the prompt, and copperhead's other modes take none, so its second
    pass never ran, and nothing said so. A file that is not such a document at all raises
    UserError naming it."""
    file = path(tasks_dir)
    if not file.exists():
        return {}, []
    doc = inputs.loads(inputs.read_regular(file, MAX_BYTES), str(file))
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise UserError(f"{file}: format: must be {FORMAT!r}")
    extra = sorted(set(doc) - {"format", "tasks"})
    if extra:
        raise UserError(f"{file}: {inputs.printable(extra[0])}: unknown field")
    tasks = doc.get("tasks", {})
    if not isinstance(tasks, dict):
        raise UserError(f"{file}: tasks: must be an object of task id to passes allowed")
    out: dict[str, int] = {}
    problems: list[tuple[str, str]] = []
    for task_id, n in tasks.items():
        where = f"tasks.{inputs.printable(task_id)}"
        mode = modes.get(task_id) if modes is not None else None
        if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_PASSES:
            problems.append((where, f"passes allowed must be an integer from 1 to {MAX_PASSES}"))
        elif known is not None and task_id not in known:
            problems.append((where, "no such task"))
        elif n > 1 and mode not in (None, "do"):
            problems.append((where, f"{n} passes allowed, but a feedback pass is told its hints in the prompt and "
                                    f"copperhead {mode} takes none: only a do task allows more than one"))
        else:
            out[task_id] = n
    return out, problems


def modes(catalog: Catalog) -> dict[str, str]:
    """Each task's mode, of the tasks whose manifest loads (`validate` names the others)."""
    out: dict[str, str] = {}
    for task_id in catalog.task_ids():
        try:
            out[task_id] = catalog.task(task_id).manifest.mode
        except (UserError, OSError, ValueError):
            continue
    return out


def granted(allowance: int, asked: int | None) -> int:
    """The passes one attempt takes: one unless asked, never more than the task allows."""
    if asked is None:
        return 1
    if asked < 1:
        raise UserError(f"--passes must be at least 1, not {asked}")
    return min(asked, allowance)
