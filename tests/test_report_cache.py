"""The kicad-cli report cache (`runner/report_cache.py`): a tree verified once is not verified
again, a tree one byte apart is, and a run that took its reports from the cache is graded and
replayed exactly as one that made them."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from cbledger.runner import check_capture, confined_verify, isolation, report_cache
from cbledger.runner.agents.copperhead import locate
from tests.runner_project import RENAME_TASK, REPO, build_project
from tests.test_rerun_real import _patched_copy

pytestmark = [pytest.mark.kicad, pytest.mark.shared]


def test_a_tree_verified_once_takes_its_reports_from_the_cache(tmp_path, shared_real, kicad_cli, monkeypatch):
    cache = tmp_path / "cache"
    monkeypatch.setenv(report_cache.CACHE_ENV, str(cache))
    made: list[str] = []
    real = confined_verify._verify

    def counted(workdir, *args):
        made.append(workdir.name)
        return real(workdir, *args)

    monkeypatch.setattr(confined_verify, "_verify", counted)
    grades = []
    for name in ("first", "second"):
        (tmp_path / name).mkdir()
        project = build_project(tmp_path / name, shared_real)
        result = project.run(RENAME_TASK, "--agent", "gold", "--jobs", "1")
        assert result.exit_code == 0, result.output
        (grade,) = project.grades()
        grades.append(grade)
        result = project.cli("replay", "--verify")
        assert result.exit_code == 0, result.output
    assert len(made) == 1  # the second project's gold run left the same tree: kicad-cli ran once
    assert len(list(cache.glob("*/*/made"))) == 1
    assert [(a.id, a.status, a.detail) for a in grades[0].assertions] == [(a.id, a.status, a.detail) for a in grades[1].assertions]
    assert grades[1].verdict == "pass"


def test_the_key_is_every_byte_of_the_tree_the_artifacts_and_the_binary(tmp_path, kicad_cli):
    tree = tmp_path / "tree"
    (tree / "docs").mkdir(parents=True)
    (tree / ".git").mkdir()
    (tree / "board.kicad_sch").write_text("(kicad_sch)")
    (tree / "docs" / "notes.md").write_text("a")
    (tree / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (tree / ".copperhead" / "runs" / "2026-12-03T16-16-28-954Z").mkdir(parents=True)
    (tree / ".copperhead" / "config.json").write_text("{}")
    first = report_cache.key(tree, "board.kicad_sch", None, kicad_cli)
    assert report_cache.key(tree, "board.kicad_sch", None, kicad_cli) == first
    # neither git's files nor copperhead's run logs reach the confined copy kicad-cli reads
    (tree / ".git" / "HEAD").write_text("ref: refs/heads/other\n")
    (tree / ".copperhead" / "runs" / "2026-12-03T16-16-28-954Z" / "transcript.jsonl").write_text("{}")
    assert report_cache.key(tree, "board.kicad_sch", None, kicad_cli) == first
    assert report_cache.key(tree, "board.kicad_sch", "board.kicad_pcb", kicad_cli) != first
    (tree / ".copperhead" / "config.json").write_text("[]")  # the rest of copperhead's files do
    second = report_cache.key(tree, "board.kicad_sch", None, kicad_cli)
    assert second != first
    (tree / "docs" / "notes.md").write_text("b")  # any file: kicad-cli may read more than the artifacts
    third = report_cache.key(tree, "board.kicad_sch", None, kicad_cli)
    assert third not in (first, second)
    (tree / "docs" / "notes.md").unlink()
    (tree / "docs" / "notes.md").symlink_to("/etc/hostname")
    assert report_cache.key(tree, "board.kicad_sch", None, kicad_cli) not in (first, second, third)
    ignore = report_cache.unseen(tree)
    assert ignore(str(tree / ".copperhead"), ["runs", "config.json"]) == {"runs"}
    assert ignore(str(tree / "docs"), ["runs", ".git"]) == {".git"}


@pytest.mark.copperhead
def test_a_tree_checked_once_takes_its_copperhead_check_from_the_cache(tmp_path, kicad_cli, copperhead_cli, monkeypatch):
    cache = tmp_path / "cache"
    monkeypatch.setenv(report_cache.CACHE_ENV, str(cache))
    ran: list[str] = []
    real = isolation.run

    def counted(job, how):
        if job.argv[-1] == "check":
            ran.append(job.argv[1])
        return real(job, how)

    monkeypatch.setattr(check_capture.isolation, "run", counted)
    tree = tmp_path / "tree"
    shutil.copytree(REPO / "fixtures" / "synthetic-led-resistor" / "tree", tree)
    cli = locate(copperhead_cli)
    assert cli is not None
    how = isolation.confinement(False, ())

    def check(cli, name: str) -> bytes:
        return check_capture.capture(cli, tree, tmp_path / name, how).read_bytes()

    first = check(cli, "first")
    assert b'"exitCode": 0' in first
    assert check(cli, "second") == first and len(ran) == 1  # the same tree, install and tools
    assert len(list(cache.glob("*/*/check.json"))) == 1
    # what the check reads: any file of the tree but git's and copperhead's run logs
    (tree / ".git").mkdir()
    (tree / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    assert check(cli, "git") == first and len(ran) == 1
    (tree / "docs" / "notes.md").write_text("a note\n")
    check(cli, "docs")
    assert len(ran) == 2
    # a patched copy of the CLI is another CLI, even where its version says the same
    patched = locate(_patched_copy(tmp_path, Path(copperhead_cli), "Edit s-expressions surgically", "Edit s-expressions boldly"))
    assert patched is not None and patched.version() == cli.version()
    assert check_capture.build_identity(patched, kicad_cli) != check_capture.build_identity(cli, kicad_cli)
    check(patched, "patched")
    assert len(ran) == 3
    # a check killed at its cap is not kept
    monkeypatch.setattr(check_capture, "CAP_SEC", 0.01)
    (tree / "docs" / "notes.md").write_text("another note\n")
    assert b'"killed"' in check(cli, "killed") and b'"killed"' in check(cli, "killed-again")
    assert len(ran) == 5


def test_a_cache_that_cannot_be_written_keeps_nothing_and_fails_no_run(tmp_path):
    made = tmp_path / "check.json"
    made.write_text('{"exitCode": 0}\n')
    cache = tmp_path / "not-a-directory"
    cache.write_text("")
    report_cache.keep_check(cache, "ab" * 32, made)
    assert report_cache.lookup_check(cache, "ab" * 32) is None
    report_cache.keep(cache, "cd" * 32, report_cache.oracle.Reports(made, None))
    assert report_cache.lookup(cache, "cd" * 32, tmp_path / "out") is None
