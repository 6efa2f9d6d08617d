"""Errors a user can act on.

Every `UserError` names the file and field (or JSON path) at fault; the CLI prints it as one line
and exits non-zero. Anything else escaping is a bug and keeps its traceback.
"""

from __future__ import annotations

from collections.abc import Iterable


class UserError(Exception):
    """A refusal the user can fix: bad input, a failed precondition, a conflict."""

    exit_code = 2


class ConflictError(UserError):
    """The same event id was appended before with a different body."""

    exit_code = 3


class SecretFound(UserError):
    """A credential pattern matched in something bound for the ledger or results/."""

    exit_code = 4


def did_you_mean(word: str, known: Iterable[str]) -> str:
    """" (did you mean 'x'?)" for the closest of `known` to a misspelled id, else "": a typo in
    a task or campaign id is the commonest refusal, and the list of every id is too long to read."""
    from difflib import get_close_matches

    matches = get_close_matches(word, list(known), n=2)
    return f" (did you mean {' or '.join(repr(m) for m in matches)}?)" if matches else ""
