"""What a verification found, in a shape a person and a program can both act on.

Every finding names where to look — the seq, the run, the assertion, the file and line — because
"something differs" is not actionable when a ledger holds a hundred thousand runs. Failures make
the command fail; notes explain what was deliberately not checked (an imported record, a run
graded under tasks that are no longer on disk) so that silence never stands for "verified".
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from cbledger.projections.site.evidence import RunEvidence

_CAMEL = {"run_id": "runId", "suite_version": "suiteVersion"}


@dataclass(frozen=True)
class Finding:
    check: str  # chain | checkpoint | suite | run | projection
    kind: str
    message: str
    seq: int | None = None
    run_id: str | None = None
    suite_version: str | None = None
    assertion: str | None = None
    field: str | None = None
    file: str | None = None
    line: int | None = None
    expected: Any = None  # what the ledger (or a regeneration) says
    actual: Any = None  # what was found

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if value is not None:
                out[_CAMEL.get(f.name, f.name)] = value
        return out

    def __str__(self) -> str:
        where = []
        if self.seq is not None:
            where.append(f"seq {self.seq}")
        if self.run_id is not None:
            where.append(f"run {self.run_id}")
        if self.suite_version is not None:
            where.append(f"suite {self.suite_version}")
        if self.assertion is not None:
            where.append(f"assertion {self.assertion}")
        if self.file is not None:
            where.append(self.file if self.line is None else f"{self.file}:{self.line}")
        prefix = f"[{', '.join(where)}] " if where else ""
        return f"{self.kind}: {prefix}{self.message}"


@dataclass
class GradeCheck:
    """One recorded grade of a run against today's re-grade."""

    suite_version: str
    seq: int
    status: str  # reproduced | mismatch | not-regradable | not-regraded

    def to_dict(self) -> dict[str, Any]:
        return {"suiteVersion": self.suite_version, "seq": self.seq, "status": self.status}


@dataclass
class RunCheck:
    run_id: str
    seq: int
    task_id: str
    model_id: str
    run_mode: str
    #: reproduced | skipped (a grade, or the run, was not reproduced) | failed | retracted
    status: str = "reproduced"
    grades: list[GradeCheck] = field(default_factory=list)
    failures: list[Finding] = field(default_factory=list)
    notes: list[Finding] = field(default_factory=list)
    #: why a grade or the run was not reproduced, one finding each
    skips: list[Finding] = field(default_factory=list)
    seconds: float = 0.0
    #: what the run's site page shows, read from the restore its re-grade used, so that the
    #: site check does not restore the run again; not part of the report
    evidence: RunEvidence | None = None

    def fail(self, finding: Finding) -> None:
        self.failures.append(finding)
        self.status = "failed"

    def skip(self, finding: Finding) -> None:
        self.skips.append(finding)
        if self.status == "reproduced":
            self.status = "skipped"

    def note(self, finding: Finding) -> None:
        self.notes.append(finding)

    def to_dict(self) -> dict[str, Any]:
        return {
            "runId": self.run_id,
            "seq": self.seq,
            "task": self.task_id,
            "model": self.model_id,
            "runMode": self.run_mode,
            "status": self.status,
            "grades": [g.to_dict() for g in self.grades],
            "failures": [f.to_dict() for f in self.failures],
            "notes": [n.to_dict() for n in self.notes],
            "skipped": [n.to_dict() for n in self.skips],
            "seconds": round(self.seconds, 4),
        }
