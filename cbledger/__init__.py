"""cbledger: the record keeper of copperbench.

Three layers with a one-way dependency: `ledger` (events, chain, store; knows nothing of KiCad)
is imported by `runner` (tasks, fixtures, sandboxes, grading) and by `projections` (pure folds to
views); the `cli` wires them together. `runner` never imports `projections`.
"""

__version__ = "0.1.0"
