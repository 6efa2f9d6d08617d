"""kicad-cli's reports of an end state, kept by what they were made from (opt-in).

A suite's gold and noop trials, a campaign's repeats and a test suite verify the same trees over
and over: noop leaves the board as it was, gold leaves it as its solution says. kicad-cli reads
nothing but the tree and its own build (confined, it cannot read the host), so two byte-identical
trees under the same kicad-cli binary give the same report but for its `date`. With
`$CBLEDGER_KICAD_REPORT_CACHE` naming a directory, the runner keeps each report under a BLAKE3
of every file of the confined copy kicad-cli reads (`unseen` names what the copy leaves out),
the artifacts' paths and the kicad-cli binary (path, size, modification time), and a later run
on the same tree takes the kept report instead of running kicad-cli again. Only confined
verification is kept: unconfined, kicad-cli reads the sandbox itself, whatever it holds. The
report is preserved with the run as if it had just been made; its `date` is the one it was made
on. Off unless the variable is set.

`copperhead check` (`check_capture.py`) is kept the same way, in the same directory: its result
(`check.json`) under the tree it ran over (the same files, `unseen` left out: the check reads
the design files, the docs, `.copperhead/config.json` and `openspec/`, never git) and what it
runs with: copperhead's package (every file's path, size and modification time: a patched or
rebuilt CLI is another CLI) and its installed dependencies' lock, node, and the kicad-cli it is
given. Only a confined check that ran to its end is kept; one killed at its cap is run again.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

import blake3

from cbledger.kicad import oracle
from cbledger.runner.environment import binary_identity

CACHE_ENV = "CBLEDGER_KICAD_REPORT_CACHE"
#: a change to what is hashed (or to how) is a new version: older entries are never read
_VERSION = b"cbledger-kicad-report-cache 1\0"
_CHECK_VERSION = b"cbledger-copperhead-check-cache 1\0"


def directory() -> Path | None:
    named = os.environ.get(CACHE_ENV)
    return Path(named) if named else None


def key(workdir: Path, schematic: str, board: str | None, cli: str) -> str:
    """What a confined report depends on: every file of the copy (its path, kind and bytes, or
    a link's target), which artifacts are verified, and the kicad-cli binary."""
    return _tree_key(_VERSION, (schematic, board or "", *map(str, binary_identity(cli))), workdir)


def check_key(workdir: Path, build: Sequence[str]) -> str:
    """What a confined `copperhead check` depends on: the tree it reads and `build`, what it
    runs with (`check_capture.build_identity`)."""
    return _tree_key(_CHECK_VERSION, build, workdir)


def _tree_key(version: bytes, parts: Sequence[str], workdir: Path) -> str:
    h = blake3.blake3(version)
    for part in parts:
        h.update(part.encode("utf-8", "surrogateescape") + b"\0")
    for path in sorted(_files(workdir)):
        rel = path.relative_to(workdir).as_posix().encode("utf-8", "surrogateescape")
        if path.is_symlink():
            h.update(b"L" + rel + b"\0" + os.readlink(path).encode("utf-8", "surrogateescape") + b"\0")
        else:
            h.update(b"F" + rel + b"\0" + str(path.stat().st_size).encode() + b"\0")
            h.update(path.read_bytes())
    return h.hexdigest()


def unseen(root: Path):
    """The `copytree` ignore of the confined verification's copy, which is also what the key
    leaves out: git's files at any depth, and copperhead's own run logs (`.copperhead/runs/`,
    a transcript per run, different every time), which are no design file."""

    def ignore(directory: str, names: list[str]) -> set[str]:
        left = {".git"} & set(names)
        if Path(directory) == root / ".copperhead" and "runs" in names:
            left.add("runs")
        return left

    return ignore


def _files(root: Path):
    ignore = unseen(root)
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in ignore(dirpath, dirnames)]
        here = Path(dirpath)
        for name in dirnames:
            if (here / name).is_symlink():
                yield here / name
        for name in filenames:
            if name not in ignore(dirpath, filenames):
                yield here / name


def lookup(cache: Path, digest: str, out_dir: Path) -> oracle.Reports | None:
    """The kept reports copied into `out_dir`, or None when nothing is kept for `digest`."""
    entry = cache / digest[:2] / digest
    if not (entry / "made").is_file():
        return None
    out_dir.mkdir(parents=True, exist_ok=True)
    made = {}
    for kind in ("erc", "drc"):
        kept = entry / f"{kind}.json"
        made[kind] = shutil.copyfile(kept, out_dir / f"{kind}.json") if kept.is_file() else None
    return oracle.Reports(made["erc"], made["drc"])


def keep(cache: Path, digest: str, reports: oracle.Reports) -> None:
    """Kept whole or not at all: the entry is written aside and renamed into place, so a reader
    never sees half of one and two runs making the same one both succeed."""
    _keep(cache, digest, {"erc": reports.erc, "drc": reports.drc})


def _keep(cache: Path, digest: str, files: dict[str, Path | None]) -> None:
    entry = cache / digest[:2] / digest
    if entry.exists():
        return
    try:
        entry.parent.mkdir(parents=True, exist_ok=True)
        scratch = Path(tempfile.mkdtemp(prefix=".making-", dir=entry.parent))
    except OSError:
        return  # a cache that cannot be written to keeps nothing; the run goes on without it
    try:
        for kind, path in files.items():
            if path is not None:
                shutil.copyfile(path, scratch / f"{kind}.json")
        (scratch / "made").write_text("")
        os.rename(scratch, entry)
    except OSError:
        shutil.rmtree(scratch, ignore_errors=True)  # another run kept it first, or the cache is read-only


def lookup_check(cache: Path, digest: str) -> bytes | None:
    """The kept `check.json`, or None when nothing is kept for `digest`."""
    entry = cache / digest[:2] / digest
    try:
        return (entry / "check.json").read_bytes() if (entry / "made").is_file() else None
    except OSError:
        return None


def keep_check(cache: Path, digest: str, made: Path) -> None:
    _keep(cache, digest, {"check": made})
