"""Writers: the only code in `projections` that touches the file system.

Folds and renderers are pure; these functions read a ledger into a state and turn views into
files. The records writer writes only files that are new or whose bytes differ from the
rendering, and removes nothing but the record files of retracted runs — the one permitted change
to an existing record. Files it does not own (anything that is not a record path) are never
touched.
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path

from msgspec import Struct

from cbledger.ledger.store import LedgerStore
from cbledger.projections import records as rec
from cbledger.projections.fold import LedgerState, Projector


def load_state(ledger: Path, projector: Projector | None = None) -> LedgerState:
    """Folds a ledger file (or only what was appended since `projector` last looked)."""
    projector = projector or Projector()
    projector.apply(LedgerStore(ledger).read(since=projector.last_seq))
    return projector.state


def write_atomic(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


class RecordsReport(Struct, kw_only=True):
    created: list[str]
    updated: list[str]
    removed: list[str]
    unchanged: int

    @property
    def clean(self) -> bool:
        return not (self.created or self.updated or self.removed)


def sync_records(state: LedgerState, results: Path, check: bool = False) -> RecordsReport:
    """Makes `results/` hold exactly the live records. With `check`, only reports what differs."""
    created, updated, removed = [], [], []
    unchanged = 0
    for entry in rec.record_entries(state):
        data = rec.render(entry.record)
        target = results / entry.path
        try:
            existing = target.read_bytes()
        except FileNotFoundError:
            existing = None
        if existing == data:
            unchanged += 1
            continue
        (created if existing is None else updated).append(entry.path)
        if not check:
            write_atomic(target, data)
    for relpath in rec.retracted_paths(state):
        target = results / relpath
        if target.is_file():
            removed.append(relpath)
            if not check:
                target.unlink()
    return RecordsReport(created=created, updated=updated, removed=removed, unchanged=unchanged)


class FileCheck(Struct, kw_only=True):
    path: str
    matches: bool
    diff: str


def check_text(path: Path, expected: str, label: str) -> FileCheck:
    """Compares a committed generated file with its regeneration; `diff` is unified, committed -> fresh."""
    try:
        actual = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        actual = ""
    if actual == expected:
        return FileCheck(path=str(path), matches=True, diff="")
    diff = "".join(
        difflib.unified_diff(
            actual.splitlines(keepends=True),
            expected.splitlines(keepends=True),
            fromfile=f"{label} (committed)",
            tofile=f"{label} (regenerated)",
        )
    )
    return FileCheck(path=str(path), matches=False, diff=diff)


def write_text_if_changed(path: Path, text: str) -> bool:
    data = text.encode("utf-8")
    try:
        if path.read_bytes() == data:
            return False
    except FileNotFoundError:
        pass
    write_atomic(path, data)
    return True
