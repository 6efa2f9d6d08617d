"""The shape of a suite run: concurrency that changes nothing but the wall clock, a dry run that
writes nothing, repeats that never share a sandbox, and ablations that reach both the record and
the harness configuration."""

from __future__ import annotations

import itertools
import json
from collections import Counter

import pytest

from cbledger.ledger.verify import verify_chain
from tests.runner_project import REFUSAL_TASK, RENAME_TASK, build_project, read_record, standin

pytestmark = [pytest.mark.kicad, pytest.mark.shared]


def verdicts(project, runs) -> Counter:
    grades = {g.run_id: g for g in project.grades()}
    return Counter(
        (r.task.id, r.campaign.slot, grades[r.run_id].verdict, tuple(a.status for a in grades[r.run_id].assertions))
        for r in runs
    )


@pytest.mark.slow
def test_jobs_3_matches_jobs_1_with_a_contiguous_chain_and_separate_sandboxes(tmp_path, shared_real, kicad_cli):
    project = build_project(tmp_path, shared_real)
    one = project.run("--suite", "smoke", "--agent", "gold", "--repeats", "2", "--jobs", "1", "--keep-sandboxes")
    assert one.exit_code == 0, one.output
    serial = project.runs()
    # the same command again is the same campaign, every slot recorded: nothing runs
    again = project.run("--suite", "smoke", "--agent", "gold", "--repeats", "2", "--jobs", "3")
    assert again.exit_code == 0, again.output
    assert "4 of 4 slot(s) recorded, 0 to run" in again.stderr
    assert project.runs() == serial
    three = project.run("--suite", "smoke", "--agent", "gold", "--repeats", "2", "--jobs", "3", "--keep-sandboxes",
                        "--campaign", "parallel")
    assert three.exit_code == 0, three.output
    parallel = project.runs()[len(serial):]

    # --repeats overrides the tasks' own (1): two of each, numbered, each knowing the plan; a new
    # campaign of the same model and condition continues the numbering
    for runs, first in ((serial, 1), (parallel, 3)):
        assert sorted((r.task.id, r.repeat, r.repeats_planned) for r in runs) == sorted(
            (t, n, 2) for t in (RENAME_TASK, REFUSAL_TASK) for n in (first, first + 1)
        )
    assert {r.campaign.slot for r in parallel} == {1, 2}
    assert all(r.run_id.startswith("parallel.") for r in parallel)
    assert verdicts(project, serial) == verdicts(project, parallel)
    assert all(v[2] == "pass" for v in verdicts(project, parallel))

    # the runs really overlapped, and the chain stayed one line with each run's pair adjacent
    spans = sorted((r.timings.started_at, r.timings.ended_at) for r in parallel)
    assert any(later[0] < earlier[1] for earlier, later in itertools.pairwise(spans))
    events = project.events()
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert verify_chain(project.ledger).ok
    for i, ev in enumerate(events):
        if ev.id.startswith("run:"):
            assert events[i + 1].id.startswith(f"grade:{ev.body.run_id}:")

    # repeats never share a sandbox: one directory per run id, each a separate repository
    all_runs = serial + parallel
    assert len({r.run_id for r in all_runs}) == len(all_runs) == 8
    kept = sorted(p.name for p in project.sandboxes.iterdir())
    assert kept == sorted(r.run_id for r in all_runs)
    assert all((project.sandboxes / name / ".git").is_dir() for name in kept)


def test_dry_run_prints_the_plan_and_writes_nothing(tmp_path, shared_real, kicad_cli):
    project = build_project(tmp_path, shared_real)
    before = project.ledger_bytes()
    result = project.run("--suite", "smoke", "--agent", "gold", "--repeats", "3", "--dry-run")
    assert result.exit_code == 0, result.output
    assert "plan: agent gold, model harness:gold, 2 task(s), 6 run(s), jobs 1" in result.stdout
    for task in (RENAME_TASK, REFUSAL_TASK):
        for n in (1, 2, 3):
            assert f"{task}  tier " in result.stdout and f"slot {n}/3  " in result.stdout
    assert project.ledger_bytes() == before
    assert not project.runs_dir.exists() or list(project.runs_dir.iterdir()) == []
    assert not project.sandboxes.exists()


@pytest.mark.slow
def test_ablations_reach_the_record_and_the_harness_config(tmp_path, shared_real, kicad_cli, monkeypatch):
    monkeypatch.delenv("COPPERHEAD_BASE_URL", raising=False)
    project = build_project(tmp_path, shared_real)
    cli, record = standin(tmp_path)
    # copperhead reads no prompt variant or tool subset: such a run would be the default one
    # recorded as an ablation (it once was, through variables the harness never reads)
    refused = project.run(
        RENAME_TASK, "--agent", "copperhead", "--model", "acme:m1", "--segment", "api-cheap", "--copperhead-cli", cli,
        "--prompt-variant", "terse", "--tool-subset", "read_file, edit_file",
    )
    assert refused.exit_code == 2 and "--prompt-variant and --tool-subset: copperhead reads no prompt variant" in refused.stderr
    assert project.runs() == []
    result = project.run(
        RENAME_TASK, "--agent", "copperhead", "--model", "acme:m1", "--segment", "api-cheap", "--copperhead-cli", cli,
        "--max-turns", "7", "--max-repair-cycles", "2",
    )
    assert result.exit_code == 0, result.output
    (run,) = project.runs()
    a = run.ablations
    assert (a.max_turns, a.max_repair_cycles, a.prompt_variant, a.tool_subset) == (7, 2, None, None)
    config = json.loads(run.sandbox.seed_config)
    assert config["maxTurns"] == 7 and config["maxRepairCycles"] == 2 and config["llmCache"] is False
    (call,) = [c for c in read_record(record) if c["command"] == "do"]
    assert call["config"]["maxTurns"] == 7 and call["config"]["maxRepairCycles"] == 2
    assert call["argv"][-2:] == ["--max-turns", "7"]
    assert run.stats.max_turns == 7

    # the same task without ablations starts from a different seed (the config is part of it)
    plain = project.run(RENAME_TASK, "--agent", "gold")
    assert plain.exit_code == 0, plain.output
    gold = project.runs()[-1]
    assert gold.ablations.max_turns is None and json.loads(gold.sandbox.seed_config)["maxTurns"] == 40
    assert gold.sandbox.seed_sha != run.sandbox.seed_sha
