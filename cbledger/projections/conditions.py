"""Ablation conditions: which runner flags a run was made under, as one key every view shares.

The standard makes prompt variant, turn budget, tool subset and repair-cycle cap runner flags
recorded on the run, so that one task is compared with itself across conditions. A run made with
any of them is a different experiment from a run made without: pooling the two would let a
two-turn budget drag a model's headline row down (or a generous one lift it). Every view keys its
rows by this condition; the **default** condition (no flag set) is the headline, the gate and the
cost figures, and each other condition is shown against the default on the same tasks.

The key is canonical: the flags in a fixed order, a tool subset as a sorted set (the order a user
listed the tools in does not change which tools the model had), so the same flags always give the
same key, and two keys are equal exactly when the runs had the same flags.
"""

from __future__ import annotations

from cbledger.ledger.events import DEFAULT_CONDITION as DEFAULT
from cbledger.ledger.events import condition_key

__all__ = ["DEFAULT", "condition_key", "order_key"]


def order_key(key: str) -> tuple[bool, str]:
    """The default condition first, then the others by key."""
    return (key != DEFAULT, key)
