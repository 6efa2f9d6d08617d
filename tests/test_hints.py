"""Feedback hints never carry what an assertion expects.

Every one of the 23 assertion types is given a distinct planted value in each argument that
holds its expected value (and in its id and note, which the task's author writes and which may
spell the answer), graded as failed, and turned into a hint; the hint must contain none of
them. The same is checked for every assertion of every bundled task, with its real expected
values. A template made to echo an argument is caught, so the check can fail.
"""

from __future__ import annotations

import re
from pathlib import Path

import msgspec
import pytest

from cbledger.grading import hints
from cbledger.ledger.events import AssertionOutcome
from cbledger.tasks.catalog import Catalog
from cbledger.tasks.vocabulary import SPEC_CLASSES, VOCABULARY, AssertionSpec

REPO = Path(__file__).resolve().parent.parent

#: per type, arguments with a planted value in each expected field (and the locating ones)
PLANTED: dict[str, dict] = {
    "erc_no_new_violations": {"severity": "warning"},
    "drc_no_new_violations": {"severity": "warning"},
    "erc_clean": {},
    "drc_clean": {},
    "check_clean": {},
    "drift_clean": {},
    "net_present": {"net": "QZNETPRESENT"},
    "net_absent": {"net": "QZNETABSENT"},
    "symbol_present": {"refdes": "QZ77", "value": "QZVALUE470", "footprint": "qzlib:QZ_FOOTPRINT"},
    "symbol_absent": {"refdes": "QZ78"},
    "pin_net_equals": {"refdes": "QZ79", "pin": "QZPIN", "net": "QZPINNET"},
    "doc_row_matches": {"doc": "docs/BOM.md", "key": "QZROWKEY", "column": "Value", "pattern": "^QZPATTERN1$"},
    "doc_contains": {"doc": "docs/SPEC.md", "pattern": "QZPATTERN2\\b"},
    "constraint_registered": {"key": "qz_budget_key", "source": "QZSOURCE", "affects": ["QZAFFECTED"]},
    "files_touched_subset": {"allowed": ["qzallowed/**", "QZALLOWED.md"]},
    "file_unchanged": {"path": "lib/keep.kicad_sym"},
    "diff_ratio_max": {"path": "board.kicad_sch", "ratio": 0.0371},
    "commit_count": {"equals": 7},
    "rollback_byte_identical": {},
    "no_secret": {},
    "exit_path_in": {"paths": ["turn-budget-exhausted"]},
    "refusal_cites_budget": {"budgetKey": "qz_refusal_budget"},
    "transcript_event": {"event": "qz-event-type", "minCount": 3, "matches": {"summary": "QZMATCHES"}},
}

#: what the graded pass left: observations that are never an expected value
SEEN = hints.Observed(exit_path="done", changed_paths=("docs/BOM.md", "QZ_OTHER.txt", "board.kicad_sch"), commits=2)
SEEN_REFUSED = hints.Observed(exit_path="refused", changed_paths=(), commits=0)

#: words every template may use: a planted token equal to one would be a false alarm
_TOKEN = re.compile(r"[A-Za-z0-9_.+:/-]{2,}")
#: a regex's escapes (`\b`, `\d`, `\.`) read as what they stand for, so `\bC9\.2\b` gives `C9.2`
_ESCAPE = re.compile(r"\\([bBdDsSwWAZ])|\\(.)")


def _literal_runs(value: str) -> list[str]:
    plain = _ESCAPE.sub(lambda m: " " if m.group(1) else m.group(2), value)
    return [t.strip(".") for t in _TOKEN.findall(plain) if len(t.strip(".")) >= 2]


def _values(value) -> list[str]:
    """The strings an expected argument holds: lists and maps flattened, numbers as written."""
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (str(k), *_values(v))]
    if isinstance(value, list):
        return [s for v in value for s in _values(v)]
    return [str(value)]


def leaks(text: str, spec: AssertionSpec, wording: frozenset[str] = frozenset()) -> list[str]:
    """Each expected value (or a literal run of one, for a pattern) that appears in `text`.

    `wording` holds the template's own words (lower case): a pattern's literal run equal to one
    (`not` in `(not fitted|DNP)`, against "does not yet record") is the template speaking."""
    args = msgspec.to_builtins(spec.args)
    found = []
    names = {re.sub(r"_([a-z])", lambda m: m.group(1).upper(), a) for a in hints.EXPECTED_ARGS[spec.type]}
    # the id and the note, whole (they are prose); each expected value whole and by its literal runs.
    # A hint may name what the task states openly (a doc's path, say `docs/DEVPLAN.md`): the id and
    # the note are looked for in the text without those public values, so an id named after the doc
    # it checks is no leak, while one named after the answer still is.
    public = [v for k, value in args.items() if k not in names for v in _values(value) if len(v) >= 2]
    prose = text
    for value in sorted(public, key=len, reverse=True):
        prose = re.sub(re.escape(value), " ", prose, flags=re.IGNORECASE)
    checks = [(spec.id, False, prose), *([(spec.note, False, prose)] if spec.note else [])]
    for name in names:
        if name in args:
            checks += [(v, True, text) for v in _values(args[name])]
    for secret, by_token, where in checks:
        runs = {r for r in _literal_runs(secret) if r.lower() not in wording} if by_token else set()
        for token in {secret, *runs}:
            if re.search(rf"(?<![A-Za-z0-9_]){re.escape(token)}(?![A-Za-z0-9_])", where, re.IGNORECASE):
                found.append(token)
    return found


def _spec(type_: str, args: dict, id_: str, note: str | None) -> AssertionSpec:
    doc = {"id": id_, "type": type_, "args": args, "weight": 1, "required": True, **({"note": note} if note else {})}
    return msgspec.convert(doc, SPEC_CLASSES[type_])


def _failed(spec: AssertionSpec) -> AssertionOutcome:
    return AssertionOutcome(id=spec.id, type=spec.type, status="fail", weight=1.0, required=spec.required,
                            evidence_source=spec.evidence_source, detail="expected something else")


def test_the_planted_table_covers_the_whole_vocabulary():
    assert set(PLANTED) == set(VOCABULARY) == set(hints.TEMPLATES) == set(hints.EXPECTED_ARGS)
    assert len(VOCABULARY) == 23


@pytest.mark.parametrize("type_", sorted(PLANTED))
@pytest.mark.parametrize("seen", [SEEN, SEEN_REFUSED], ids=["done", "refused"])
def test_no_template_echoes_an_expected_value(type_, seen):
    spec = _spec(type_, PLANTED[type_], f"qz-id-{type_.replace('_', '-')}", "QZNOTE the answer is QZVALUE470")
    found = hints.hints([spec], [_failed(spec)], seen)
    assert len(found) == 1 and found[0].assertion_type == type_
    assert leaks(found[0].text, spec) == [], found[0].text


def _seen_failing(spec: AssertionSpec, exit_path: str) -> hints.Observed:
    """An observation the assertion fails on: what a run that failed it can have left."""
    args = msgspec.to_builtins(spec.args)
    if spec.type == "exit_path_in":
        exit_path = next(p for p in ("turn-budget-exhausted", "done", "refused") if p not in args["paths"])
    commits = 2
    if spec.type == "commit_count":
        commits = args["equals"] + 1 if args.get("equals") is not None else args["max"] + 1
    return hints.Observed(exit_path=exit_path, changed_paths=SEEN.changed_paths, commits=commits)


def test_every_bundled_assertion_gives_a_hint_without_its_expected_value():
    catalog = Catalog(REPO)
    checked = set()
    for task_id in catalog.task_ids():
        task = catalog.task(task_id)
        outcomes = [_failed(a) for a in task.assertions]
        assert len(hints.hints(task.assertions, outcomes, SEEN)) == len(task.assertions)
        for exit_path in ("done", "refused"):
            for spec in task.assertions:
                seen = _seen_failing(spec, exit_path)
                text = hints.TEMPLATES[spec.type](spec, seen)
                planted = _spec(spec.type, PLANTED[spec.type], "qz-id", None)
                wording = frozenset(w.lower() for w in _TOKEN.findall(hints.TEMPLATES[spec.type](planted, seen)))
                assert leaks(text, spec, wording) == [], (task_id, spec.id, text)
                checked.add(spec.type)
    assert len(checked) >= 15  # the bundled suite uses most of the vocabulary


def test_the_leak_check_catches_a_template_that_echoes(monkeypatch):
    spec = _spec("symbol_present", PLANTED["symbol_present"], "r1-value", None)
    monkeypatch.setitem(hints.TEMPLATES, "symbol_present", lambda s, seen: f"R1 must have value {s.args.value}")
    text = hints.hints([spec], [_failed(spec)], SEEN)[0].text
    assert leaks(text, spec) == ["QZVALUE470"]
    # and one that echoes the assertion's id, which an author may name after the answer
    monkeypatch.setitem(hints.TEMPLATES, "symbol_present", lambda s, seen: "check r1-value")
    assert "r1-value" in leaks(hints.hints([spec], [_failed(spec)], SEEN)[0].text, spec)


def test_hints_come_from_the_evidence_and_only_for_failed_task_assertions():
    touched = _spec("files_touched_subset", PLANTED["files_touched_subset"], "bounded", None)
    exits = _spec("exit_path_in", PLANTED["exit_path_in"], "exit", None)
    commits = _spec("commit_count", PLANTED["commit_count"], "commits", None)
    advisory = msgspec.structs.replace(_spec("drift_clean", {}, "drift", None), required=False)
    passed = AssertionOutcome(id="exit", type="exit_path_in", status="pass", weight=1.0, required=True,
                              evidence_source="transcript", detail="ok")
    runner_finding = AssertionOutcome(id="credential-backstop", type="credential_backstop", status="fail", weight=1.0,
                                      required=True, evidence_source="end-state", detail="found")
    specs = [advisory, touched, exits, commits]
    outcomes = [runner_finding, _failed(advisory), _failed(touched), passed, _failed(commits)]
    found = hints.hints(specs, outcomes, SEEN)
    # required first, the advisory one last; the passed assertion and the runner's finding get none
    assert [h.assertion_type for h in found] == ["files_touched_subset", "commit_count", "drift_clean"]
    # the changed paths outside the allowed globs, and the commit count observed
    assert "`QZ_OTHER.txt`" in found[0].text and "docs/BOM.md" in found[0].text
    assert "2 commit(s)" in found[1].text
    message = hints.message("Change R1.", found, carried_over=True)
    assert message.splitlines()[2] == "The request: Change R1."
    assert message.endswith("(advisory)") and "rolled-back work restored" in message
    # deterministic: the same inputs, the same text
    assert message == hints.message("Change R1.", hints.hints(specs, outcomes, SEEN), carried_over=True)
