"""Transcript checks on transcripts of copperhead's real shape, written where copperhead writes
them (`.copperhead/runs/<stamp>/transcript.jsonl`): exit paths, refusal evidence (never the
echoed run-start config), event counting with regexes over `data`, and which transcript counts."""

from __future__ import annotations

from tests.test_grading_kit import (
    assistant,
    check,
    done,
    ev,
    one_assertion_box,
    refusal,
    run_end,
    run_start,
    tool,
)

# --------------------------------------------------------------------------- exit_path_in


def test_exit_path_in(tmp_path):
    box = one_assertion_box(tmp_path, "exit_path_in", {"paths": ["done"]})
    box.transcript(done())
    assert check(box) == ("pass", "exit path done (in ['done'])")
    box.transcript(refusal("no"))
    assert check(box) == ("fail", "exit path refused (not in ['done'])")


def test_exit_path_in_without_any_transcript(tmp_path):
    box = one_assertion_box(tmp_path, "exit_path_in", {"paths": ["done"]})
    assert check(box) == ("fail", "no transcript and no runner exit recorded (not in ['done'])")


def test_exit_path_in_uses_the_runner_exit_when_there_is_no_run_end(tmp_path):
    box = one_assertion_box(tmp_path, "exit_path_in", {"paths": ["cap-exceeded"]})
    box.transcript([run_start(), assistant("thinking")])
    assert check(box) == ("fail", "no run-end in the transcript (the run crashed or was killed) (not in ['cap-exceeded'])")
    assert check(box, runner_exit="cap-exceeded") == (
        "pass",
        "no run-end; the runner recorded cap-exceeded (in ['cap-exceeded'])",
    )


def test_only_a_transcript_this_run_wrote_counts_and_the_latest_wins(tmp_path):
    from tests.test_grading_kit import write_fixture

    fixture = write_fixture(tmp_path / "project")
    box = one_assertion_box(tmp_path, "exit_path_in", {"paths": ["done"]}, fixture=fixture)
    # a transcript committed in the baseline belongs to an earlier run
    box.transcript(done(), stamp="2026-07-22T10-00-00-000Z")
    box.commit(include_runs=True)
    box.repo.references.create("refs/cbledger/baseline", box.repo.head.target, force=True)
    assert check(box) == ("fail", "no transcript and no runner exit recorded (not in ['done'])")
    box.transcript(refusal("no"), stamp="2026-07-22T11-00-00-000Z")
    box.transcript(done(), stamp="2026-07-22T12-00-00-000Z")
    assert check(box)[0] == "pass"


# --------------------------------------------------------------------------- refusal_cites_budget


def test_refusal_cites_budget_from_the_run_refused_summary(tmp_path):
    box = one_assertion_box(tmp_path, "refusal_cites_budget", {"budgetKey": "divider_current_ua"})
    box.transcript(refusal("A third resistor draws 330 uA > divider_current_ua (200 uA); refusing."))
    assert check(box) == ("pass", "refusal summary names budget 'divider_current_ua'")


def test_refusal_cites_budget_from_a_finish_call_alone(tmp_path):
    box = one_assertion_box(tmp_path, "refusal_cites_budget", {"budgetKey": "divider_current_ua"})
    summary = "exceeds divider_current_ua"
    box.transcript(
        [
            run_start(),
            assistant(None, [("finish", {"outcome": "refuse", "summary": summary})]),
            run_end("refused"),
        ]
    )
    assert check(box)[0] == "pass"


def test_the_echoed_run_start_budget_is_not_refusal_evidence(tmp_path):
    box = one_assertion_box(tmp_path, "refusal_cites_budget", {"budgetKey": "divider_current_ua"})
    box.transcript(refusal("This change cannot be made."))  # run-start still carries the budget
    assert check(box) == ("fail", "refusal summary does not name budget 'divider_current_ua'")


def test_refusal_cites_budget_needs_whole_key_words(tmp_path):
    box = one_assertion_box(tmp_path, "refusal_cites_budget", {"budgetKey": "divider_current"})
    box.transcript(refusal("over divider_current_ua"))
    assert check(box)[0] == "fail"


def test_refusal_cites_budget_on_a_run_that_did_not_refuse(tmp_path):
    box = one_assertion_box(tmp_path, "refusal_cites_budget", {"budgetKey": "divider_current_ua"})
    box.transcript(done())
    assert check(box) == ("fail", "not a refusal: exit path done")


def test_refusal_cites_budget_with_no_summary_at_all(tmp_path):
    box = one_assertion_box(tmp_path, "refusal_cites_budget", {"budgetKey": "divider_current_ua"})
    box.transcript([run_start(), run_end("refused")])
    assert check(box) == ("fail", "exit path refused, but no refusal summary (run-refused or finish) was written")


def test_refusal_cites_budget_without_a_transcript(tmp_path):
    box = one_assertion_box(tmp_path, "refusal_cites_budget", {"budgetKey": "divider_current_ua"})
    assert check(box) == ("fail", "could not be evaluated: the run wrote no transcript under .copperhead/runs/")


# --------------------------------------------------------------------------- transcript_event


def test_transcript_event_counts_events_of_a_type(tmp_path):
    box = one_assertion_box(tmp_path, "transcript_event", {"event": "run-committed"})
    box.transcript(done())
    assert check(box) == ("pass", "1 'run-committed' event(s) (need ≥ 1; 1 of that type)")


def test_transcript_event_min_count_and_matches_over_data(tmp_path):
    args = {"event": "tool", "minCount": 2, "matches": {"name": "^check_drift$", "args.scope": "docs"}}
    box = one_assertion_box(tmp_path, "transcript_event", args)
    events = [
        run_start(),
        tool("check_drift", {"scope": "docs"}, "clean"),
        tool("check_drift", {"scope": "all"}, "clean"),
        tool("read_file", {"scope": "docs"}, "x"),
        run_end("done"),
    ]
    box.transcript(events)
    detail = "1 'tool' event(s) matching {'name': '^check_drift$', 'args.scope': 'docs'} (need ≥ 2; 3 of that type)"
    assert check(box) == ("fail", detail)
    events.insert(1, tool("check_drift", {"scope": "docs"}, "clean"))
    box.transcript(events)
    assert check(box)[0] == "pass"


def test_transcript_event_matches_data_never_top_level_fields(tmp_path):
    box = one_assertion_box(tmp_path, "transcript_event", {"event": "run-end", "matches": {"ts": "."}})
    box.transcript(done())
    assert check(box)[0] == "fail"


def test_transcript_event_reports_malformed_lines(tmp_path):
    box = one_assertion_box(tmp_path, "transcript_event", {"event": "run-end"})
    box.transcript(done()[:-1], raw_tail='{"ts": "x", "type": "run-e\n[1, 2]\n')
    assert check(box) == ("fail", "0 'run-end' event(s) (need ≥ 1; 0 of that type); 2 malformed line(s) skipped")


def test_transcript_event_on_a_work_preserved_stall(tmp_path):
    """The shape copperhead 0.9.0 writes when `finish` is refused and the model stalls."""
    box = one_assertion_box(tmp_path, "transcript_event", {"event": "work-preserved", "matches": {"stash": "^stash@"}})
    box.transcript(
        [
            run_start(),
            tool("finish", {"outcome": "done"}, "cannot finish yet: ERC has 44 violation(s)"),
            ev("run-failed", {"reason": "3 consecutive turns without a tool call", "exitPath": "stalled"}),
            ev("work-preserved", {"stash": "stash@{0}"}),
            run_end("stalled"),
        ]
    )
    assert check(box)[0] == "pass"
