"""Reproducing what the ledger claims: `replay --verify`, `watch` and imports of outside evidence.

This package sits on top of both `cbledger.runner` (restoring and re-grading preserved runs) and
`cbledger.projections` (regenerating the published views), which is why it is neither: the
runner never imports projections, and a reproduction needs both.
"""
