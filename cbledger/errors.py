"""Errors a user can act on.

Every `UserError` names the file and field (or JSON path) at fault; the CLI prints it as one line
and exits non-zero. Anything else escaping is a bug and keeps its traceback.
"""

from __future__ import annotations


class UserError(Exception):
    """A refusal the user can fix: bad input, a failed precondition, a conflict."""

    exit_code = 2


class ConflictError(UserError):
    """The same event id was appended before with a different body."""

    exit_code = 3


class SecretFound(UserError):
    """A credential pattern matched in something bound for the ledger or results/."""

    exit_code = 4
