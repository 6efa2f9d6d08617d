"""The one progress reporter (`cbledger/cli/progress.py`): a plain line per step off a terminal,
a live bar on one, nothing when quiet. That nothing below the command line draws is a rule of
tests/test_architecture.py."""

from __future__ import annotations

import io
from types import SimpleNamespace

from cbledger.cli.progress import Reporter, SuiteProgress, VerifyProgress, chain_progress
from cbledger.reproduce.findings import Finding, RunCheck


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _output(task: str, repeat: int, verdict: str, category: str | None = None, note: str | None = None):
    grade = SimpleNamespace(verdict=verdict, failure_category=category)
    return SimpleNamespace(grade=grade, run=SimpleNamespace(task=SimpleNamespace(id=task), repeat=repeat, runner_note=note))


def test_a_suite_run_off_a_terminal_is_one_line_per_run_with_the_tally():
    log = io.StringIO()
    progress = SuiteProgress(3, stream=log)
    progress(_output("rename-net", 1, "pass"), None, 1, 3)
    progress(_output("rename-net", 2, "fail", "wrong-edit"), None, 2, 3)
    progress(None, "rename-net r3: a secret was found", 3, 3)
    progress.close()
    lines = log.getvalue().splitlines()
    assert [line.split("  | ")[0] for line in lines] == [
        "[1/3] rename-net r1 pass",
        "[2/3] rename-net r2 fail (wrong-edit)",
        "[3/3] error: rename-net r3: a secret was found",
    ]
    assert [line.split(" | ")[1] for line in lines] == ["pass 1 fail 0", "pass 1 fail 1", "pass 1 fail 1 error 1"]
    assert all(" | elapsed " in line and " eta " in line for line in lines)


def test_a_session_script_the_harness_did_not_follow_is_said_on_the_runs_line():
    """An `expect` that did not match ended the run on a provider error, shown as `fail (stalled)`
    alone: the reason was only in `show --json`'s runnerNote, so a script's author read it as
    the harness's doing."""
    log = io.StringIO()
    progress = SuiteProgress(1, stream=log)
    why = "turn 4: session 'badexpect' turn 4: tool result 2 does not match '^drift: dirty' (it begins 'drift: clean')"
    progress(_output("dmx-task", 1, "fail", "stalled", note=f"copperhead exited 1; session script: {why}"), None, 1, 1)
    progress.close()
    lines = log.getvalue().splitlines()
    assert lines[0].startswith("[1/1] dmx-task r1 fail (stalled)")
    assert lines[1] == f"  dmx-task r1: the session script does not fit what the harness did: {why}"


def test_text_shown_above_a_live_bar_is_never_read_as_markup():
    """A note quoting a regular expression or a tool's output went through rich's markup:
    `[a-z]` was dropped and `[/x]` raised in the middle of a run."""
    screen = Terminal()
    progress = SuiteProgress(2, stream=screen)
    why = "turn 2: tool result 1 does not match '^[a-z]+ ok' (it begins '[/x] [bold]')"
    progress(_output("t", 1, "fail", "stalled", note=f"session script: {why}"), None, 1, 2)
    progress(None, "t r2: [seq 3, run r-2] [/x]", 2, 2)
    progress.close()
    drawn = screen.getvalue()
    assert "'^[a-z]+ ok' (it begins '[/x] [bold]')" in drawn and "t r2: [seq 3, run r-2] [/x]" in drawn, drawn


def test_verification_off_a_terminal_ends_each_line_with_the_run_status():
    log = io.StringIO()
    progress = VerifyProgress(stream=log)
    progress.start(2)
    ok = RunCheck("run-a", 3, "t", "m", "gold")
    bad = RunCheck("run-b", 5, "t", "m", "gold")
    bad.fail(Finding(check="run", kind="bundle-digest", message="changed"))
    progress(1, 2, ok)
    progress(2, 2, bad)
    progress.close()
    assert log.getvalue().splitlines() == ["[1/2] run-a reproduced", "[2/2] run-b failed (bundle-digest)"]


def test_quiet_prints_nothing():
    log = Terminal()
    progress = VerifyProgress(quiet=True, stream=log)
    progress.start(1)
    progress(1, 1, RunCheck("run-a", 3, "t", "m", "gold"))
    progress.close()
    assert log.getvalue() == ""


def test_on_a_terminal_a_bar_is_drawn_instead_of_lines_and_errors_stay_visible():
    screen = Terminal()
    progress = SuiteProgress(2, stream=screen)
    progress(_output("rename-net", 1, "pass"), None, 1, 2)
    progress(None, "rename-net r2: agent crashed", 2, 2)
    progress.close()
    drawn = screen.getvalue()
    assert "[1/2]" not in drawn and "2/2" in drawn
    assert "error: rename-net r2: agent crashed" in drawn and "pass 1 fail 0 error 1" in drawn


def test_the_chain_bar_is_only_for_a_terminal():
    assert chain_progress(io.StringIO()) is None
    screen = Terminal()
    update = chain_progress(screen)
    assert update is not None
    update(512, 1024)
    update(1024, 1024)
    assert "verifying chain" in screen.getvalue()


def test_a_byte_count_off_a_terminal_prints_nothing():
    log = io.StringIO()
    reporter = Reporter("bytes", stream=log, in_bytes=True)
    reporter.start(10)
    reporter.step(10, 10)
    reporter.close()
    assert log.getvalue() == ""



def test_a_fault_the_session_script_injects_on_purpose_is_no_misfit():
    """Every injected fault was printed as a session script that does not fit what the harness
    did, even on a run that passed: a fault campaign's real misfits were lost among them."""
    log = io.StringIO()
    progress = SuiteProgress(2, stream=log)
    progress(_output("dmx-task", 1, "pass", None, note="session script: turn 3: injected fault: HTTP 500"), None, 1, 2)
    misfit = "turn 4: tool result 2 does not match '^a; b' (it begins 'c')"
    progress(_output("dmx-task", 2, "fail", "stalled",
                     note=f"session script: turn 3: injected fault: reset; session script: {misfit}"), None, 2, 2)
    progress.close()
    lines = log.getvalue().splitlines()
    assert len(lines) == 3 and lines[0].startswith("[1/2] dmx-task r1 pass"), lines
    assert lines[2] == f"  dmx-task r2: the session script does not fit what the harness did: {misfit}"
