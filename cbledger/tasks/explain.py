"""What the standard says a task field or an assertion's arguments mean, added to a schema
problem so that `validate` tells an author what the field is for, not only that it is wrong.

The decoder's own words (`Invalid enum value 'easy'`, `missing required field`) name the
symptom; an author new to the standard needs the rule, which is this table (the task manifest
table of the copperbench standard, docs/GRADING.md) and the vocabulary's argument schemas.
"""

from __future__ import annotations

import msgspec

from cbledger.tasks.fixtures.problems import Problem
from cbledger.tasks.vocabulary import VOCABULARY

#: the task manifest's fields, as the standard defines them
TASK_FIELDS = {
    "id": "kebab-case (lower-case letters, digits, single hyphens), equal to the task's directory name",
    "tier": "one of simple, medium, hard",
    "mode": "the copperhead surface driven: do, create, sync or check",
    "fixture": "{path: fixtures/<id>, sha256: the fixture's tree hash}",
    "request": "{prompt} for do and sync, {briefPath} for create",
    "expectedOutcome": "edit (make the change), refusal (no change fits the budgets) or flag (surface an inconsistency, resolve nothing)",
    "config": "optional overrides for .copperhead/config.json: budgets (key → number), maxTurns, maxRepairCycles, stageMaxTurns; never llmCache",
    "setup": "optional {commands}; only init is allowed (LLM-free, network-free)",
    "caps": "{turns, wallClockSec}: hard caps, exceeding one terminates the run",
    "repeats": "optional, 1 to 100; default 3",
    "tags": "at least one: the acceptance criteria and capabilities exercised",
    "variantOf": "only on memorization variants: the original task's id",
    "rubric": "optional: a rubric prompt file in the task directory (rubric tier only)",
}
#: the fields every assertion carries, whatever its type
ASSERTION_FIELDS = {
    "id": "unique within the task",
    "weight": "a number > 0",
    "required": "true or false: a failed required assertion fails the run",
    "note": "optional free text",
}


def signature(kind: str) -> str:
    """`doc_contains {doc, pattern, absent?}`: the arguments a type takes."""
    fields = msgspec.structs.fields(VOCABULARY[kind][0])
    return f"{kind} {{{', '.join(f.encode_name + ('' if f.required else '?') for f in fields)}}}"


def explain(problem: Problem, kind: str | None = None) -> Problem:
    """The problem with the standard's rule for its field appended; `kind` is the assertion's type
    for a problem inside `assertions.json`."""
    if kind is None:
        name = problem.field.split(".", 1)[0].split("[", 1)[0]
        rule = TASK_FIELDS.get(name)
    elif ".args" in problem.field:
        name, rule = "args", f"{signature(kind)} (docs/GRADING.md)" if kind in VOCABULARY else None
    else:
        name = problem.field.rsplit(".", 1)[-1]
        rule = ASSERTION_FIELDS.get(name)
    if rule is None:
        return problem
    return msgspec.structs.replace(problem, message=f"{problem.message}; the standard: {name} is {rule}")
