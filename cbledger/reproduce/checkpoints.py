"""`replay --verify --checkpoint FILE`: is this ledger an extension of what was signed?

The chain proves the file is internally consistent; it cannot prove it is the file that was
published, since whoever holds it can rewrite an event and recompute every later link. A signed
checkpoint held by someone else can: the ledger's first N events must hash to the root the
checkpoint signs. This runs in the chain's own pass (`tlog.verified_scan`) and checks

* every checkpoint FILE given (signed by a trusted key, else a usage error): the ledger has at
  least its size and its first `size` events hash to its root — `not-an-extension` otherwise;
  with none given, every checkpoint kept under `results/checkpoints/` that a trusted key signed;
* every `checkpoint.published` the ledger records: its root is the ledger's root at its size
  (`checkpoint-record`), and, when trusted keys are at hand, a trusted key's signature on it
  verifies (`checkpoint-signature`); one signed by no trusted key is a note, not a failure.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cbledger import inputs
from cbledger.errors import UserError
from cbledger.ledger.keys import Untrusted, VerifierKey, open_note
from cbledger.ledger.note import NoteError
from cbledger.ledger.signed_checkpoint import SignedCheckpoint, UntrustedCheckpoint, open_checkpoint
from cbledger.ledger.tlog import recorded_problems, verified_scan
from cbledger.ledger.verify import ChainReport
from cbledger.reproduce.findings import Finding
from cbledger.workspace import Workspace


@dataclass
class CheckpointsCheck:
    given: list[tuple[str, SignedCheckpoint]] = field(default_factory=list)
    recorded: int = 0
    #: recorded checkpoints whose signature a trusted key verified
    trusted_recorded: int = 0
    failures: list[Finding] = field(default_factory=list)
    notes: list[Finding] = field(default_factory=list)
    #: whether the checkpoints were held against the ledger: not when its chain broke first
    checked: bool = False

    def to_dict(self) -> dict[str, Any]:
        failed = {f.file for f in self.failures if f.kind == "not-an-extension"}
        # `ok` is null for a checkpoint never compared: the scan stops at a broken chain, so
        # "not among the failures" would claim a ledger tampered inside it matches it
        return {
            "given": [{"path": p, "origin": c.checkpoint.origin, "size": c.size,
                       "ok": (p not in failed) if self.checked else None}
                      for p, c in self.given],
            "recorded": self.recorded,
            "failures": [f.to_dict() for f in self.failures],
        }


def trusted_keys(workspace: Workspace | None, files: Sequence[Path]) -> list[VerifierKey]:
    """The keys named, else every `keys/*.vkey` the workspace trusts (possibly none; none
    without a workspace)."""
    paths = list(files) or (workspace.trusted_key_files() if workspace is not None else [])
    keys = []
    for p in paths:
        text = inputs.read_regular(p, inputs.MAX_NOTE_BYTES, "a key file").decode("utf-8", "replace")
        keys.append(VerifierKey.parse(text, str(p)))
    return keys


def none_by_named_keys(named: Sequence[Path], check: CheckpointsCheck) -> list[Finding]:
    """A failure when keys were named with --key and not one checkpoint, given, kept beside the
    ledger or recorded in it, carries their signature. Whoever rewrote the whole ledger stripped
    the publisher's checkpoints or signed new ones with a key of their own; either way each was
    only a note, and a reader who said which keys they trust was told every check passed."""
    if not named or not check.checked or check.given or check.trusted_recorded:
        return []
    return [Finding(check="checkpoint", kind="no-trusted-checkpoint",
                    message=f"no checkpoint signed by a key given with --key ({len(named)} key(s)): the ledger holds "
                            f"{check.recorded} recorded checkpoint(s), none by them, so nothing ties it to their holder "
                            "(a ledger rewritten whole passes every other check); hold it to one they signed with "
                            "--checkpoint FILE")]


def self_vouched(workspace: Workspace, named: Sequence[Path], given: Sequence[tuple[str, SignedCheckpoint]]) -> list[Finding]:
    """A note when the checkpoints were held only to keys the results directory brings itself (a
    scratch workspace's own `keys/`): a copy handed over, cut short and signed anew with a key
    generated into it, verifies against that key, so what it proves is the directory's word."""
    own = self_brought(workspace, named) if given else set()
    if not own or any(k not in own for k in trusted_keys(workspace, ())):
        return []
    where = workspace.shown_path(workspace.own_keys)
    return [Finding(check="checkpoint", kind="self-trusted-key", file=where,
                    message=f"the checkpoints were held only to keys under {where}/, which this results directory "
                            "brings itself: a copy handed to you vouches for itself; pass the publisher's key with --key")]


def self_brought(workspace: Workspace, named: Sequence[Path]) -> set[VerifierKey]:
    """The keys only the results directory itself vouches for: those `key generate` put under
    its own `keys/` (a scratch workspace's), not the project's, when no key was named. A
    checkpoint signed by them alone proves what the directory says of itself."""
    if named or workspace.own_keys == workspace.keys:
        return set()
    project = sorted(workspace.keys.glob("*.vkey"))
    own = [p for p in sorted(workspace.own_keys.glob("*.vkey")) if p.resolve() not in {q.resolve() for q in project}]
    if not own:  # (an empty list of files would read as "every trusted key")
        return set()
    return set(trusted_keys(workspace, own)) - (set(trusted_keys(workspace, project)) if project else set())


def no_key(workspace: Workspace) -> str:
    """Where no key was found, and how to give one: run outside the project (a copy of its
    ledger on another laptop) the default `keys/` is under the working directory, not the project's."""
    looked = ", ".join(f"{d}/" for d in dict.fromkeys((workspace.keys, workspace.own_keys)))
    return f"no trusted key (no *.vkey under {looked}; pass the project's with --key VKEY)"


def open_given(files: Sequence[Path], keys: Sequence[VerifierKey]) -> list[tuple[str, SignedCheckpoint]]:
    if files and not keys:
        raise UserError("--checkpoint needs a trusted public key: pass --key FILE or commit one under keys/")
    out = []
    for p in files:
        out.append((str(p), open_checkpoint(inputs.read_regular(p, inputs.MAX_NOTE_BYTES, "a checkpoint file"), keys, str(p))))
    return out


def published_beside(
    workspace: Workspace, keys: Sequence[VerifierKey],
) -> tuple[list[tuple[str, SignedCheckpoint]], list[Finding], list[Finding]]:
    """The signed checkpoints kept under `results/checkpoints/`, held against the file ledger of
    the same results directory when no --checkpoint is given: a ledger cut short at its end, or re-chained over a signed prefix,
    is caught by the checkpoints published beside it (one from elsewhere is still stronger: whoever
    cut the ledger could have removed these too). Returns them with the notes and the failures:
    one no trusted key signed is a note; one a trusted key's signature does not verify (its text
    edited, or forged), or that is no signed checkpoint at all, is a failure."""
    directory = workspace.checkpoints
    ledger = workspace.ledger_file
    # Only a file ledger inside the same results directory owns them: a database ledger, or a
    # file elsewhere, named with --ledger beside a project, is another ledger than theirs.
    if ledger is None or not directory.is_dir() or not ledger.resolve().is_relative_to(directory.parent.resolve()):
        return [], [], []
    files = sorted(directory.glob("*.txt"), key=lambda p: (len(p.stem), p.stem))
    if files and not keys:
        return [], [Finding(check="checkpoint", kind="untrusted-signer", file=workspace.shown_path(directory),
                            message=f"{len(files)} checkpoint file(s) beside the ledger, not held against it: {no_key(workspace)}")], []
    given, notes, failures = [], [], []
    for p in files:
        name = workspace.shown_path(p)  # the file a reader opens: under --results DIR, DIR's own
        try:
            given.append((name, open_checkpoint(inputs.read_regular(p, inputs.MAX_NOTE_BYTES), keys, name)))
        except UntrustedCheckpoint as exc:
            notes.append(Finding(check="checkpoint", kind="untrusted-signer", file=name,
                                 message=f"not held against the ledger: {exc}"))
        except (NoteError, UnicodeDecodeError, OSError) as exc:
            failures.append(Finding(check="checkpoint", kind="checkpoint-signature", file=name,
                                    message=f"not a checkpoint a trusted key signed: {exc}"))
    return given, notes, failures


def chain_and_checkpoints(
    workspace: Workspace, given: list[tuple[str, SignedCheckpoint]], keys: Sequence[VerifierKey],
    progress: Callable[[int, int], None] | None = None,
) -> tuple[ChainReport, CheckpointsCheck]:
    """The chain, and the checkpoints held against it, in one pass over the ledger."""
    chain, tree, recorded = verified_scan(workspace.ledger, [c.size for _, c in given], progress=progress)
    check = CheckpointsCheck(given=given, recorded=len(recorded))
    if not chain.ok:
        return chain, check
    check.checked = True
    for path, c in given:
        if c.size > chain.head.seq:
            check.failures.append(Finding(
                check="checkpoint", kind="not-an-extension", file=path, expected=c.size, actual=chain.head.seq,
                message=f"the checkpoint covers {c.size} events, the ledger has {chain.head.seq}: "
                        "events were removed since it was signed",
            ))
        elif tree.roots[c.size] != c.root:
            check.failures.append(Finding(
                check="checkpoint", kind="not-an-extension", file=path,
                expected=c.root.hex(), actual=tree.roots[c.size].hex(),
                message=f"the ledger's first {c.size} events do not hash to the signed root: an event at or "
                        f"before seq {c.size} is not the one that was signed (the chain was recomputed over it)",
            ))
    for r, why in recorded_problems(recorded, tree):
        check.failures.append(Finding(check="checkpoint", kind="checkpoint-record", seq=r.seq, message=why))
    for r in recorded:
        if not keys:
            continue
        try:
            open_note(r.body.note, keys)  # its text is its fields: the event type checks that
            check.trusted_recorded += 1
        except Untrusted:
            check.notes.append(Finding(check="checkpoint", kind="untrusted-signer", seq=r.seq,
                                       message="the recorded checkpoint is signed by no trusted key; its signature was not checked"))
        except NoteError as exc:
            check.failures.append(Finding(check="checkpoint", kind="checkpoint-signature", seq=r.seq,
                                          message=f"the recorded checkpoint's signature fails: {exc}"))
    if recorded and not keys:
        check.notes.append(Finding(check="checkpoint", kind="untrusted-signer",
                                   message=f"{len(recorded)} recorded checkpoint(s), signatures not checked: {no_key(workspace)}"))
    return chain, check
