"""The transcript source: copperhead's `.copperhead/runs/<stamp>/transcript.jsonl`.

Each line is `{"ts", "type", "data"}`; grading reads `data` only. A crashed or killed run leaves
no `run-end`, and a torn write can leave a malformed line: both are reported (the line numbers of
malformed lines are kept), never silently dropped and never a crash, because a transcript that
cannot be read is itself evidence about the run.

`run-start` echoes the task's budgets and request, so it is never evidence that a refusal cited a
budget: refusal evidence is the `run-refused` summary or a `finish` call with `outcome: refuse`.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from cbledger.grading.evidence.tree import TreeView
from cbledger.inputs import json_deeper_than

RUNS_PREFIX = ".copperhead/runs/"
TRANSCRIPT_NAME = "transcript.jsonl"

#: Tool-error categories, most specific first; the order also breaks ties for "dominant".
#: `finish-blocked` is copperhead's finish gate saying no (`cannot finish yet: …`, open
#: obligations or a failing ERC/DRC): the harness working as designed, not a protocol error.
TOOL_ERROR_CATEGORIES = ("unknown-tool", "malformed-arguments", "reverted-edit", "rejected-call", "finish-blocked")
PROTOCOL_ERRORS = {"unknown-tool", "malformed-arguments", "rejected-call"}

#: copperhead's own result prefixes for a call it did not carry out: a proposal that did not
#: validate (`validation FAILED`), an edit it refused (`refused: …`), the finish gate
_FINISH_BLOCKED = re.compile(r"cannot finish yet:", re.IGNORECASE)
_REJECTED_STATUS = re.compile(r"(validation FAILED\b|refused:)")

#: copperhead's own status wording, anchored at the start of a result: a tool that returns file
#: content (read_file, search) must not be classified by what the file says
_UNKNOWN_TOOL = re.compile(
    r"""(error:\s*)?(tool\s+["'`]?[\w.:-]+["'`]?\s+is not available|unknown tool|no such tool)""",
    re.IGNORECASE,
)
_REVERTED_STATUS = re.compile(r"([\w-]+\s+){0,2}reverted\b", re.IGNORECASE)
_MALFORMED = re.compile(
    r"missing required|invalid arg|malformed|could not parse arguments|expected (a |an )?\w+ (for|arg)|"
    r"must be (a|an) \w+",
    re.IGNORECASE,
)
_REVERTED = re.compile(
    r"revert|rolled back|unloadable|failed to (load|parse)|parse error|restored from",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class TranscriptEvent:
    line: int
    ts: str | None
    type: str
    data: dict[str, Any]


@dataclass
class Transcript:
    path: str | None
    events: list[TranscriptEvent] = field(default_factory=list)
    malformed: list[int] = field(default_factory=list)
    candidates: list[str] = field(default_factory=list)

    # ---------------------------------------------------------------- run-end

    @property
    def run_end(self) -> dict[str, Any] | None:
        for ev in reversed(self.events):
            if ev.type == "run-end":
                return ev.data
        return None

    @property
    def exit_path(self) -> str | None:
        end = self.run_end
        value = end.get("exitPath") if end else None
        return value if isinstance(value, str) else None

    def of_type(self, event_type: str) -> list[TranscriptEvent]:
        return [ev for ev in self.events if ev.type == event_type]

    # ---------------------------------------------------------------- provenance

    def provider_models(self) -> list[str]:
        """The model ids the provider named in its answers, where the harness wrote them down:
        `model` in an `assistant` event's data (one answer each), distinct, in order. The
        `run-start` model is the id the harness was asked for, not what answered, so it never
        counts. copperhead 0.9.0 writes neither, so its transcripts give none."""
        out: list[str] = []
        for ev in self.of_type("assistant"):
            model = ev.data.get("model")
            if isinstance(model, str) and model.strip() and model not in out:
                out.append(model)
        return out

    # ---------------------------------------------------------------- refusals

    def refusal_summaries(self) -> list[str]:
        """The refusal evidence: `run-refused` summaries and `finish(outcome=refuse)` summaries."""
        out: list[str] = []
        for ev in self.events:
            if ev.type == "run-refused":
                s = ev.data.get("summary")
                if isinstance(s, str):
                    out.append(s)
            for call in self._finish_calls(ev):
                if call.get("outcome") == "refuse" and isinstance(call.get("summary"), str):
                    out.append(call["summary"])
        return out

    @staticmethod
    def _finish_calls(ev: TranscriptEvent) -> list[dict[str, Any]]:
        if ev.type == "assistant":
            calls = ev.data.get("toolCalls") or []
            return [
                c.get("args") or {}
                for c in calls
                if isinstance(c, dict) and c.get("name") == "finish" and isinstance(c.get("args"), dict)
            ]
        return []

    # ---------------------------------------------------------------- tool errors

    def tool_results(self) -> list[tuple[str, str]]:
        out = []
        for ev in self.events:
            if ev.type == "tool":
                result = ev.data.get("result")
                text = result if isinstance(result, str) else json.dumps(result, sort_keys=True)
                out.append((str(ev.data.get("name")), text))
        return out

    def tool_error_counts(self) -> Counter[str]:
        counts: Counter[str] = Counter()
        for _name, result in self.tool_results():
            category = classify_tool_result(result)
            if category is not None:
                counts[category] += 1
        counts["reverted-edit"] += len(self.of_type("restore-failed"))
        return +counts

    def dominant_tool_error(self) -> str | None:
        counts = self.tool_error_counts()
        if not counts:
            return None
        best = max(counts.values())
        return next(c for c in TOOL_ERROR_CATEGORIES if counts.get(c) == best)

    def tool_calls(self) -> int:
        return len(self.of_type("tool"))


def classify_tool_result(result: str) -> str | None:
    """The error category of one tool result, or None when it is not an error."""
    head = result.strip()
    if _UNKNOWN_TOOL.match(head):
        return "unknown-tool"
    if _FINISH_BLOCKED.match(head):
        return "finish-blocked"
    if _REJECTED_STATUS.match(head):
        return "rejected-call"
    lowered = head.lower()
    if not (lowered.startswith(("error", "rejected")) or _REVERTED_STATUS.match(head)):
        return None
    if _MALFORMED.search(head[:300]):
        return "malformed-arguments"
    if _REVERTED.search(head[:300]):
        return "reverted-edit"
    return "rejected-call"


#: Deepest nesting a transcript line may have; a real copperhead event is under ten deep.
MAX_TRANSCRIPT_DEPTH = 128


def parse_transcript(data: bytes, path: str | None = None) -> Transcript:
    t = Transcript(path=path)
    for lineno, raw in enumerate(data.decode("utf-8", errors="replace").splitlines(), start=1):
        if not raw.strip():
            continue
        if json_deeper_than(raw.encode("utf-8", "surrogatepass"), MAX_TRANSCRIPT_DEPTH):
            t.malformed.append(lineno)  # nested past any real event: never handed to a recursive parser
            continue
        try:
            obj = json.loads(raw)
        except (ValueError, RecursionError):
            # RecursionError: a line nested deeper than the decoder goes, as a hostile harness
            # can write one; it is malformed like any other line that does not decode
            t.malformed.append(lineno)
            continue
        if not isinstance(obj, dict) or not isinstance(obj.get("type"), str):
            t.malformed.append(lineno)
            continue
        payload = obj.get("data")
        ts = obj.get("ts")
        t.events.append(
            TranscriptEvent(
                lineno,
                ts if isinstance(ts, str) else None,
                obj["type"],
                payload if isinstance(payload, dict) else {},
            )
        )
    return t


def locate(end: TreeView, baseline: TreeView | None) -> tuple[str | None, list[str]]:
    """The transcript this run wrote: among `.copperhead/runs/*/transcript.jsonl` files that are
    new or changed since the baseline, the one with the greatest stamp (stamps sort in time).
    Transcripts already in the baseline belong to earlier runs and never count."""
    candidates = []
    for path, entry in end.files().items():
        if not (path.startswith(RUNS_PREFIX) and path.endswith("/" + TRANSCRIPT_NAME)):
            continue
        if path[len(RUNS_PREFIX) :].count("/") != 1:
            continue
        before = baseline.files().get(path) if baseline is not None else None
        if before is None or before.oid != entry.oid:
            candidates.append(path)
    candidates.sort()
    return (candidates[-1] if candidates else None), candidates


#: run-end figures a create run's stages each report and the whole run is the sum of
STAGE_SUMS = ("turnsUsed", "maxTurns", "repairCyclesUsed", "maxRepairCycles", "tokensIn", "tokensOut", "durationMs")


def _command(t: Transcript) -> str | None:
    starts = t.of_type("run-start")
    value = starts[0].data.get("command") if starts else None
    return value if isinstance(value, str) else None


def merge_stages(stages: list[Transcript]) -> Transcript:
    """One `copperhead create` run out of its stage transcripts (one per stage attempt, in time
    order): every event, and a single `run-end` standing for the run. Its exit path is the first
    stage's that did not end `done` (where the pipeline stopped), else `done`; its figures are
    the stages' sums, so turns, tokens and time are the whole run's. The diagnosis calls between
    attempts are in no transcript: only the cassette sees them."""
    last = stages[-1]
    merged = Transcript(path=last.path)
    ends: list[dict[str, Any]] = []
    for stage in stages:
        merged.malformed.extend(stage.malformed)
        for ev in stage.events:
            if ev.type == "run-end":
                ends.append(ev.data)
            else:
                merged.events.append(ev)
    if len(ends) < len(stages):  # a stage the runner killed: no run-end for the whole run either
        return merged
    paths = [e.get("exitPath") for e in ends]
    end: dict[str, Any] = dict(ends[-1])
    end["exitPath"] = next((p for p in paths if p != "done"), "done")
    for key in STAGE_SUMS:
        values = [e.get(key) for e in ends]
        if all(isinstance(v, int) and not isinstance(v, bool) for v in values):
            end[key] = sum(values)
    end["stages"] = len(stages)
    merged.events.append(TranscriptEvent(0, None, "run-end", end))
    return merged


def load(end: TreeView, baseline: TreeView | None) -> Transcript:
    """The run's transcript; for a `create` run, its stage transcripts merged (`merge_stages`)."""
    path, candidates = locate(end, baseline)
    if path is None:
        return Transcript(path=None, candidates=candidates)
    t = parse_transcript(end.read(path) or b"", path)
    if _command(t) == "create":
        stages = [parse_transcript(end.read(p) or b"", p) for p in candidates]
        t = merge_stages([s for s in stages if _command(s) == "create"])
    t.candidates = candidates
    return t
