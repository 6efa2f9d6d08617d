"""The benchmark card: what this suite version measures, which parts are deterministic and which
judged, what it does not claim and where its safety boundary lies, generated from the ledger (the
suite bump, the graded runs, the rubric scores) and the surfaces catalog, never written by hand.
"""

from __future__ import annotations

from cbledger.ledger import surfaces
from cbledger.ledger.events import TaskIdentity
from cbledger.projections import format as fmt
from cbledger.projections.fold import LedgerState, suite_bump
from cbledger.projections.isolation import isolation
from cbledger.projections.metrics import TIERS
from cbledger.projections.records import RecordEntry, run_kind

TITLE = "Benchmark card"


def _counts(items: list[str]) -> str:
    tally: dict[str, int] = {}
    for item in items:
        tally[item] = tally.get(item, 0) + 1
    return _tally(tally)


class CardAcc:
    """What the card reads of a suite's records, one record at a time (counts, sets and the last
    task identity seen per id), so a record added at the end of the order is folded in alone."""

    def __init__(self) -> None:
        self.records = 0
        self.tasks: dict[str, TaskIdentity] = {}
        self.fixtures: set[str] = set()
        self.checks: set[str] = set()
        self.kinds: dict[str, int] = {}
        self.judged = 0
        self.judges: set[str] = set()
        self.surfaces: set[str] = set()
        self.confined: dict[str, int] = {}
        #: real-model runs by whether a provider key was in their environment: yes, no, unknown
        self.keyed: dict[str, int] = {}

    def add_judge(self, judge_model: str) -> None:
        """A record with a rubric score (its first), by this judge."""
        self.judged += 1
        self.judges.add(judge_model)

    def add(self, state: LedgerState, rec: RecordEntry) -> None:
        run = rec.run.run
        self.records += 1
        self.tasks[run.task.id] = run.task
        self.fixtures.add(run.fixture.id)
        self.checks.update(f"{a.type} ({a.evidence_source})" for a in rec.graded.grade.assertions)
        kind = run_kind(rec.run)
        self.kinds[kind] = self.kinds.get(kind, 0) + 1
        scores = state.rubric.get(rec.run_id)
        if scores:
            self.add_judge(scores[0].rubric.judge_model)
        self.surfaces.add(surfaces.run_surface(run))
        how = isolation(run)
        self.confined[how] = self.confined.get(how, 0) + 1
        if run.run_mode == "agent" and run.harness_failure is None:
            reach = key_in_reach(run.model.id)
            self.keyed[reach] = self.keyed.get(reach, 0) + 1


#: the routes whose provider is the operator's saved login: no key variable is passed
SAVED_LOGINS = ("codex", "cursor", "claude-code")


def key_in_reach(model_id: str) -> str:
    """Whether a real model's run had a provider key in its environment: the native routes always
    (the preflight requires it), a saved login never, a `compat:` route only where
    `$COPPERHEAD_API_KEY_ENV` named one, which a run does not record."""
    head = model_id.split(":", 1)[0]
    if head == "compat":
        return "unknown"
    return "no" if head in SAVED_LOGINS else "yes"


def _keys_line(keyed: dict[str, int]) -> str:
    if not keyed:
        return "no run of a real model: no run had a provider key in reach (scripted and harness runs get none)"
    parts = [f"{keyed['yes']} with a key" if keyed.get("yes") else "",
             f"{keyed['no']} on a saved login" if keyed.get("no") else "",
             f"{keyed['unknown']} on a compat route (a key only where $COPPERHEAD_API_KEY_ENV named one)" if keyed.get("unknown") else ""]
    return "real-model runs: " + ", ".join(p for p in parts if p)


def _tally(counts: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "none"


def render(state: LedgerState, suite: str, records: list[RecordEntry]) -> list[str]:
    acc = CardAcc()
    for rec in records:
        acc.add(state, rec)
    return render_acc(state, suite, acc)


def render_acc(state: LedgerState, suite: str, acc: CardAcc) -> list[str]:
    bump = suite_bump(state, suite)
    tasks = acc.tasks
    named = sorted(bump.body.task_manifest_hashes) if bump else sorted(tasks)
    fixtures = sorted(bump.body.fixture_hashes) if bump else sorted(acc.fixtures)
    tier_of = {t: tasks[t].tier for t in named if t in tasks}
    by_tier = ", ".join(f"{tier} {sum(1 for v in tier_of.values() if v == tier)}" for tier in TIERS)
    if len(tier_of) < len(named):  # tier and outcome are known from records: say whose counts these are
        by_tier = f"{len(tier_of)} with a graded record: {by_tier}"
    outcomes = _counts([tasks[t].expected_outcome for t in named if t in tasks])
    checks = ", ".join(sorted(acc.checks))
    kinds = _tally(acc.kinds)
    judged = acc.judged
    judges = sorted(acc.judges)
    used = sorted(acc.surfaces | {surfaces.import_surface(i.body) for i in state.imports})
    confined = _tally(acc.confined)
    catalog = surfaces.catalog()
    rows = [
        ["Scope", (
            f"suite `{suite}`: {len(named)} task(s) ({by_tier}; expected outcomes: {outcomes}) on "
            f"{len(fixtures)} fixture(s); {acc.records} graded record(s) by run kind: {kinds}"
        )],
        ["Deterministic parts", (
            "every verdict, partial credit, pass rate and cost per passing task: kicad-cli reports, the "
            "diff, the transcript and the docs read by the grader, re-graded offline by `replay --verify`. "
            f"Checks graded under this suite (type and evidence): {checks or 'none'}"
        )],
        ["Judged parts", (
            f"{judged} record(s) with a model-judged rubric score, by {', '.join(f'`{j}`' for j in judges)}; "
            "shown only in the model-judged section, read by no metric" if judged else
            "none graded under this suite; a rubric score would be model-judged and read by no metric"
        )],
        ["Surfaces", "; ".join(
            f"`{s}` ({catalog.get(s).ownership}, {catalog.get(s).execution}, redaction `{catalog.get(s).redaction}`)"
            for s in used
        ) or "none"],
        ["Limitations", (
            "what the copperhead harness lets a model do on these tasks, not fabrication readiness, "
            "design quality or general capability (see above); single-repeat rows are listed, never "
            "compared; records of another schema or suite version, task or fixture revision or kicad-cli major "
            "stay in their own comparability group, while copperhead builds, Node and the OS are pooled within "
            "one (listed under its reference environment; `cbledger project compare` sets builds apart)"
        )],
        ["Safety boundary", (
            f"runs confined: {confined}; a credential found in anything bound for `results/` is "
            "redacted and fails the run, and one in imported evidence refuses the import; surfaces "
            f"with credentials in reach: {', '.join(f'`{s}`' for s in used if catalog.get(s).credentials) or 'none'}; "
            + _keys_line(acc.keyed)
        )],
    ]
    return [f"## {TITLE}", "", "> Generated from the ledger and `cbledger/ledger/surfaces.json`.", "",
            *fmt.table(["", "This suite version"], rows), ""]
