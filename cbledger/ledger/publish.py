"""Publishing a checkpoint: sign the ledger's tree head, write it out, record the publication.

`cbledger checkpoint` is this. In order, each step refusing to go on when the one before failed:

1. verify the chain and hash the tree in one pass (a broken chain is never signed);
2. check every checkpoint the ledger already records against the tree at its size — a log must
   never sign a checkpoint inconsistent with one it signed before (tlog-checkpoint), and a ledger
   whose own records disagree with it has been rewritten;
3. sign the tree head at the head seq N and write `results/checkpoints/<N>.txt` (an existing file
   for N with other bytes is refused, never replaced);
4. append `checkpoint.published` (origin, size N, root, the note), which lands at seq N+1 or later:
   a checkpoint never covers its own record, the next one does.

When nothing but the last checkpoint's own record came after it, there is nothing new to sign and
nothing is written.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from cbledger.errors import UserError
from cbledger.ledger import durable
from cbledger.ledger.checkpoint import Checkpoint
from cbledger.ledger.events import Actor, CheckpointPublished, make_event
from cbledger.ledger.keys import SigningKey
from cbledger.ledger.signed_checkpoint import sign
from cbledger.ledger.store import Appended, LedgerStore
from cbledger.ledger.tlog import recorded_problems, verified_scan


class NotConsistent(UserError):
    """The ledger disagrees with a checkpoint it records: signing now would sign a fork."""

    exit_code = 5


@dataclass(frozen=True)
class Published:
    checkpoint: Checkpoint
    note: str
    path: Path
    appended: Appended | None  # None: nothing new since the last checkpoint, nothing written


def publish(
    store: LedgerStore, key: SigningKey, checkpoint_path: Callable[[int], Path], actor: Actor,
    origin: str | None = None,
) -> Published:
    """Signs the tree head of the whole ledger as it is now; `checkpoint_path(size)` says where the
    note goes (`Workspace.checkpoint`)."""
    # The chain and the tree are checked in one pass over the ledger's stored lines.
    chain, tree, earlier = verified_scan(Path(store.location))
    if not chain.ok:
        raise UserError(f"{store.location}: the chain does not verify ({chain.problem}); refusing to sign it")
    head = chain.head.seq
    if earlier and origin is not None and earlier[-1].body.origin != origin:
        raise UserError(f"this ledger publishes checkpoints as {earlier[-1].body.origin!r}, not {origin!r}")
    origin = earlier[-1].body.origin if earlier else (origin or key.name)
    problems = recorded_problems(earlier, tree)
    if problems:
        raise NotConsistent(
            f"{store.location}: the ledger is not an extension of its own recorded checkpoints "
            f"({'; '.join(why for _, why in problems)}); refusing to sign"
        )
    last = earlier[-1] if earlier else None
    if last is not None and last.seq == head and last.body.tree_size == head - 1:
        cp = Checkpoint(last.body.origin, last.body.tree_size, bytes.fromhex(last.body.root_hash))
        return Published(cp, last.body.note, checkpoint_path(cp.size), None)
    cp = Checkpoint(origin, head, tree.root(head))
    note = sign(cp, [key])
    path = checkpoint_path(head)
    _write_once(path, note)
    body = CheckpointPublished(origin=origin, tree_size=head, root_hash=cp.root_hex, note=note)
    (appended,) = store.append([make_event(body, id=f"checkpoint:{head}", actor=actor)])
    return Published(cp, note, path, appended)


def _write_once(path: Path, note: str) -> None:
    data = note.encode("utf-8")
    if path.exists():
        if path.read_bytes() != data:
            raise UserError(f"{path}: a different checkpoint of this size is already published; not replaced")
        return
    durable.write_atomic(path, data)
    durable.fsync_directory(path.parent)  # the event appended next names this file
