"""Where throwaway restores are made: a user's choice first, memory when there is room, else disk."""

from __future__ import annotations

import os
from pathlib import Path

from cbledger import scratch


def test_a_named_scratch_directory_wins_over_everything(tmp_path: Path):
    assert scratch.parent({"CBLEDGER_SCRATCH": str(tmp_path), "TMPDIR": "/elsewhere"}, shared=tmp_path / "shm") == tmp_path


def test_a_set_tmpdir_keeps_pythons_default(tmp_path: Path):
    assert scratch.parent({"TMPDIR": str(tmp_path)}, shared=tmp_path) is None


def test_memory_is_used_only_when_it_exists_is_writable_and_has_room(tmp_path: Path, monkeypatch):
    assert scratch.parent({}, shared=tmp_path / "absent") is None
    # tmp_path is writable; whether it has room decides
    monkeypatch.setattr(scratch, "MIN_FREE", 0)
    assert scratch.parent({}, shared=tmp_path) == tmp_path
    monkeypatch.setattr(scratch, "MIN_FREE", 1 << 62)
    assert scratch.parent({}, shared=tmp_path) is None
    read_only = tmp_path / "ro"
    read_only.mkdir(mode=0o500)
    monkeypatch.setattr(scratch, "MIN_FREE", 0)
    if os.geteuid() != 0:  # root writes anywhere, so the check cannot refuse it
        assert scratch.parent({}, shared=read_only) is None


def test_mkdtemp_makes_a_private_directory_where_chosen(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("CBLEDGER_SCRATCH", str(tmp_path))
    made = scratch.mkdtemp("cbledger-test-")
    assert made.parent == tmp_path and made.name.startswith("cbledger-test-") and made.is_dir()
    assert (made.stat().st_mode & 0o777) == 0o700


def test_a_directory_whose_maker_was_killed_is_removed_by_the_next_one_made(tmp_path: Path, monkeypatch):
    """SIGKILL runs no `finally`: the restores a killed `replay --verify` or `project all` had open
    stayed (20 MB after five kills, under /dev/shm in memory) and no later command removed them."""
    import subprocess
    import sys

    monkeypatch.setenv("CBLEDGER_SCRATCH", str(tmp_path))
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True, check=True)
    ns = os.stat("/proc/self/ns/pid").st_ino
    dead = tmp_path / f"cbledger-test-{int(gone.stdout)}-{ns}.abc"
    (dead / "objects").mkdir(parents=True)
    kept = [
        tmp_path / f"cbledger-test-{os.getppid()}-{ns}.def",  # a running process's
        tmp_path / f"cbledger-test-{int(gone.stdout)}-{ns + 1}.ghi",  # another pid namespace's: its pids are not ours
        tmp_path / "cbledger-test-scratch-1.x",  # another prefix's
        tmp_path / "cbledger-test-12345678",  # not a name mkdtemp makes (a random suffix of digits)
        # what anyone may leave in a shared directory, which once ended every restore in a traceback
        tmp_path / "cbledger-test-99999999999999999999-1.x",
        tmp_path / f"cbledger-test-\u00b2-{ns}.x",
    ]
    for d in kept:
        d.mkdir()
    made = scratch.mkdtemp("cbledger-test-")
    assert made.name.startswith(f"cbledger-test-{os.getpid()}-{ns}.")
    assert not dead.exists() and made.is_dir() and all(d.is_dir() for d in kept)
