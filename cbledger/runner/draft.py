"""Draft runs: a task not yet in a bumped suite, run for its author in a scratch workspace.

A run is refused unless its task is the one the ledger's current suite version recorded, and a
suite version is recorded only after the task's gold passed (`suite bump`); the gold itself is
best taken from a run of the real harness (`fixture gold --from-sandbox`). `cbledger run TASK
--draft` breaks that circle without touching the project's record: the run goes to a fresh
results directory of its own, whose ledger records the tasks as they are on disk as a suite
version nobody published, and its sandboxes are kept for `fixture gold`. The project's ledger,
LEADERBOARD.md and every headline never see a draft; the scratch workspace is the author's to
inspect (`cbledger --results DIR show RUN`) and delete.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from cbledger import invocation
from cbledger.errors import UserError
from cbledger.grading import suite_version
from cbledger.ledger.events import Actor, SuiteBumped, make_event
from cbledger.ledger.store import LedgerStore
from cbledger.tasks import suite_archive
from cbledger.workspace import Workspace, same_directory

#: the suite version a draft workspace records: below every published one, so no record made
#: in it can be mistaken for a run of a published suite
DRAFT_VERSION = "0.0.1"
_ACTOR = Actor(kind="maintainer", name="cbledger-draft")


def workspace(project: Workspace, results: Path | None = None) -> Workspace:
    """A scratch workspace over the project's tasks, whose ledger records them as they are now.
    `results` (empty or absent: `cbledger --results DIR run --draft`) is where; by default a new
    temporary directory."""
    made = results is None
    if results is None:
        results = Path(tempfile.mkdtemp(prefix="cbledger-draft-"))
    elif results.exists() and any(results.iterdir()):
        raise UserError(f"{results}: a draft needs an empty results directory (it records its own ledger)")
    if project.results_dir is None and same_directory(results, project.results):
        raise UserError(f"{results}: a draft never runs in the project's own results directory")
    ws = Workspace.at(project.root, results=results)
    store = LedgerStore(ws.ledger)
    try:
        store.init("copperbench-draft", _ACTOR, "draft runs of tasks not yet in a bumped suite: not the project's record")
        try:
            body, kept = suite_version.bump_and_keep(None, ws, "draft: the tasks as they are on disk, unpublished", version=DRAFT_VERSION)
        except UserError as exc:
            # every task on disk goes into the draft's suite, so another task half-written stops this one's draft
            raise UserError(f"{exc}; a draft records every task and fixture on disk as its suite: fix that file, or move "
                            f"its task aside, to draft the others (`{invocation.command('validate', workspace=False)}` "
                            "lists every problem)") from None
        store.append([
            make_event(body, id=f"suite:{body.suite_version}", actor=_ACTOR),
            make_event(kept, id=suite_archive.event_id(kept), actor=_ACTOR),
        ])
    except BaseException:  # Ctrl-C or a refusal half way: a workspace without its suite is no draft
        discard(ws, made)
        raise
    return ws


def discard(ws: Workspace, made: bool) -> None:
    """Removes what `workspace` wrote (and the directory, when it `made` it): a draft refused
    before any run leaves no scratch workspace behind."""
    results = ws.results
    for child in list(results.iterdir()) if results.is_dir() else []:
        shutil.rmtree(child) if child.is_dir() and not child.is_symlink() else child.unlink()
    if made and results.is_dir():
        results.rmdir()


def is_draft(suite: SuiteBumped | None) -> bool:
    """Is this the suite `workspace` recorded? A campaign resumed in a draft's workspace
    (`cbledger --results DIR run --resume ID`) goes on as the draft did: sandboxes kept, no
    projections."""
    return suite is not None and suite.suite_version == DRAFT_VERSION
