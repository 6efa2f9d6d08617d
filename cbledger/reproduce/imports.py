"""Outside evidence into the ledger, as `evidence.imported` and never as a run.

Two doors: the reference implementation's published result records (a file or a
`results/<date>/<model>/<task>/run-<n>.json` tree, in either of its layouts), and a reviewer's
manual import (`manual.py`). Both keep the exact bytes (content and SHA-256) beside a summary,
so what the leaderboard shows can always be traced to what was supplied. Neither is re-gradable
or project-owned: there is no preserved sandbox to restore, and the ownership says so.

The event id is the content's digest, so importing the same bytes again — from the same place or
another — is a no-op that names the earlier import. Everything is checked (layout, fields, files,
credential patterns) before anything is written; a credential match anywhere refuses the whole
import.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from cbledger import credentials, inputs, invocation
from cbledger.errors import SecretFound, UserError
from cbledger.ledger import semantics
from cbledger.ledger.durable import fsync_directory, write_atomic
from cbledger.ledger.events import (
    Actor,
    EvidenceImported,
    EvidenceImportedEvent,
    ImportedFile,
    ImportSummary,
    make_event,
)
from cbledger.ledger.store import LedgerStore, remove_unless_landed
from cbledger.ledger.surfaces import MANUAL_IMPORT_FORMAT, import_surface
from cbledger.login import login_name
from cbledger.projections.fold import LedgerState
from cbledger.projections.paths import RETRACTION_NAME
from cbledger.reproduce import manual as manual_mod
from cbledger.reproduce.findings import Finding
from cbledger.reproduce.import_formats import recognize
from cbledger.workspace import Workspace

MANUAL_FORMAT = MANUAL_IMPORT_FORMAT
MANUAL_SOURCE = "manual-reviewer-import"


@dataclass
class Outcome:
    original_path: str
    format: str
    sha256: str
    status: str  # imported | unchanged | duplicate
    seq: int | None = None
    note: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"originalPath": self.original_path, "format": self.format, "sha256": self.sha256,
                "status": self.status, "seq": self.seq, "note": self.note}


@dataclass
class ImportReport:
    outcomes: list[Outcome] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)

    def count(self, status: str) -> int:
        return sum(1 for o in self.outcomes if o.status == status)

    def to_dict(self) -> dict[str, Any]:
        return {"outcomes": [o.to_dict() for o in self.outcomes], "kept": self.kept,
                "imported": self.count("imported"), "unchanged": self.count("unchanged"),
                "duplicate": self.count("duplicate")}


@dataclass
class _Candidate:
    body: EvidenceImported
    files: list[tuple[Path, bytes]] = field(default_factory=list)  # (destination under root, bytes)

    @property
    def id(self) -> str:
        return f"evidence.imported:{self.body.sha256}"


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _text(data: bytes, where: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UserError(f"{where}: not UTF-8 text ({exc}); imported content is kept verbatim as text") from None


def _refuse_credentials(items: list[tuple[str, bytes]]) -> None:
    found = []
    for where, data in items:
        found += credentials.scan_bytes(data, where)
    if found:
        raise SecretFound(
            "credential pattern matched: " + ", ".join(str(m) for m in found) + "; nothing imported, nothing written"
        )


def _existing(store: LedgerStore) -> dict[str, tuple[int, EvidenceImported]]:
    found: dict[str, tuple[int, EvidenceImported]] = {}
    for stored in store.read(types={"evidence.imported"}):
        event = stored.event
        if isinstance(event, EvidenceImportedEvent):
            found[event.id] = (stored.seq, event.body)
    return found


def _commit(workspace: Workspace, candidates: list[_Candidate], actor: Actor) -> ImportReport:
    store = LedgerStore(workspace.ledger)
    if not store.exists():
        raise UserError(f"{workspace.ledger}: no ledger here (run `{invocation.command('init')}` first)")
    existing = _existing(store)
    report = ImportReport()
    fresh: list[_Candidate] = []
    batch: dict[str, _Candidate] = {}
    for c in candidates:
        b = c.body
        outcome = Outcome(b.original_path, b.format, b.sha256, "imported")
        if c.id in existing:
            seq, before = existing[c.id]
            outcome.seq = seq
            if before == b:
                outcome.status, outcome.note = "unchanged", f"already imported at seq {seq}"
            else:
                outcome.status = "duplicate"
                outcome.note = f"the same bytes were imported at seq {seq} ({before.source}: {before.original_path})"
        elif c.id in batch:
            outcome.status = "duplicate"
            outcome.note = f"the same bytes as {batch[c.id].body.original_path} in this import"
        else:
            batch[c.id] = c
            fresh.append(c)
        report.outcomes.append(outcome)
    written: list[Path] = []
    try:
        for c in fresh:
            for dest, data in c.files:
                if not (dest.is_file() and dest.read_bytes() == data):
                    write_atomic(dest, data)
                    written.append(dest)
                report.kept.append(workspace.recorded_name(dest))
        for directory in sorted({dest.parent for dest in written}):
            fsync_directory(directory)  # the events name these files: their names must outlast a power cut
        now = _dt.datetime.now(_dt.UTC)
        appended = store.append([make_event(c.body, id=c.id, actor=actor, at=now) for c in fresh]) if fresh else []
    except BaseException:
        remove_unless_landed(store, [c.id for c in fresh], written)
        raise
    seqs = {a.id: a.seq for a in appended}
    for outcome in report.outcomes:
        if outcome.status == "imported":
            outcome.seq = seqs[f"evidence.imported:{outcome.sha256}"]
    return report


# --------------------------------------------------------------------------- published records


#: A published result record is a few kilobytes; a tree of them is bounded in count.
MAX_RECORD_BYTES = 4 * inputs.MiB
MAX_RECORDS = 100_000


def _record_files(path: Path) -> list[tuple[Path, str]]:
    """(file, path relative to PATH) of every record to import, in path order. A tree's
    retraction marks (`run-<n>.retracted.json`) are not records, and the records they mark are
    retracted evidence: neither is imported. Symlinks are never followed (a link could point at
    any file on the machine) and refuse the import."""
    if path.is_symlink():
        raise UserError(f"{inputs.printable_path(path)}: a symlink; only regular files and directories are imported")
    if path.is_file():
        return [(path, path.name)]
    if not path.is_dir():
        if os.path.lexists(path):  # a FIFO, socket or device: named as what it is, never opened
            raise UserError(f"{inputs.printable_path(path)}: {inputs.kind_of(os.lstat(path).st_mode)}; "
                            "only regular files and directories are imported")
        raise UserError(f"{inputs.printable_path(path)}: no such file or directory")
    found = []
    for dirpath, dirnames, filenames in os.walk(path, followlinks=False):
        for name in dirnames + filenames:
            full = Path(dirpath) / name
            if full.is_symlink():
                raise UserError(f"{inputs.printable_path(full)}: a symlink; only regular files and directories are imported")
        found += [Path(dirpath) / n for n in filenames if n.endswith(".json")]
        if len(found) > MAX_RECORDS:
            raise UserError(f"{inputs.printable_path(path)}: more than {MAX_RECORDS} records in one import")
    if not found:
        raise UserError(f"{inputs.printable_path(path)}: no *.json result records under it")
    marked: set[Path] = set()
    for p in found:
        if RETRACTION_NAME.match(p.name):
            marked.add(p)
            marked.update(p.parent / name for name in _marked_records(p))
    kept = [(p, p.relative_to(path).as_posix()) for p in found if p.is_file() and p not in marked]
    return sorted(kept, key=lambda item: item[1])


def _marked_records(mark: Path) -> list[str]:
    """The record names a retraction mark lists (none when it cannot be read as one)."""
    try:
        doc = json.loads(mark.read_bytes()[:MAX_RECORD_BYTES])
    except (OSError, ValueError, RecursionError):
        return []
    names = doc.get("records") if isinstance(doc, dict) else None
    return [n for n in names if isinstance(n, str) and "/" not in n] if isinstance(names, list) else []


def import_records(workspace: Workspace, path: Path, source: str | None = None) -> ImportReport:
    """Imports one published record, or every record of a tree, as `evidence.imported`."""
    source = source or path.resolve().name
    files = [(file, rel, inputs.read_regular(file, MAX_RECORD_BYTES, "a result record")) for file, rel in _record_files(path)]
    _refuse_credentials([(rel, data) for _, rel, data in files])  # first: later messages may quote values
    candidates = []
    for file, rel, data in files:
        where = str(file)
        content = _text(data, where)
        # a single file's date and repeat come from where it sits, as they would in a tree
        recognized = recognize(data, rel if path.is_dir() else file.resolve().as_posix(), where)
        body = EvidenceImported(
            ownership="imported", source=source, original_path=rel, format=recognized.format,
            sha256=_sha256(data), content=content, summary=recognized.summary,
        )
        candidates.append(_Candidate(msgspec.structs.replace(body, surface=import_surface(body))))
    return _commit(workspace, candidates, Actor(kind="importer", name=login_name("importer")))


# --------------------------------------------------------------------------- manual imports


def import_manual(
    workspace: Workspace, file: Path, source: str | None = None, import_root: Path | None = None
) -> ImportReport:
    """Imports a reviewer-supplied run; its prompt and transcript are kept as files under
    `results/imports/<sha256 of the import file>/<role>/<name>`. Only regular files under
    `import_root` (default: the import file's directory) are read (`reproduce/manual.py`)."""
    raw = inputs.read_regular(file, manual_mod.MAX_IMPORT_BYTES, "the manual import file")
    _refuse_credentials([(file.name, raw)])  # first: a validation message may quote a value
    m = manual_mod.load(file, import_root)
    content = _text(m.data, str(file))
    sha = _sha256(m.data)
    kept_dir = workspace.kept_import(sha)
    scanned = [(file.name, m.data)]
    kept, entries = [], []
    for role, key in manual_mod.FILES:
        src = m.files[role]
        data = m.contents[role]
        scanned.append((m.fields[key], data))
        dest = kept_dir / role / os.path.basename(src)
        kept.append((dest, data))
        entries.append(ImportedFile(role=role, original_path=m.fields[key],
                                    stored_path=workspace.recorded_name(dest), sha256=_sha256(data), bytes=len(data)))
    _refuse_credentials(scanned)
    f = m.fields
    body = EvidenceImported(
        ownership="reviewer-supplied", source=source or MANUAL_SOURCE, original_path=file.name,
        format=MANUAL_FORMAT, sha256=sha, content=content,
        summary=ImportSummary(
            task_id=f["case_slug"], variant=f["variant"], benchmark=f["benchmark"], surface_id=f["surface_id"],
            run_date=m.run_at.date().isoformat(),
        ),
        files=entries,
    )
    body = msgspec.structs.replace(body, surface=import_surface(body))
    return _commit(workspace, [_Candidate(body, kept)], Actor(kind="reviewer", name=login_name("importer")))


# --------------------------------------------------------------------------- verification


def import_findings(state: LedgerState, workspace: Workspace) -> list[Finding]:
    """Each import held to what it states: its content to its digest and id (`semantics.
    import_problems`, which `append` refuses too), and each file kept beside it to the digest and
    size its event records. Imports are never re-graded, but they are published beside the runs:
    evidence rewritten after its import, or made up under another import's hash, is named here."""
    out: list[Finding] = []
    for imp in state.imports:
        body = imp.body
        for problem in semantics.import_problems(f"evidence.imported:{body.sha256}", body):
            out.append(Finding(check="import", kind="import-digest", seq=imp.seq, message=f"evidence.imported: {problem}"))
        for kept in body.files:
            path = workspace.stored(kept.stored_path)
            data = None
            if path is not None and path.is_file() and not path.is_symlink():
                with path.open("rb") as f:
                    data = f.read(kept.bytes + 1)  # one byte past what it records: a longer file is named, never read whole
            shown = workspace.shown(kept.stored_path)
            if data is None:
                out.append(Finding(check="import", kind="import-file-missing", seq=imp.seq, file=shown,
                                   message=f"the {kept.role} this import keeps is not there (or not a regular file)"))
            elif len(data) != kept.bytes or _sha256(data) != kept.sha256:
                out.append(Finding(check="import", kind="import-file-different", seq=imp.seq, file=shown,
                                   message=f"the {kept.role} this import keeps is not the {kept.sha256[:16]}… "
                                           f"({kept.bytes} bytes) its event records"))
    return out
