"""The suite's discrimination check, run before a task is recorded: gold must pass it and noop
must fail it.

A trial is a real run through the same steps as `cbledger run --agent gold|noop` (sandbox, setup,
agent, capture, kicad-cli, grade) that stops before anything is preserved or appended: the suite
version the run would be recorded under does not exist yet, and a check is not evidence. A task
whose gold does not pass is unsolvable as written, and one that noop passes grades nothing; either
way it must not enter a suite version (`suite bump`) or be offered as a variant (`task variant`).
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from cbledger.errors import UserError
from cbledger.kicad.oracle import require_kicad_cli
from cbledger.ledger.events import Ablations, Actor, AssertionOutcome
from cbledger.runner import execute as steps
from cbledger.runner import isolation
from cbledger.runner.agents.base import Agent
from cbledger.runner.agents.copperhead import CLI_ENV, INSTALL_DIR, locate
from cbledger.runner.agents.scripted import GoldAgent, NoopAgent
from cbledger.runner.environment import probe
from cbledger.runner.plan import PlannedRun
from cbledger.tasks.catalog import Catalog, Task
from cbledger.tasks.validate import ensure_runnable

#: what each scripted agent must do to a well-made task
EXPECTED = {"gold": "pass", "noop": "fail"}
#: the suite version a trial grades under: none, since nothing of a trial is recorded
UNRECORDED = "0.0.0"


@dataclass(frozen=True)
class TrialResult:
    task_id: str
    agent: str
    verdict: str
    first_failed_required: str | None
    #: the optional assertions a passing gold failed: the right change misses them, so each is
    #: most likely a typo (a value's case, a net's name) that no run can ever score
    gold_missed: tuple[str, ...] = ()
    #: the change's own assertions (`target-N`, as `task new` names them) a failing noop passed:
    #: each holds before any edit, so it does not recognise the change (a guard's `absent` read
    #: as the change, a value the baseline already has)
    noop_passed_targets: tuple[str, ...] = ()
    #: an edit task's required assertions a noop failed, when none reads the end state: noop fails
    #: only on how a run ended or what it committed, so nothing recognises the change itself
    noop_fails_only_process: tuple[str, ...] = ()
    #: what the grader said of the first failed required assertion: for a gold that fails, the
    #: author's next question, which otherwise took a `cbledger grade` of its own to answer
    first_failed_detail: str | None = None

    @property
    def ok(self) -> bool:
        return self.verdict == EXPECTED[self.agent]

    @property
    def warned(self) -> bool:
        return bool(self.gold_missed or self.noop_passed_targets or self.noop_fails_only_process)

    def __str__(self) -> str:
        why = f" (first failed: {self.first_failed_required})" if self.first_failed_required else ""
        if self.first_failed_required and self.first_failed_detail and not self.ok:
            why = f" (first failed: {self.first_failed_required}: {self.first_failed_detail})"
        missed = (f"; warning: the gold fails optional assertion(s) {', '.join(self.gold_missed)}: a typo?"
                  if self.gold_missed else "")
        missed += (f"; warning: noop passes {', '.join(self.noop_passed_targets)}, which the board meets before any "
                   "edit: not a test of the change" if self.noop_passed_targets else "")
        missed += (f"; warning: noop fails only on {', '.join(self.noop_fails_only_process)}, which read how a run "
                   "ends or what it commits, never the board: no assertion recognises the change itself"
                   if self.noop_fails_only_process else "")
        return f"{self.task_id}: {self.agent} {self.verdict}{why}, expected {EXPECTED[self.agent]}{missed}"


def _agent(kind: str) -> Agent:
    return GoldAgent() if kind == "gold" else NoopAgent()


def run_trials(
    root: Path,
    task_ids: Sequence[str],
    *,
    copperhead_cli: str | None = None,
    on_done: Callable[[TrialResult], None] | None = None,
) -> list[TrialResult]:
    """Gold and noop once each on every task, in throwaway sandboxes. Raises UserError when a task
    cannot run at all (it does not validate, its fixture tree is missing, no kicad-cli)."""
    if not task_ids:
        return []
    require_kicad_cli()
    catalog = Catalog(root)
    tasks = [catalog.task(t) for t in task_ids]
    for task in tasks:
        ensure_runnable(root, task)
    setup_cli = _setup_cli(copperhead_cli, root, tasks)
    environment = probe(setup_cli)
    results: list[TrialResult] = []
    sandbox_root = Path(tempfile.mkdtemp(prefix="cbledger-trial-"))
    try:
        # confined where bubblewrap is there; a trial records nothing, so without it it still runs
        confinement = isolation.confinement(False, (root, sandbox_root))
    except UserError:
        confinement = isolation.Confinement(None)
    try:
        for task in tasks:
            for kind in EXPECTED:
                settings = steps.RunSettings(
                    root=root, catalog=catalog, agent=_agent(kind), run_mode="gold" if kind == "gold" else "noop",
                    suite_version=UNRECORDED, environment=environment, price_table=None, ablations=Ablations(),
                    sandbox_root=sandbox_root, keep_sandboxes=False, copperhead=setup_cli,
                    actor=Actor(kind="runner", name="cbledger-trial"), confinement=confinement,
                )
                try:
                    result = _one(settings, PlannedRun(task, f"harness:{kind}", 1, 1), kind)
                except UserError as exc:
                    result = TrialResult(task.id, kind, f"could not run ({exc})", None)
                results.append(result)
                if on_done:
                    on_done(result)
    finally:
        shutil.rmtree(sandbox_root, ignore_errors=True)
    return results


def _setup_cli(copperhead_cli: str | None, root: Path, tasks: Sequence[Task]):
    """The copperhead CLI for setup commands and `check_clean`; refused when a task to try needs
    it and there is none, rather than blaming the task when its gold then fails `check_clean`."""
    try:
        cli, why = locate(copperhead_cli, root), None
    except UserError as exc:
        cli, why = None, str(exc)
    if cli is not None:
        return cli
    needs = [t.id for t in tasks if t.manifest.setup.commands or any(a.type == "check_clean" for a in t.assertions)]
    if needs:
        raise UserError(
            f"{why or f'no copperhead CLI (--copperhead-cli, ${CLI_ENV}, or the install under {root / INSTALL_DIR})'}; "
            f"{', '.join(needs)} need{'s' if len(needs) == 1 else ''} it to run (its setup or its copperhead check): "
            "nothing tried (scripts/bootstrap installs it)"
        )
    return None


def _one(settings: steps.RunSettings, planned: PlannedRun, kind: str) -> TrialResult:
    """Steps 1 to 7 of a run (docs/RUNNER.md section 2); the sandbox is removed whatever happens."""
    task = planned.task
    fixture = settings.catalog.fixture_for(task)
    start = steps.open_sandbox(settings, planned)
    try:
        seed = steps.plant_seed(settings, start, task, fixture)
        baseline = steps.set_up(settings, planned, start, seed)
        agent_run = steps.run_agent(settings, planned, fixture, start, baseline)
        end = steps.capture_end_state(start, seed, baseline)
        verified = steps.verify_end_state(start, fixture, end, steps.check_with(settings, task), settings.confinement)
        graded = steps.grade_end_state(task, fixture, baseline, agent_run, end, verified)
    finally:
        steps.remove_sandbox(settings, start)
    g = graded.grade
    return judged(task, kind, g.verdict, g.first_failed_required, g.outcomes)


def judged(
    task: Task, kind: str, verdict: str, first_failed_required: str | None, outcomes: Sequence[AssertionOutcome],
) -> TrialResult:
    """What the bump's trial makes of a gold or noop run's grade: for the trial's own runs, and
    for a draft's (`run --draft`), which are that trial ahead of the bump."""
    missed = tuple(o.id for o in outcomes if o.status == "fail" and not o.required) if kind == "gold" else ()
    # an edit task's targets recognise the change; a refusal's may be met by doing nothing at all
    edit = task.manifest.expected_outcome == "edit"
    idle = tuple(o.id for o in outcomes if o.status == "pass" and o.id.startswith("target-")) if kind == "noop" and edit else ()
    failed = [o for o in outcomes if o.status == "fail" and o.required] if kind == "noop" and edit else []
    process = () if any(o.evidence_source == "end-state" for o in failed) else tuple(o.id for o in failed)
    detail = next((o.detail for o in outcomes if o.id == first_failed_required), None)
    return TrialResult(task.id, kind, verdict, first_failed_required, missed, idle, process, detail)


def require_discriminating(results: Sequence[TrialResult], what: str) -> None:
    """Refuses, naming every task whose gold failed or whose noop passed."""
    bad = [r for r in results if not r.ok]
    if bad:
        raise UserError(
            f"{what}: the scripted agents do not separate {len({r.task_id for r in bad})} task(s): "
            + "; ".join(str(r) for r in bad)
            + " (gold must pass and noop must fail every task)"
        )
