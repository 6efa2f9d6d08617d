"""The inputs of a grade, and the single exception a check may use to say "cannot evaluate".

Grading is a pure function of (task, fixture baseline, evidence): nothing here runs a tool or
touches the network, which is what lets `replay --verify` call exactly this code years later.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cbledger.errors import UserError
from cbledger.grading.evidence.bundle import Evidence
from cbledger.tasks.catalog import Fixture, Task


class Unevaluable(Exception):
    """An assertion that cannot be evaluated. It fails (there is no third state) and its detail
    says why, e.g. "no ERC report was captured for this run"."""


@dataclass
class GradeContext:
    task: Task
    fixture: Fixture
    evidence: Evidence
    #: per-grade memo for derived evidence (the parsed schematic, its nets)
    cache: dict[str, object] = field(default_factory=dict)

    def end_text(self, path: str) -> str:
        """A text file of the end state, or Unevaluable naming the path."""
        text = self.evidence.end.text(path)
        if text is None:
            raise Unevaluable(f"{path} does not exist in the end state")
        return text

    def doc_text(self, doc: str) -> str:
        """A markdown doc of the end state. A bare file name (`PINOUT.md`) is looked up at the
        tree root and then under `docs/`, the directory copperhead keeps its docs in; a path
        with a `/` is taken as given."""
        if "/" not in doc and not self.evidence.end.exists(doc):
            candidate = f"docs/{doc}"
            if self.evidence.end.exists(candidate):
                return self.end_text(candidate)
        return self.end_text(doc)

    def report(self, kind: str) -> bytes:
        data = self.evidence.reports.get(kind)
        if data is None:
            raise Unevaluable(f"no {kind.upper()} report was captured when this run ended")
        return data

    def baseline_report(self, kind: str) -> bytes:
        data = self.fixture.baseline_report(kind)
        if data is None:
            raise Unevaluable(
                f"fixture {self.fixture.id} has no baseline {kind.upper()} report to compare with"
            )
        return data


#: What a check may raise to produce a failing outcome with a detail instead of crashing. A
#: RecursionError is a file nested deeper than a reader goes (an agent can write one): that
#: check cannot be evaluated, and the grade still is.
EVALUATION_ERRORS = (Unevaluable, UserError, RecursionError)
