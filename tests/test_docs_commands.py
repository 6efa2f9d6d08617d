"""Every `cbledger` command README.md and docs/ show, checked against the CLI and, where it is a
whole command, run.

A reader copies what a page shows. So each `cbledger …` in a fenced block, and each inline one,
is read as the shell would read it and sorted three ways:

- a synopsis (`[--check]`, `ID…`, `pass|fail`, a placeholder no workspace can fill): its command
  path must exist and every option it names must be one of that command's;
- a reference to a command in prose (`cbledger append`, its required argument left out): the
  command must exist;
- a whole command (placeholders such as `$RUN` or `<task>` filled from the workspace): it is run,
  in the order its document shows it, in one scratch project per document (a copy of the
  repository's suite and committed results in tmp_path, never the repository tree), and must
  exit 0 — or, where its document shows it failing, with the code the document states.

A command that cannot run here (a real provider key, a network service, minutes of kicad-cli)
is listed in `NOT_RUN` with its reason; a listed command no document shows any more fails the
test, so the list cannot rot. The site's commands are run by tests/test_site_commands.py, and
the shell blocks of docs/AUTHORING.md and docs/JUDGING.md, each as one script, by the tests
`RUN_ELSEWHERE` names.
"""

from __future__ import annotations

import functools
import re
import shlex
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest
import typer.main
from typer import _click as click

from cbledger.cli.app import app
from tests.factories import run_cli

REPO = Path(__file__).resolve().parent.parent
DOCS = (REPO / "README.md", *sorted((REPO / "docs").glob("*.md")))

_FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.MULTILINE | re.DOTALL)
_INLINE = re.compile(r"`([^`]+)`")
_INVOCATION = re.compile(r"(?:^|[\s(=/])cbledger\s+(.*)")
_SHELL_STOP = {"|", "||", "&&", ";", "2>&1", ">", "&"}
_SYNOPSIS = ("[", "]", "…", "...", "|", "{", "}", "(")
_PLACEHOLDER = re.compile(r"^\$\w+$|^\$\{\w+\}$|^[A-Z][A-Z0-9_-]*$|^<[a-z-]+>$|^~/")


@dataclass(frozen=True)
class Shown:
    """One `cbledger …` as a document shows it."""

    doc: str
    line: int
    fenced: bool  # in a shell block: typed as it stands (an untyped block is read as prose)
    text: str  # what follows `cbledger`, as shown
    argv: tuple[str, ...]  # the words the shell passes, up to a pipe or a redirection

    def __str__(self) -> str:
        return f"{self.doc}:{self.line}: `cbledger {self.text}`"


def _words(text: str) -> tuple[str, ...]:
    try:
        words = shlex.split(text, comments=True)
    except ValueError:  # an unbalanced quote: a synopsis, not shell
        return tuple(text.split())
    out: list[str] = []
    for word in words:
        if word in _SHELL_STOP or word.startswith(("2>", ">")):
            break
        if word.endswith(")") and "(" not in word:  # the end of `$(cbledger …)` or `(cbledger …)`
            out.extend([word[:-1]] if word[:-1] else [])
            break
        out.append(word)
    return tuple(out)


def shown_commands(doc: Path) -> list[Shown]:
    """Every `cbledger …` of one document, in its order."""
    text = doc.read_text(encoding="utf-8")
    name = doc.relative_to(REPO).as_posix()
    found: list[tuple[int, Shown]] = []
    for block in _FENCE.finditer(text):
        first = text.count("\n", 0, block.start(2)) + 1
        lines = block.group(2).split("\n")
        joined = ""
        for i, line in enumerate(lines):
            joined += line
            if line.endswith("\\"):
                joined = joined[:-1] + " "
                continue
            match = _INVOCATION.search(joined)
            if match and not joined.lstrip().startswith("#") and "# or:" not in joined[: match.start()]:
                rest = match.group(1).strip()
                shell = block.group(1) in ("sh", "bash", "console")
                found.append((block.start(), Shown(name, first + i, shell, rest, _words(rest))))
            joined = ""
    prose = _FENCE.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)  # offsets kept: one order
    for span in _INLINE.finditer(prose):
        words = " ".join(span.group(1).split())
        match = re.match(r"(?:\.venv/bin/)?cbledger\s+(.*)", words)
        if match and re.match(r"(--results\b|[a-z][a-z-]*(\s|$))", match.group(1)):
            rest = match.group(1)
            found.append((span.start(), Shown(name, prose.count("\n", 0, span.start()) + 1, False, rest, _words(rest))))
    return [shown for _, shown in sorted(found, key=lambda f: f[0])]


#: `cbledger …` in code that is no command -> what it is
NOT_A_COMMAND = {"runner": "the author of the commit that carries a pass's work into the next"}

ALL = [shown for doc in DOCS for shown in shown_commands(doc) if shown.text not in NOT_A_COMMAND]


def _is_group(command: click.Command) -> bool:
    return hasattr(command, "get_command")


def resolve(argv: tuple[str, ...]) -> tuple[list[str], click.Command, list[str]]:
    """The command path, the command, and the words left for it. The root's own `--results DIR`
    is skipped; an unknown name fails."""
    command: click.Command = typer.main.get_command(app)
    path: list[str] = []
    words = list(argv)
    while _is_group(command):
        while words and words[0].startswith("--results"):
            words = words[1:] if "=" in words[0] else words[2:]
        if not words or words[0] in ("…", "..."):
            break
        if "|" in words[0]:  # `fixture hash|check|…`: each is a command
            for name in words[0].replace("\\", "").split("|"):
                assert command.get_command(click.Context(command), name), f"no command `cbledger {' '.join([*path, name])}`"  # type: ignore[attr-defined]
        sub = command.get_command(click.Context(command), words[0].split("|")[0])  # type: ignore[attr-defined]
        assert sub is not None, f"no command `cbledger {' '.join([*path, words[0]])}`"
        path.append(words.pop(0))
        command = sub
    return path, command, words


def _option_names(command: click.Command) -> set[str]:
    return {o for p in command.params for o in (*p.opts, *p.secondary_opts) if o.startswith("-")} | {"--help"}


def _parts(word: str) -> list[str]:
    """A word and, for `key=VALUE` or `a:B`, its values: `runs=ID,ID` holds placeholders too."""
    return [word, *re.split(r"[=,:]", word)[1:]]


@functools.cache
def kind(shown: Shown) -> str:
    """synopsis, reference or command."""
    if any(mark in word for word in shown.argv for mark in _SYNOPSIS):
        return "synopsis"
    if any(_PLACEHOLDER.match(part) and part not in PLACEHOLDERS for word in shown.argv for part in _parts(word)):
        return "synopsis"
    path, command, words = resolve(shown.argv)
    if _is_group(command) or (not shown.fenced and not words):
        return "reference"  # a command named in prose, not one to type as it stands
    if "--help" in words:
        return "command"
    try:
        command.make_context(" ".join(path), words, resilient_parsing=False)
    except click.exceptions.MissingParameter:
        return "reference"
    except click.exceptions.UsageError:
        pass  # run it: the run says what is wrong
    return "command"


#: placeholders the docs use -> what fills them in the scratch project (see `_fill`)
TASK = "led-resistor-swap"
PLACEHOLDERS = {"$RUN": "{run}", "RUN": "{run}", "RUN_ID": "{run}", "<task>": TASK, "TASK": TASK}

#: a command shown that is not run here -> why (a command no document shows any more fails)
NOT_RUN = {
    "run --suite full --agent copperhead --session solve": "the real harness over the full suite: minutes",
    "replay --verify": "re-grades the committed ledger: a minute and more (scripts/test runs it)",
    "replay --verify --rerun": "re-executes every cassette through the real harness: minutes",
    "replay --verify --rerun --jobs 2": "re-executes every cassette through the real harness: minutes (scripts/test runs it)",
    "rerun --all": "re-executes every cassette through the real harness: minutes",
    "rerun --all --from-session --attach": "re-executes every scripted run through the real harness: minutes",
    "fixture check --all --kicad": "kicad-cli on every fixture: minutes",
    "watch --no-site": "runs until interrupted (tests/test_watch.py)",
    "watch": "runs until interrupted (tests/test_watch.py)",
    "run --suite smoke --agent gold": "the smoke suite through kicad-cli: minutes (`demo` runs the same)",
    "run do-rename-net --agent copperhead --model compat:qwen2.5-coder-7b --segment open-weight-hosted --repeats 5": "a real model",
    "run led-resistor-swap --agent copperhead --session sessions/idle.json": "the real harness: a minute",
    "endpoint serve tasks/led-resistor-swap/sessions/solve.json": "serves until interrupted (tests/test_endpoint.py)",
    "pricing publish prices.json": "the reader's own price table",
    "run led-resistor-swap --agent copperhead --model compat:flaky --segment open-weight-self-hosted":
        "the real harness against an endpoint served by hand (tests/test_runner_campaign.py, the provider outage)",
    "run led-resistor-swap --agent copperhead --model compat:flaky --segment open-weight-self-hosted --retry-env 1":
        "the real harness against an endpoint served by hand (tests/test_runner_campaign.py, the provider outage)",
    "run TASK --agent copperhead --session solve --keep-sandboxes": "the real harness, three repeats: a minute",
    "rerun RUN": "re-executes the run through the real harness (tests/test_rerun_cassette.py)",
    "rerun RUN --from-session": "re-executes the run through the real harness (tests/test_rerun_attach.py)",
    "doctor --model claude-sonnet-4": "a real provider's key",
    "run --suite full --agent copperhead --model claude-sonnet-4 --dry-run":
        "prices the model from the reader's own table (`pricing publish prices.json` above); unpriced, it is refused",
    "run --suite full --agent copperhead --model claude-sonnet-4 --jobs 2 --max-cost-usd 2 --budget-usd 40": "a real model",
    "run --suite real --agent copperhead --model claude-sonnet-4": "a real model",
    "run led-resistor-swap --agent copperhead --model claude-sonnet-4 --passes 2": "a real model",
    "run led-resistor-swap --agent copperhead --session sessions/led-resistor-swap-two-pass.json --passes 2 --repeats 1": "the real harness, two passes: a minute",
    "run --suite full --agent gold --executor dask --scheduler tcp://10.0.0.1:8786": "a Dask cluster",
    "run --suite full --agent gold --ledger postgresql://bench@db.example/copperbench?ledger=main": "a PostgreSQL server",
    "export --jsonl --ledger postgresql://bench@db.example/copperbench?ledger=main -o results/ledger/events.jsonl":
        "a PostgreSQL server",
    "import --jsonl results/ledger/events.jsonl --ledger postgresql://bench@db.example/copperbench?ledger=main":
        "a PostgreSQL server",
}

#: documents whose shell blocks another test runs as one script, in order
RUN_ELSEWHERE = {
    "docs/AUTHORING.md": "tests/test_authoring_guide.py",
    "docs/JUDGING.md": "tests/test_real_tasks.py",
}


def _key(shown: Shown) -> str:
    return " ".join(shown.argv)


def runnable(doc: str) -> list[Shown]:
    return [s for s in ALL if s.doc == doc and kind(s) == "command" and _key(s) not in NOT_RUN
            and not (s.fenced and doc in RUN_ELSEWHERE)]


def test_every_document_is_read():
    docs = {shown.doc for shown in ALL}
    assert "README.md" in docs and "docs/RUNNER.md" in docs and len(ALL) > 150
    assert {kind(s) for s in ALL} == {"synopsis", "reference", "command"}


def _unknown(shown: Shown) -> str | None:
    """What of a shown command the CLI does not have, or None."""
    try:
        path, command, words = resolve(shown.argv)
    except AssertionError as exc:
        return f"{shown}: {exc}"
    unknown = [w.split("=")[0] for w in words if w.startswith("-") and w.split("=")[0] not in _option_names(command)]
    return f"{shown}: `cbledger {' '.join(path)}` has no option {', '.join(unknown)}" if unknown else None


def test_every_command_and_option_a_document_names_exists():
    """Synopses and references included: an option renamed or a command removed shows here."""
    wrong = [problem for shown in ALL if (problem := _unknown(shown))]
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("bad", ["project compare --baseline-snapshot X", "snapshot", "fixture hash|chek"])
def test_the_check_names_a_command_or_option_the_cli_does_not_have(bad: str):
    shown = Shown("docs/X.md", 1, True, bad, _words(bad))
    assert _unknown(shown) is not None


def test_the_list_of_commands_not_run_names_only_commands_a_document_shows():
    shown = {_key(s) for s in ALL if kind(s) == "command"}
    assert sorted((set(NOT_RUN) | set(FAILS)) - shown) == []
    texts = {s.text for doc in DOCS for s in shown_commands(doc)}
    assert set(NOT_A_COMMAND) <= texts
    for doc, test in RUN_ELSEWHERE.items():
        assert doc in (REPO / test).read_text(encoding="utf-8"), (doc, test)


def scratch_project(tmp: Path) -> Path:
    """A scratch copy of the repository's project: its suite, and its committed results."""
    root = tmp / "project"
    for name in ("tasks", "fixtures", "suites", "sessions", "keys", "schema", "results"):
        # a real board's tree is third-party data, materialized where a command needs it
        shutil.copytree(REPO / name, root / name, ignore=shutil.ignore_patterns("tree") if name == "fixtures" else None)
    for fixture in (REPO / "fixtures").iterdir():
        if (fixture / "tree").is_dir() and '"origin": "upstream"' not in (fixture / "fixture.json").read_text():
            shutil.copytree(fixture / "tree", root / "fixtures" / fixture.name / "tree")
    shutil.copy2(REPO / "LEADERBOARD.md", root / "LEADERBOARD.md")
    return root


def _a_run(root: Path) -> str:
    """A run of TASK that can be shown, restored and re-graded: one the harness made with a
    cassette, so its transcript and diff are a real agent's."""
    from cbledger.ledger.store import LedgerStore

    store = LedgerStore(root / "results" / "ledger" / "events.jsonl")
    taped = {s.event.body.run_id for s in store.read(types={"cassette.attached"})}
    runs = store.read(types={"run.recorded"})
    return next(s.event.body.run_id for s in runs if s.event.body.task.id == TASK and s.event.body.run_id in taped)


def _fill(argv: tuple[str, ...], root: Path, real: Path, values: dict[str, str]) -> list[str]:
    """The words as the shell would pass them in the project: placeholders filled, `../shared/real`
    (beside the repository) found where it is, globs expanded."""
    out: list[str] = []
    for word in argv:
        for token, value in PLACEHOLDERS.items():
            if token.startswith("$") and token in word:
                word = word.replace(token, value)
        word = PLACEHOLDERS.get(word, word).format(**values)
        word = word.replace("../shared/real", str(real))
        out.extend(sorted(str(p.relative_to(root)) for p in root.glob(word)) if "*" in word else [word])
    return out


#: a command its document shows failing, where the exit is stated in prose -> the exit
FAILS = {
    "task variant <task> --seed 1": 2,  # docs/VARIANTS.md: the committed seed-1 variant is refused as existing
}


def _promised(shown: Shown) -> int:
    """0, the exit a shell block's comment states (`# exit 4: …`), or the one FAILS lists."""
    said = re.search(r"#.*\bexits? (\d)", shown.text)
    return int(said.group(1)) if said else FAILS.get(_key(shown), 0)


DOCS_RUN = sorted({s.doc for s in ALL if s in runnable(s.doc)})


def _run_in_order(commands: list[Shown], root: Path, real: Path, copperhead: Path) -> list[str]:
    """Each command from the project's root, in order; what exited otherwise than promised."""
    values = {"run": _a_run(root)}
    env = {"CBLEDGER_ROOT": str(root), "CBLEDGER_RESULTS": None, "CBLEDGER_LEDGER": None, "COPPERHEAD_CLI": str(copperhead)}
    wrong = []
    for shown in commands:
        result = run_cli(_fill(shown.argv, root, real, values), env=env)
        if result.exit_code != _promised(shown):
            wrong.append(f"{shown} exited {result.exit_code}, its document promises {_promised(shown)}: "
                         f"{(result.stderr or result.stdout).strip()[-400:]}")
    return wrong


@pytest.mark.parametrize("doc", DOCS_RUN)
def test_every_command_a_document_shows_runs(
    doc: str, tmp_path: Path, shared_real: Path, copperhead_cli: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    root = scratch_project(tmp_path)
    monkeypatch.chdir(root)
    wrong = _run_in_order(runnable(doc), root, shared_real, copperhead_cli)
    assert not wrong, "\n".join(wrong)


def test_the_run_reports_a_command_that_exits_otherwise_than_promised(
    tmp_path: Path, shared_real: Path, copperhead_cli: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The check itself can fail: a refusal shown as a success, a success shown as a refusal."""
    root = scratch_project(tmp_path)
    monkeypatch.chdir(root)
    shown = [Shown("docs/X.md", 1, True, text, _words(text)) for text in ("show no-such-run", "validate  # exit 2: refused")]
    wrong = _run_in_order(shown, root, shared_real, copperhead_cli)
    assert [w.split(" exited ")[1][:28] for w in wrong] == ["2, its document promises 0: ", "0, its document promises 2: "]
