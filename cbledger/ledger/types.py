"""Constrained scalar types shared by event bodies.

Constraints live on the types so that decoding is validation: a body that decodes is a body the
ledger accepts. Money is never a binary float (prices are decimal strings, costs are integer
micro-dollars); datetimes must carry a timezone and are normalised to UTC.
"""

from __future__ import annotations

import datetime as _dt
from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta

# msgspec checks a pattern with Python's `re.search`, where a bare `$` also matches before a final
# "\n": "abc\n" would pass as a Slug. Every anchored pattern therefore ends in `(?!\n)$`, which
# refuses that newline in Python and means the same as `$` in the published JSON Schemas (ECMA-262,
# where `$` is the end of input only). `tests/test_ledger_bad_input.py` holds every pattern to this.
Hex64 = Annotated[str, Meta(pattern=r"^[0-9a-f]{64}(?!\n)$", description="64 lowercase hex digits")]
Hex40 = Annotated[str, Meta(pattern=r"^[0-9a-f]{40}(?!\n)$", description="a full git SHA-1")]
SemVer = Annotated[str, Meta(pattern=r"^\d+\.\d+\.\d+(?!\n)$", description="MAJOR.MINOR.PATCH")]
Slug = Annotated[
    str, Meta(pattern=r"^[a-z0-9]+(-[a-z0-9]+)*(?!\n)$", max_length=100, description="kebab-case id")
]
NonEmpty = Annotated[str, Meta(min_length=1)]
# Not all digits: `cbledger show KEY` and `LedgerStore.find` read an all-digit key as a seq.
EventId = Annotated[
    str,
    Meta(
        pattern=r"^(?![0-9]+$)[A-Za-z0-9][A-Za-z0-9._:/@+-]*(?!\n)$",
        max_length=200,
        description="unique idempotency key of an event (not all digits: that is a seq)",
    ),
]
RunId = Annotated[
    str,
    Meta(pattern=r"^[A-Za-z0-9][A-Za-z0-9._:-]*(?!\n)$", max_length=200, description="unique run id"),
]
ModelId = Annotated[
    str,
    Meta(
        pattern=r"^(?!.*\.\.)[A-Za-z0-9][A-Za-z0-9._:+-]*(?!\n)$",
        max_length=128,
        description="a model id that is a safe path segment once ':' becomes '-'",
    ),
]
DecimalStr = Annotated[
    str,
    Meta(pattern=r"^(0|[1-9][0-9]*)(\.[0-9]+)?(?!\n)$", description="a non-negative decimal number"),
]
UtcDateTime = Annotated[_dt.datetime, Meta(tz=True, description="RFC 3339 with a timezone")]
#: The largest count an event may hold: exact in a JSON double and in SQLite's 64-bit integer, so
#: no figure a run reports can overflow a projection or the read model.
MAX_COUNT = 2**53 - 1
Count = Annotated[int, Meta(ge=0, le=MAX_COUNT)]
#: Tokens one run may report: a trillion, so that the sum over a million runs still fits SQLite's
#: integer. An agent's larger figure is recorded as invalid, never stored (`runner/execute.py`).
MAX_TOKENS = 10**12
#: the most feedback passes one attempt may take (a task's allowance is capped by it)
MAX_PASSES = 10
TokenCount = Annotated[int, Meta(ge=0, le=MAX_TOKENS)]
Fraction = Annotated[float, Meta(ge=0.0, le=1.0)]
Weight = Annotated[float, Meta(gt=0.0, le=1e6)]

Tier = Literal["simple", "medium", "hard"]
Mode = Literal["do", "create", "sync", "check"]
Outcome = Literal["edit", "refusal", "flag"]
Segment = Literal[
    "api-frontier",
    "api-cheap",
    "open-weight-hosted",
    "open-weight-self-hosted",
    "saved-login",
    "harness",
]
Pinning = Literal["strong", "weak"]
SelectionSource = Literal["flag", "env", "config", "openai-key", "anthropic-key", "picker"]
RunMode = Literal["agent", "scripted", "gold", "noop", "replay"]
ExitPath = Literal[
    "done",
    "refused",
    "turn-budget-exhausted",
    "repair-cycles-exhausted",
    "commit-failed",
    "provider-error",
    "session-limit",
    "stalled",
    "cap-exceeded",
]
FailureCategory = Literal[
    "tool-protocol",
    "file-revert",
    "turn-budget",
    "repair-exhausted",
    "obligation-open",
    "drift-left",
    "constraint-violation",
    "false-refusal",
    "stalled",
    "commit-failed",
    "wrong-target",
    "credential-leak",
    "end-state-unreadable",
]
EvidenceSource = Literal["end-state", "diff", "transcript"]
#: how the runner confined a run's processes (docs/RUNNER.md §5): under bubblewrap, or not at all
Isolation = Literal["bubblewrap", "unsandboxed"]
ActorKind = Literal["runner", "maintainer", "reviewer", "importer"]


def conforms(value: object, tp: Any) -> bool:
    """Whether `value` is valid as `tp`, so that a command-line value is checked by the very rule
    that decoding it from a file would apply."""
    try:
        msgspec.convert(value, tp)
    except msgspec.ValidationError:
        return False
    return True


def to_utc(value: _dt.datetime) -> _dt.datetime:
    """Normalises an aware datetime to UTC; naive ones never get this far (Meta(tz=True))."""
    if value.tzinfo is None:
        raise ValueError("datetime must carry a timezone")
    try:
        return value.astimezone(_dt.UTC)
    except OverflowError:  # 0001-01-01T00:00+05:00, 9999-12-31T23:59-05:00: no such instant in UTC
        raise ValueError(f"datetime {value.isoformat()} is outside the range representable in UTC") from None
