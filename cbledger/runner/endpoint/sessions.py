"""Which session script a run is served: `cbledger run --session NAME|PATH`.

A name selects each task's own `tasks/<id>/sessions/<NAME>.json` (a task carries its scripted
sessions beside its gold solution); a path (a file, or a directory of files) supplies sessions
that say which task they are for, or one session naming no task, which serves every run. Every
planned task must have one before anything runs.
"""

from __future__ import annotations

import re
from pathlib import Path

from cbledger.errors import UserError, did_you_mean
from cbledger.runner.endpoint import script
from cbledger.tasks.catalog import Catalog

SESSIONS_DIR = "sessions"
_NAME = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")


def session_path(catalog: Catalog, task_id: str, name: str) -> Path:
    return catalog.tasks_dir / task_id / SESSIONS_DIR / f"{name}.json"


def for_plan(catalog: Catalog, task_ids: list[str], session: str) -> dict[str, script.Session]:
    """The session of every planned task, keyed by task id; refuses a task without one."""
    if _NAME.match(session) and not Path(session).exists():
        out: dict[str, script.Session] = {}
        missing = []
        for task_id in task_ids:
            p = session_path(catalog, task_id, session)
            if not p.is_file():
                missing.append(task_id)
                continue
            s = script.load(p)
            if s.task not in (None, task_id):
                raise UserError(f"{p}: `task` is {s.task!r}, but the file is under task {task_id}")
            out[task_id] = s
        if missing:
            near = did_you_mean(session, {p.stem for t in missing for p in session_path(catalog, t, session).parent.glob("*.json")})
            shared = catalog.root / SESSIONS_DIR / f"{session}.json"
            if shared.is_file():  # the project's own sessions/, which a path names
                near = f"; the project's {SESSIONS_DIR}/{session}.json is named by its path: --session {SESSIONS_DIR}/{session}.json"
            raise UserError(f"no session script {session!r} for: {', '.join(missing)} (looked for tasks/<id>/{SESSIONS_DIR}/{session}.json){near}")
        return out
    loaded = script.load_all([Path(session)])
    if len(loaded) == 1 and loaded[0].task is None:
        # one session written for no task in particular (a loop, a model that does nothing):
        # it serves every planned run
        return dict.fromkeys(task_ids, loaded[0])
    found = script.by_task(loaded)
    missing = [t for t in task_ids if t not in found]
    if missing:
        raise UserError(f"{session}: no session script names task(s) {', '.join(missing)}")
    return {t: found[t] for t in task_ids}
