"""The suite version a run or a re-grade is made under, refused as the grader refuses it, with the
`suite bump` it suggests written for the workspace the user chose.

The refusal itself is the grader's (`suite_version.require_current`), whose code is part of every
suite version's hash and so cannot learn about `--results` or `--ledger`: its suggestion is
re-rendered here (cbledger/invocation.py), and the grader's words are otherwise kept.
"""

from __future__ import annotations

from cbledger import invocation
from cbledger.errors import UserError
from cbledger.grading import suite_version
from cbledger.runner.ledger_view import LedgerView
from cbledger.tasks import suite_archive
from cbledger.tasks.catalog import Catalog
from cbledger.workspace import Workspace

#: the suggestions the grader's refusals end with, as it writes them
_GRADER_SUGGESTS = {
    '`cbledger suite bump --reason "initial suite"`': ("suite", "bump", "--reason", "initial suite"),
    "`cbledger suite bump --reason …`": ("suite", "bump", "--reason", "…"),
}


def require(view: LedgerView, catalog: Catalog, task_ids: list[str], workspace: Workspace | None) -> str:
    """The recorded suite version, when the tasks on disk are the ones it recorded."""
    try:
        return suite_version.require_current(view.suite, catalog, task_ids, view.archived, workspace)
    except UserError as exc:
        message = str(exc)
        for written, words in _GRADER_SUGGESTS.items():
            message = message.replace(written, f"`{invocation.command(*words)}`")
        if view.archived is not None and workspace is not None:
            # the refusal names a changed task; the kept definitions say which of its files
            try:
                named = [d for d in suite_archive.named_differences(workspace, [], view.archived)
                         if any(d.startswith(f"task {t}: ") for t in task_ids)]
            except UserError:  # the kept definitions are missing or damaged: the refusal stands alone
                named = []
            head, sep, rest = message.partition(" as recorded (")
            inner, close, tail = rest.partition("); ")
            if named and sep and close:  # each `task T` of the refusal's list named with its files
                items = [next((n for n in named if n.startswith(f"{i}: ")), i) for i in inner.split(", ")]
                message = head + sep + ", ".join(items) + close + tail
        new = [t for t in task_ids if view.suite is not None and t not in view.suite.task_manifest_hashes]
        if new:
            # a new task's bump needs a gold that passes, which a draft run is how to get
            message += (f"; a task no version records yet ({', '.join(new)}) is run with --draft until its gold "
                        "passes (docs/AUTHORING.md, section 5)")
        raise UserError(message) from None
