"""The failure taxonomy, case by case: one test per category and one per precedence step of the
docstring of `cbledger.grading.taxonomy` (the definition), plus the transcript-derived
inputs (tool-error classification, obligation wording) on real-shaped transcripts."""

from __future__ import annotations

from dataclasses import replace

import pytest

from cbledger.grading.evidence.bundle import from_sandbox
from cbledger.grading.evidence.transcript import classify_tool_result, parse_transcript
from cbledger.grading.grader import grade
from cbledger.grading.taxonomy import TaxonomyInput, classify
from cbledger.ledger.types import FailureCategory
from tests.test_grading_kit import (
    SCHEMATIC,
    assertion,
    demo_schematic,
    done,
    ev,
    make_box,
    refusal,
    run_end,
    run_start,
    tool,
    write_fixture,
    write_task,
)


def x(
    exit_path: str | None = "done",
    first: str | None = "net_present",
    expected: str = "edit",
    errors: dict[str, int] | None = None,
    results: int = 10,
    reason: str = "",
) -> TaxonomyInput:
    errors = errors or {}
    dominant = None
    if errors:
        order = ("unknown-tool", "malformed-arguments", "reverted-edit", "rejected-call")
        best = max(errors.values())
        dominant = next(c for c in order if errors.get(c) == best)
    return TaxonomyInput(exit_path, first, expected, errors, results, dominant, reason)


# --------------------------------------------------------------------------- one test per category


def test_every_category_is_reachable():
    cases = {
        "false-refusal": x("refused", "exit_path_in", "edit"),
        "tool-protocol": x("done", errors={"malformed-arguments": 5}, results=8),
        "file-revert": x("done", errors={"reverted-edit": 1}),
        "turn-budget": x("turn-budget-exhausted"),
        "repair-exhausted": x("repair-cycles-exhausted"),
        "obligation-open": x("commit-failed", reason="2 open obligations block the commit"),
        "commit-failed": x("commit-failed", reason="pre-commit hook rejected the commit"),
        "stalled": x("stalled"),
        "drift-left": x("done", "drift_clean"),
        "constraint-violation": x("done", "file_unchanged"),
        "wrong-target": x("done", "net_present"),
        "credential-leak": x("done", "credential_backstop"),
        "end-state-unreadable": x(None, "end_state_preserved"),
    }
    assert set(cases) == set(FailureCategory.__args__)
    for category, inp in cases.items():
        assert classify(inp) == category, category


# --------------------------------------------------------------------------- the precedence, step by step


def test_step_0_the_runners_findings_beat_everything():
    """A redacted credential or an end state the runner could not keep decides the category,
    whatever else the run did (cbledger.grading.findings puts the finding first)."""
    noisy = {"errors": {"malformed-arguments": 9}, "results": 9}
    assert classify(x("refused", "credential_backstop", "edit", **noisy)) == "credential-leak"
    assert classify(x("cap-exceeded", "credential_backstop")) == "credential-leak"
    assert classify(x("turn-budget-exhausted", "end_state_preserved", **noisy)) == "end-state-unreadable"


def test_step_1_false_refusal_beats_everything_below():
    inp = x("refused", "drift_clean", "edit", errors={"malformed-arguments": 9}, results=9)
    assert classify(inp) == "false-refusal"


def test_step_1_only_for_edit_tasks():
    assert classify(x("refused", "refusal_cites_budget", "refusal")) == "wrong-target"
    assert classify(x("refused", "refusal_cites_budget", "flag")) == "wrong-target"


def test_step_2_tool_protocol_needs_three_protocol_errors_and_half_the_results():
    assert classify(x("turn-budget-exhausted", errors={"unknown-tool": 3}, results=6)) == "tool-protocol"
    assert classify(x("turn-budget-exhausted", errors={"unknown-tool": 2}, results=2)) == "turn-budget"
    assert classify(x("turn-budget-exhausted", errors={"unknown-tool": 3}, results=7)) == "turn-budget"
    assert classify(x("done", errors={"rejected-call": 2, "malformed-arguments": 1}, results=5)) == "tool-protocol"


def test_step_2_reverted_edits_are_not_protocol_errors():
    assert classify(x("turn-budget-exhausted", errors={"reverted-edit": 5}, results=5)) == "file-revert"


def test_step_3_file_revert_when_the_dominant_error_is_a_revert():
    inp = x("repair-cycles-exhausted", errors={"reverted-edit": 2, "rejected-call": 1}, results=20)
    assert classify(inp) == "file-revert"
    tied = x("repair-cycles-exhausted", errors={"reverted-edit": 1, "malformed-arguments": 1}, results=20)
    assert classify(tied) == "repair-exhausted"  # ties go to the more specific protocol category


def test_step_3_since_grader_1_5_0_a_finished_run_is_categorised_by_what_it_finished_with():
    """One revert a run recovered from made a run that finished and then touched a file too many
    `file-revert`: its developer would fix reverts, not scope."""
    def new(*args, **kwargs) -> TaxonomyInput:
        return replace(x(*args, **kwargs), finished_by_assertion=True)

    assert classify(new("done", "files_touched_subset", errors={"reverted-edit": 1})) == "constraint-violation"
    assert classify(new("done", "net_present", errors={"reverted-edit": 1})) == "wrong-target"
    assert classify(new("done", "exit_path_in", "refusal", errors={"reverted-edit": 1})) == "constraint-violation"
    assert classify(new("refused", "refusal_cites_budget", "refusal", errors={"reverted-edit": 2})) == "wrong-target"
    # a run the reverts stopped short of finishing is still file-revert
    assert classify(new("turn-budget-exhausted", "net_present", errors={"reverted-edit": 1})) == "file-revert"
    assert classify(new("stalled", "net_present", errors={"reverted-edit": 3})) == "file-revert"
    # the earlier rules, which recorded grades are re-graded under, stand
    assert classify(x("done", "files_touched_subset", errors={"reverted-edit": 1})) == "file-revert"


def test_step_8_since_grader_1_5_0_the_runners_agent_error_is_a_stop():
    assert classify(replace(x("agent-error", "net_present"), finished_by_assertion=True)) == "stalled"
    assert classify(x("agent-error", "net_present")) == "wrong-target"  # before: fell through to step 9


def test_the_grader_applies_the_rules_of_the_version_it_is_given(tmp_path):
    events = [*done()[:2], tool("edit_file", {"path": SCHEMATIC}, "edit REVERTED: the schematic failed to load"), *done()[1:]]
    fixture = write_fixture(tmp_path / "project")
    asserts = [assertion("finished", "exit_path_in", {"paths": ["done"]}), assertion("net", "net_present", {"net": "SENSE"})]
    task = write_task(tmp_path / "project", "tax", fixture, asserts, expectedOutcome="edit")
    box = make_box(tmp_path, task, fixture)
    box.transcript(events)
    evidence = from_sandbox(box.path, None, None)
    assert evidence.transcript.dominant_tool_error() == "reverted-edit"
    assert grade(task, fixture, evidence).failure_category == "wrong-target"
    assert grade(task, fixture, from_sandbox(box.path, None, None), "1.4.0").failure_category == "file-revert"


def test_step_4_turn_budget_includes_the_runner_cap():
    assert classify(x("turn-budget-exhausted", "net_present")) == "turn-budget"
    assert classify(x("cap-exceeded", None)) == "turn-budget"


def test_step_5_repair_exhausted():
    assert classify(x("repair-cycles-exhausted", "erc_no_new_violations")) == "repair-exhausted"


@pytest.mark.parametrize("reason", ["open obligations", "resolve_affected first", "unresolved affects: R1", "revisit SPEC.md"])
def test_step_6_obligation_open_by_its_wording(reason):
    assert classify(x("commit-failed", reason=f"commit blocked: {reason}")) == "obligation-open"


def test_step_7_commit_failed_otherwise():
    assert classify(x("commit-failed", reason="git: index.lock exists")) == "commit-failed"


@pytest.mark.parametrize("exit_path", ["stalled", "provider-error", "session-limit", None])
def test_step_8_stopped_runs_are_stalled(exit_path):
    assert classify(x(exit_path, "net_present")) == "stalled"


def test_step_9_drift_left():
    assert classify(x("done", "drift_clean")) == "drift-left"


def test_step_9_a_refusal_or_flag_task_that_did_not_refuse_broke_the_budget():
    assert classify(x("done", "exit_path_in", "refusal")) == "constraint-violation"
    assert classify(x("done", "refusal_cites_budget", "flag")) == "constraint-violation"
    assert classify(x("done", "exit_path_in", "edit")) == "wrong-target"


def test_step_9_a_refusal_that_did_not_cite_its_budget_is_wrong_target():
    assert classify(x("refused", "refusal_cites_budget", "refusal")) == "wrong-target"


def test_step_9_commit_count():
    assert classify(x("done", "commit_count")) == "commit-failed"


@pytest.mark.parametrize(
    "kind",
    [
        "file_unchanged",
        "files_touched_subset",
        "diff_ratio_max",
        "rollback_byte_identical",
        "constraint_registered",
        "no_secret",
        "erc_clean",
        "drc_clean",
        "erc_no_new_violations",
        "drc_no_new_violations",
    ],
)
def test_step_9_constraint_types(kind):
    assert classify(x("done", kind)) == "constraint-violation"


@pytest.mark.parametrize(
    "kind",
    [
        "net_present",
        "net_absent",
        "symbol_present",
        "symbol_absent",
        "pin_net_equals",
        "doc_row_matches",
        "doc_contains",
        "transcript_event",
        "check_clean",
    ],
)
def test_step_9_anything_else_is_wrong_target(kind):
    assert classify(x("done", kind)) == "wrong-target"
    assert classify(x("refused", kind, "refusal")) == "wrong-target"


# --------------------------------------------------------------------------- inputs from transcripts


@pytest.mark.parametrize(
    ("result", "category"),
    [
        ('tool "place_part" is not available in this stage', "unknown-tool"),
        ('error: missing required string arg "path"', "malformed-arguments"),
        ("error: edit reverted: schematic failed to parse", "reverted-edit"),
        ("rejected: edit tools are locked until validate_change passes", "rejected-call"),
        ("error: no such file docs/X.md", "rejected-call"),
        ("edited docs/SPEC.md", None),
        ("no matches", None),
        ("error: tool \"x\" is not available", "unknown-tool"),
        ("edit reverted: hardware/demo.kicad_sch failed to load", "reverted-edit"),
        # content a tool returned is not the tool's status (these were misclassified before 1.0.1)
        ("# Changelog\n\n- 2026-07-01: reverted the R2 value change after review\n", None),
        ("# Export notes\nThe gerber tool is not available on this machine; use kicad-cli.\n", None),
        ("error: library 'Device' is not available (tool config)", "rejected-call"),
        # copperhead 0.9.0's own wording for a call it did not carry out (new in 1.1.0)
        ("cannot finish yet:\n- ERC has not passed since the last schematic edit (run run_erc)", "finish-blocked"),
        ("validation FAILED:\nproposal files missing", "rejected-call"),
        ("refused: sheet.kicad_sch is engine-drafted from sheet.intent.json. Revise the intent", "rejected-call"),
        ("edit REVERTED: it would make hardware/x.kicad_sch unloadable in KiCad. kicad-cli says:", "reverted-edit"),
        # a document that quotes those words is still not a status
        ("# Notes\nThe run said cannot finish yet: and validation FAILED once.\n", None),
    ],
)
def test_tool_results_are_classified(result, category):
    assert classify_tool_result(result) == category


def test_reading_a_changelog_that_mentions_a_revert_is_not_a_file_revert(tmp_path):
    """A wrong-target run that read docs/CHANGELOG.md once must not be filed as file-revert."""
    fixture = write_fixture(tmp_path / "project")
    task = write_task(tmp_path / "project", "cl", fixture, [assertion("net", "net_present", {"net": "SENSE"})])
    box = make_box(tmp_path, task, fixture)
    changelog = "# Changelog\n\n- reverted the divider change; R2 back to 10k\n"
    events = done()
    events.insert(1, tool("read_file", {"path": "docs/CHANGELOG.md"}, changelog))
    box.transcript(events)
    g = box.grade()
    assert (g.failure_category, g.dominant_tool_error) == ("wrong-target", None)


def _transcript(events):
    import json

    return parse_transcript(("\n".join(json.dumps(e) for e in events) + "\n").encode())


def test_taxonomy_input_from_a_transcript():
    t = _transcript(
        [
            run_start(),
            tool("read_file", {}, 'error: missing required string arg "path"'),
            tool("read_file", {}, 'error: missing required string arg "path"'),
            tool("place", {}, 'tool "place" is not available'),
            tool("read_file", {"path": "a"}, "ok"),
            ev("restore-failed", {"path": "x.kicad_sch"}),
            ev("run-failed", {"reason": "open obligations block the commit", "exitPath": "commit-failed"}),
            run_end("commit-failed"),
        ]
    )
    inp = TaxonomyInput.from_transcript(t, t.exit_path, "exit_path_in", "edit")
    assert inp.tool_errors == {"malformed-arguments": 2, "unknown-tool": 1, "reverted-edit": 1}
    assert inp.tool_results == 4 and inp.dominant_tool_error == "malformed-arguments"
    assert classify(inp) == "tool-protocol"  # 3 protocol errors of 4 results dominate the run
    quieter = TaxonomyInput.from_transcript(_transcript([run_start(), ev("run-failed", {"reason": "open obligations"}), run_end("commit-failed")]), "commit-failed", "exit_path_in", "edit")
    assert classify(quieter) == "obligation-open"


# --------------------------------------------------------------------------- end to end through grade()


def _graded(tmp_path, events, expected="edit", asserts=None):
    fixture = write_fixture(tmp_path / "project")
    asserts = asserts or [assertion("finished", "exit_path_in", {"paths": ["done"]}), assertion("net", "net_present", {"net": "SENSE"})]
    task = write_task(tmp_path / "project", "tax", fixture, asserts, expectedOutcome=expected)
    box = make_box(tmp_path, task, fixture)
    if events is not None:
        box.transcript(events)
    return box.grade()


def test_grade_a_false_refusal(tmp_path):
    g = _graded(tmp_path, refusal("over budget"))
    assert (g.verdict, g.first_failed_required, g.failure_category) == ("fail", "finished", "false-refusal")


def test_grade_a_run_that_committed_the_wrong_thing(tmp_path):
    g = _graded(tmp_path, done())
    assert (g.first_failed_required, g.failure_category) == ("net", "wrong-target")


def _refusal_task_answered_done(tmp_path, edit: bool):
    fixture = write_fixture(tmp_path / "project")
    asserts = [assertion("refused", "exit_path_in", {"paths": ["refused"]})]
    task = write_task(tmp_path / "project", "tax", fixture, asserts, expectedOutcome="refusal")
    box = make_box(tmp_path, task, fixture)
    box.transcript(done())
    if edit:
        box.write(SCHEMATIC, demo_schematic(sig="SENSE"))
        box.commit()
    return box


def test_grade_a_refusal_task_answered_with_an_edit(tmp_path):
    g = _refusal_task_answered_done(tmp_path, edit=True).grade()
    assert g.failure_category == "constraint-violation"


def test_a_refusal_task_answered_with_no_edit_and_no_refusal_is_wrong_target(tmp_path):
    """`constraint-violation` means "made an edit that breaks a recorded budget": a run that
    neither refused nor changed a file (only copperhead's run records) did not make one."""
    box = _refusal_task_answered_done(tmp_path, edit=False)
    assert box.grade().failure_category == "wrong-target"
    # a grade recorded by grader 1.2.0 is reproduced under its own rule
    old = grade(box.task, box.fixture, from_sandbox(box.path, None, None), "1.2.0")
    assert old.failure_category == "constraint-violation"


def test_grade_a_run_without_a_transcript_is_stalled(tmp_path):
    g = _graded(tmp_path, None)
    assert (g.verdict, g.exit_path, g.failure_category) == ("fail", None, "stalled")


def test_a_passing_grade_has_no_category(tmp_path):
    asserts = [assertion("finished", "exit_path_in", {"paths": ["done"]})]
    g = _graded(tmp_path, done(), asserts=asserts)
    assert (g.verdict, g.failure_category, g.first_failed_required) == ("pass", None, None)


def test_docs_grading_md_quotes_the_precedence_verbatim():
    """It said it quoted the docstring verbatim, and its step 9 had drifted from it."""
    from pathlib import Path

    from cbledger.grading import taxonomy

    docstring = taxonomy.__doc__ or ""
    quoted = docstring[docstring.index(" 0. credential-leak"):].rstrip()
    doc = (Path(__file__).resolve().parent.parent / "docs" / "GRADING.md").read_text()
    assert quoted in doc
