"""Who is at the keyboard, for the `actor.name` of the events a person appends.

The name is a label, not an identity: an actor is recorded so a reader can tell a maintainer's
events from a runner's. Some containers run as a user with no passwd entry, where the standard
lookup raises; the caller's fallback names the role instead.
"""

from __future__ import annotations

import getpass


def login_name(fallback: str) -> str:
    try:
        return getpass.getuser() or fallback
    except Exception:  # no passwd entry and no LOGNAME/USER: getpass raises rather than guess
        return fallback
