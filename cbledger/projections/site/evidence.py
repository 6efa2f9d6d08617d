"""What a run's page shows beyond its events: the conversation, the diff against the baseline,
the ERC/DRC counts before and after, and where its events sit in the chain.

These are read from the preserved bundle and the ledger file, which a projection never opens: the
gatherer at the I/O edge (`cbledger.reproduce.site_evidence`) fills these structs, and the
renderer reads nothing else, so a page is a function of the state and this data.
"""

from __future__ import annotations

from typing import Literal

from msgspec import Struct

TurnKind = Literal["request", "assistant", "tool", "event"]


class ToolCall(Struct, frozen=True, kw_only=True):
    name: str
    #: the arguments as indented JSON
    args: str


class Turn(Struct, frozen=True, kw_only=True):
    kind: TurnKind
    #: the speaker or tool name, or the event type
    title: str
    text: str
    calls: list[ToolCall] = []
    #: a tool's arguments as indented JSON (tool turns only)
    args: str = ""
    #: a tool result copperhead reported as an error, by category
    error: str | None = None
    #: the text was cut to the page's limit
    truncated: bool = False


class ReportCounts(Struct, frozen=True, kw_only=True):
    """One kicad-cli report: violations by severity and by (source, type)."""

    errors: int
    warnings: int
    by_type: list[tuple[str, int]] = []


class ChainLink(Struct, frozen=True, kw_only=True):
    seq: int
    type: str
    hash: str
    prev: str


class RunEvidence(Struct, frozen=True, kw_only=True):
    #: why the bundle could not be read back (the page says so); None when it was
    problem: str | None = None
    #: the problem is this checkout's, not the run's: its fixture's tree is not materialized here
    here_only: bool = False
    turns: list[Turn] = []
    #: transcript lines that did not decode, by line number
    malformed: list[int] = []
    diff: str = ""
    diff_truncated: bool = False
    #: "erc"/"drc" -> counts of the fixture's baseline report and of the run's end state
    before: dict[str, ReportCounts] = {}
    after: dict[str, ReportCounts] = {}
    #: the run's event and its grades, with their chain hashes
    chain: list[ChainLink] = []
