"""The exit codes every command uses, named once.

A script driving cbledger branches on the code, so one number means one thing in every command:
1 is a check that ran and found something (a difference, a regression, a failed run), never a
mistyped flag; 2 is a usage error or bad input (click's own usage errors are 2 as well), with
nothing written; 3 and 4 are the refusals the ledger makes (`ConflictError`, `SecretFound`).
`replay --verify` keeps its own, more specific codes (1, 3 to 7), listed in its `--help` and in
docs/REPRODUCE.md; the proof commands share its 5 (not an extension of a checkpoint).
"""

from __future__ import annotations

OK = 0
#: a check ran and failed: a difference, a regression, a run not recorded, a proof that does not verify
CHECK_FAILED = 1
#: bad usage or bad input (a damaged ledger too, whether a line cannot be read or cannot be
#: folded): nothing was written
USAGE = 2
#: an event id recorded before with a different body
CONFLICT = 3
#: a credential pattern matched in something bound for the ledger or results/
SECRET_REFUSED = 4
#: interrupted (Ctrl-C): 128 + SIGINT, as a shell reports a process SIGINT ended
INTERRUPTED = 130

EXIT_CODES_HELP = (
    "Exit codes: 0 ok; 1 a check failed; 2 bad usage or input (nothing written); 3 an id conflict; "
    "4 a secret refused; 130 interrupted (Ctrl-C; 143 for SIGTERM, handled alike). replay --verify keeps its own codes (1, 3-8: see its --help)."
)
