"""Real copperhead transcripts (copperhead 0.9.x `create` pipeline runs, from the shared data)
parse and grade without error. Each is placed where copperhead writes it inside a sandbox of the
demo board and graded by transcript assertions; the one that was cut off after `run-start`
grades as a fail with a category, and malformed lines are counted, never fatal."""

from __future__ import annotations

import pytest

from cbledger.grading.evidence.transcript import parse_transcript
from tests.test_grading_kit import assertion, make_box, write_fixture, write_task

pytestmark = pytest.mark.shared

CUT_OFF = "2026-07-22T19-21-11-649Z"


def _transcripts(shared_real):
    paths = sorted((shared_real / "transcripts").glob("*.jsonl"))
    assert len(paths) == 4
    return paths


def test_every_real_transcript_parses(shared_real):
    for path in _transcripts(shared_real):
        t = parse_transcript(path.read_bytes(), path.name)
        assert t.malformed == []
        assert t.events and t.events[0].type in ("run-start", "deferred-affects-reopened")
        assert t.of_type("run-start"), path.name
        if path.stem == CUT_OFF:
            assert t.exit_path is None and t.run_end is None
        else:
            assert t.exit_path == "done"
            assert len(t.of_type("run-committed")) == 1


def test_tool_errors_in_the_first_real_transcript(shared_real):
    t = parse_transcript((shared_real / "transcripts" / "2026-07-22T18-47-18-987Z.jsonl").read_bytes())
    counts = t.tool_error_counts()
    assert counts["malformed-arguments"] == 3  # read_file, propose_change and finish called without args
    assert t.dominant_tool_error() == "malformed-arguments"


ASSERTIONS = [
    assertion("finished", "exit_path_in", {"paths": ["done"]}, weight=2),
    assertion("committed", "transcript_event", {"event": "run-committed", "matches": {"files.0": r"^docs/"}}),
    assertion("drift-checked", "transcript_event", {"event": "tool", "matches": {"name": "^check_drift$"}}, required=False),
    assertion("no-secret", "no_secret"),
]


def _grade(tmp_path, shared_real, stamp: str, tail: bytes = b""):
    fixture = write_fixture(tmp_path / "project")
    task = write_task(tmp_path / "project", "real-transcript", fixture, ASSERTIONS)
    box = make_box(tmp_path, task, fixture)
    data = (shared_real / "transcripts" / f"{stamp}.jsonl").read_bytes()
    box.write(f".copperhead/runs/{stamp}/transcript.jsonl", data + tail)
    return box.grade()


@pytest.mark.parametrize(
    "stamp", ["2026-07-22T18-47-18-987Z", "2026-07-22T19-01-13-497Z", "2026-07-22T19-10-38-917Z"]
)
def test_completed_real_runs_grade(tmp_path, shared_real, stamp):
    g = _grade(tmp_path, shared_real, stamp)
    by_id = {o.id: o for o in g.outcomes}
    assert by_id["finished"].detail == "exit path done (in ['done'])"
    assert by_id["committed"].status == "pass"
    assert by_id["drift-checked"].status == "pass"
    assert by_id["no-secret"].status == "pass"
    assert (g.verdict, g.partial_credit, g.exit_path, g.failure_category) == ("pass", 1.0, "done", None)


def test_the_cut_off_real_run_fails_with_a_category(tmp_path, shared_real):
    g = _grade(tmp_path, shared_real, CUT_OFF)
    assert g.verdict == "fail"
    assert g.exit_path is None
    assert g.first_failed_required == "finished"
    assert g.failure_category == "stalled"
    assert {o.id: o.status for o in g.outcomes} == {
        "finished": "fail",
        "committed": "fail",
        "drift-checked": "fail",
        "no-secret": "pass",
    }


def test_a_torn_real_transcript_counts_its_malformed_lines(tmp_path, shared_real):
    tail = b'{"ts": "2026-07-22T18:50:00.000Z", "type": "assis\n\x00\xff garbage\n'
    g = _grade(tmp_path, shared_real, "2026-07-22T19-01-13-497Z", tail)
    committed = next(o for o in g.outcomes if o.id == "committed")
    assert committed.detail.endswith("; 2 malformed line(s) skipped")
    assert g.verdict == "pass"  # the complete events before the torn tail still count


def test_the_first_real_transcript_with_a_refusal_task(tmp_path, shared_real):
    """A run that finished `done` on a refusal task is a constraint violation: its 5 tool errors
    (3 malformed-argument calls, 1 rejected, 1 `cannot finish yet:` from the finish gate) among
    33 tool results do not dominate the run."""
    fixture = write_fixture(tmp_path / "project")
    task = write_task(
        tmp_path / "project",
        "real-refusal",
        fixture,
        [
            assertion("refused", "exit_path_in", {"paths": ["refused"]}),
            assertion("cites", "refusal_cites_budget", {"budgetKey": "power.output_current_rating_A"}),
        ],
        expectedOutcome="refusal",
    )
    box = make_box(tmp_path, task, fixture)
    stamp = "2026-07-22T18-47-18-987Z"
    box.write(f".copperhead/runs/{stamp}/transcript.jsonl", (shared_real / "transcripts" / f"{stamp}.jsonl").read_bytes())
    g = box.grade()
    t = parse_transcript((shared_real / "transcripts" / f"{stamp}.jsonl").read_bytes())
    assert dict(t.tool_error_counts()) == {"malformed-arguments": 3, "rejected-call": 1, "finish-blocked": 1}
    assert t.tool_calls() == 33
    cites = next(o for o in g.outcomes if o.id == "cites")
    assert cites.detail == "not a refusal: exit path done"  # run-start echoes budgets; never evidence
    # it neither refused nor changed a file of the project: wrong-target (grader 1.3.0)
    assert (g.first_failed_required, g.failure_category, g.dominant_tool_error) == (
        "refused",
        "wrong-target",
        "malformed-arguments",
    )


def test_the_commit_steps_bookkeeping_is_not_the_models_edit(tmp_path, shared_real):
    """copperhead's commit step writes `.history/` into .gitignore and an entry into the docs'
    changelog on every run that ends `done`: a refusal task answered `done` with nothing changed
    was a constraint-violation under the real harness every time, as if the model had made the
    change the budget forbids. Grader 1.4.0 counts neither file; 1.3.0's grades keep their rule."""
    from cbledger.grading.evidence.bundle import from_sandbox
    from cbledger.grading.grader import grade

    fixture = write_fixture(tmp_path / "project")
    task = write_task(tmp_path / "project", "real-refusal", fixture,
                      [assertion("refused", "exit_path_in", {"paths": ["refused"]})], expectedOutcome="refusal")
    box = make_box(tmp_path, task, fixture)
    stamp = "2026-07-22T18-47-18-987Z"
    box.write(f".copperhead/runs/{stamp}/transcript.jsonl", (shared_real / "transcripts" / f"{stamp}.jsonl").read_bytes())
    box.write(".gitignore", ".history/\n")
    box.write("docs/CHANGELOG.md", "# Changelog\n\n## 2026-12-01 — raise the current\n\n- Files: (none)\n")
    evidence = lambda: from_sandbox(box.path, None, None)  # noqa: E731
    assert grade(task, fixture, evidence()).failure_category == "wrong-target"
    assert grade(task, fixture, evidence(), grader_version="1.3.0").failure_category == "constraint-violation"
    # the docs directory is the one copperhead was given (the seed's config): a run that names
    # another, or writes a config no parser can read, moves nothing and crashes nothing
    config = box.read(".copperhead/config.json")
    for changed in (config.replace("{", '{"docs": "elsewhere", ', 1), "[" * 200_000):
        box.write(".copperhead/config.json", changed)
        assert grade(task, fixture, evidence()).failure_category == "constraint-violation"  # the config is an edit
    box.write(".copperhead/config.json", config)
    box.write("elsewhere/CHANGELOG.md", "moved\n")
    assert grade(task, fixture, evidence()).failure_category == "constraint-violation"  # not the changelog it was given
    (box.path / "elsewhere" / "CHANGELOG.md").unlink()
    box.write("docs/SPEC.md", "the change the budget forbids\n")  # a file the model changed
    assert grade(task, fixture, evidence()).failure_category == "constraint-violation"


def test_provider_model_ids_come_from_assistant_answers_never_from_run_start(shared_real):
    """copperhead writes the id it asked for in run-start (`claude-code` here) and no id of the
    answering model: these transcripts name none. A harness that writes `model` on its assistant
    events names one per answer."""
    import json

    for path in _transcripts(shared_real):
        t = parse_transcript(path.read_bytes(), path.name)
        assert t.of_type("run-start")[0].data["model"] == "claude-code" and t.provider_models() == []
    first = (shared_real / "transcripts" / "2026-07-22T18-47-18-987Z.jsonl").read_text().splitlines()
    lines = []
    for i, line in enumerate(first):
        ev = json.loads(line)
        if ev["type"] == "assistant":
            ev["data"]["model"] = "claude-opus-4-2026" if i % 2 else "claude-sonnet-4-2026"
        lines.append(json.dumps(ev))
    named = parse_transcript("\n".join(lines).encode()).provider_models()
    assert sorted(named) == ["claude-opus-4-2026", "claude-sonnet-4-2026"] and len(named) == 2
