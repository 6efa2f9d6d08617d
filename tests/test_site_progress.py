"""A first build of the site restores every preserved run, which takes seconds to minutes: the
command line shows one step per run read (a line each off a terminal), and `--json` keeps
stdout to the document."""

from __future__ import annotations

from cbledger.cli.project_commands import _site_source
from cbledger.reproduce.site_evidence import gather
from cbledger.workspace import Workspace
from tests.site_helpers import REPO, committed_state


def _two_synthetic_runs(state) -> list[str]:
    return [next(r for r in sorted(state.runs) if f"-{kind}-" in r) for kind in
            ("compat-scripted-solve-led-resistor-swap-v1", "harness-noop-mcu-rename-i2c-nets-v1")]


def test_gather_reports_each_run_it_reads_in_order():
    state = committed_state()
    chosen = _two_synthetic_runs(state)
    steps: list[tuple[int, int, str]] = []
    found = gather(Workspace.at(REPO), state, chosen, on_step=lambda *step: steps.append(step))
    assert set(found) == set(chosen)
    assert steps == [(1, 2, sorted(chosen)[0]), (2, 2, sorted(chosen)[1])]


def test_the_command_line_draws_a_line_per_run_off_a_terminal(capsys):
    state = committed_state()
    chosen = _two_synthetic_runs(state)
    source, progress = _site_source(Workspace.at(REPO), as_json=False)
    source(state, chosen)
    progress.close()
    captured = capsys.readouterr()
    lines = [line for line in captured.err.splitlines() if line.startswith("[")]
    assert lines == [f"[1/2] {sorted(chosen)[0]}", f"[2/2] {sorted(chosen)[1]}"]
    assert captured.out == ""


def test_json_output_stays_quiet_off_a_terminal(capsys):
    state = committed_state()
    source, progress = _site_source(Workspace.at(REPO), as_json=True)
    source(state, _two_synthetic_runs(state))
    progress.close()
    assert capsys.readouterr().err == ""
