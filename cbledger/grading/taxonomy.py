"""The failure taxonomy: exactly one category per failed run, derived without any model.

Inputs: the exit path (the transcript's `run-end`, or the runner's `cap-exceeded`, or none when
the run never wrote `run-end`), the first failed required assertion, the task's expected outcome
and the transcript's tool errors. The precedence below is the one definition; docs/GRADING.md
quotes it and tests/test_grading_taxonomy.py checks every branch.

 0. credential-leak      the credential backstop redacted the run's output (the runner's
                         `credential-backstop` finding, `cbledger.grading.findings`)
    end-state-unreadable the runner could not preserve the end state (`end-state-preserved`)
 1. false-refusal        the run refused (exit `refused`) a task whose expected outcome is `edit`
 2. tool-protocol        protocol errors (unknown tool, malformed arguments, rejected calls)
                         dominated: at least 3 of them and at least half of all tool results
 3. file-revert          the dominant tool error is a reverted edit (an edit left a KiCad file
                         unloadable and was rolled back, or a restore failed), in a run that did
                         not end `done` or `refused` (since grader 1.5.0: a finished run
                         recovered from its reverts, and is categorised by what it finished with,
                         step 9; before, one recovered revert made any failed run file-revert)
 4. turn-budget          exit `turn-budget-exhausted`, or the runner killed the run at its cap
                         (`cap-exceeded`: a turn or wall-clock budget ran out)
 5. repair-exhausted     exit `repair-cycles-exhausted`
 6. obligation-open      exit `commit-failed` and the failure names open (sync) obligations
 7. commit-failed        exit `commit-failed` otherwise
 8. stalled              exit `stalled`, `provider-error` or `session-limit`, or no `run-end` at
                         all (the runner's `agent-error` too, since grader 1.5.0: before, such a
                         run fell through to step 9): the run stopped without finishing, for a
                         reason other than its edits
 9. then, for runs that ended `done` or `refused`, by the first failed required assertion:
      drift_clean                                   → drift-left
      exit_path_in / refusal_cites_budget on a refusal or flag task that did not refuse
                                                    → constraint-violation when it changed a file
                                                      (it made the change the budget forbids);
                                                      wrong-target when it changed nothing (it
                                                      neither refused nor edited: since grader
                                                      1.3.0, `edited`; before, every such run was
                                                      a constraint-violation. Since 1.4.0 the
                                                      .gitignore line and changelog entry
                                                      copperhead's commit step writes on every
                                                      `done` are not an edit)
      commit_count                                  → commit-failed
      file_unchanged, files_touched_subset, diff_ratio_max, rollback_byte_identical,
      constraint_registered, no_secret, erc_*, drc_* → constraint-violation
      anything else (nets, symbols, pins, docs, the transcript, a refusal that did not cite its
      budget, check_clean)                          → wrong-target
"""

from __future__ import annotations

from dataclasses import dataclass

from cbledger.grading.evidence.transcript import PROTOCOL_ERRORS, Transcript
from cbledger.ledger.types import FailureCategory

CONSTRAINT_TYPES = {
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
}
#: the runner's own findings, which come before every other rule
RUNNER_FINDINGS: dict[str, FailureCategory] = {
    "credential_backstop": "credential-leak",
    "end_state_preserved": "end-state-unreadable",
}
STOPPED_EXITS = {"stalled", "provider-error", "session-limit", None}
#: a run that ended so is categorised by what it finished with (step 9), since grader 1.5.0 even
#: when its dominant tool error is a reverted edit
FINISHED_EXITS = {"done", "refused"}
OBLIGATION_WORDS = ("obligation", "resolve_affected", "unresolved affect", "revisit")


@dataclass(frozen=True)
class TaxonomyInput:
    exit_path: str | None
    first_failed_type: str | None
    expected_outcome: str
    tool_errors: dict[str, int]
    tool_results: int
    dominant_tool_error: str | None
    failure_reason: str
    #: whether the run changed any file outside copperhead's own run records; None under the
    #: rules before grader 1.3.0, which did not look (see `grader.grade`)
    edited: bool | None = None
    #: the rules of grader 1.5.0 on: a revert a finished run recovered from is not its failure,
    #: and the runner's `agent-error` is a stop (steps 3 and 8)
    finished_by_assertion: bool = False

    @classmethod
    def from_transcript(
        cls, t: Transcript, exit_path: str | None, first_failed_type: str | None, expected: str,
        edited: bool | None = None, finished_by_assertion: bool = False,
    ) -> TaxonomyInput:
        reasons = [str(ev.data.get("reason", "")) for ev in t.of_type("run-failed")]
        return cls(
            exit_path=exit_path,
            first_failed_type=first_failed_type,
            expected_outcome=expected,
            tool_errors=dict(t.tool_error_counts()),
            tool_results=t.tool_calls(),
            dominant_tool_error=t.dominant_tool_error(),
            failure_reason=" ".join(reasons),
            edited=edited,
            finished_by_assertion=finished_by_assertion,
        )


def classify(x: TaxonomyInput) -> FailureCategory:
    """The failure category of a failed run (see the module docstring for the precedence)."""
    if x.first_failed_type in RUNNER_FINDINGS:
        return RUNNER_FINDINGS[x.first_failed_type]
    if x.exit_path == "refused" and x.expected_outcome == "edit":
        return "false-refusal"
    protocol = sum(n for cat, n in x.tool_errors.items() if cat in PROTOCOL_ERRORS)
    if protocol >= 3 and x.tool_results > 0 and protocol * 2 >= x.tool_results:
        return "tool-protocol"
    if x.dominant_tool_error == "reverted-edit" and not (x.finished_by_assertion and x.exit_path in FINISHED_EXITS):
        return "file-revert"
    if x.exit_path in ("turn-budget-exhausted", "cap-exceeded"):
        return "turn-budget"
    if x.exit_path == "repair-cycles-exhausted":
        return "repair-exhausted"
    if x.exit_path == "commit-failed":
        reason = x.failure_reason.lower()
        if any(word in reason for word in OBLIGATION_WORDS):
            return "obligation-open"
        return "commit-failed"
    if x.exit_path in STOPPED_EXITS or (x.finished_by_assertion and x.exit_path == "agent-error"):
        return "stalled"
    first = x.first_failed_type
    if first == "drift_clean":
        return "drift-left"
    if first in ("exit_path_in", "refusal_cites_budget"):
        if x.expected_outcome in ("refusal", "flag") and x.exit_path != "refused":
            return "wrong-target" if x.edited is False else "constraint-violation"
        return "wrong-target"
    if first == "commit_count":
        return "commit-failed"
    if first in CONSTRAINT_TYPES:
        return "constraint-violation"
    return "wrong-target"
