"""Feedback passes in LEADERBOARD.md: pass rate at pass 1, pass rate by pass k, mean passes to
pass, per model, over the attempts that were allowed more than one pass.

The headline never reads this: it is built from `LedgerState.runs`, which holds pass 1 of every
attempt and no later pass (`fold.py`), so a ledger's headline is the same with or without the
passes that followed. This section is rendered only when an attempt took passes, so a ledger
without them renders byte for byte as before.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from fractions import Fraction

from cbledger.projections import format as fmt
from cbledger.projections.fold import LedgerState
from cbledger.projections.records import row_kind

TITLE = "Feedback passes (pass 1 is the headline; later passes revised it, told hints)"
_NOTE = (
    "> An attempt allowed more than one pass (`cbledger run --passes N`, capped by "
    "`tasks/passes.json`) goes on after a failed pass: each failed assertion comes back as a hint "
    "that never states the expected value, and the agent revises the sandbox as the pass before "
    "left it. Every pass is a preserved, graded and replayed run; only pass 1 enters the tables "
    "above. A row is one model's attempts of one run kind (a session script's, or an ablation's, "
    "apart from the model's own). *By pass k*: attempts that had passed at or before pass k. "
    "*Mean passes to pass*: over the attempts that passed."
)


@dataclass(frozen=True)
class Attempt:
    model: str
    task_id: str
    allowed: int
    #: the verdict of each pass made, in order ("pass", "fail", or None when not graded under the suite)
    verdicts: tuple[str | None, ...]
    #: what pass 1 measured (`records.row_kind`): a session script's attempt, or an ablation's,
    #: is no attempt of the model's default condition, and a row is of one kind
    kind: str = "agent"

    @property
    def passed_at(self) -> int | None:
        """The index of the first pass that passed, or None."""
        for index, verdict in enumerate(self.verdicts, 1):
            if verdict == "pass":
                return index
        return None


@dataclass(frozen=True)
class PassRow:
    model: str
    kind: str
    attempts: int
    allowed: int
    #: passed by pass k, for k = 1..allowed (cumulative)
    by_pass: tuple[int, ...]
    mean_passes_to_pass: Fraction | None


def _verdict(state: LedgerState, run_id: str, suite: str) -> str | None:
    entry = state.grades.get(run_id, {}).get(suite)
    return entry.grade.verdict if entry is not None else None


def later_by_first(state: LedgerState) -> dict[str, list[tuple[int, str]]]:
    """Pass 1's run id -> (index, run id) of each later pass of its attempt."""
    later: dict[str, list[tuple[int, str]]] = {}
    for rid, later_entry in state.later_passes.items():
        later_ref = later_entry.run.passes
        if later_ref and later_ref.first is not None:
            later.setdefault(later_ref.first, []).append((later_ref.index, rid))
    return later


def attempts(state: LedgerState, suite: str, firsts: Iterable[str] | None = None) -> list[Attempt]:
    """Every live attempt allowed more than one pass whose pass 1 was graded under `suite`, in
    ledger order, with its passes in index order (a retracted pass ends the attempt there).
    `firsts`: the runs allowed more than one pass, in seq order (`Views.attempt_firsts`), so
    that not every run is read."""
    later = later_by_first(state)
    out: list[Attempt] = []
    # in seq order: the fold adds each run at its seq
    entries = state.runs.items() if firsts is None else ((rid, state.runs[rid]) for rid in firsts)
    for rid, entry in entries:
        ref = entry.run.passes
        if not ref or ref.allowed < 2 or rid in state.retracted:
            continue
        first = _verdict(state, rid, suite)
        if first is None:
            continue
        verdicts: list[str | None] = [first]
        for _index, pid in sorted(later.get(rid, [])):
            if pid in state.retracted:
                break
            verdicts.append(_verdict(state, pid, suite))
        out.append(Attempt(entry.run.model.id, entry.run.task.id, ref.allowed, tuple(verdicts), row_kind(entry)))
    return out


def rows(found: list[Attempt]) -> list[PassRow]:
    by_model: dict[tuple[str, str], list[Attempt]] = {}
    for a in found:
        by_model.setdefault((a.model, a.kind), []).append(a)
    out: list[PassRow] = []
    for (model, kind), items in sorted(by_model.items()):
        allowed = max(a.allowed for a in items)
        passed = [a.passed_at for a in items if a.passed_at is not None]
        out.append(PassRow(
            model=model, kind=kind, attempts=len(items), allowed=allowed,
            by_pass=tuple(sum(1 for p in passed if p <= k) for k in range(1, allowed + 1)),
            mean_passes_to_pass=Fraction(sum(passed), len(passed)) if passed else None,
        ))
    return out


def table(state: LedgerState, suite: str, firsts: Iterable[str] | None = None) -> tuple[list[str], list[list[str]]]:
    """The section's header and rows (no rows: no attempt of `suite` took passes), as
    LEADERBOARD.md and the site show them."""
    table_rows = rows(attempts(state, suite, firsts))
    if not table_rows:
        return [], []
    width = max(r.allowed for r in table_rows)
    header = ["Model", "Run kind", "Attempts", "Passes allowed", "Pass rate at pass 1",
              *(f"By pass {k}" for k in range(2, width + 1)), "Mean passes to pass"]
    body = []
    for r in table_rows:
        cells = [f"{fmt.pct(Fraction(n, r.attempts))} ({n}/{r.attempts})" for n in r.by_pass]
        cells += ["—"] * (width - len(cells))
        mean = f"{float(r.mean_passes_to_pass):.2f}" if r.mean_passes_to_pass is not None else "—"
        body.append([f"`{r.model}`", r.kind, str(r.attempts), str(r.allowed), *cells, mean])
    return header, body


def render(state: LedgerState, suite: str, firsts: Iterable[str] | None = None) -> list[str]:
    """The section, or nothing when no attempt of `suite` took passes."""
    header, body = table(state, suite, firsts)
    if not body:
        return []
    return [f"## {TITLE}", "", _NOTE, "", *fmt.table(header, body), ""]
