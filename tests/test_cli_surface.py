"""The command line as one surface: commands imported only when used, every command reachable
from the table in cli/app.py, plain help, `--version`, one exit code per meaning."""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from cbledger.cli import app as app_module
from cbledger.cli.lazy import Commands, lazy_group, module_commands
from cbledger.ledger.events import event_type
from tests.factories import run_cli
from tests.test_projections_cli import (
    root as root,  # a fixture: a ledger of runs, grades and a retraction
)

REPO = Path(__file__).resolve().parent.parent
HEAVY = ("pygit2", "sqlite_utils", "cbledger.grading.grader", "cbledger.runner", "cbledger.projections", "rich", "pydantic")
NO_ENV = {"CBLEDGER_LEDGER": None, "CBLEDGER_ROOT": None}


def _loaded_after(code: str) -> list[str]:
    """The heavy modules a fresh interpreter holds after running `code`."""
    probe = (
        "import sys\n" + code + "\n"
        f"print('loaded:', *(m for m in {HEAVY!r} if any(k == m or k.startswith(m + '.') for k in sys.modules)))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=REPO, check=True)
    last = done.stdout.splitlines()[-1].split()
    assert last[0] == "loaded:", done.stdout[-400:]
    return last[1:]


def test_importing_the_app_imports_no_heavy_module() -> None:
    assert _loaded_after("import cbledger.cli.app") == []


def test_help_and_kicad_nets_import_no_heavy_module() -> None:
    schematic = REPO / "tests" / "data" / "kicad" / "wiring" / "wiring.kicad_sch"
    run = (
        "from cbledger.cli.app import main\n"
        f"for argv in (['--help'], ['kicad', 'nets', '--json', {str(schematic)!r}]):\n"
        "    sys.argv = ['cbledger', *argv]\n"
        "    try:\n        main()\n    except SystemExit as exc:\n        assert exc.code in (0, None), exc.code\n"
    )
    assert _loaded_after(run) == []


def test_a_command_that_needs_the_grader_still_gets_it() -> None:
    """The probe can fail: a command of the runner's module loads the runner."""
    run = (
        "from cbledger.cli.app import main\nsys.argv = ['cbledger', 'rescore', '--help']\n"
        "try:\n    main()\nexcept SystemExit:\n    pass"
    )
    assert "cbledger.runner" in _loaded_after(run)


def test_the_table_names_exactly_what_each_module_registers() -> None:
    for entry in app_module.COMMANDS:
        assert sorted(module_commands(entry.module)) == sorted(entry.names), entry.module
        assert all(text.strip() for text in entry.names.values()), entry.module


def test_every_command_module_is_in_the_table() -> None:
    listed = {entry.module for entry in app_module.COMMANDS}
    on_disk = {
        f"cbledger.cli.{p.stem}"
        for p in (REPO / "cbledger" / "cli").glob("*.py")
        if p.stem.endswith(("_commands", "_command"))
    }
    assert on_disk == listed


def test_two_modules_claiming_one_name_are_refused() -> None:
    with pytest.raises(ValueError, match="show"):
        lazy_group((Commands("a", show="x"), Commands("b", show="y")))


def test_every_command_has_help() -> None:
    for entry in app_module.COMMANDS:
        for name in entry.names:
            result = run_cli([name, "--help"], env=NO_ENV)
            assert result.exit_code == 0, (name, result.output)
            assert result.stdout.startswith(f"Usage: cbledger {name} ")


def test_root_help_lists_every_command_with_its_line() -> None:
    out = run_cli(["--help"], env=NO_ENV).stdout
    assert "Exit codes: 0 ok; 1 a check failed; 2 bad usage or input" in out
    flat = " ".join(out.split())
    for entry in app_module.COMMANDS:
        for name, text in entry.names.items():
            assert f"{name} {text}" in flat, name


def test_version() -> None:
    result = run_cli(["--version"], env=NO_ENV)
    assert result.exit_code == 0
    assert result.stdout.strip() == f"cbledger {importlib.metadata.version('cbledger')}"


def test_boolean_flags_are_plain_in_help() -> None:
    out = run_cli(["log", "--help"], env=NO_ENV).stdout
    assert "<bool>" not in out and "╭" not in out
    assert any(line.split()[:1] == ["--json"] and "Machine-readable" in line for line in out.splitlines())


def test_unknown_command_is_a_usage_error_with_a_suggestion() -> None:
    result = run_cli(["lgo"], env=NO_ENV)
    assert result.exit_code == 2
    assert "Did you mean 'log'?" in result.output


def test_a_results_directory_that_is_a_file_is_refused_as_such(tmp_path: Path) -> None:
    """It was "no ledger here (run `init` first)", and `init` then failed with "Not a directory"."""
    afile = tmp_path / "afile"
    afile.write_text("")
    for argv in (["log"], ["init"]):
        r = run_cli(["--results", afile, *argv], env=NO_ENV)
        assert r.exit_code == 2 and r.stderr == f"error: --results {afile}: not a directory (it names the directory " \
            "a workspace's ledger and outputs go in)\n", r.stderr
    assert afile.read_text() == ""


def test_a_command_option_given_before_the_command_is_shown_after_it(tmp_path: Path) -> None:
    ledger = tmp_path / "my ledger.jsonl"
    result = run_cli(["--ledger", ledger, "replay", "--verify"], env=NO_ENV)
    assert result.exit_code == 2
    assert result.stderr == (f"error: cbledger: No such option: --ledger (--ledger is each command's own option, "
                             f"given after it: `cbledger replay --ledger '{ledger}' --verify`)\n")
    root = run_cli(["--results", "out", f"--root={tmp_path}", "log", "-n", "1"], env=NO_ENV)
    assert root.exit_code == 2 and f"`cbledger --results out log --root={tmp_path} -n 1`" in root.stderr
    assert run_cli(["--bogus", "log"], env=NO_ENV).stderr == "error: cbledger: No such option: --bogus\n"
    # a group's command: after its subcommand, which owns the option (after the group it failed again)
    grouped = run_cli(["--results", "out", "--ledger", "L", "suite", "bump", "--reason", "x"], env=NO_ENV)
    assert grouped.exit_code == 2 and "`cbledger --results out suite bump --ledger L --reason x`" in grouped.stderr, grouped.stderr
    between = run_cli(["suite", "--ledger", "L", "bump", "--reason", "x"], env=NO_ENV)
    assert between.exit_code == 2 and "`cbledger suite bump --ledger L --reason x`" in between.stderr, between.stderr
    # and the root's own option given after the command: the line with it before
    late = run_cli(["replay", "--verify", "--results", tmp_path / "w"], env=NO_ENV)
    assert late.exit_code == 2 and (f"(--results is cbledger's own option, given before the command: "
                                    f"`cbledger --results {tmp_path / 'w'} replay --verify`)") in late.stderr, late.stderr


def _snake_keys(doc: object, path: str = "$") -> list[str]:
    if isinstance(doc, dict):
        return [f"{path}.{k}" for k in doc if "_" in k] + [x for k, v in doc.items() for x in _snake_keys(v, f"{path}.{k}")]
    if isinstance(doc, list):
        return [x for i, v in enumerate(doc) for x in _snake_keys(v, f"{path}[{i}]")]
    return []


def test_kicad_json_keys_are_camel_case() -> None:
    data = REPO / "tests" / "data" / "kicad"
    for argv in (["nets", data / "wiring" / "wiring.kicad_sch"], ["symbols", data / "wiring" / "wiring.kicad_sch"],
                 ["summary", data / "bus" / "bus.kicad_sch"]):
        result = run_cli(["kicad", *argv, "--json"], env=NO_ENV)
        assert result.exit_code == 0, result.output
        doc = json.loads(result.stdout)
        assert doc and _snake_keys(doc) == [], argv
    nets = json.loads(run_cli(["kicad", "nets", "--json", data / "wiring" / "wiring.kicad_sch"], env=NO_ENV).stdout)
    assert {k for net in nets for node in net["nodes"] for k in node} == {"reference", "pin", "pinName", "pinType"}


def test_project_json_keys_are_camel_case(root: Path) -> None:
    compare = ["compare", "--baseline-select", "model=vendor:model-a", "--candidate-select", "model=cheap:model-b", "--suite", "1.0.0"]
    for argv in (["workqueue", "--suite", "1.0.0"], compare):
        result = run_cli(["project", *argv, "--root", root, "--json"], env=NO_ENV)
        assert result.exit_code in (0, 1), result.output
        doc = json.loads(result.stdout)
        assert doc and _snake_keys(doc) == [], argv
        assert doc.get("findings", [None]) and doc.get("entries", [None]), argv


# --------------------------------------------------------------------------- exit codes, no raw errors


def test_usage_errors_exit_2_and_failed_checks_exit_1(tmp_path: Path) -> None:
    assert run_cli(["repair", "--ledger", tmp_path / "e.jsonl"], env=NO_ENV).exit_code == 2
    assert run_cli(["fixture", "check", "--root", tmp_path], env=NO_ENV).exit_code == 2
    assert run_cli(["log", "--verdict", "maybe", "--ledger", tmp_path / "e.jsonl"], env=NO_ENV).exit_code == 2
    assert run_cli(["log", "--since", "-1"], env=NO_ENV).exit_code == 2  # click's own usage error
    stale = tmp_path / "schema"
    stale.mkdir()
    (stale / "event.schema.json").write_text("{}")
    checked = run_cli(["schema", "--check", "--root", tmp_path], env=NO_ENV)
    assert checked.exit_code == 1 and "schemas differ" in checked.stderr


def test_a_missing_or_unwritable_file_is_one_line_without_errno(tmp_path: Path) -> None:
    missing = run_cli(["project", "compare", "--baseline", tmp_path / "gone.json", "--candidate-select", "all",
                       "--root", REPO], env=NO_ENV)
    assert missing.exit_code == 2
    assert missing.stderr == f"error: {tmp_path / 'gone.json'}: cannot read the baseline snapshot (No such file or directory)\n"
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    unwritable = run_cli(["project", "leaderboard", "--root", REPO, "--out", blocker / "LEADERBOARD.md"], env=NO_ENV)
    assert unwritable.exit_code == 2
    assert unwritable.stderr.startswith(f"error: {blocker}") and unwritable.stderr.count("\n") == 1
    assert "Errno" not in unwritable.stderr and "Traceback" not in unwritable.stderr


# --------------------------------------------------------------------------- the project root, found like git


def test_validate_from_a_subdirectory_finds_the_project() -> None:
    done = subprocess.run([sys.executable, "-m", "cbledger.cli.app", "validate", "--json"], cwd=REPO / "tasks" / "led-resistor-swap",
                          capture_output=True, text=True, env={k: v for k, v in os.environ.items() if not k.startswith("CBLEDGER_")})
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["checked"]["tasks"] == len([p for p in (REPO / "tasks").iterdir() if (p / "task.json").is_file()]) > 0


def test_validate_outside_any_project_is_refused(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "cbledger.cli.app", "validate"], cwd=tmp_path, capture_output=True, text=True,
                          env={k: v for k, v in os.environ.items() if not k.startswith("CBLEDGER_")})
    assert done.returncode == 2 and "not a copperbench project" in done.stderr


# --------------------------------------------------------------------------- log filters


def _committed_runs() -> tuple[list, dict[str, tuple[str, str]]]:
    from cbledger.ledger.store import LedgerStore

    events = list(LedgerStore(REPO / "results" / "ledger" / "events.jsonl").read())
    runs = {s.event.body.run_id: (s.event.body.task.id, s.event.body.model.id) for s in events if event_type(s.event) == "run.recorded"}
    return events, runs


def _log_seqs(*args: str) -> list[int]:
    result = run_cli(["log", "--json", "--root", REPO, *args], env=NO_ENV)
    assert result.exit_code == 0, result.output
    return [json.loads(line)["seq"] for line in result.stdout.splitlines()]


def test_log_filters_by_task_model_run_and_verdict() -> None:
    events, runs = _committed_runs()
    run_types = {"run.recorded", "grade.recorded", "run.retracted", "rubric.scored", "cassette.attached"}
    task, model = next(iter(runs.values()))
    about = [s for s in events if event_type(s.event) in run_types]
    expected = [s.seq for s in about if runs[s.event.body.run_id] == (task, model)]
    assert expected and _log_seqs("--task", task, "--model", model) == expected
    failed = [s.seq for s in about if event_type(s.event) == "grade.recorded" and s.event.body.verdict == "fail"]
    assert failed and _log_seqs("--verdict", "fail") == failed
    one = next(iter(runs))
    assert _log_seqs("--run", one, "--type", "run.recorded") == [s.seq for s in about if event_type(s.event) == "run.recorded" and s.event.body.run_id == one]
    nothing = run_cli(["log", "--json", "--root", REPO, "--task", "no-such-task"], env=NO_ENV)
    assert nothing.exit_code == 2 and "--task no-such-task" in _json_error(nothing.stderr)["message"]


# --------------------------------------------------------------------------- --json wherever a command reports

def _leaf_commands() -> dict[str, object]:
    leaves: dict[str, object] = {}

    def walk(prefix: str, command: object) -> None:
        subs = getattr(command, "commands", None)
        if subs:
            for name, sub in subs.items():
                walk(f"{prefix} {name}".strip(), sub)
        else:
            leaves[prefix] = command

    for entry in app_module.COMMANDS:
        for name, command in module_commands(entry.module).items():
            walk(name, command)
    return leaves


def _json_error(stderr: str) -> dict:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    doc = json.loads(lines[0])
    assert set(doc) == {"error"} and isinstance(doc["error"]["message"], str) and doc["error"]["message"]
    return doc["error"]


LEAVES = sorted(_leaf_commands())


def test_the_whole_tree_is_walked() -> None:
    assert len(LEAVES) > 40 and "run" in LEAVES and "prove consistency" in LEAVES


@pytest.mark.parametrize("name", LEAVES)
def test_every_command_takes_json_and_reports_a_usage_error_as_json(name: str) -> None:
    """Under --json an error is one JSON object on stderr, `{"error": {"message", "exitCode"}}`,
    whoever raised it: here click's own parser."""
    assert any("--json" in p.opts for p in _leaf_commands()[name].params)  # type: ignore[attr-defined]
    out = run_cli([*name.split(), "--json", "--no-such-option-anywhere"], env=NO_ENV)
    assert out.exit_code == 2, out.output
    error = _json_error(out.stderr)
    assert error["exitCode"] == 2 and "--no-such-option-anywhere" in error["message"]


@pytest.mark.parametrize(
    "args",
    [["log"], ["show", "some-run"], ["restore", "some-run", "DIR"], ["project", "leaderboard"], ["export", "--jsonl"],
     ["replay", "--verify"], ["project", "snapshot"]],
    ids=" ".join,
)
def test_a_refusal_under_json_is_the_same_refusal_as_json(tmp_path: Path, args: list[str]) -> None:
    """A command's own refusal and the library's `UserError` alike; the plain text says the same."""
    argv = [str(tmp_path / "d") if a == "DIR" else a for a in args]
    plain = run_cli([*argv, "--root", tmp_path], env=NO_ENV)
    as_json = run_cli([*argv, "--root", tmp_path, "--json"], env=NO_ENV)
    assert plain.exit_code == as_json.exit_code == 2, (plain.output, as_json.output)
    error = _json_error(as_json.stderr)
    assert error["exitCode"] == 2 and plain.stderr.strip() == f"error: {error['message']}"


@pytest.mark.parametrize("name", LEAVES)
def test_every_help_shows_its_placeholders_in_one_style(name: str) -> None:
    """Upper case, as click writes them (`--jobs INTEGER`, `KEY`, `[TASK_IDS]...`), never typer's
    `<int range>`, `{key}` or `[task_ids]...`."""
    out = run_cli([*name.split(), "--help"], env=NO_ENV)
    assert out.exit_code == 0, out.output
    usage = out.stdout.splitlines()[0]
    assert usage.startswith(f"Usage: cbledger {name} [OPTIONS]")
    tail = usage.removeprefix(f"Usage: cbledger {name} [OPTIONS]").split()
    assert all(part.strip("[].") == part.strip("[].").upper() for part in tail), usage
    assert not re.search(r"(?:--[a-z-]+|-[a-z]) (?:<[a-z ]+>|\{\w+\})", out.stdout), out.stdout


def test_project_all_check_json_reports_both_outputs() -> None:
    result = run_cli(["project", "all", "--check", "--json", "--root", REPO], env=NO_ENV)
    doc = json.loads(result.stdout)
    assert set(doc) == {"records", "leaderboard"}
    assert result.exit_code == (0 if doc["records"]["clean"] and doc["leaderboard"]["matches"] else 1)
    assert doc["records"]["unchanged"] > 0 and _snake_keys(doc) == []


# --------------------------------------------------------------------------- output files: into a directory that exists

_OUTPUT_OPTIONS = {"-o", "--out", "--vkey"}
OUTPUTS = sorted(
    (name, next(o for o in p.opts if o.startswith("--")))
    for name, command in _leaf_commands().items()
    for p in command.params  # type: ignore[attr-defined]
    if _OUTPUT_OPTIONS & set(p.opts)
)


def test_every_output_option_is_found() -> None:
    assert {name for name, _ in OUTPUTS} >= {"export", "project leaderboard", "project snapshot", "project readmodel",
                                              "key generate", "prove inclusion", "prove consistency"}


@pytest.mark.parametrize(("name", "option"), OUTPUTS, ids=[f"{n} {o}" for n, o in OUTPUTS])
def test_an_output_into_a_missing_directory_is_refused_and_nothing_is_written(tmp_path: Path, name: str, option: str) -> None:
    """Never a directory made silently: one line naming it, exit 2, before anything is read."""
    missing = tmp_path / "no-such-dir"
    for as_json in (False, True):
        result = run_cli([*name.split(), option, missing / "out.file", "--root", tmp_path, *(["--json"] if as_json else [])],
                         env=NO_ENV)
        assert result.exit_code == 2, result.output
        message = _json_error(result.stderr)["message"] if as_json else result.stderr.removeprefix("error: ")
        assert message.startswith(f"{missing}: no such directory"), result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_ctrl_c_in_any_command_exits_130_with_a_line_saying_so(tmp_path, monkeypatch):
    """typer turns Ctrl-C into exit 130 without a word; a command that reports its own
    interruption (`run`: what it kept) is not said twice."""
    from cbledger.reproduce import verify as verify_mod

    assert run_cli(["init", "--root", tmp_path]).exit_code == 0

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(verify_mod, "verify", interrupted)
    result = run_cli(["replay", "--verify", "--root", tmp_path])
    assert (result.exit_code, result.stderr) == (130, "interrupted\n"), result.output
    as_json = run_cli(["replay", "--verify", "--json", "--root", tmp_path])
    assert as_json.exit_code == 130 and json.loads(as_json.stderr)["error"]["message"] == "interrupted"


def test_a_reader_that_stops_early_is_not_a_failed_check():
    """`cbledger log | head -1` exited 1 about half the time, nothing said: click ends a write to a
    closed pipe with exit 1, which here means a check that failed."""
    for _ in range(3):
        proc = subprocess.Popen([sys.executable, "-m", "cbledger.cli.app", "log", "--root", str(REPO)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
        assert proc.stdout is not None and proc.stdout.readline()
        proc.stdout.close()  # the reader has had enough, as `head -1` has
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 0 and err == b"", (proc.returncode, err)


def test_python_dash_m_runs_the_same_entry_point(tmp_path):
    """A clone beside an installed copy runs its own code as `python -m cbledger` from its top."""
    r = subprocess.run([sys.executable, "-m", "cbledger", "--version"], cwd=Path(__file__).resolve().parents[1],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.strip() == f"cbledger {importlib.metadata.version('cbledger')}", r.stderr
    bad = subprocess.run([sys.executable, "-m", "cbledger", "log", "--since", "-1", "--ledger", tmp_path / "x.jsonl"],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and bad.stderr.startswith("error: cbledger log: "), bad.stderr
