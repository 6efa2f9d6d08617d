"""The committed ledger's state and a run page with hostile evidence, shared by the site tests."""

from __future__ import annotations

from pathlib import Path

from cbledger.projections.fold import LedgerState
from cbledger.projections.site.evidence import ChainLink, ReportCounts, RunEvidence, ToolCall, Turn
from cbledger.projections.writers import load_state
from cbledger.workspace import Workspace

REPO = Path(__file__).resolve().parent.parent
HOSTILE = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">'


def committed_state() -> LedgerState:
    return load_state(Workspace.at(REPO).ledger)


def hostile_evidence() -> RunEvidence:
    """Every field an agent's run controls, carrying markup that would run if not escaped."""
    return RunEvidence(
        turns=[
            Turn(kind="request", title="request", text=f"please {HOSTILE}"),
            Turn(kind="assistant", title="assistant", text=f"sure {HOSTILE}",
                 calls=[ToolCall(name=f"edit{HOSTILE}", args=f'{{"path": "{HOSTILE}"}}')]),
            Turn(kind="tool", title=f"read_file{HOSTILE}", text=f"result {HOSTILE}", args="{}", error="rejected-call"),
            Turn(kind="event", title=f"odd{HOSTILE}", text=HOSTILE),
        ],
        diff=f"--- a/x\n+++ b/x\n@@ -1 +1 @@\n-old\n+{HOSTILE}\n",
        before={"erc": ReportCounts(errors=0, warnings=1, by_type=[(f"erc:{HOSTILE}", 1)])},
        after={"erc": ReportCounts(errors=2, warnings=0, by_type=[(f"erc:{HOSTILE}", 2)])},
        chain=[ChainLink(seq=1, type="run.recorded", hash="a" * 64, prev="0" * 64)],
    )
