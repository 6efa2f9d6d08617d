"""Feedback hints: a failed assertion turned into a sentence the agent can act on in its next pass.

A hint is made from what the run left (its exit path, the paths it changed, the commits it
made) and from the assertion's *locating* arguments (which document, which file), by one
fixed template per type. It never carries what the assertion expects: not a value, a
footprint, a net or reference name, a pattern, a count, a budget key, an event type, nor the
assertion's id or note (both written by the task's author, and both may spell the answer).
An agent told the expected value would pass the next pass by copying it, and the pass rate at
pass k would measure that copying instead of the revision.

`EXPECTED_ARGS` names, per type, the arguments that hold the expected value;
`tests/test_hints.py` plants a distinct value in each and fails if any reaches a hint.
Pure: no I/O, no clock, the same inputs give the same text.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from cbledger.grading.checks_diff import matches_any
from cbledger.ledger.events import AssertionOutcome
from cbledger.tasks.vocabulary import VOCABULARY, AssertionSpec

#: type -> the arguments whose values are what the assertion expects (never in a hint)
EXPECTED_ARGS: dict[str, tuple[str, ...]] = {
    "erc_no_new_violations": ("severity",),
    "drc_no_new_violations": ("severity",),
    "erc_clean": (),
    "drc_clean": (),
    "check_clean": (),
    "drift_clean": (),
    "net_present": ("net",),
    "net_absent": ("net",),
    "symbol_present": ("refdes", "value", "footprint"),
    "symbol_absent": ("refdes",),
    "pin_net_equals": ("refdes", "pin", "net"),
    "doc_row_matches": ("key", "pattern"),
    "doc_contains": ("pattern",),
    "constraint_registered": ("key", "source", "affects"),
    "files_touched_subset": ("allowed",),
    "file_unchanged": (),
    "diff_ratio_max": ("ratio",),
    "commit_count": ("equals", "max"),
    "rollback_byte_identical": (),
    "no_secret": (),
    "exit_path_in": ("paths",),
    "refusal_cites_budget": ("budget_key",),
    "transcript_event": ("event", "min_count", "matches"),
}
#: how many paths a hint lists before it says how many more there are
LISTED_PATHS = 8


@dataclass(frozen=True)
class Observed:
    """What the graded pass left, as the evidence reads it: never what the task expects."""

    exit_path: str | None
    changed_paths: tuple[str, ...]
    commits: int


@dataclass(frozen=True)
class Hint:
    assertion_type: str
    required: bool
    text: str


def _paths(paths: Sequence[str]) -> str:
    shown = ", ".join(f"`{p}`" for p in paths[:LISTED_PATHS])
    more = f" and {len(paths) - LISTED_PATHS} more" if len(paths) > LISTED_PATHS else ""
    return shown + more


def _exit(seen: Observed) -> str:
    return f"`{seen.exit_path}`" if seen.exit_path else "no recorded exit path"


def _violations(tool: str) -> Callable[[AssertionSpec, Observed], str]:
    return lambda spec, seen: f"{tool} on the end state reports violations the starting point did not have; fix them."


def _clean(tool: str) -> Callable[[AssertionSpec, Observed], str]:
    return lambda spec, seen: f"{tool} on the end state reports violations; it must report none."


def _files_touched(spec: AssertionSpec, seen: Observed) -> str:
    allowed = list(getattr(spec.args, "allowed", []))
    outside = [p for p in seen.changed_paths if not matches_any(p, allowed)]
    if not outside:
        return "The run changed files this task does not allow; leave everything outside the request as it was."
    return f"The run changed files this task does not allow: {_paths(outside)}. Put them back as they were."


def _rollback(spec: AssertionSpec, seen: Observed) -> str:
    if not seen.changed_paths:
        return "The working tree differs from its starting point; this task requires it left byte for byte as it was."
    return (
        f"The working tree differs from its starting point ({_paths(list(seen.changed_paths))}); "
        "this task requires it left byte for byte as it was."
    )


def _refusal(spec: AssertionSpec, seen: Observed) -> str:
    if seen.exit_path != "refused":
        return f"The run ended with {_exit(seen)}, not with a refusal; check the recorded budgets before changing anything."
    return "The refusal does not cite the recorded budget that rules the change out; name it and show the arithmetic."


TEMPLATES: dict[str, Callable[[AssertionSpec, Observed], str]] = {
    "erc_no_new_violations": _violations("ERC"),
    "drc_no_new_violations": _violations("DRC"),
    "erc_clean": _clean("ERC"),
    "drc_clean": _clean("DRC (schematic parity included)"),
    "check_clean": lambda spec, seen: "`copperhead check` over the repository does not pass; run it and fix what it reports.",
    "drift_clean": lambda spec, seen: "The docs disagree with the schematic (doc drift); bring them back in line.",
    "net_present": lambda spec, seen: "A net the task requires does not exist in the schematic.",
    "net_absent": lambda spec, seen: "A net the task requires gone is still in the schematic.",
    "symbol_present": lambda spec, seen: (
        "A symbol the task requires is missing, or its value or footprint is not the one the request asks for."
    ),
    "symbol_absent": lambda spec, seen: "A symbol the task requires removed is still in the schematic.",
    "pin_net_equals": lambda spec, seen: "A pin is not connected to the net the task requires.",
    "doc_row_matches": lambda spec, seen: (
        f"In `{getattr(spec.args, 'doc', '')}`, the `{getattr(spec.args, 'column', '')}` cell of a table row "
        "does not say what the request requires; keep the doc in sync with the design."
    ),
    "doc_contains": lambda spec, seen: (
        f"`{getattr(spec.args, 'doc', '')}` still holds text the task requires gone."
        if getattr(spec.args, "absent", False)
        else f"`{getattr(spec.args, 'doc', '')}` does not yet record something the task requires."
    ),
    "constraint_registered": lambda spec, seen: (
        "`.copperhead/constraints.json` does not record a constraint the task requires; record it with record_constraint."
    ),
    "files_touched_subset": _files_touched,
    "file_unchanged": lambda spec, seen: (
        f"`{getattr(spec.args, 'path', '')}` was changed; this task requires it exactly as it was."
    ),
    "diff_ratio_max": lambda spec, seen: (
        f"`{getattr(spec.args, 'path', '')}` changed more than this task allows; make the edit more surgical."
    ),
    "commit_count": lambda spec, seen: (
        f"The run left {seen.commits} commit(s) since its starting point, which is not what this task requires."
    ),
    "rollback_byte_identical": _rollback,
    "no_secret": lambda spec, seen: "Something the run wrote matches a credential pattern; remove it.",
    "exit_path_in": lambda spec, seen: f"The run ended with {_exit(seen)}, which is not an outcome this task accepts.",
    "refusal_cites_budget": _refusal,
    "transcript_event": lambda spec, seen: "The run's transcript lacks a step this task requires of the run.",
}

assert set(TEMPLATES) == set(VOCABULARY) == set(EXPECTED_ARGS), "a hint template for every assertion type"


def hints(assertions: Sequence[AssertionSpec], outcomes: Sequence[AssertionOutcome], seen: Observed) -> list[Hint]:
    """One hint per failed assertion of the task, required ones first, in the task's order. An
    outcome the task does not define (a runner finding) gets none: a run that tripped one does
    not get another pass."""
    by_id = {a.id: a for a in assertions}
    out: list[Hint] = []
    for outcome in outcomes:
        spec = by_id.get(outcome.id)
        if outcome.status != "fail" or spec is None or spec.type not in TEMPLATES:
            continue
        out.append(Hint(spec.type, spec.required, TEMPLATES[spec.type](spec, seen)))
    return sorted(out, key=lambda h: not h.required)


def message(prompt: str, found: Sequence[Hint], carried_over: bool) -> str:
    """The task message of the next pass: the original request, the state it starts from, and
    the hints. A fresh `copperhead do` remembers nothing of the pass before, so the request is
    said again."""
    state = (
        "its rolled-back work restored and committed, so you continue from it"
        if carried_over else "so you continue from it"
    )
    lines = [
        f"A check of the previous attempt at this request found {len(found)} requirement(s) unmet. "
        f"The repository is as that attempt left it, {state}. Revise it so every requirement holds, "
        "then verify and commit.",
        "",
        f"The request: {prompt}",
        "",
        "What the check found:",
        *(f"- {h.text}" + ("" if h.required else " (advisory)") for h in found),
    ]
    return "\n".join(lines)
