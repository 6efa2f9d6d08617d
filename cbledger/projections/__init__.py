"""Projections: pure folds from ledger events to views, and the writers that render them.

Dependency rule: this package imports `cbledger.ledger` and nothing else of cbledger (never
`cbledger.runner`), so a projection can be recomputed from a ledger file alone.

* `fold`          the fold engine: events -> `LedgerState` (incremental == full rebuild)
* `paths`         the record path rule
* `records`       `ResultRecord` and the per-(run, suite) record view
* `comparability` which records may share a table, and why the others may not
* `metrics`       headline numbers and diagnostics per suite, group, tier and model
* `workqueue`     failure categories ranked by what they cost
* `gate`          regression snapshot and comparison
* `leaderboard`   `LEADERBOARD.md` rendering
* `readmodel`     the SQLite read model
* `writers`       the only module here that touches the file system
"""
