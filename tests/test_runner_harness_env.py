"""What the copperhead adapter hands the harness, and what it records about it, decided without
running it: the credential variables per route, the stamp's version and commit, and whether a
run is the model's at all."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from cbledger.errors import UserError
from cbledger.grading.evidence.transcript import parse_transcript
from cbledger.runner.agents.copperhead import (
    CopperheadCli,
    agent_environment,
    key_variables,
    tree_digest,
)
from cbledger.runner.harness_failure import detect

ENV = {
    "OPENAI_API_KEY": "o", "ANTHROPIC_API_KEY": "a", "GROQ_API_KEY": "g", "CLAUDE_CODE_OAUTH_TOKEN": "c",
}


@pytest.mark.parametrize(
    ("model", "extra", "expected"),
    [
        ("gpt-5", {}, {"OPENAI_API_KEY": "o"}),
        ("acme:m1", {}, {"OPENAI_API_KEY": "o"}),
        ("claude-sonnet-4", {}, {"ANTHROPIC_API_KEY": "a"}),
        ("claude-code", {}, {"CLAUDE_CODE_OAUTH_TOKEN": "c"}),
        ("codex", {}, {}),
        ("cursor:gpt-5", {}, {}),
        # the compat route: the variable COPPERHEAD_API_KEY_ENV names, and that name, nothing else
        ("compat:llama-3.3-70b", {"COPPERHEAD_BASE_URL": "https://api.groq.example/openai/v1", "COPPERHEAD_API_KEY_ENV": "GROQ_API_KEY"},
         {"COPPERHEAD_API_KEY_ENV": "GROQ_API_KEY", "GROQ_API_KEY": "g"}),
        # a loopback endpoint needs no key, and gets none
        ("compat:scripted", {"COPPERHEAD_BASE_URL": "http://127.0.0.1:8080/v1"}, {}),
    ],
)
def test_each_route_gets_its_own_key_and_no_other(model, extra, expected):
    assert key_variables(model, {**ENV, **extra}) == expected


def test_a_remote_compat_endpoint_without_its_key_variable_is_refused():
    # copperhead would fall back to OPENAI_API_KEY and send it to the third party
    with pytest.raises(UserError, match=r"set \$COPPERHEAD_API_KEY_ENV"):
        key_variables("compat:x", {**ENV, "COPPERHEAD_BASE_URL": "https://third.party.example/v1"})
    with pytest.raises(UserError, match=r"names MISSING_KEY, which is not set"):
        key_variables("compat:x", {"COPPERHEAD_BASE_URL": "https://x.example/v1", "COPPERHEAD_API_KEY_ENV": "MISSING_KEY"})
    with pytest.raises(UserError, match=r"set \$COPPERHEAD_BASE_URL"):
        key_variables("compat:x", ENV)


def test_the_harness_commits_as_the_project_never_as_the_operator(monkeypatch):
    monkeypatch.setenv("GIT_AUTHOR_NAME", "Operator Person")
    monkeypatch.setenv("OPENAI_API_KEY", "o")
    monkeypatch.setenv("SOME_SECRET_SETTING", "x")
    env = agent_environment("gpt-5")
    assert env["GIT_AUTHOR_NAME"] == env["GIT_COMMITTER_NAME"] == "copperhead"
    assert env["GIT_AUTHOR_EMAIL"] == "copperhead@copperbench.invalid"
    assert env["GIT_CONFIG_GLOBAL"] == os.devnull and env["GIT_CONFIG_NOSYSTEM"] == "1"
    assert "SOME_SECRET_SETTING" not in env and env["OPENAI_API_KEY"] == "o"


def _git(cwd: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True, env=env).stdout.strip()


def _package(root: Path, version: str = "0.9.0") -> Path:
    (root / "dist").mkdir(parents=True)
    (root / "dist" / "cli.js").write_text("// cli\n")
    (root / "package.json").write_text(json.dumps({"name": "copperhead", "version": version}))
    return root / "dist" / "cli.js"


def test_the_stamp_is_the_package_and_never_a_repository_around_it(tmp_path):
    # an install inside some other project's checkout: that project's HEAD is not copperhead's commit
    outer = tmp_path / "someone-elses-project"
    outer.mkdir()
    _git(outer, "init", "-q")
    (outer / "README").write_text("x")
    _git(outer, "add", ".")
    _git(outer, "commit", "-qm", "outer")
    cli = CopperheadCli("node", _package(outer / "node_modules" / "copperhead", "0.9.0"))
    assert cli.version() == "0.9.0" and cli.commit() is None
    # the project's installer records the build commit beside its install: that is used while
    # the package's files are the ones it installed
    package = outer / "node_modules" / "copperhead"
    build = {"version": "0.9.0", "commit": "a" * 40, "tree": tree_digest(package)}
    (outer / "copperhead-build.json").write_text(json.dumps(build))
    assert cli.commit() == "a" * 40
    # a build patched in place was stamped as the release
    (package / "dist" / "cli.js").write_text("// cli, patched\n")
    assert cli.commit() is None
    (package / "dist" / "cli.js").write_text("// cli\n")
    (package / "dist" / "extra.js").write_text("// added\n")
    assert cli.commit() is None
    (package / "dist" / "extra.js").unlink()
    assert cli.commit() == "a" * 40
    (outer / "copperhead-build.json").write_text(json.dumps({"version": "0.9.0", "commit": "a" * 40}))
    assert cli.commit() is None  # an install that recorded no tree cannot say its files are the build
    (outer / "copperhead-build.json").write_text(json.dumps({**build, "version": "0.8.0"}))
    assert cli.commit() is None  # written for another version: not this CLI's
    # a copperhead checkout: its own HEAD
    checkout = tmp_path / "copperhead"
    own = CopperheadCli("node", _package(checkout, "0.9.1-dev"))
    _git(checkout, "init", "-q")
    _git(checkout, "add", ".")
    _git(checkout, "commit", "-qm", "copperhead")
    assert own.version() == "0.9.1-dev" and own.commit() == _git(checkout, "rev-parse", "HEAD")
    # ... while it holds no uncommitted change: a checkout edited and rebuilt is not its HEAD's build
    (checkout / "dist" / "cli.js").write_text("// cli, edited\n")
    assert own.commit() is None
    (checkout / ".gitignore").write_text("build/\n")
    (checkout / "dist" / "cli.js").write_text("// cli\n")
    assert own.commit() is None  # an untracked file is a change too
    _git(checkout, "add", ".gitignore")
    _git(checkout, "commit", "-qm", "ignore builds")
    (checkout / "build").mkdir()
    (checkout / "build" / "out.js").write_text("// ignored\n")
    assert own.commit() == _git(checkout, "rev-parse", "HEAD")  # what git ignores is no change


def test_the_installers_tree_digest_is_the_one_a_run_computes(copperhead_cli):
    """scripts/install-copperhead digests the package with sha256sum; the runner again in Python."""
    cli = CopperheadCli("node", Path(copperhead_cli))
    package = cli.package_root
    assert package is not None
    build = package.parents[1] / "copperhead-build.json"
    if not build.is_file():
        pytest.skip(f"{copperhead_cli} was not installed by scripts/install-copperhead")
    recorded = json.loads(build.read_text())
    assert recorded["tree"] == tree_digest(package)
    assert cli.commit() == recorded["commit"]


def _transcript(*events: dict) -> bytes:
    return "".join(json.dumps(e) + "\n" for e in events).encode()


RUN_START = {"type": "run-start", "data": {}}
ASSISTANT = {"type": "assistant", "data": {"text": "x", "toolCalls": []}}


def test_a_run_is_the_models_only_if_the_model_answered():
    no_transcript = parse_transcript(b"", None)
    f = detect(no_transcript, "working tree is dirty; copperhead refuses to run on uncommitted changes by default\n\nwhy", 1, False)
    assert (f.kind, f.detail) == ("preflight", "working tree is dirty; copperhead refuses to run on uncommitted changes by default")
    empty = parse_transcript(b"", ".copperhead/runs/x/transcript.jsonl")
    assert detect(empty, "OPENAI_API_KEY is not set\n", 1, False).kind == "missing-key"
    assert detect(empty, "compat:x requires an endpoint; set baseURL\n", 1, False).kind == "provider-config"
    started = parse_transcript(_transcript(RUN_START, {"type": "run-failed", "data": {"reason": "provider error: Connection error.", "exitPath": "provider-error"}}), "t")
    f = detect(started, "", 1, False)
    assert (f.kind, f.detail, f.turn) == ("provider-transport", "provider error: Connection error.", 1)
    gave_up = parse_transcript(_transcript(RUN_START, {"type": "run-failed", "data": {"reason": "the model produced nothing", "exitPath": "stalled"}}), "t")
    assert detect(gave_up, "", 1, False).kind == "no-model-turn"
    # the model answered: whatever happened next is the model's run
    answered = parse_transcript(_transcript(RUN_START, ASSISTANT, {"type": "run-failed", "data": {"reason": "model stopped calling tools", "exitPath": "stalled"}}), "t")
    assert detect(answered, "", 1, False) is None
    assert detect(parse_transcript(_transcript(RUN_START, ASSISTANT), "t"), "", None, True) is None
    # except a commit git could not make for want of an identity
    identity = parse_transcript(_transcript(RUN_START, ASSISTANT, {"type": "run-failed", "data": {
        "reason": "commit failed: Command failed with exit code 128: git commit -m x\n\n*** Please tell me who you are.", "exitPath": "commit-failed"}}), "t")
    f = detect(identity, "", 1, False)
    assert f.kind == "git-identity" and f.detail.startswith("commit failed")


def test_a_providers_402_is_the_accounts_and_the_proxys_own_money_limit_refusal_is_not():
    """A provider out of credit answers 402: a fact about the account, which lowered the model's
    pass rate and was never retried with --retry-env. The recording proxy's refusal of a call
    past a money limit is a 402 too, and stays a limit like the turn cap."""
    from cbledger.runner.budget import REFUSAL_CODE
    from cbledger.runner.cassette import FORMAT, Cassette, Recorded

    def run(reason: str, body: dict):
        transcript = parse_transcript(_transcript(RUN_START, ASSISTANT, {"type": "run-failed", "data": {
            "reason": reason, "exitPath": "provider-error"}}), "t")
        cassette = Cassette(format=FORMAT, route="openai-compat", model_id="compat:x", exchanges=[
            Recorded(method="POST", path="/chat/completions", status=200, body={"choices": []}),
            Recorded(method="POST", path="/chat/completions", status=402, body=body)])
        return detect(transcript, "", 1, False, cassette, 10_000)

    credit = run("provider error: 402 insufficient credit", {"error": {"message": "insufficient credit"}})
    assert credit is not None and (credit.kind, credit.status, credit.turn) == ("provider-status", 402, 2)
    limit = {"error": {"code": REFUSAL_CODE, "message": "cbledger stopped this run at ...", "type": "cost_limit"}}
    assert run("provider error: 402 cbledger stopped this run at the --max-cost-usd cap", limit) is None
