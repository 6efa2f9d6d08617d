"""How each run's processes were confined, as the views state it.

`run.recorded.isolation` says it for every run recorded since the agent sandbox exists. A run
recorded before then does not say, and needs no guess: no runner before the sandbox confined
anything, so every such run ran unsandboxed, as the operator, and is shown that way with the
reason. Nothing here reads a machine: it is a fold over what the events state.
"""

from __future__ import annotations

from typing import Literal

from msgspec import UNSET

from cbledger.ledger.events import RunRecorded

#: why a run is not sandboxed: it was run with `--unsandboxed`, or before the sandbox existed
Why = Literal["--unsandboxed", "before the sandbox"]


def isolation(run: RunRecorded) -> str:
    """`bubblewrap` or `unsandboxed`; a run that does not state it is `unsandboxed`."""
    return "unsandboxed" if run.isolation is UNSET else run.isolation


def why_unsandboxed(run: RunRecorded) -> Why | None:
    """None for a sandboxed run, else why it was not."""
    if run.isolation is UNSET:
        return "before the sandbox"
    if run.isolation == "unsandboxed":
        return "--unsandboxed"
    return None
