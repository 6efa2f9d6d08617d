"""What killed runs of a campaign left behind, adopted or removed by the next invocation of it.

A run killed mid-way (the driver SIGKILLed, the machine lost) can leave: staged bundles and
cassettes (`results/runs/.<run-id>.*.tmp`), a sandbox and its kept baseline
(`<sandbox-root>/<run-id>/`, `.<run-id>.baseline.git`), a bundle renamed into place whose events
never reached the ledger, or a bundle with its events kept for later (`<run-id>.events.jsonl`,
when the ledger refused the append). A campaign's run ids all start with its id, so its next
invocation finds exactly its own leftovers: events kept for later are appended (the run was paid
for and is whole: it is adopted), and the rest is removed, and said so. Another campaign's files
are never touched; two invocations of one campaign in one results directory are refused
(`hold`), so nothing live is taken for a leftover.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import msgspec
from blake3 import blake3

from cbledger.errors import ConflictError, UserError
from cbledger.ledger import semantics
from cbledger.ledger.events import RunRecordedEvent
from cbledger.ledger.intake import parse_drafts
from cbledger.ledger.store import LedgerStore
from cbledger.runner import campaign as campaign_mod
from cbledger.runner import isolation
from cbledger.workspace import Workspace, bundle_name

#: a bundle in place with no event is removed only once older than this: younger, its run may
#: be between the rename and the append in a driver of another machine sharing the ledger
ORPHAN_AGE_SEC = 60.0


@dataclass
class Cleaned:
    #: run ids whose events, kept beside their bundle, were appended now
    adopted: list[str] = field(default_factory=list)
    #: what was removed
    removed: list[Path] = field(default_factory=list)
    #: kept events the ledger still refused: (file, why)
    refused: list[tuple[Path, str]] = field(default_factory=list)
    #: runs whose kept events could not be read, removed with their bundle: (run id, why)
    discarded: list[tuple[str, str]] = field(default_factory=list)
    #: runs whose slot another driver recorded meanwhile, removed with their bundle: (run id, why)
    superseded: list[tuple[str, str]] = field(default_factory=list)

    def lines(self) -> list[str]:
        out = [f"adopted run {r} (its events were kept beside its bundle)" for r in self.adopted]
        if self.removed:
            out.append(f"removed {len(self.removed)} leftover(s) of killed runs: "
                       + ", ".join(p.name for p in self.removed[:8]) + (" …" if len(self.removed) > 8 else ""))
        out.extend(f"{p}: still not appended ({why})" for p, why in self.refused)
        out.extend(f"discarded run {r}: its kept events cannot be read ({why}); its slot runs again"
                   for r, why in self.discarded)
        out.extend(f"discarded run {r}: another driver of its campaign recorded its slot meanwhile ({why}); its "
                   "bundle and kept events are removed" for r, why in self.superseded)
        return out


@contextlib.contextmanager
def hold(workspace: Workspace, campaign: str) -> Iterator[None]:
    """One invocation of a campaign at a time per results directory: a second one would take the
    first's runs in flight for leftovers (and run the same slots, which the ledger refuses)."""
    workspace.campaigns.mkdir(parents=True, exist_ok=True)
    path = workspace.campaigns / f".{campaign}.lock"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise UserError(f"campaign {campaign} is being run by another process here ({path} is held); "
                            "wait for it, or run another campaign") from None
        yield
    finally:
        os.close(fd)


def clean(workspace: Workspace, store: LedgerStore, campaign: str, sandbox_root: Path | None) -> Cleaned:
    """Adopts or removes the campaign's leftovers (module docstring). Call under `hold`."""
    done = Cleaned()
    prefix = campaign_mod.prefix(campaign)
    runs = workspace.runs
    if runs.is_dir():
        for path in sorted(runs.glob(f".{prefix}*.tmp")):
            path.unlink(missing_ok=True)
            done.removed.append(path)
        for run_id in workspace.pending_run_ids(prefix):
            _adopt(store, workspace, run_id, done)
        bundles = workspace.bundles(prefix)
        known = store.recorder.lookup_many({f"run:{run_id}" for run_id in bundles}) if bundles else {}
        now = time.time()
        for run_id, path in sorted(bundles.items()):
            if f"run:{run_id}" in known or workspace.pending_events(run_id).exists():
                continue
            if now - path.stat().st_mtime >= ORPHAN_AGE_SEC:
                path.unlink(missing_ok=True)
                done.removed.append(path)
    if sandbox_root is not None and sandbox_root.is_dir():
        sandboxes = {p.name: p for p in sandbox_root.glob(f"{prefix}*") if p.is_dir() and not p.is_symlink()}
        # a recorded run's sandbox is one `--keep-sandboxes` kept: not a leftover
        recorded = store.recorder.lookup_many({f"run:{name}" for name in sandboxes}) if sandboxes else {}
        left = [p for name, p in sandboxes.items() if f"run:{name}" not in recorded]
        for path in sorted([*left, *sandbox_root.glob(f".{prefix}*.baseline.git")]):
            shutil.rmtree(path, ignore_errors=True)
            done.removed.append(path)
    if sandbox_root is not None:
        # the socket directories and verification copies of the runs a killed driver had going
        for path in isolation.scratch_left(sandbox_root, campaign):
            shutil.rmtree(path, ignore_errors=True)
            done.removed.append(path)
    return done


def _adopt(store: LedgerStore, workspace: Workspace, run_id: str, done: Cleaned) -> None:
    pending = workspace.pending_events(run_id)
    bundle = workspace.stored(bundle_name(run_id))
    if bundle is None or not bundle.is_file():
        done.refused.append((pending, "its bundle is not in place"))
        return
    data = pending.read_bytes()
    try:
        drafts = parse_drafts(data, str(pending))
    except UserError as exc:
        if not _cut_short(data):  # whole lines refused for what they say: kept, and said, as ever
            done.refused.append((pending, str(exc)))
            return
        # cut short as it was written (before it was written whole and renamed): no append can
        # take it, and its bundle would hold the slot against every rerun, so both go and the
        # slot is run again, unless the run was recorded after all (then only the file goes)
        pending.unlink(missing_ok=True)
        if store.recorder.lookup(f"run:{run_id}") is not None:
            done.removed.append(pending)
            return
        bundle.unlink(missing_ok=True)
        done.discarded.append((run_id, str(exc)))
        return
    try:
        appended = store.append(drafts, check=semantics.check_batch)
    except ConflictError as exc:
        recorded = store.recorder.lookup(f"run:{run_id}")
        if recorded is None:
            done.refused.append((pending, str(exc)))
            return
        # another driver recorded this slot while the kept events waited (a long outage of a shared
        # ledger): they can never land, and a bundle of the recorded run's name but of other bytes
        # would make the results directories disagree once gathered; both go, and it is said (a
        # bundle that is the recorded run's own stays)
        pending.unlink(missing_ok=True)
        event = recorded.event
        if not (isinstance(event, RunRecordedEvent) and blake3(bundle.read_bytes()).hexdigest() == event.body.sandbox.store_blake3):
            bundle.unlink(missing_ok=True)
        done.superseded.append((run_id, str(exc)))
        return
    except UserError as exc:
        done.refused.append((pending, str(exc)))
        return
    pending.unlink()
    if any(a.created for a in appended):
        done.adopted.append(run_id)
    else:  # appended by hand as the refusal said (`cbledger append` of the kept file): only the file was left
        done.removed.append(pending)


def _cut_short(data: bytes) -> bool:
    """Bytes a write stopped part-way through: no final newline, or a line that is not JSON."""
    if not data.endswith(b"\n"):
        return True
    try:
        for line in data.splitlines():
            msgspec.json.decode(line)
    except msgspec.DecodeError:
        return True
    return False
