"""Findings about the harness itself, stated on LEADERBOARD.md beside the numbers they bound.

A low pass rate on a kind of task can be the harness's doing, not the model's: copperhead 0.9.0's
finish gate makes some real-board tasks unfinishable for every model, so the suite holds none of
them, and a reader comparing this benchmark with another must know which kinds are missing and
why. Each finding is stated for the harness versions it was established on, and shown only while
the ledger holds runs of one of them: a finding about a version nobody ran is not this ledger's.
"""

from __future__ import annotations

from typing import NamedTuple


class Finding(NamedTuple):
    harness: str
    version: str
    title: str
    text: str


FINDINGS: tuple[Finding, ...] = (
    Finding(
        "copperhead", "0.9.0", "the finish gate and real boards",
        "`finish {outcome: done}` is refused once a run has edited any KiCad file unless the last ERC "
        "since then reported zero violations of any severity, and, after a board edit, the last DRC too; "
        "warnings, unconnected items, schematic parity and violations the board's own project excludes all "
        "count (copperhead's README and its `finish` handler). Real boards carry library-resolution "
        "warnings in a bare checkout (the bundled ones: 44 and 224 ERC warnings), so on them copperhead "
        "0.9.0 cannot finish any edit of the schematic or the board: such a run stalls and is rolled back, "
        "whatever the model does. The suite's real-board tasks are therefore edits of copperhead's own "
        "records (budgets in the SPEC and the constraint registry, decisions), refusals and flags; "
        "real-board schematic or layout edits are not measured, and a pass rate here says nothing about "
        "them (docs/AUTHORING.md, \"The finish gate\").",
    ),
)


def render(versions: set[str | None]) -> list[str]:
    """The findings about the copperhead `versions` the ledger's runs were made under."""
    shown = [f for f in FINDINGS if f.version in versions]
    if not shown:
        return []
    out = ["## Harness findings (about the harness, not any model)", ""]
    out += [f"- **{f.harness} {f.version}, {f.title}.** {f.text}" for f in shown]
    return [*out, ""]
