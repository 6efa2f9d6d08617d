"""What the runner found about a run that its grade must honour, read from `runner.json` in the
evidence commit.

Two findings fail a run whatever its assertions say, and each comes first among its outcomes, so
it is the first failed required assertion and decides the failure category:

* `credential-backstop` (category `credential-leak`): the run's output matched the credential
  pattern set. The standard says a match hard-fails the run; the runner redacts what matched,
  preserves the rest, and says so here, so the failure is recorded and re-graded like any other
  instead of vanishing with the secret.
* `end-state-preserved` (category `end-state-unreadable`): the runner could not read or keep the
  run's end state (the agent broke its repository, or a step after the agent failed); the run
  is recorded from its baseline with the reason.

The file is written by the runner after the agent has exited and its sandbox was taken back, and
replay reads it from the preserved bundle, so a re-grade reaches the same verdict.
"""

from __future__ import annotations

import json

from cbledger.grading.evidence.bundle import RUNNER_REPORT, Evidence
from cbledger.ledger.events import AssertionOutcome

BACKSTOP_TYPE = "credential_backstop"
UNREADABLE_TYPE = "end_state_preserved"
#: how many redactions a detail names (each is a kind and a place, never the text)
LISTED = 10


def read(evidence: Evidence) -> dict[str, object]:
    data = evidence.reports.get(RUNNER_REPORT)
    if data is None:
        return {}
    try:
        doc = json.loads(data)
    except ValueError:
        return {"unreadable": "runner.json in the evidence is not JSON"}
    return doc if isinstance(doc, dict) else {"unreadable": "runner.json in the evidence is not an object"}


def outcomes(evidence: Evidence) -> list[AssertionOutcome]:
    """The failed outcomes the runner's findings add in front of the task's own."""
    doc = read(evidence)
    out: list[AssertionOutcome] = []
    listed_redactions = doc.get("redactions")
    redactions = [r for r in listed_redactions if isinstance(r, dict)] if isinstance(listed_redactions, list) else []
    if redactions:
        listed = "; ".join(f"{r.get('kind')} at {r.get('location')}" for r in redactions[:LISTED])
        more = f" and {len(redactions) - LISTED} more" if len(redactions) > LISTED else ""
        out.append(_failed(
            "credential-backstop", BACKSTOP_TYPE,
            f"the credential backstop found {len(redactions)} match(es) and redacted them before preservation: {listed}{more}",
        ))
    unreadable = doc.get("unreadable")
    if isinstance(unreadable, str) and unreadable:
        out.append(_failed(
            "end-state-preserved", UNREADABLE_TYPE,
            f"the run's end state could not be preserved ({unreadable}); it is recorded from its baseline",
        ))
    return out


def _failed(id: str, type: str, detail: str) -> AssertionOutcome:
    return AssertionOutcome(
        id=id, type=type, status="fail", weight=1.0, required=True, evidence_source="end-state", detail=detail,
    )
