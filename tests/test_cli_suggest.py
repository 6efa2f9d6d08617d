"""A `cbledger …` command a message suggests runs as printed: it carries the options the user
typed to choose the workspace (`--results`, `--ledger`, `--root`), each where the suggested
command takes it, and never a database password (cli/suggest.py, cbledger/invocation.py)."""

from __future__ import annotations

import shlex
import shutil
from pathlib import Path

import msgspec
import pytest
import typer.main

from cbledger import invocation
from cbledger.cli import suggest
from cbledger.cli.app import app
from cbledger.ledger.events import CampaignSlot, HarnessFailure
from cbledger.runner import campaign as campaign_mod
from tests.factories import run_cli, run_recorded

REPO = Path(__file__).resolve().parent.parent
NO_ENV = {"CBLEDGER_LEDGER": None, "CBLEDGER_ROOT": None, "CBLEDGER_RESULTS": None}


def suggested(stderr: str) -> list[str]:
    """The commands an error line suggests, as argv after `cbledger`."""
    quoted = stderr.split("`")[1::2]
    assert quoted, stderr
    return [shlex.split(c)[1:] for c in quoted if c.startswith("cbledger ")]


def leaf(argv: list[str]):
    """The click context of the command `argv` names, parsed as the command line would be."""
    group = typer.main.get_command(app)
    root = group.make_context("cbledger", list(argv))
    words = root._protected_args + root.args  # the subcommand and what follows it
    ctx = root
    command = group
    while words and hasattr(command, "get_command"):
        name, words = words[0], words[1:]
        command = command.get_command(ctx, name)
        ctx = command.make_context(name, list(words), parent=ctx)
        words = getattr(ctx, "_protected_args", []) + ctx.args if hasattr(command, "get_command") else []
    return ctx


def test_a_suggested_init_runs_in_the_results_directory_the_user_chose(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # a suggestion that dropped the options would init here
    chosen, root = tmp_path / "my results", tmp_path / "project"
    shutil.copytree(REPO / "suites", root / "suites")
    (root / "tasks").mkdir()
    (root / "fixtures").mkdir()
    refused = run_cli(["--results", chosen, "log", "--root", root], env=NO_ENV)
    assert refused.exit_code == 2, refused.output
    [init] = suggested(refused.stderr)
    assert init == ["--results", str(chosen), "init", "--root", str(root)]
    assert run_cli(init, env=NO_ENV).exit_code == 0
    assert (chosen / "ledger" / "events.jsonl").is_file() and not (tmp_path / "results").exists()
    assert run_cli(["--results", chosen, "log", "--root", root], env=NO_ENV).exit_code == 0


def test_init_outside_any_project_says_it_made_a_ledger_only_workspace(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    lost = run_cli(["log"], env=NO_ENV)  # in the wrong directory: no advice to make a ledger right here
    assert lost.exit_code == 2 and "cbledger init" not in lost.stderr and f"no cbledger project at or above {tmp_path}" in lost.stderr, lost.stderr
    made = run_cli(["init"], env=NO_ENV)
    assert made.exit_code == 0 and (tmp_path / "results" / "ledger" / "events.jsonl").is_file()
    assert f"note: {tmp_path} holds no tasks/ and fixtures/: it is now a ledger-only workspace" in made.stderr, made.output
    chosen = run_cli(["--results", tmp_path / "other", "init"], env=NO_ENV)  # a place named: nothing to say
    assert chosen.exit_code == 0 and "note:" not in chosen.stderr


def test_a_suggestion_carries_ledger_and_root_where_the_command_takes_them(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    root = tmp_path / "project"
    for name in ("synthetic-led-resistor", "antmicro-microphone-board"):  # the second: a real board, no tree here
        shutil.copytree(REPO / "fixtures" / name, root / "fixtures" / name, ignore=shutil.ignore_patterns("tree"))
    (root / "tasks").mkdir()
    ledger = tmp_path / "elsewhere" / "a b.jsonl"
    refused = run_cli(["show", "no-such-run", "--ledger", ledger, "--root", root], env=NO_ENV)
    [init] = suggested(refused.stderr)
    assert init == ["init", "--ledger", str(ledger), "--root", str(root)]
    assert run_cli(init, env=NO_ENV).exit_code == 0 and ledger.is_file()
    # `fixture materialize` has no --ledger: only --root (and the root's --results) come along
    checked = run_cli(["--results", tmp_path / "r", "fixture", "check", "antmicro-microphone-board", "--root", root], env=NO_ENV)
    assert checked.exit_code == 1, checked.output
    [materialize] = suggested(checked.stderr)
    assert materialize == ["--results", str(tmp_path / "r"), "fixture", "materialize", "antmicro-microphone-board",
                           "--from", "DIR", "--root", str(root)]


def test_what_the_environment_gives_is_not_repeated_and_a_password_is_never_printed(monkeypatch, tmp_path):
    monkeypatch.setenv("CBLEDGER_ROOT", str(tmp_path))
    monkeypatch.delenv("CBLEDGER_RESULTS", raising=False)
    url = "postgresql://me:s3cret@db.example:5432/bench?ledger=nightly"
    render = suggest.renderer(leaf(["--results", "R", "run", "--ledger", url]))
    assert render(["init"], True) == ["cbledger", "--results", "R", "init", "--ledger", "postgresql://me@db.example:5432/bench?ledger=nightly"]
    assert render(["kicad", "nets", "X"], True) == ["cbledger", "--results", "R", "kicad", "nets", "X"]
    plain = suggest.renderer(leaf(["run"]))
    assert plain(["run", "--resume", "c"], True) == ["cbledger", "run", "--resume", "c"]


def test_a_command_that_makes_its_own_workspace_is_given_only_the_root():
    """`run --draft` refuses a results directory that holds a ledger: `validate`'s suggestion for
    a new task would fail if it carried the workspace `validate` was given."""
    render = suggest.renderer(leaf(["--results", "R", "validate", "--ledger", "l.jsonl", "--root", "proj"]))
    invocation.use(render)
    try:
        draft = invocation.argv("run", "new-task", "--draft", workspace=False)
        bump = invocation.argv("suite", "bump", "--reason", "...")
    finally:
        invocation.use(None)
    assert draft == ["cbledger", "run", "new-task", "--draft", "--root", "proj"]
    assert bump == ["cbledger", "--results", "R", "suite", "bump", "--reason", "...", "--ledger", "l.jsonl", "--root", "proj"]


def test_the_renderer_is_in_effect_only_while_the_command_runs():
    before = invocation.command("init")
    result = run_cli(["--results", "/nonexistent/ux", "log"], env=NO_ENV)
    assert "--results /nonexistent/ux init" in result.stderr, result.output
    assert invocation.command("init") == before == "cbledger init"


def test_the_retry_hint_names_a_resume_that_carries_the_workspace_options():
    run = run_recorded(1).body
    failed = msgspec.structs.replace(
        run, run_id="outage.t-s1-a1", campaign=CampaignSlot(id="outage", slot=1, attempt=1),
        harness_failure=HarnessFailure(kind="provider-transport", detail="reset"),
    )
    invocation.use(suggest.renderer(leaf(["--results", "my dir", "run", "--root", "proj"])))
    try:
        hint = campaign_mod.retry_hint([failed], retry_env=0)
    finally:
        invocation.use(None)
    assert hint is not None and hint.endswith(
        "run the same command with --retry-env 1 (or `cbledger --results 'my dir' run --resume outage --retry-env 1 --root proj`)"
    ), hint
    # a draft: the same command would make a new scratch workspace, so only its own is named
    invocation.use(suggest.renderer(leaf(["--results", "my dir", "run", "--root", "proj"])))
    try:
        invocation.in_results("/tmp/draft")
        hint = campaign_mod.retry_hint([failed], retry_env=0, again=False)
        # what reads the project's own workspace names it, not the draft's (removed when refused)
        project_wide = invocation.command("validate", workspace=False)
    finally:
        invocation.use(None)
    assert project_wide == "cbledger validate --root proj", project_wide
    assert hint is not None and hint.endswith(
        "to try them again, run `cbledger --results /tmp/draft run --resume outage --retry-env 1 --root proj`"), hint


@pytest.mark.parametrize("words", [["run", "--resume", "c"], ["append", "pending.jsonl"], ["suite", "bump", "--reason", "..."]])
def test_every_command_suggested_for_a_workspace_takes_the_workspace_options(words):
    ctx = leaf(["run"])
    assert {"--ledger", "--root"} <= suggest.options_of(ctx.find_root(), words)
