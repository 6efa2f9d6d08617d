"""The copperhead adapter, driven against a stand-in CLI (tests/data/copperhead-standin/cli.js)
that records how it was invoked, edits and commits like copperhead, and writes a real-shaped
transcript. Also the two things the runner must do to a misbehaving harness: kill it at its
wall-clock cap, and refuse to keep anything that carries a credential.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
from decimal import Decimal
from pathlib import Path

import msgspec
import pytest

from cbledger.runner import preserve, rescore
from cbledger.tasks.catalog import Catalog
from cbledger.workspace import Workspace
from tests.runner_project import (
    REFUSAL_TASK,
    RENAME_TASK,
    build_project,
    lingering,
    processes_with,
    read_record,
    standin,
)

pytestmark = [pytest.mark.slow, pytest.mark.kicad, pytest.mark.shared]

BASIC_ENV = {
    "PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "USER", "NODE_OPTIONS", "NODE_EXTRA_CA_CERTS", "SSL_CERT_FILE",
    # the fixed project identity, and the operator's git configuration shut out
    "GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL",
    "GIT_CONFIG_GLOBAL", "GIT_CONFIG_NOSYSTEM", "GIT_TERMINAL_PROMPT",
    # set by the sandbox to the directory it starts the harness in: the sandbox itself
    "PWD",
}
KEY_VARIABLES = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GROQ_API_KEY", "COPPERHEAD_API_KEY_ENV", "CLAUDE_CODE_OAUTH_TOKEN")
#: acme:m1 goes through copperhead's OpenAI route: its key and nothing else
#: the OpenAI SDK's base-URL variable: the recording proxy in front of the provider
ALLOWED_ENV = BASIC_ENV | {"OPENAI_API_KEY", "OPENAI_BASE_URL"}
TOKENS_IN, TOKENS_OUT = 12340, 678
PRICE_IN, PRICE_OUT = "2.5", "10"


@pytest.fixture
def clean_env(monkeypatch):
    for name in ("COPPERHEAD_CLI", "COPPERHEAD_BASE_URL", "CBLEDGER_KICAD_CLI", *KEY_VARIABLES):
        monkeypatch.delenv(name, raising=False)


def publish_prices(project, tmp_path) -> None:
    table = {
        "tableVersion": "2026-03-test",
        "effectiveDate": "2026-03-01",
        "models": {"acme:m1": {"segment": "api-frontier", "pinning": "strong", "input": PRICE_IN, "output": PRICE_OUT}},
        "nullCostRoutes": {"codex": {"segment": "saved-login", "pinning": "weak", "reason": "saved ChatGPT login"}},
    }
    path = tmp_path / "prices.json"
    path.write_text(json.dumps(table))
    result = project.cli("pricing", "publish", path)
    assert result.exit_code == 0, result.output


def git_commit_dir(directory: Path) -> str:
    """Makes the stand-in's directory a git checkout, as a real copperhead install would be."""
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    subprocess.run(["git", "init", "-q", str(directory)], check=True)
    subprocess.run(["git", "-C", str(directory), "add", "."], check=True)
    subprocess.run(["git", "-C", str(directory), "commit", "-qm", "standin"], check=True, env=env)
    return subprocess.run(["git", "-C", str(directory), "rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()


def test_adapter_drives_the_cli_exactly_and_records_stamp_stats_and_cost(tmp_path, shared_real, kicad_cli, clean_env):
    project = build_project(tmp_path, shared_real)
    publish_prices(project, tmp_path)
    cli, record = standin(tmp_path, version="0.9.7-standin", tokensIn=TOKENS_IN, tokensOut=TOKENS_OUT)
    commit = git_commit_dir(cli.parent)
    env = {"CBLEDGER_PRIVATE_SETTING": "runner-only"}
    result = project.run("--suite", "smoke", "--agent", "copperhead", "--model", "acme:m1", "--copperhead-cli", cli, env=env)
    assert result.exit_code == 0, result.output

    calls = [c for c in read_record(record) if c["command"] == "do"]
    # the version is the package's own (its package.json), so the CLI is not even started for it
    assert [c for c in read_record(record) if c["command"] == "version"] == []
    runs = {r.task.id: r for r in project.runs()}
    assert len(calls) == 2 and set(runs) == {RENAME_TASK, REFUSAL_TASK}
    prompts = {RENAME_TASK: "rename net DATA to PDM_DATA", REFUSAL_TASK: "add a 10k pullup from SELECT to VDD so the channel selection is never floating"}
    for call in calls:
        sandbox = call["argv"][1]
        task = next(t for t, r in runs.items() if sandbox.endswith(r.run_id))
        assert call["argv"] == ["--repo", sandbox, "--json", "do", prompts[task], "--model", "acme:m1", "--max-turns", "40"]
        assert "--allow-dirty" not in call["argv"]
        assert Path(call["cwd"]).resolve() == Path(sandbox).resolve()
        assert Path(sandbox).parent.resolve() == project.sandboxes.resolve()
        assert call["stdin"]["isTTY"] is False and call["stdin"]["bytes"] == 0 and call["stdin"]["target"] == "/dev/null"
        assert set(call["envNames"]) <= ALLOWED_ENV, set(call["envNames"]) - ALLOWED_ENV
        assert "OPENAI_API_KEY" in call["envNames"] and "CBLEDGER_PRIVATE_SETTING" not in call["envNames"]
        assert "ANTHROPIC_API_KEY" not in call["envNames"]  # another route's key: no failover to another model
        # the model's traffic goes through the run's recording proxy, on loopback, to the provider's /v1
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+/v1", call["env"]["OPENAI_BASE_URL"])
        assert call["env"]["GIT_AUTHOR_EMAIL"] == "copperhead@copperbench.invalid"
        assert call["env"]["COPPERHEAD_BASE_URL"] is None
        assert call["config"]["llmCache"] is False

    grades = {g.run_id: g for g in project.grades()}
    expected_micros = int(Decimal(TOKENS_IN) * Decimal(PRICE_IN) + Decimal(TOKENS_OUT) * Decimal(PRICE_OUT))
    assert expected_micros == 37630
    for run in runs.values():
        assert grades[run.run_id].verdict == "pass", [(a.id, a.detail) for a in grades[run.run_id].assertions if a.status == "fail"]
        assert run.run_mode == "agent" and run.runner_exit is None
        assert run.comparability.copperhead_version == "0.9.7-standin"
        assert run.comparability.copperhead_commit == commit
        assert run.model.id == "acme:m1" and run.model.segment == "api-frontier" and run.model.pinning == "strong"
        assert run.stats.tokens_in == TOKENS_IN and run.stats.tokens_out == TOKENS_OUT
        assert run.cost.usd_micros == expected_micros and run.cost.price_table_version == "2026-03-test"
    rename = runs[RENAME_TASK]
    assert rename.stats.exit_path == "done" and rename.sandbox.head_sha != rename.sandbox.baseline_sha
    assert rename.stats.files_touched == ["docs/PINOUT.md", "hardware/microphone-board.kicad_sch"]
    assert runs[REFUSAL_TASK].stats.exit_path == "refused"


def test_compat_model_gets_its_endpoint_and_saved_login_costs_null(tmp_path, shared_real, kicad_cli, clean_env):
    project = build_project(tmp_path, shared_real)
    publish_prices(project, tmp_path)
    cli, record = standin(tmp_path)
    result = project.run(RENAME_TASK, "--agent", "copperhead", "--model", "compat:qwen2.5-coder-7b", "--segment", "open-weight-hosted",
                         "--copperhead-cli", cli, env={"COPPERHEAD_BASE_URL": "http://127.0.0.1:9/v1"})
    assert result.exit_code == 0, result.output
    # a saved login lives in the operator's home, which no sandbox sees: refused up front there
    refused = project.run(RENAME_TASK, "--agent", "copperhead", "--model", "codex", "--copperhead-cli", cli)
    assert refused.exit_code != 0 and "--unsandboxed" in refused.output
    assert len(project.runs()) == 1
    result = project.run(RENAME_TASK, "--agent", "copperhead", "--model", "codex", "--copperhead-cli", cli, "--unsandboxed")
    assert result.exit_code == 0, result.output

    compat_call, codex_call = [c for c in read_record(record) if c["command"] == "do"]
    # the harness talks to the run's recording proxy, which forwards to the endpoint it was given
    proxied = compat_call["env"]["COPPERHEAD_BASE_URL"]
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+/v1", proxied) and proxied != "http://127.0.0.1:9/v1"
    assert "COPPERHEAD_BASE_URL" not in codex_call["envNames"] and "OPENAI_BASE_URL" not in codex_call["envNames"]
    compat, codex = project.runs()
    assert compat.isolation == "bubblewrap" and codex.isolation == "unsandboxed"
    assert compat.model.provider == "openai-compat" and compat.model.segment == "open-weight-hosted"
    assert compat.cost.usd_micros is None and compat.stats.tokens_in > 0  # tokens kept, no price
    assert codex.model.segment == "saved-login" and codex.model.pinning == "weak"
    assert codex.cost.usd_micros is None and codex.cost.price_table_version is None
    assert codex.stats.tokens_in > 0
    # the compat run's exchanges are recorded (the stand-in makes none); a saved login's cannot be
    assert compat.cassette.exchanges == 0 and (project.root / compat.cassette.path).is_file()
    assert codex.cassette is msgspec.UNSET and "exchanges not recorded: codex is a saved-login route" in codex.runner_note


def test_wall_clock_cap_kills_the_whole_sandbox_and_the_suite_goes_on(tmp_path, shared_real, kicad_cli, clean_env):
    sleepy = "sleepy-rename"
    marker = f"sleeper-{tmp_path.name}"
    project = build_project(tmp_path, shared_real, extra=[(sleepy, "rename net CLK to SLOW_CLK", 2)])
    cli, record = standin(tmp_path, byPrompt={"rename net CLK to SLOW_CLK": "sleep"}, marker=marker)
    try:
        result = project.run(sleepy, RENAME_TASK, "--agent", "copperhead", "--model", "acme:m1", "--segment", "api-cheap", "--copperhead-cli", cli)
        assert result.exit_code == 0, result.output
        calls = [c for c in read_record(record) if c["command"] == "do"]
        assert calls[0]["childPid"]  # the harness did start its child, which left its session
        # the child left the harness's session and ignored SIGTERM; the sandbox's end took it
        assert lingering(marker) == []

        runs = {r.task.id: r for r in project.runs()}
        grades = {g.run_id: g for g in project.grades()}
        capped = runs[sleepy]
        assert capped.runner_exit == "cap-exceeded" and capped.isolation == "bubblewrap"
        assert "2s wall-clock cap" in capped.runner_note and "no run-end in the transcript" in capped.runner_note
        # no run-end: the runner states how the run ended itself, claiming no tokens it cannot see
        assert capped.stats.exit_path == "cap-exceeded" and capped.stats.tokens_in == capped.stats.tokens_out == 0
        assert 2000 <= capped.timings.agent_ms < 9000
        g = grades[capped.run_id]
        assert g.verdict == "fail" and g.failure_category == "turn-budget"
        exit_check = {a.id: a for a in g.assertions}["finished-cleanly"]
        assert exit_check.status == "fail" and "cap-exceeded" in exit_check.detail
        assert "transcript" in capped.evidence  # the run-start it wrote before the kill is kept
        # the suite went on: the next run was made and graded
        assert grades[runs[RENAME_TASK].run_id].verdict == "pass"
    finally:
        for pid in processes_with(marker):  # only if the runner failed to: started by this test
            os.kill(pid, signal.SIGKILL)


PLANTED = "sk-standin" + "0123456789" * 3  # what the stand-in plants (it assembles it at run time)


def preserved_objects(project, run) -> list[bytes]:
    """Every object of a preserved run's bundle, restored on its seed: what a reader of
    `results/` can get at."""
    restored = preserve.restore(project.root / run.sandbox.store, run.sandbox, Catalog(project.root).fixture(run.fixture.id))
    repo = restored.repo
    return [repo[oid].read_raw() for oid in repo.odb]


def backstop_grade(project, run):
    grade = next(g for g in project.grades() if g.run_id == run.run_id)
    assert grade.verdict == "fail" and grade.failure_category == "credential-leak"
    assert grade.first_failed_required == "credential-backstop"
    return grade


def test_credential_in_a_written_file_fails_that_run_and_is_recorded_redacted(tmp_path, shared_real, kicad_cli, clean_env):
    leaky = "leaky-notes"
    project = build_project(tmp_path, shared_real, extra=[(leaky, "rename net DATA to LEAKY_DATA", 120)])
    cli, _record = standin(tmp_path, byPrompt={"rename net DATA to LEAKY_DATA": "secret-file"})
    before = project.ledger_bytes()
    result = project.run(leaky, RENAME_TASK, "--agent", "copperhead", "--model", "acme:m1", "--segment", "api-cheap", "--copperhead-cli", cli)
    assert result.exit_code == 0, result.output
    assert "fail (credential-leak)" in result.output
    # both runs recorded: the leak cannot erase its own failure
    runs = {r.task.id: r for r in project.runs()}
    assert set(runs) == {leaky, RENAME_TASK}
    grade = backstop_grade(project, runs[leaky])
    detail = {a.id: a.detail for a in grade.assertions}["credential-backstop"]
    assert "openai-or-anthropic-key at docs/NOTES.md:1" in detail
    assert PLANTED.encode() not in project.ledger_bytes() and PLANTED not in result.output
    assert project.ledger_bytes().startswith(before)
    objects = preserved_objects(project, runs[leaky])
    assert not any(PLANTED.encode() in o for o in objects)
    assert any(b"debug: provider key <openai-or-anthropic-key>" in o for o in objects)  # the rest is kept
    # the preserved, redacted run re-grades to the same verdict
    verify = project.cli("replay", "--verify")
    assert verify.exit_code == 0, verify.output


def test_credential_in_a_commit_message_is_redacted_from_the_commit(tmp_path, shared_real, kicad_cli, clean_env):
    leaky = "leaky-commit"
    project = build_project(tmp_path, shared_real, extra=[(leaky, "rename net DATA to LEAKY_DATA", 120)])
    cli, _ = standin(tmp_path, behaviour="secret-commit")
    result = project.run(leaky, "--agent", "copperhead", "--model", "acme:m1", "--segment", "api-cheap", "--copperhead-cli", cli)
    assert result.exit_code == 0, result.output
    (run,) = project.runs()
    detail = {a.id: a.detail for a in backstop_grade(project, run).assertions}["credential-backstop"]
    assert "openai-or-anthropic-key at commit " in detail and " message:3" in detail
    assert PLANTED not in result.output and PLANTED.encode() not in project.ledger_bytes()
    assert not any(PLANTED.encode() in o for o in preserved_objects(project, run))


def test_credential_in_a_gold_solution_is_caught_too(tmp_path, shared_real, kicad_cli, clean_env):
    project = build_project(tmp_path, shared_real, bump=False)
    key = "sk-" + "gold0123456789" * 2
    notes = project.root / "tasks" / RENAME_TASK / "gold" / "files" / "docs" / "NOTES.md"
    notes.write_text(f"the key was {key}\n")
    project.bump()
    result = project.run("--suite", "smoke", "--agent", "gold")
    assert result.exit_code == 0, result.output
    assert key not in result.output and key.encode() not in project.ledger_bytes()
    runs = {r.task.id: r for r in project.runs()}
    assert set(runs) == {RENAME_TASK, REFUSAL_TASK}  # the suite went on
    detail = {a.id: a.detail for a in backstop_grade(project, runs[RENAME_TASK]).assertions}["credential-backstop"]
    assert "openai-or-anthropic-key at docs/NOTES.md:1" in detail


def test_the_backstop_covers_names_signatures_escapes_and_the_added_patterns(tmp_path, shared_real, kicad_cli, clean_env):
    leaky = "leaky-everywhere"
    project = build_project(tmp_path, shared_real, extra=[(leaky, "rename net DATA to LEAKY_DATA", 120)])
    cli, _ = standin(tmp_path, behaviour="secret-everywhere")
    result = project.run(leaky, "--agent", "copperhead", "--model", "acme:m1", "--segment", "api-cheap", "--copperhead-cli", cli)
    assert result.exit_code == 0, result.output
    (run,) = project.runs()
    detail = {a.id: a.detail for a in backstop_grade(project, run).assertions}["credential-backstop"]
    for where in (
        "openai-or-anthropic-key at file name docs/<openai-or-anthropic-key>.txt",
        "openai-or-anthropic-key at docs/\\x1b[31mred.txt:1",
        "aws-access-key-id at docs/aws.txt:1",
        "pem-private-key at docs/deploy.pem:1",
        "url-credentials at docs/db.txt:1",
        "(JSON-escaped)",
        "author name", "author e-mail", "committer e-mail",
    ):
        assert where in detail, (where, detail)
    secrets = [PLANTED, "AKIASTANDIN0123456", "hunter2standin", "b3BlbnNzaC1rZXktdjEAAAAAstandinAAAA", "\\u0073k-standin"]
    published = project.ledger_bytes() + (project.root / "LEADERBOARD.md").read_bytes()
    objects = preserved_objects(project, run)
    for secret in secrets:
        assert secret not in result.output and secret.encode() not in published, secret
        assert not any(secret.encode() in o for o in objects), secret
    assert "\x1b" not in result.output and b"\x1b" not in published  # no raw control character echoed


def test_setup_init_runs_through_the_cli_and_is_skipped_without_it(tmp_path, shared_real, kicad_cli, clean_env):
    task = "rename-after-init"
    project = build_project(tmp_path, shared_real, extra=[(task, "rename net DATA to PDM_DATA", 120, ["init"])])
    cli, record = standin(tmp_path)
    result = project.run(task, "--agent", "copperhead", "--model", "acme:m1", "--segment", "api-cheap", "--copperhead-cli", cli,
                         env={})
    assert result.exit_code == 0, result.output
    result = project.run(task, "--agent", "noop")
    assert result.exit_code == 0, result.output

    init_call, do_call = [c for c in read_record(record) if c["command"] in ("init", "do")]
    sandbox = do_call["argv"][1]
    assert init_call["argv"] == ["--repo", sandbox, "init", "--no-hooks"]
    assert set(init_call["envNames"]) <= BASIC_ENV, init_call["envNames"]  # init is model-free: no credentials
    assert "OPENAI_API_KEY" in do_call["envNames"]
    assert init_call["stdin"]["bytes"] == 0 and init_call["written"] == ["docs/SPEC.md", "docs/DECISIONS.md", "docs/CHANGELOG.md"]
    agent_run, noop_run = project.runs()
    grades = {g.run_id: g for g in project.grades()}
    # init's output is the baseline, one commit on top of the seed, so it is not the run's diff
    assert agent_run.setup_skipped == [] and agent_run.sandbox.baseline_sha != agent_run.sandbox.seed_sha
    assert grades[agent_run.run_id].verdict == "pass", [(a.id, a.detail) for a in grades[agent_run.run_id].assertions if a.status == "fail"]
    assert [(s.command, "copperhead CLI not available" in s.reason) for s in noop_run.setup_skipped] == [("init", True)]
    assert noop_run.sandbox.baseline_sha == noop_run.sandbox.seed_sha
    # the preserved run carries its baseline commit and regrades the same
    again = rescore.regrade(Workspace.at(project.root), Catalog(project.root), agent_run)
    assert list(again.outcomes) == grades[agent_run.run_id].assertions


def test_a_harness_that_dies_without_run_end_is_recorded_as_a_failure(tmp_path, shared_real, kicad_cli, clean_env):
    project = build_project(tmp_path, shared_real)
    cli, _ = standin(tmp_path, behaviour="crash")
    result = project.run(RENAME_TASK, "--agent", "copperhead", "--model", "acme:m1", "--segment", "api-cheap", "--copperhead-cli", cli)
    assert result.exit_code == 0, result.output  # graded, not an error of the runner
    (run,) = project.runs()
    (grade,) = project.grades()
    assert run.runner_exit is None and run.runner_note.startswith("copperhead exited 3; no run-end in the transcript")
    assert run.stats.exit_path == "stalled" and run.stats.tokens_in == 0
    assert "transcript" in run.evidence
    assert grade.verdict == "fail" and grade.failure_category == "stalled"
    # no run-end: the spend was never reported, so the cost is unknown, not zero
    assert run.cost.usd_micros is None and "cost unknown" in run.runner_note
    # it never produced an assistant turn: recorded with its evidence, but not the model's
    assert run.harness_failure is not None and run.harness_failure.kind == "no-model-turn"
    assert {"harness-stdout", "harness-stderr"} <= set(run.evidence)


def test_one_hostile_run_never_aborts_the_suite(tmp_path, shared_real, kicad_cli, clean_env):
    """A transcript nested 100,000 deep, an `[include]` of itself in `.git/config` and a
    symbolic link in `.git/` each used to end the whole `run` with a traceback. Each is now that
    run's own record, and the runs after it start."""
    hostile = {"deep-transcript": "rename net DATA to DEEP_DATA", "git-include": "rename net DATA to INC_DATA",
               "git-symlink": "rename net DATA to LINK_DATA"}
    project = build_project(tmp_path, shared_real, extra=[(b, prompt, 120) for b, prompt in hostile.items()])
    cli, _ = standin(tmp_path, byPrompt={prompt: b for b, prompt in hostile.items()})
    result = project.run(*hostile, RENAME_TASK, "--agent", "copperhead", "--model", "acme:m1", "--segment", "api-cheap",
                         "--copperhead-cli", cli)
    assert result.exit_code == 0, result.output
    assert "Traceback" not in result.output
    runs = {r.task.id: r for r in project.runs()}
    assert set(runs) == {*hostile, RENAME_TASK}
    grades = {g.run_id: g for g in project.grades()}
    # the deep line is a malformed line of an otherwise readable transcript
    deep = grades[runs["deep-transcript"].run_id]
    assert runs["deep-transcript"].stats.exit_path == "done", runs["deep-transcript"].runner_note
    assert deep.failure_category != "end-state-unreadable"
    # the agent's git configuration is not the runner's: replaced, and the run graded on its work
    included = runs["git-include"]
    assert included.stats.exit_path == "done" and included.stats.files_touched  # its own commit, read
    assert grades[included.run_id].failure_category != "end-state-unreadable"
    # a link in .git is refused: recorded from the baseline, failed, with the reason
    linked = runs["git-symlink"]
    g = grades[linked.run_id]
    assert g.verdict == "fail" and g.failure_category == "end-state-unreadable"
    assert "symbolic link at .git/objects" in linked.runner_note
    # the model's doing, as RUNNER.md section 1 says: the transcript the unkept end state held was
    # never read, and its absence is no preflight failure (it was, with the banner for a reason)
    assert linked.harness_failure is None, linked.harness_failure
    assert linked.sandbox.capture_sha != linked.sandbox.baseline_sha and linked.sandbox.head_sha == linked.sandbox.baseline_sha
    assert grades[runs[RENAME_TASK].run_id].verdict == "pass"  # and the suite went on
    verify = project.cli("replay", "--verify")
    assert verify.exit_code == 0, verify.output
