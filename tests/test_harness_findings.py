"""The harness findings section of LEADERBOARD.md: shown for the harness versions the ledger ran."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from cbledger.projections import harness_findings
from cbledger.projections.fold import LedgerState

REPO = Path(__file__).resolve().parent.parent


def _state(*versions: str | None) -> LedgerState:
    state = LedgerState()
    for n, v in enumerate(versions):
        state.runs[f"run-{n}"] = SimpleNamespace(run=SimpleNamespace(comparability=SimpleNamespace(copperhead_version=v)))  # type: ignore[assignment]
    return state


def test_the_finish_gate_finding_is_stated_while_the_ledger_holds_runs_of_that_version():
    lines = harness_findings.render(_state(None, "0.9.0"))
    assert lines[0] == "## Harness findings (about the harness, not any model)"
    text = "\n".join(lines)
    assert "**copperhead 0.9.0, the finish gate and real boards.**" in text
    assert "cannot finish any edit of the schematic or the board" in text


def test_no_section_for_a_ledger_without_runs_of_a_version_with_findings():
    assert harness_findings.render(_state()) == []
    assert harness_findings.render(_state(None, "1.0.0")) == []


def test_the_committed_leaderboard_states_it():
    board = (REPO / "LEADERBOARD.md").read_text(encoding="utf-8")
    assert "## Harness findings (about the harness, not any model)" in board
    assert board.index("## Harness findings") < board.index("## Benchmark card")
