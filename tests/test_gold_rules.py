"""A gold solution acts only inside the sandbox: an absolute path or a `..` in gold/delete.txt,
or a symbolic link in gold/files, is refused by `cbledger validate`, by the runner's preflight and
by the gold agent itself, before anything is touched. (Before, an absolute path deleted a file
outside the sandbox and a link copied /etc/hostname into a bundle.)"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cbledger.tasks import gold
from tests.runner_project import RENAME_TASK, build_project

pytestmark = [pytest.mark.slow, pytest.mark.kicad, pytest.mark.shared]


def test_gold_rules_name_each_way_out():
    assert gold.outside("/etc/passwd") and gold.outside("../../victim") and gold.outside("a/../../b")
    assert gold.outside(".git/config") and gold.outside("~/x")
    assert gold.outside("docs/NOTES.md") is None and gold.outside("hardware/board.kicad_sch") is None


@pytest.mark.parametrize("how", ["absolute", "dotdot", "symlink"])
def test_a_gold_solution_that_reaches_outside_is_refused(tmp_path, shared_real, kicad_cli, how):
    project = build_project(tmp_path, shared_real, bump=False)
    victim = tmp_path / "victim.txt"
    victim.write_text("outside every sandbox\n")
    gold_dir = project.root / "tasks" / RENAME_TASK / "gold"
    if how == "absolute":
        (gold_dir / "delete.txt").write_text(f"# a comment\n{victim}\n")
        where = "gold/delete.txt:2"
    elif how == "dotdot":
        (gold_dir / "delete.txt").write_text("docs/PINOUT.md\n../../../../victim.txt\n")
        where = "gold/delete.txt:2"
    else:
        os.symlink("/etc/hostname", gold_dir / "files" / "docs" / "hostname.txt")
        where = "gold/files/docs/hostname.txt"
    # refused before any version could record it, --skip-trial or not: the gold is in error
    bumped = project.cli("suite", "bump", "--reason", "initial suite", "--skip-trial")
    assert bumped.exit_code == 2 and where in bumped.output and "nothing recorded" in bumped.output, bumped.output

    checked = project.cli("validate")
    assert checked.exit_code != 0
    assert where in checked.output, checked.output

    before = project.ledger_bytes()
    result = project.run(RENAME_TASK, "--agent", "gold")
    assert result.exit_code != 0  # with no suite recorded, refused before any task is looked at
    assert victim.read_text() == "outside every sandbox\n"
    assert project.ledger_bytes() == before and not project.sandboxes.exists()


def test_the_gold_agent_refuses_even_past_preflight(tmp_path, shared_real, kicad_cli, monkeypatch):
    """The agent applies the rules itself: a gold directory changed after preflight (or a check
    skipped) still cannot delete outside the sandbox."""
    from cbledger.cli import run_commands
    from cbledger.runner import suite_run

    project = build_project(tmp_path, shared_real)
    victim = tmp_path / "victim.txt"
    victim.write_text("outside every sandbox\n")
    skipped = lambda catalog, plan, view, **_: view.suite.suite_version  # noqa: E731
    monkeypatch.setattr(suite_run, "preflight", skipped)  # the check before the runs and the one `run` makes first
    monkeypatch.setattr(run_commands, "preflight", skipped)
    (project.root / "tasks" / RENAME_TASK / "gold" / "delete.txt").write_text(f"{victim}\n")
    result = project.run(RENAME_TASK, "--agent", "gold")
    assert result.exit_code != 0
    assert "the gold solution would act outside the sandbox" in result.output
    assert victim.read_text() == "outside every sandbox\n"
    assert Path(victim).exists()


def test_a_scripted_run_leaves_the_run_directory_copperhead_leaves(tmp_path):
    """copperhead writes summary.md beside its transcript; a gold run did not, so a task whose
    files_touched_subset named the transcript alone passed its gold and failed every real run."""
    import datetime as dt

    from cbledger.runner.agents.base import write_transcript

    started = dt.datetime(2026, 7, 22, 18, 47, 18, 987000, tzinfo=dt.UTC)
    path = write_transcript(tmp_path, started, [
        {"type": "run-start", "data": {"request": "rename net DATA to SENSE"}},
        {"type": "run-end", "data": {"exitPath": "done"}},
    ])
    assert path == tmp_path / ".copperhead" / "runs" / "2026-07-22T18-47-18-987Z" / "transcript.jsonl"
    summary = (path.parent / "summary.md").read_text()
    assert summary.startswith("# Run summary\n") and "- **Request:** rename net DATA to SENSE" in summary
    assert "- **Outcome:** done" in summary
    assert sorted(p.name for p in path.parent.iterdir()) == ["summary.md", "transcript.jsonl"]
