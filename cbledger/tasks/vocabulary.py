"""The closed assertion vocabulary: every type, its argument schema and its evidence source.

The vocabulary is data about the grading contract, so it lives apart from the code that checks
each type (`cbledger.grading`). Each type becomes a tagged msgspec Struct, which makes
`assertions.json` validation the same thing as decoding it, gives per-type argument errors with a
JSON path, and puts a real per-type schema into `schema/assertions.schema.json`.

`VOCABULARY_HASH` covers the names, argument schemas and evidence sources; `suite bump` records it
because adding or changing a type changes what a grade means.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import TYPE_CHECKING, Annotated, Any, Literal, Union, cast

import msgspec
from msgspec import Meta, Struct, field

from cbledger.ledger.types import EvidenceSource, ExitPath, NonEmpty


class Args(Struct, forbid_unknown_fields=True, frozen=True, kw_only=True, rename="camel"):
    """Base of every argument struct."""


def _regex(value: str, what: str) -> None:
    try:
        re.compile(value)
    except re.error as exc:
        raise ValueError(f"{what} is not a valid regular expression: {exc}") from None


class NoArgs(Args, frozen=True, kw_only=True):
    pass


class SeverityArgs(Args, frozen=True, kw_only=True):
    severity: Literal["error", "warning"] = "error"


class NetArgs(Args, frozen=True, kw_only=True):
    net: NonEmpty


class SymbolPresentArgs(Args, frozen=True, kw_only=True):
    refdes: NonEmpty
    value: str | None = None
    footprint: str | None = None


class SymbolAbsentArgs(Args, frozen=True, kw_only=True):
    refdes: NonEmpty


class PinNetArgs(Args, frozen=True, kw_only=True):
    refdes: NonEmpty
    pin: NonEmpty | int
    net: NonEmpty


class DocRowArgs(Args, frozen=True, kw_only=True):
    doc: NonEmpty
    key: NonEmpty
    column: NonEmpty
    pattern: NonEmpty

    def __post_init__(self) -> None:
        _regex(self.pattern, "pattern")


class DocContainsArgs(Args, frozen=True, kw_only=True):
    doc: NonEmpty
    pattern: NonEmpty
    absent: bool = False

    def __post_init__(self) -> None:
        _regex(self.pattern, "pattern")


class ConstraintArgs(Args, frozen=True, kw_only=True):
    key: NonEmpty
    source: str | None = None
    affects: list[str] | None = None

    def __post_init__(self) -> None:
        if self.source is not None:
            _regex(self.source, "source")


class FilesTouchedArgs(Args, frozen=True, kw_only=True):
    allowed: Annotated[list[NonEmpty], Meta(min_length=1)]

    def __post_init__(self) -> None:
        # A changed path is relative to the repository's top and never leaves it: a glob that
        # starts at `/` or steps through `.` or `..` matches none, so the assertion would fail
        # every run that changes anything, the gold's included.
        for i, pattern in enumerate(self.allowed):
            parts = pattern.split("/")
            if pattern.startswith("/") or any(part in (".", "..") for part in parts):
                raise ValueError(
                    f"allowed[{i}] {pattern!r} can match no changed path: paths are relative to the "
                    "repository's top, with no leading `/`, `./` or `..` (e.g. `board.kicad_pcb`, `docs/**`)"
                )


class PathArgs(Args, frozen=True, kw_only=True):
    path: NonEmpty


class DiffRatioArgs(Args, frozen=True, kw_only=True):
    path: NonEmpty
    ratio: Annotated[float, Meta(ge=0.0, le=1.0)]


class CommitCountArgs(Args, frozen=True, kw_only=True):
    equals: Annotated[int, Meta(ge=0)] | None = None
    max: Annotated[int, Meta(ge=0)] | None = None

    def __post_init__(self) -> None:
        if (self.equals is None) == (self.max is None):
            raise ValueError("give exactly one of `equals` and `max`")


class ExitPathArgs(Args, frozen=True, kw_only=True):
    paths: Annotated[list[ExitPath], Meta(min_length=1)]


class RefusalCitesArgs(Args, frozen=True, kw_only=True):
    budget_key: NonEmpty


class TranscriptEventArgs(Args, frozen=True, kw_only=True):
    event: NonEmpty
    min_count: Annotated[int, Meta(ge=1)] = 1
    matches: dict[NonEmpty, NonEmpty] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for key, rx in self.matches.items():
            _regex(rx, f"matches.{key}")


#: type name → (argument struct, evidence source). Order is the order of the standard's tables.
VOCABULARY: dict[str, tuple[type[Args], EvidenceSource]] = {
    # end state
    "erc_no_new_violations": (SeverityArgs, "end-state"),
    "drc_no_new_violations": (SeverityArgs, "end-state"),
    "erc_clean": (NoArgs, "end-state"),
    "drc_clean": (NoArgs, "end-state"),
    "check_clean": (NoArgs, "end-state"),
    "drift_clean": (NoArgs, "end-state"),
    "net_present": (NetArgs, "end-state"),
    "net_absent": (NetArgs, "end-state"),
    "symbol_present": (SymbolPresentArgs, "end-state"),
    "symbol_absent": (SymbolAbsentArgs, "end-state"),
    "pin_net_equals": (PinNetArgs, "end-state"),
    "doc_row_matches": (DocRowArgs, "end-state"),
    "doc_contains": (DocContainsArgs, "end-state"),
    "constraint_registered": (ConstraintArgs, "end-state"),
    # diff
    "files_touched_subset": (FilesTouchedArgs, "diff"),
    "file_unchanged": (PathArgs, "diff"),
    "diff_ratio_max": (DiffRatioArgs, "diff"),
    "commit_count": (CommitCountArgs, "diff"),
    "rollback_byte_identical": (NoArgs, "diff"),
    "no_secret": (NoArgs, "diff"),
    # transcript
    "exit_path_in": (ExitPathArgs, "transcript"),
    "refusal_cites_budget": (RefusalCitesArgs, "transcript"),
    "transcript_event": (TranscriptEventArgs, "transcript"),
}


class AssertionSpec(Struct, tag_field="type", forbid_unknown_fields=True, frozen=True, kw_only=True):
    """One entry of `assertions.json`; `type` selects the argument schema."""

    id: Annotated[str, Meta(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*(?!\n)$", max_length=100)]
    weight: Annotated[float, Meta(gt=0.0, le=1e6)]
    required: bool
    note: str | None = None
    if TYPE_CHECKING:
        #: each type's class declares `args` with its own argument struct (`_spec_class`)
        args: Args

    @property
    def type(self) -> str:
        tag = type(self).__struct_config__.tag
        if not isinstance(tag, str):
            raise TypeError(f"{type(self).__name__} is not a type of the assertion vocabulary")
        return tag

    @property
    def evidence_source(self) -> EvidenceSource:
        return VOCABULARY[self.type][1]


def _spec_class(name: str, args_type: type[Args]) -> type[AssertionSpec]:
    default: Any = msgspec.NODEFAULT
    if not msgspec.structs.fields(args_type) or all(
        f.required is False for f in msgspec.structs.fields(args_type)
    ):
        default = msgspec.field(default_factory=args_type)
    camel = "".join(part.capitalize() for part in name.split("_"))
    fields = [("args", args_type, default)] if default is not msgspec.NODEFAULT else [("args", args_type)]
    # defstruct is typed as making a bare Struct; `bases` makes this one an AssertionSpec.
    return cast(
        type[AssertionSpec],
        msgspec.defstruct(
            f"{camel}Assertion",
            fields,
            bases=(AssertionSpec,),
            tag=name,
            kw_only=True,
            module=__name__,
        ),
    )


SPEC_CLASSES: dict[str, type[AssertionSpec]] = {
    name: _spec_class(name, args) for name, (args, _src) in VOCABULARY.items()
}
globals().update({cls.__name__: cls for cls in SPEC_CLASSES.values()})

if TYPE_CHECKING:
    # The union exists only at run time, built from the table; every member is an AssertionSpec.
    AnyAssertion = AssertionSpec
else:
    AnyAssertion = Union[tuple(SPEC_CLASSES.values())]  # noqa: UP007 (a tuple built at run time has no `|` spelling)


def _vocabulary_hash() -> str:
    doc = {
        name: {"source": src, "args": msgspec.json.schema(args)}
        for name, (args, src) in VOCABULARY.items()
    }
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()


VOCABULARY_HASH = _vocabulary_hash()
