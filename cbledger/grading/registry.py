"""Which function checks which assertion type.

Every type of the closed vocabulary has exactly one check; `tests/test_grading_vocabulary.py`
fails if one is missing or extra. A check is `fn(args, ctx) -> (passed, detail)`; the detail
is what a reader sees instead of the sandbox, so it states the observed value either way.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cbledger.grading.context import GradeContext

Check = Callable[[Any, GradeContext], tuple[bool, str]]
CHECKS: dict[str, Check] = {}


def check(type_name: str) -> Callable[[Check], Check]:
    def register(fn: Check) -> Check:
        if type_name in CHECKS:
            raise RuntimeError(f"two checks for {type_name}")
        CHECKS[type_name] = fn
        return fn

    return register


def all_checks() -> dict[str, Check]:
    """The full registry, with every check module imported."""
    from cbledger.grading import (  # noqa: F401  (imported for registration)
        checks_diff,
        checks_docs,
        checks_kicad,
        checks_transcript,
    )

    return CHECKS
