"""Failures that are not the model's: the harness stopped before the model ever answered.

A run whose transcript holds no assistant turn never measured the model. copperhead refused
before its first call (a dirty tree, no kicad-cli), could not build its provider (no endpoint, no
key) or never got an answer from it; or, after the model's work, its commit failed because git
had no identity to commit under. Such a run is kept with its evidence (transcript, the harness's
stdout and stderr) and graded like any other, but it is marked so that no model metric counts it:
the leaderboard lists it in a section of its own with the reason.

The decision reads only what the run preserved, so it can be made again from a restored run.
"""

from __future__ import annotations

import re

from cbledger.grading.evidence.transcript import Transcript
from cbledger.ledger.events import HarnessFailure

_IDENTITY = re.compile(r"author identity unknown|please tell me who you are|empty ident|unable to auto-detect email", re.I)
_MISSING_KEY = re.compile(r"\b[A-Z][A-Z0-9_]*(KEY|TOKEN)[A-Z0-9_]* is not set\b")


def first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return line.strip()[:300]
    return ""


def detect(transcript: Transcript, stderr: str, exit_code: int | None, killed: bool) -> HarnessFailure | None:
    """The reason this run is not the model's, or None when the model took part in it."""
    said = first_line(stderr)
    if transcript.of_type("assistant"):
        for ev in transcript.of_type("run-failed"):
            reason = str(ev.data.get("reason", ""))
            if ev.data.get("exitPath") == "commit-failed" and _IDENTITY.search(reason):
                return HarnessFailure(kind="git-identity", detail=first_line(reason) or "git has no identity to commit under")
        return None
    if transcript.path is None:
        if killed:
            return HarnessFailure(kind="no-model-turn", detail="killed at the wall-clock cap before writing a transcript")
        return HarnessFailure(
            kind="preflight",
            detail=said or f"the harness exited {exit_code} before writing a transcript",
        )
    if not transcript.of_type("run-start"):
        return HarnessFailure(
            kind="missing-key" if _MISSING_KEY.search(stderr) else "provider-config", detail=said or f"the harness exited {exit_code} before its first model call")
    reasons = [first_line(str(ev.data.get("reason", ""))) for ev in transcript.of_type("run-failed")]
    detail = next((r for r in reasons if r), "") or said
    if killed:
        detail = detail or "killed at the wall-clock cap before the first model turn"
    return HarnessFailure(kind="no-model-turn", detail=detail or "the model never answered a turn")
