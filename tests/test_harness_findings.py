"""The harness findings section of LEADERBOARD.md: shown for the harness versions the ledger ran."""

from __future__ import annotations

from pathlib import Path

from cbledger.projections import harness_findings
from cbledger.projections.aggregates import Views
from cbledger.projections.fold import fold
from tests.factories import rich_stream

REPO = Path(__file__).resolve().parent.parent


def test_the_finish_gate_finding_is_stated_while_the_ledger_holds_runs_of_that_version():
    lines = harness_findings.render({None, "0.9.0"})
    assert lines[0] == "## Harness findings (about the harness, not any model)"
    text = "\n".join(lines)
    assert "**copperhead 0.9.0, the finish gate and real boards.**" in text
    assert "cannot finish any edit of the schematic or the board" in text


def test_no_section_for_a_ledger_without_runs_of_a_version_with_findings():
    assert harness_findings.render(set()) == []
    assert harness_findings.render({None, "1.0.0"}) == []


def test_the_versions_are_every_runs_retracted_ones_included():
    """LEADERBOARD.md reads them from the aggregates, tallied as runs fold (no pass over every run)."""
    state = fold(rich_stream().events)
    assert Views(state).harness_versions == {e.run.comparability.copperhead_version for e in state.runs.values()}
    assert state.retracted


def test_the_committed_leaderboard_states_it():
    board = (REPO / "LEADERBOARD.md").read_text(encoding="utf-8")
    assert "## Harness findings (about the harness, not any model)" in board
    assert board.index("## Harness findings") < board.index("## Benchmark card")
