"""Preflight refuses a bad suite run before anything exists: each refusal names what is wrong,
exits non-zero, and leaves the ledger byte-identical with no bundle and no sandbox."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from tests.runner_project import MIC_FIXTURE, MIC_SCH, RENAME_TASK, build_project, standin

pytestmark = [pytest.mark.kicad, pytest.mark.shared]


@pytest.fixture
def project(tmp_path, shared_real, kicad_cli, monkeypatch):
    monkeypatch.delenv("COPPERHEAD_CLI", raising=False)
    monkeypatch.delenv("COPPERHEAD_BASE_URL", raising=False)
    monkeypatch.delenv("CBLEDGER_KICAD_CLI", raising=False)
    return build_project(tmp_path, shared_real)


def refused(project, *args, env=None, expect: str | list[str]) -> str:
    before = project.ledger_bytes()
    result = project.run(*args, env=env)
    assert result.exit_code != 0, result.output
    expected = [expect] if isinstance(expect, str) else expect
    for phrase in expected:
        assert phrase in result.stderr, (phrase, result.output)
    assert "Traceback" not in result.output
    assert project.ledger_bytes() == before
    assert not project.runs_dir.exists() or list(project.runs_dir.iterdir()) == []
    assert not project.sandboxes.exists(), "preflight must refuse before the sandbox root is made"
    return result.stderr


def test_unknown_suite(project):
    refused(project, "--suite", "nightly", "--agent", "gold", expect=["nightly.json: no such suite", "known: smoke"])


def test_unknown_task(project):
    refused(project, RENAME_TASK, "no-such-task", "--agent", "gold", expect="unknown task(s): no-such-task")
    assert "did you mean" not in refused(project, RENAME_TASK, "no-such-task", "--agent", "gold", expect="no-such-task")


def test_a_misspelled_task_is_refused_with_the_id_it_was_close_to(project):
    typo = RENAME_TASK.replace("-", "_", 1)
    refused(project, typo, "--agent", "gold", expect=[f"unknown task(s): {typo}", f"(did you mean {RENAME_TASK!r}"])


def test_a_suite_listing_a_misspelled_task_is_named_with_its_entry(project):
    suite = project.root / "suites" / "smoke.json"
    doc = json.loads(suite.read_text())
    typo = doc["tasks"][0] + "x"
    doc["tasks"] = [typo, *doc["tasks"][1:]]
    suite.write_text(json.dumps(doc))
    refused(project, "--suite", "smoke", "--agent", "gold",
            expect=[f"{suite}: tasks[0]: unknown task(s): {typo}", f"(did you mean {typo[:-1]!r}"])


def test_fixture_tree_edited_after_its_hash_was_recorded(project):
    sch = project.root / "fixtures" / MIC_FIXTURE / "tree" / MIC_SCH
    sch.write_bytes(sch.read_bytes().replace(b'(label "DATA"', b'(label "DATA2"', 1))
    refused(project, "--suite", "smoke", "--agent", "gold", expect=[f"{MIC_FIXTURE}/fixture.json: sha256", "but tree/ hashes to"])


def test_task_changed_without_a_suite_bump(project):
    path = project.root / "tasks" / RENAME_TASK / "assertions.json"
    assertions = json.loads(path.read_text())
    assertions[0]["weight"] = 5
    path.write_text(json.dumps(assertions, indent=2) + "\n")
    # which file changed, as `validate` says it, not only which task
    refused(project, "--suite", "smoke", "--agent", "gold",
            expect=[f"(task {RENAME_TASK}: assertions.json changed)", "run `cbledger suite bump"])
    status = project.cli("suite", "status")
    assert status.exit_code == 1 and f"differs: task {RENAME_TASK}: assertions.json changed" in status.stdout


def test_a_new_task_run_before_any_bump_is_pointed_to_a_draft(project):
    """`suite bump` alone would fail a new task's trial (its gold is not captured yet)."""
    new = project.root / "tasks" / "brand-new"
    shutil.copytree(project.root / "tasks" / RENAME_TASK, new)
    doc = json.loads((new / "task.json").read_text())
    (new / "task.json").write_text(json.dumps({**doc, "id": "brand-new"}, indent=2) + "\n")
    refused(project, "brand-new", "--agent", "gold", expect=[
        "(task brand-new)", "a task no version records yet (brand-new) is run with --draft until its gold passes",
    ])


def test_a_bump_repeats_the_warnings_validate_gives_on_the_tasks_it_records(project):
    """A guard on a file the fixture does not have (a typo) was recorded without a word by an
    author who skipped `validate`: it then passes every run, and guards nothing."""
    path = project.root / "tasks" / RENAME_TASK / "assertions.json"
    assertions = json.loads(path.read_text())
    assertions.append({"id": "schematic-untouched", "type": "file_unchanged", "args": {"path": "mic_board.kicad_sch"},
                       "weight": 1, "required": True})
    path.write_text(json.dumps(assertions, indent=2) + "\n")
    bumped = project.bump("a guard with a typo")
    index = len(assertions) - 1
    assert (f"warning: tasks/{RENAME_TASK}/assertions.json: [{index}].args.path: 'mic_board.kicad_sch' is not in "
            f"fixtures/{MIC_FIXTURE}/tree") in bumped.stderr


def test_kicad_cli_named_by_the_environment_is_missing(project):
    refused(
        project, "--suite", "smoke", "--agent", "gold",
        env={"CBLEDGER_KICAD_CLI": str(project.root / "no" / "kicad-cli")},
        expect=["$CBLEDGER_KICAD_CLI names", "not an executable kicad-cli"],
    )


def test_kicad_cli_not_on_path(project, tmp_path):
    bin_dir = tmp_path / "bin-without-kicad"
    bin_dir.mkdir()
    for tool in ("git", "node"):
        found = shutil.which(tool)
        if found:
            os.symlink(found, bin_dir / tool)
    refused(project, "--suite", "smoke", "--agent", "gold", env={"PATH": str(bin_dir)}, expect="kicad-cli is required to verify runs but was not found")


def test_copperhead_cli_missing(project):
    refused(project, "--suite", "smoke", "--agent", "copperhead", "--model", "acme:m1", "--segment", "api-cheap",
            expect="--agent copperhead needs the copperhead CLI")
    refused(project, "--suite", "smoke", "--agent", "copperhead", "--model", "acme:m1", "--segment", "api-cheap",
            "--copperhead-cli", str(project.root / "missing" / "cli.js"), expect="cli.js does not exist")


@pytest.mark.parametrize("model", ["../x", "a/b", "x" * 200, "..", "a b", "acme:m1\n"])
def test_model_id_that_is_not_a_safe_path_segment(project, tmp_path, model):
    cli, _ = standin(tmp_path)
    refused(project, "--suite", "smoke", "--agent", "copperhead", "--model", model, "--segment", "api-cheap",
            "--copperhead-cli", str(cli), expect="is not a safe path segment")


def test_empty_model_id(project, tmp_path):
    cli, _ = standin(tmp_path)
    refused(project, "--suite", "smoke", "--agent", "copperhead", "--model", "", "--copperhead-cli", str(cli), expect="needs --model")


@pytest.mark.parametrize("agent", ["copperhead", "replay"])
def test_agent_runs_need_a_model(project, tmp_path, agent):
    cli, _ = standin(tmp_path)
    refused(project, "--suite", "smoke", "--agent", agent, "--copperhead-cli", str(cli), expect=f"--agent {agent} needs --model")


def test_unpriced_model_without_a_segment(project, tmp_path):
    cli, record = standin(tmp_path)
    refused(project, "--suite", "smoke", "--agent", "copperhead", "--model", "acme:m1", "--copperhead-cli", str(cli),
            expect=["model acme:m1 is not in the latest price table", "--segment"])
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"tableVersion": "p1", "effectiveDate": "2026-01-01", "models": {
        "acme:other": {"segment": "api-cheap", "pinning": "strong", "input": "1", "output": "2"}}}))
    assert project.cli("pricing", "publish", prices).exit_code == 0
    refused(project, "--suite", "smoke", "--agent", "copperhead", "--model", "acme:m1", "--copperhead-cli", str(cli),
            expect="model acme:m1 is not in the latest price table")
    assert not any(r.get("command") == "do" for r in _records(record))


def test_compat_model_without_its_endpoint(project, tmp_path):
    cli, record = standin(tmp_path)
    refused(project, "--suite", "smoke", "--agent", "copperhead", "--model", "compat:qwen-7b", "--segment", "open-weight-hosted",
            "--copperhead-cli", str(cli), expect="set $COPPERHEAD_BASE_URL")
    assert not any(r.get("command") == "do" for r in _records(record))


def test_segment_that_is_not_a_cost_segment(project, tmp_path):
    cli, record = standin(tmp_path)
    refused(project, "--suite", "smoke", "--agent", "copperhead", "--model", "acme:m1", "--segment", "api-pricey",
            "--copperhead-cli", str(cli), expect=["--segment 'api-pricey' is not a cost segment", "api-cheap"])
    assert not any(r.get("command") == "do" for r in _records(record))


def test_scripted_agents_take_no_model(project):
    refused(project, "--suite", "smoke", "--agent", "gold", "--model", "acme:m1", expect="takes no --model")


def _records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.is_file() else []


def test_copperhead_refuses_modes_it_does_not_drive(tmp_path, shared_real, kicad_cli, monkeypatch):
    monkeypatch.delenv("COPPERHEAD_BASE_URL", raising=False)
    project = build_project(tmp_path, shared_real, bump=False)
    path = project.root / "tasks" / RENAME_TASK / "task.json"
    task = json.loads(path.read_text())
    task["mode"], task["request"] = "check", {}
    path.write_text(json.dumps(task, indent=2) + "\n")
    project.bump()
    cli, record = standin(tmp_path)
    refused(project, "--suite", "smoke", "--agent", "copperhead", "--model", "acme:m1", "--segment", "api-cheap",
            "--copperhead-cli", str(cli), expect=f"drives only `do`, `sync` and `create` tasks; not: {RENAME_TASK} (check makes no model call")
    assert not any(r.get("command") == "do" for r in _records(record))


# Ablations and --jobs are checked before any agent runs: before, `--max-turns 0` and a key in
# `--prompt-variant` ran the whole suite and failed at the append, and `--jobs 0` was accepted.


def test_an_ablation_out_of_range_is_refused_up_front(project):
    refused(project, RENAME_TASK, "--agent", "gold", "--max-turns", "0",
            expect="Invalid value for '--max-turns'")


def test_a_negative_repair_cycle_cap_is_refused_up_front(project):
    refused(project, RENAME_TASK, "--agent", "gold", "--max-repair-cycles", "-1",
            expect="Invalid value for '--max-repair-cycles'")


def test_a_credential_in_an_ablation_is_refused_without_echoing_it(project):
    key = "sk-" + "variant0123456789" * 2
    stderr = refused(project, RENAME_TASK, "--agent", "gold", "--prompt-variant", f"terse {key}",
                     expect=["--prompt-variant holds a credential (openai-or-anthropic-key)", "nothing was run"])
    assert key not in stderr
    refused(project, RENAME_TASK, "--agent", "gold", "--tool-subset", f"read_file,{key}",
            expect="--tool-subset holds a credential")


def test_a_credential_as_the_model_id_is_refused(project):
    key = "sk-" + "model0123456789" * 2
    stderr = refused(project, RENAME_TASK, "--agent", "copperhead", "--model", key, expect="--model holds a credential")
    assert key not in stderr


@pytest.mark.parametrize("jobs", ["0", "-2"])
def test_jobs_below_one_is_refused(project, jobs):
    refused(project, RENAME_TASK, "--agent", "gold", "--jobs", jobs, expect="Invalid value for '--jobs'")
