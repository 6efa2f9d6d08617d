"""`cbledger export --jsonl -o FILE` replaces a file, and only a file."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from tests.factories import new_ledger, run_cli


@pytest.fixture()
def ledger(tmp_path: Path) -> Path:
    path = tmp_path / "results" / "ledger" / "events.jsonl"
    new_ledger(path)
    return path


def test_export_writes_the_file_byte_for_byte_and_leaves_no_temporary(ledger: Path, tmp_path: Path):
    out = tmp_path / "copy.jsonl"
    r = run_cli(["export", "--jsonl", "-o", out, "--ledger", ledger])
    assert r.exit_code == 0, r.stderr
    assert out.read_bytes() == ledger.read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["copy.jsonl", "results"]


def test_a_symlink_target_is_refused_and_neither_it_nor_what_it_names_changes(ledger: Path, tmp_path: Path):
    kept = tmp_path / "kept.txt"
    kept.write_text("not a ledger\n")
    link = tmp_path / "link.jsonl"
    link.symlink_to(kept)
    r = run_cli(["export", "--jsonl", "-o", link, "--ledger", ledger])
    assert r.exit_code == 2 and f"{link}: not a regular file" in r.stderr
    assert link.is_symlink() and kept.read_text() == "not a ledger\n"


def test_a_directory_target_is_refused_by_its_own_name_and_no_temporary_is_left(ledger: Path, tmp_path: Path):
    target = tmp_path / "dir"
    target.mkdir()
    r = run_cli(["export", "--jsonl", "-o", target, "--ledger", ledger])
    assert r.exit_code == 2 and f"{target}: not a regular file" in r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dir", "results"]


def test_a_snapshot_into_a_directory_is_refused_by_its_name_and_no_temporary_is_left(ledger: Path, tmp_path: Path):
    target = tmp_path / "dir"
    target.mkdir()
    r = run_cli(["project", "snapshot", "-o", target, "--ledger", ledger])
    assert r.exit_code == 2 and f"{target}: not a regular file" in r.stderr, r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dir", "results"]


def test_a_published_file_is_readable_as_the_umask_allows(ledger: Path, tmp_path: Path):
    """Written whole and renamed (`durable.write_atomic`), a published file still gets the mode a
    plain write would give it: a checkpoint or leaderboard copied to a web host must be readable."""
    out = tmp_path / "copy.jsonl"
    assert run_cli(["export", "--jsonl", "-o", out, "--ledger", ledger]).exit_code == 0
    mask = os.umask(0o022)
    os.umask(mask)
    assert stat.S_IMODE(out.stat().st_mode) == 0o666 & ~mask


def test_a_file_that_went_its_own_way_is_never_replaced_and_a_prefix_is(ledger: Path, tmp_path: Path):
    """`export -o` over a file ledger holding events the export lacks once dropped them silently."""
    from cbledger.ledger.store import LedgerStore
    from tests.factories import run_recorded

    prefix = tmp_path / "older.jsonl"
    prefix.write_bytes(ledger.read_bytes())
    LedgerStore(ledger).append([run_recorded(1)])
    r = run_cli(["export", "--jsonl", "-o", prefix, "--ledger", ledger])  # an older copy: extended
    assert r.exit_code == 0 and prefix.read_bytes() == ledger.read_bytes(), r.output
    diverged = tmp_path / "diverged.jsonl"
    diverged.write_bytes(ledger.read_bytes())
    LedgerStore(diverged).append([run_recorded(2)])
    before = diverged.read_bytes()
    LedgerStore(ledger).append([run_recorded(3)])
    r = run_cli(["export", "--jsonl", "-o", diverged, "--ledger", ledger])
    assert r.exit_code == 2 and "holds events the export" in r.stderr and "nothing replaced" in r.stderr, r.output
    assert diverged.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []
