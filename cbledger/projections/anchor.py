"""Which signed checkpoint a published view is built from: the hook every renderer uses.

A checkpoint of size N covers seq 1..N and is recorded at a later seq, so a view of a ledger whose
head is H names the latest checkpoint recorded up to H and says how far it reaches: every event
up to its size is held to a signature, the ones after it (its own record at least) are not yet.
LEADERBOARD.md and the read model use these functions; a future HTML site should too, so that
every published page names the checkpoint a reader can hold it to (docs/CHECKPOINTS.md).

A record is anchored by the first checkpoint that covers every event it was built from (its run
and its grade; a rubric score it shows comes before its grade): later checkpoints cover it too,
since each extends the one before, but the first never changes, so neither does the anchor.
"""

from __future__ import annotations

from msgspec import Struct

from cbledger.projections.fold import CheckpointEntry, LedgerState
from cbledger.workspace import checkpoint_name


class Anchor(Struct, frozen=True, kw_only=True):
    checkpoint: CheckpointEntry
    path: str  # the checkpoint file, relative to the project root
    uncovered: int  # events after the checkpoint's size, up to the view's head


def latest(state: LedgerState) -> Anchor | None:
    """The newest checkpoint recorded in the folded ledger, or None before the first."""
    if not state.checkpoints:
        return None
    cp = state.checkpoints[-1]
    return Anchor(checkpoint=cp, path=checkpoint_name(cp.tree_size), uncovered=state.head_seq - cp.tree_size)


def covering(state: LedgerState, seq: int) -> CheckpointEntry | None:
    """The first checkpoint whose tree includes `seq`, or None while none does."""
    for cp in state.checkpoints:
        if cp.tree_size >= seq:
            return cp
    return None
