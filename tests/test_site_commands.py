"""Every `cbledger` command the site shows, run as a reader would run it from the project root.

A page marks each command it shows with `<code class="cmd" data-exit="N">`: N is the exit the
page promises (0, or 1 where a regression gate reports what fired). A command that exits with
anything else fails here, and a `cbledger …` in a `<code>` that is not marked fails too, so no
command escapes the check. Both the committed ledger's site and one with agent runs over two
copperhead versions (which has a regressions page with commands) are walked.
"""

from __future__ import annotations

import html
import re
import shlex
from pathlib import Path

import pytest

from cbledger.ledger.store import LedgerStore
from cbledger.projections.site import render as site
from cbledger.projections.writers import load_state
from tests.factories import MAINTAINER, run_cli
from tests.site_helpers import REPO, committed_state, crowd_stream

_MARKED = re.compile(r'<code class="cmd" data-exit="(\d)">(cbledger [^<]*)</code>')
_ANY = re.compile(r"<code[^>]*>(cbledger [^<]*)</code>")


def _commands(pages: list[tuple[str, bytes]]) -> dict[str, tuple[int, str]]:
    """Each distinct command -> (the exit its page promises, the first page showing it)."""
    out: dict[str, tuple[int, str]] = {}
    for rel, data in pages:
        text = data.decode()
        marked = _MARKED.findall(text)
        assert len(marked) == len(_ANY.findall(text)), f"{rel}: a command shown without its promised exit"
        for code, command in marked:
            out.setdefault(html.unescape(command), (int(code), rel))
    return out


def _run_all(commands: dict[str, tuple[int, str]], root: Path) -> None:
    wrong = []
    for command, (promised, page) in sorted(commands.items()):
        args = shlex.split(command)
        assert args[0] == "cbledger"
        result = run_cli([*args[1:], "--root", root])
        if result.exit_code != promised:
            wrong.append(f"{page}: `{command}` exited {result.exit_code}, the page promises {promised}: "
                         f"{(result.stderr or result.stdout).strip()[:300]}")
    assert wrong == []


def _one_show_per_kind(state, commands: dict[str, tuple[int, str]]) -> dict[str, tuple[int, str]]:
    """Every command but the run pages' `show RUN`, of which one per kind of run (board, run
    mode, suite version, retracted or not, a later pass or not, the exit promised): `show` is one
    code path, and running it for each of the committed ledger's 470 runs, each loading the whole
    ledger, had grown to over a minute of CI with every suite bump's 86 runs."""
    kept: dict[tuple, str] = {}
    for command, (code, page) in sorted(commands.items()):
        args = shlex.split(command)
        if args[1] != "show" or not page.startswith("runs/"):
            kept[(command,)] = command
            continue
        rid = args[2]
        entry = state.runs.get(rid) or state.later_passes.get(rid)
        run = entry.run
        kind = ("show", run.fixture.id, run.run_mode, run.comparability.suite_version, rid in state.retracted,
                rid in state.later_passes, code)
        kept.setdefault(kind, command)
    return {command: commands[command] for command in kept.values()}


def test_every_command_the_committed_site_shows_runs():
    state = committed_state()
    commands = _commands(site.render(state, {}))
    kinds = {page.split("/")[0] for _, page in commands.values()}
    assert {"runs", "tasks", "models"} <= kinds
    chosen = _one_show_per_kind(state, commands)
    assert 20 <= sum(1 for c in chosen if c.startswith("cbledger show")) < 200
    _run_all(chosen, REPO)


def test_every_command_of_a_site_with_agent_runs_and_two_harness_versions_runs(tmp_path):
    ledger = tmp_path / "results" / "ledger" / "events.jsonl"
    ledger.parent.mkdir(parents=True)
    LedgerStore(ledger).init("site-crowd", MAINTAINER)
    LedgerStore(ledger).append(crowd_stream().drafts()[1:])
    pages = site.render(load_state(ledger), {})
    # the run pages' `show` needs preserved runs, which a synthetic ledger has none of: the
    # committed site's test runs those; the aggregate pages' commands are run here
    commands = {c: v for c, v in _commands(pages).items() if not v[1].startswith("runs/")}
    # the gate fires between the two versions: its command promises exit 1, and must keep it
    assert [code for code, page in commands.values() if page == site.REGRESSIONS] == [1]
    _run_all(commands, tmp_path)


@pytest.mark.parametrize("bad", ["cbledger project compare --baseline copperhead=A --candidate copperhead=B"])
def test_the_check_fails_on_a_command_that_does_not_run(bad):
    """The check itself can fail: a command the CLI refuses is reported with its page."""
    with pytest.raises(AssertionError, match="the page promises 0"):
        _run_all({bad: (0, site.REGRESSIONS)}, REPO)
