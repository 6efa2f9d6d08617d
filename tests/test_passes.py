"""Feedback passes without the harness: the allowance file, the session's later passes, how a
rolled-back pass is carried into the next, and how passes fold and render."""

from __future__ import annotations

import json
import os
import subprocess
from fractions import Fraction
from pathlib import Path

import msgspec
import pygit2
import pytest

from cbledger.errors import UserError
from cbledger.ledger.events import PassRef
from cbledger.projections import leaderboard, passes_part
from cbledger.projections.fold import current_suite, fold
from cbledger.runner import passes as runner_passes
from cbledger.runner import preserve
from cbledger.runner.endpoint import script
from cbledger.tasks import passes
from tests.factories import grade_recorded, run_cli, run_id, run_recorded, run_retracted

REPO = Path(__file__).resolve().parent.parent


# --------------------------------------------------------------------------- tasks/passes.json


def _allowances(tmp_path: Path, doc, known=frozenset({"led-resistor-swap"})):
    (tmp_path / "passes.json").write_text(json.dumps(doc) if not isinstance(doc, str) else doc)
    return passes.allowances(tmp_path, set(known))


def test_the_allowance_file_is_read_and_each_task_gets_at_most_its_allowance(tmp_path):
    assert passes.allowances(tmp_path) == {}  # no file: every task allows one pass
    assert _allowances(tmp_path, {"format": passes.FORMAT, "tasks": {"led-resistor-swap": 3}}) == {"led-resistor-swap": 3}
    assert passes.granted(3, None) == 1  # not asked: one pass, as every run before passes
    assert passes.granted(3, 2) == 2 and passes.granted(3, 9) == 3 and passes.granted(1, 5) == 1
    with pytest.raises(UserError, match="--passes must be at least 1"):
        passes.granted(3, 0)


@pytest.mark.parametrize(("doc", "message"), [
    ({"format": "other/1", "tasks": {}}, r"passes\.json: format: must be 'cbledger-passes/1'"),
    ({"format": passes.FORMAT, "tasks": {"led-resistor-swap": 0}}, r"tasks\.led-resistor-swap: passes allowed must be an integer from 1 to 10"),
    ({"format": passes.FORMAT, "tasks": {"led-resistor-swap": 11}}, r"tasks\.led-resistor-swap: passes allowed"),
    ({"format": passes.FORMAT, "tasks": {"led-resistor-swap": True}}, r"tasks\.led-resistor-swap: passes allowed"),
    ({"format": passes.FORMAT, "tasks": {"no-such-task": 2}}, r"tasks\.no-such-task: no such task"),
    ({"format": passes.FORMAT, "tasks": [], }, r"passes\.json: tasks: must be an object"),
    ({"format": passes.FORMAT, "extra": 1}, r"passes\.json: extra: unknown field"),
    ('{"format": "cbledger-passes/1", "format": "x"}', r"passes\.json"),
])
def test_a_bad_allowance_file_is_refused_naming_the_file_and_field(tmp_path, doc, message):
    with pytest.raises(UserError, match=message):
        _allowances(tmp_path, doc)


def test_more_than_one_pass_is_refused_for_a_task_that_is_not_a_do_task(tmp_path):
    """A feedback pass is told its hints in the prompt, which copperhead sync and create take
    none of: a second pass of such a task never ran, nothing said so, and the run recorded
    `passes.allowed: 2` all the same."""
    doc = {"format": passes.FORMAT, "tasks": {"led-bom-drift-sync": 2, "led-resistor-swap": 2}}
    (tmp_path / "passes.json").write_text(json.dumps(doc))
    modes = {"led-bom-drift-sync": "sync", "led-resistor-swap": "do"}
    with pytest.raises(UserError, match=r"tasks\.led-bom-drift-sync: 2 passes allowed, but a feedback pass is told its "
                                        r"hints in the prompt and copperhead sync takes none"):
        passes.allowances(tmp_path, set(modes), modes)
    doc["tasks"]["led-bom-drift-sync"] = 1  # one pass is every task's
    (tmp_path / "passes.json").write_text(json.dumps(doc))
    assert passes.allowances(tmp_path, set(modes), modes) == doc["tasks"]
    from cbledger.tasks.catalog import Catalog

    assert passes.modes(Catalog(REPO))["led-bom-drift-sync"] == "sync"


def test_validate_reports_a_bad_allowance_file(tmp_path):
    import shutil

    root = tmp_path / "project"
    for name in ("tasks", "fixtures", "suites"):
        shutil.copytree(REPO / name, root / name, ignore=shutil.ignore_patterns("tree"))
    (root / "tasks" / "passes.json").write_text(json.dumps({"format": passes.FORMAT, "tasks": {
        "nope": 2, "led-resistor-swap": 0, "led-bom-drift-sync": 2, "mcu-rename-i2c-nets": 2}}))
    result = run_cli(["validate", "--root", root])
    assert result.exit_code != 0, result.output
    # every entry in error, each by its field, the file named once (it was the first alone, its path twice)
    said = [line for line in result.stderr.splitlines() if line.startswith("error: tasks/passes.json")]
    assert [line.split(": ")[2] for line in said] == ["tasks.nope", "tasks.led-resistor-swap", "tasks.led-bom-drift-sync"], said
    assert "no such task" in said[0] and str(root) not in result.stderr, result.stderr


def test_the_dry_run_shows_the_passes_each_attempt_may_take(tmp_path):
    import shutil

    root = tmp_path / "project"
    for name in ("tasks", "fixtures", "suites"):
        shutil.copytree(REPO / name, root / name, ignore=shutil.ignore_patterns("tree"))
    (root / "tasks" / "passes.json").write_text(json.dumps({"format": passes.FORMAT, "tasks": {"led-resistor-swap": 2}}))
    args = ["run", "led-resistor-swap", "mcu-rename-i2c-nets", "--agent", "gold", "--repeats", "1", "--dry-run", "--root", root]
    text = run_cli([*args, "--passes", "3"])
    assert text.exit_code == 0, text.output
    assert "led-resistor-swap  tier medium  slot 1/1  up to 2 passes  would run" in text.stdout  # capped by the task
    assert "mcu-rename-i2c-nets  tier simple  slot 1/1  would run\n" in text.stdout  # allowed one
    as_json = json.loads(run_cli([*args, "--passes", "3", "--json"]).stdout)
    assert {r["task"]: r["passesAllowed"] for r in as_json["runs"]} == {"led-resistor-swap": 2, "mcu-rename-i2c-nets": 1}
    unasked = json.loads(run_cli([*args, "--json"]).stdout)
    assert {r["passesAllowed"] for r in unasked["runs"]} == {1}  # one pass unless asked
    (root / "tasks" / "passes.json").write_text("{")
    bad = run_cli([*args, "--passes", "2"])
    assert bad.exit_code == 2 and "passes.json" in bad.output and not (root / "results").exists()


@pytest.mark.kicad
def test_a_run_refused_for_its_allowance_file_keeps_no_campaign(tmp_path, kicad_cli):
    """`run --passes` over a bad tasks/passes.json exited 2 after keeping the campaign's plan and
    lock, in the project's results directory (a draft's workspace kept them too)."""
    import shutil

    root = tmp_path / "project"
    for name in ("tasks", "fixtures", "suites"):
        shutil.copytree(REPO / name, root / name)
    for args in (("init",), ("suite", "bump", "--reason", "x", "--skip-trial")):
        assert run_cli([*args, "--root", root]).exit_code == 0
    (root / "tasks" / "passes.json").write_text(json.dumps({"format": passes.FORMAT, "tasks": {"nope": 2}}))
    bad = run_cli(["run", "led-resistor-swap", "--agent", "gold", "--repeats", "1", "--passes", "2", "--root", root])
    assert bad.exit_code == 2 and "tasks.nope: no such task" in bad.stderr, bad.output
    campaigns = root / "results" / "campaigns"
    assert not campaigns.exists() or not any(campaigns.iterdir()), sorted(campaigns.iterdir())


def test_the_bundled_allowance_is_outside_the_suite_definitions():
    """Granting a pass must not change a grade's definitions: the file is not under tasks/<id>/."""
    from cbledger.tasks.catalog import Catalog

    assert passes.allowances(REPO / "tasks", set(Catalog(REPO).task_ids())) == {"led-resistor-swap": 2}
    assert not (REPO / "tasks" / "passes.json").is_dir() and "passes.json" not in Catalog(REPO).task_ids()


# --------------------------------------------------------------------------- session scripts


def test_a_session_serves_each_pass_its_own_exchanges(tmp_path):
    session = script.load(REPO / "sessions" / "led-resistor-swap-two-pass.json")
    assert script.for_pass(session, 1) is session
    second = script.for_pass(session, 2)
    assert second.exchanges == session.passes[0].exchanges and second.passes == []
    assert script.for_pass(session, 3).exchanges == []  # no turns scripted: the endpoint refuses pass 3
    # a session without later passes is written exactly as before
    idle = script.load(REPO / "sessions" / "idle.json")
    assert "passes" not in json.loads(script.dumps(idle))
    bad = json.loads((REPO / "sessions" / "led-resistor-swap-two-pass.json").read_text())
    bad["passes"][0]["exchanges"][0]["expect"] = {"toolResults": ["("]}
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(bad))
    with pytest.raises(UserError, match=r"\$\.passes\[0\]\.exchanges\[0\]\.expect\.toolResults\[0\]: not a regex"):
        script.load(path)


# --------------------------------------------------------------------------- carrying a pass over


def _git(cwd: Path, *args: str) -> str:
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, check=True).stdout


def _sandbox(tmp_path: Path) -> Path:
    repo = tmp_path / "sandbox"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    (repo / "board.kicad_sch").write_text("(value 1k)\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "baseline")
    return repo


def test_a_rolled_back_pass_is_restored_and_committed_by_the_runner(tmp_path):
    repo = _sandbox(tmp_path)
    # what a failed copperhead run leaves: its work stashed, the tree rolled back, its record untracked
    (repo / "board.kicad_sch").write_text("(value 680)\n")
    (repo / "docs").mkdir()
    (repo / "docs" / "BOM.md").write_text("| R1 | 680 |\n")
    _git(repo, "stash", "push", "-u", "-q", "-m", "copperhead failed run")
    record = repo / ".copperhead" / "runs" / "2026-01-01T00-00-00-000Z"
    record.mkdir(parents=True)
    (record / "transcript.jsonl").write_text("{}\n")
    r = pygit2.Repository(str(repo))
    preserve.keep_stash(r)
    assert runner_passes.carry_over(repo, 2) is True
    head = r.revparse_single("HEAD")
    assert head.message.startswith("runner: the work of pass 1, carried into pass 2")
    assert (head.author.name, head.author.email) == runner_passes.CARRY_SIGNATURE
    files = _git(repo, "show", "--name-only", "--format=", "HEAD").split()
    assert sorted(files) == ["board.kicad_sch", "docs/BOM.md"]  # the work, not copperhead's record
    assert (repo / "board.kicad_sch").read_text() == "(value 680)\n" and record.is_dir()
    assert _git(repo, "status", "--porcelain") == ""  # what copperhead's preflight needs
    assert _git(repo, "stash", "list") == "" and preserve.STASH_REF not in pygit2.Repository(str(repo)).references


def test_a_pass_that_left_a_clean_tree_is_carried_over_without_a_commit(tmp_path):
    repo = _sandbox(tmp_path)
    record = repo / ".copperhead" / "runs" / "2026-01-01T00-00-00-000Z"
    record.mkdir(parents=True)
    (record / "summary.md").write_text("refused\n")
    before = _git(repo, "rev-parse", "HEAD")
    assert runner_passes.carry_over(repo, 2) is False
    assert _git(repo, "rev-parse", "HEAD") == before and _git(repo, "status", "--porcelain") == ""
    assert "/.copperhead/runs/2026-01-01T00-00-00-000Z/" in (repo / ".git" / "info" / "exclude").read_text()


def test_a_committed_record_written_after_its_commit_is_no_work_to_carry(tmp_path):
    """A pass that committed committed copperhead's record with its work, and copperhead wrote
    the record's last lines after the commit: the runner committed those as "the work of pass 1",
    one commit more for every later pass's `commit_count`."""
    repo = _sandbox(tmp_path)
    record = repo / ".copperhead" / "runs" / "2026-01-01T00-00-00-000Z"
    record.mkdir(parents=True)
    (repo / "board.kicad_sch").write_text("(value 680)\n")
    (record / "transcript.jsonl").write_text('{"type":"run-start"}\n')
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "copperhead: the pass's work")
    with open(record / "transcript.jsonl", "a") as f:
        f.write('{"type":"run-end"}\n')
    before = _git(repo, "rev-parse", "HEAD")
    assert runner_passes.carry_over(repo, 2) is False
    assert _git(repo, "rev-parse", "HEAD") == before and _git(repo, "status", "--porcelain") == ""
    assert (record / "transcript.jsonl").read_text().endswith('{"type":"run-end"}\n')  # kept in the tree


# --------------------------------------------------------------------------- fold and render


def _attempt_events(verdicts: list[str], first_n: int = 1, allowed: int = 3) -> list:
    events = []
    first = run_id(first_n)
    for index, verdict in enumerate(verdicts, 1):
        n = first_n + index - 1
        run = run_recorded(n)
        ref = PassRef(index=1, allowed=allowed) if index == 1 else PassRef(
            index=index, allowed=allowed, first=first, previous=run_id(n - 1), hints=["a hint"])
        events.append(msgspec.structs.replace(run, body=msgspec.structs.replace(run.body, passes=ref)))
        grade = grade_recorded(n, verdict=verdict)
        events.append(msgspec.structs.replace(grade, body=msgspec.structs.replace(
            grade.body, task_manifest_hash=run.body.task.manifest_hash)))
    return events


def _retraction(rid: str):
    event = run_retracted(99)
    return msgspec.structs.replace(event, id=f"run.retracted:{rid}", body=msgspec.structs.replace(event.body, run_id=rid))


def _sequenced(events: list) -> list:
    return [msgspec.structs.replace(e, seq=i) for i, e in enumerate(events, 1)]


def test_later_passes_fold_apart_and_the_figures_count_each_attempt_once():
    # three attempts of one model: passed at pass 2, passed at pass 1, never passed in 3
    events = _sequenced([*_attempt_events(["fail", "pass"], 1), *_attempt_events(["pass"], 10),
                         *_attempt_events(["fail", "fail", "fail"], 20)])
    state = fold(events)
    assert sorted(state.runs) == [run_id(1), run_id(10), run_id(20)]
    assert sorted(state.later_passes) == [run_id(2), run_id(21), run_id(22)]
    found = passes_part.attempts(state, "1.1.0")
    assert [a.verdicts for a in found] == [("fail", "pass"), ("pass",), ("fail", "fail", "fail")]
    (row,) = passes_part.rows(found)  # one model
    # at pass 1: 1 of 3; by pass 2: 2 of 3; by pass 3: still 2; the two that passed took 2 and 1
    assert (row.attempts, row.allowed, row.by_pass) == (3, 3, (1, 2, 2))
    assert row.mean_passes_to_pass == Fraction(3, 2)
    rendered = "\n".join(passes_part.render(state, "1.1.0"))
    assert "| `claude-sonnet-4.5` | agent, max-turns=40 | 3 | 3 | 33.3% (1/3) | 66.7% (2/3) | 66.7% (2/3) | 1.50 |" in rendered
    # a retracted later pass ends its attempt there
    retracted = fold(_sequenced([*_attempt_events(["fail", "pass"], 1), _retraction(run_id(2))]))
    assert [a.verdicts for a in passes_part.attempts(retracted, "1.1.0")] == [("fail",)]
    # a later pass is not a grade without a run, and it is no headline row
    assert "grade-without-run" not in leaderboard.render(state)


def test_a_ledger_without_passes_renders_no_passes_section():
    """The committed ledger before its first run made with passes has no section; with it, the
    section is there and LEADERBOARD.md is current."""
    from cbledger.ledger.store import LedgerStore

    items = list(LedgerStore(REPO / "results" / "ledger" / "events.jsonl").read())
    whole = fold(items)
    first = min(e.seq for e in (*whole.runs.values(), *whole.later_passes.values()) if e.run.passes)
    before = fold([i for i in items if i.seq < first])
    assert before.later_passes == {}
    assert passes_part.render(before, "1.3.0") == []
    assert passes_part.TITLE not in leaderboard.render(before, "1.3.0")
    assert passes_part.render(whole, "1.3.0") != []
    assert passes_part.TITLE in leaderboard.render(whole, "1.3.0")
    # LEADERBOARD.md shows the current suite, whose runs (fresh gold and noop, once it moved past
    # 1.3.0) may have taken no passes: it has the section exactly when that suite's attempts did.
    current = current_suite(whole)
    assert current is not None
    shown = passes_part.TITLE in (REPO / "LEADERBOARD.md").read_text()
    assert shown == (passes_part.render(whole, current) != [])
    result = run_cli(["project", "leaderboard", "--check", "--root", REPO])
    assert result.exit_code == 0, result.output


def test_an_environment_failure_on_a_later_pass_does_not_retry_an_attempt_whose_first_pass_counts():
    """The attempt's record is its pass 1 (`Campaign.missing` reads that one on a resume). A
    provider fault on pass 2 leaves a pass 1 that reached the model and counts in its row: trying
    the slot again would put the same repeat in the row twice and pay for it twice."""
    from cbledger.ledger.events import CampaignSlot, HarnessFailure
    from cbledger.runner import campaign as campaign_mod
    from cbledger.runner.execute import RunOutput
    from cbledger.runner.plan import PlannedRun
    from cbledger.runner.suite_run import retry_of

    first = msgspec.structs.replace(run_recorded(1).body, campaign=CampaignSlot(id="c", slot=1, attempt=1),
                                    passes=PassRef(index=1, allowed=2))
    fault = HarnessFailure(kind="provider-status", detail="provider error: 529 overloaded", turn=3, status=529)
    second = msgspec.structs.replace(first, run_id=first.run_id + "-p2", harness_failure=fault,
                                     passes=PassRef(index=2, allowed=2, first=first.run_id, previous=first.run_id))
    grade = grade_recorded(1).body

    def outputs(*runs):
        return [RunOutput(run=r, grade=grade, events=[], staged=Path("s"), final=Path("f"), sandbox=None,
                          pending=Path("p")) for r in runs]

    planned = PlannedRun(task=None, model_id=first.model.id, repeat=1, repeats_planned=1, campaign="c", slot=1,
                         attempt=1)
    assert not campaign_mod.retryable(first, 1)
    assert retry_of(planned, outputs(first, second), retry_env=1) is None
    # pass 1 failed for the environment: the attempt is tried again, as a resume would
    failed_first = msgspec.structs.replace(first, harness_failure=fault)
    again = retry_of(planned, outputs(failed_first), retry_env=1)
    assert again is not None and again.attempt == 2


@pytest.mark.parametrize("spent_by_pass_1, passes_run", [(1_000, 1), (999, 2)])
def test_no_further_pass_starts_once_the_campaigns_budget_is_spent(tmp_path, monkeypatch, spent_by_pass_1, passes_run):
    """A pass started with the budget spent is refused at its first model call by the proxy and
    would be recorded as a run the model never answered: it is not started, as no run is."""
    import contextlib
    import datetime as dt
    from types import SimpleNamespace

    from cbledger.ledger.events import ModelPrice
    from cbledger.runner import budget
    from cbledger.runner import execute as steps

    purse = budget.Purse(1_000)
    settings = SimpleNamespace(agent=SimpleNamespace(money=budget.Guard(
        ModelPrice(segment="api-frontier", pinning="strong", input="3", output="15"), None, purse)))
    planned = SimpleNamespace(task=SimpleNamespace(assertions=[], manifest=SimpleNamespace(
        request=SimpleNamespace(prompt="do it"))), campaign="c")
    started: list[str] = []

    @contextlib.contextmanager
    def prepared(settings, planned):
        yield SimpleNamespace(start=steps.RunStart("r1", tmp_path, dt.datetime.now(dt.UTC), 0.0), fixture=None, baseline=None)

    def run_agent(settings, planned, fixture, run_start, baseline, options):
        started.append(run_start.run_id)
        purse.add(spent_by_pass_1 if len(started) == 1 else 1)
        return None

    def finish(settings, planned, ready, run_start, agent_run, ref):
        grade = SimpleNamespace(verdict="fail", assertions=[])
        return SimpleNamespace(grade=grade, run=SimpleNamespace(run_id=run_start.run_id)), object()

    monkeypatch.setattr(steps, "prepared_sandbox", prepared)
    monkeypatch.setattr(steps, "run_agent", run_agent)
    monkeypatch.setattr(steps, "finish_or_record", finish)
    monkeypatch.setattr(runner_passes, "observed", lambda graded: None)
    monkeypatch.setattr(runner_passes.hints_mod, "hints", lambda *a: [SimpleNamespace(text="look again")])
    monkeypatch.setattr(runner_passes.hints_mod, "message", lambda prompt, found, carried: "look again")
    monkeypatch.setattr(runner_passes, "carry_over", lambda workdir, index: False)
    outputs = runner_passes.execute_passes(settings, planned, 2)
    assert len(outputs) == passes_run and started[:1] == ["r1"] and len(started) == passes_run
