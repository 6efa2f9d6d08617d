"""Failures that are not the model's: the harness or its environment stopped the run.

A benchmark that folds provider outages into pass rates ranks providers' uptime, not models. So a
run is kept with its evidence and graded like any other, but marked so that no model metric counts
it (the leaderboard lists it in a section of its own, with its kind and turn) when what it
preserved shows one of these, checked in this order:

1. `harness-signal`: the harness died of a signal the runner did not send (SIGKILL from outside
   is exit 137 or -9); the runner's own kills at the caps are `runnerExit: cap-exceeded` instead.
2. A provider failure at any turn, the model's earlier answers notwithstanding:
   `provider-status` (copperhead's `provider error: <status> …` with 408, 409, 429, 5xx, 401 or
   403, after its SDK's and its own retries; or its `session-limit` exit, a usage or session limit
   the provider's words name, at any status), `provider-transport` (a reset or closed connection,
   an answer cut short or not JSON: the reason names no status, and the cassette's failing
   exchange, or without a cassette the reason's words, say the wire broke), `provider-timeout`
   (copperhead's turn watchdog gave up, or the run was killed at the wall-clock cap while the
   provider had not answered its last request, outstanding for at least half the harness's
   time: a cap that strikes one call of a slow model in passing stays the model's). A 400, 404 or 422 is the request's content, which
   the model shaped (a context that grew too long, a session script that ran out), and stays the
   model's.
3. The harness's own process dying of an uncaught exception before its run ended (no
   `run-end`; stderr ending with Node's report of it: the throw site, what was thrown, the
   `Node.js v…` line): `harness-crash`, at any turn, before the model's first answer or after
   its last (a tool the harness could not run is the harness's defect, not the model's stall).
   A V8 abort (out of heap, exit 134) prints no such report and stays the model's.
4. No assistant turn at all: `preflight` (copperhead refused, saying why, before a transcript),
   `harness-exit` (it exited without a word and without a transcript: preflight never ran, or
   `sync` found nothing for a model to resolve, which its stdout report says),
   `missing-key` / `provider-config` (no provider could be built), `no-model-turn`.
5. After the model's work, a commit that failed for want of a git identity: `git-identity`.

The decision reads only what the run preserved (the transcript, the harness's stderr, the
cassette, and the exit status the run's `runnerNote` and `runnerExit` state), so `replay --verify`
makes it again from a restored run (`cbledger.reproduce.figures.attribution_findings`).
"""

from __future__ import annotations

import json
import re
import signal

from msgspec import UnsetType

from cbledger.grading.evidence.transcript import Transcript
from cbledger.ledger.events import HarnessFailure
from cbledger.runner.budget import REFUSAL_CODE, REFUSAL_STATUS
from cbledger.runner.cassette import Cassette, Recorded, model_calls

#: the line Node ends its report of an uncaught exception with, the process dying of it: the
#: last line the harness wrote, never one a model's words quoted earlier on stderr can end with
_NODE_LAST = re.compile(r"(?:^|\n)Node\.js v\d+[\w.-]*\s*\Z")
#: the head of the error such a report names: `Error: …`, `TypeError: …`, `Error [ERR_X]: …`,
#: `[UnhandledPromiseRejection: …`
_ERROR_HEAD = re.compile(r"\[?(?:[A-Za-z_$][\w$.]*)?(?:Error|Exception|Rejection)\b")


#: where Node's report begins: the throw site (`file:line`), its source line and a caret under
#: it; the line after is what was thrown, whatever it was (an error of any name, a string)
_SITE = re.compile(r"^\S+:\d+\n[^\n]*\n[ \t]*\^+[ \t]*\n\n?(?P<head>[^\n]*\S[^\n]*)", re.M)


def crash_report(stderr: str) -> str | None:
    """What Node's report of an uncaught exception says was thrown, when stderr ends with such a
    report: the line after its last throw site (or, where the report gives none, the first line
    of the paragraph above its stack). None when stderr does not end as such a report does."""
    end = _NODE_LAST.search(stderr)
    if end is None:
        return None
    report = stderr[:end.start()]
    sites = list(_SITE.finditer(report))
    if sites:
        return sites[-1]["head"].strip()
    paragraphs = [p for p in re.split(r"\n\s*\n", report) if p.strip()]
    for paragraph in reversed(paragraphs[-3:]):  # the error and its stack, its properties
        lines = paragraph.strip("\n").splitlines()
        if any(line.startswith("    at ") for line in lines) or _ERROR_HEAD.match(lines[0]):
            head = lines[0].strip()
            return head if _ERROR_HEAD.match(head) else None
    return None

_IDENTITY = re.compile(r"author identity unknown|please tell me who you are|empty ident|unable to auto-detect email", re.I)
_MISSING_KEY = re.compile(r"\b[A-Z][A-Z0-9_]*(KEY|TOKEN)[A-Z0-9_]* is not set\b")
_STATUS = re.compile(r"^provider error:\s*(\d{3})\b")
_TIMED_OUT = re.compile(r"^provider turns timed out|\btimed? ?out\b", re.I)
_TRANSPORT = re.compile(
    r"connection error|socket hang up|ECONNRESET|ECONNREFUSED|EPIPE|premature close|terminated|"
    r"unexpected end of JSON|Unterminated string in JSON|is not valid JSON|in JSON at position",
    re.I,
)
#: statuses that say the provider (or the way to it) failed, not the request the model shaped
ENVIRONMENT_STATUSES = frozenset({401, 402, 403, 408, 409, 429})
#: what the runner writes into `runnerNote` when copperhead exits non-zero on its own
_EXITED = re.compile(r"copperhead exited (-?\d+)")
#: signals an outside party ends a process with; by the shell's convention a death by signal n
#: is exit 128 + n (bubblewrap passes it on so), Python's is -n
_OUTSIDE_SIGNALS = (signal.SIGKILL, signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return line.strip()[:300]
    return ""


def exit_code_from(note: str | None) -> int | None:
    """The harness's exit code as the run's note states it (None: it exited 0 or was killed by
    the runner, which the note and `runnerExit` say otherwise)."""
    for segment in (note or "").split("; "):  # the runner's own segment, never words quoted inside another
        m = _EXITED.fullmatch(segment)
        if m:
            return int(m.group(1))
    return None


#: how the note of a run whose end state could not be kept begins (`execute.record_unpreserved`)
UNPRESERVED = "end state not preserved: "
#: the whole reason when the runner's own tool was killed from outside (`confined_verify`): matched
#: whole, never searched for, since other reasons quote what the agent named (a link's path)
_TOOL_SIGNALLED = re.compile(r"(?P<tool>kicad-cli [A-Z]+) on [^\s;]+ was ended by (?P<sig>SIG[A-Z]+), which the runner did not send")


def unpreserved_reason(note: str | None) -> str | None:
    """The reason a recorded run's end state was not kept, read back from its note (which joins
    the runner's reason with the harness's own note and the stats note by "; "): the runner's
    kill reason when the note begins with it, else the rest of the note (any other reason)."""
    if not note or not note.startswith(UNPRESERVED):
        return None
    rest = note[len(UNPRESERVED):]
    tool = _TOOL_SIGNALLED.match(rest)
    if tool is not None and rest[tool.end():tool.end() + 2] in ("", "; "):
        return tool.group(0)
    return rest


def detect(
    transcript: Transcript, stderr: str, exit_code: int | None, killed: bool, cassette: Cassette | None = None,
    agent_ms: int = 0, *, before_402: bool = False, unpreserved: str | None = None, session_limit: bool = True,
    stdout: str = "", crash: bool = True,
) -> HarnessFailure | None:
    """The reason this run is not the model's, or None when the model's work decided it.
    `agent_ms`: how long the harness ran (a request unanswered for half of it is a hang).
    `before_402`: the rule runs were recorded under before a provider's 402 was the account's
    (`replay --verify` accepts what either gives). `unpreserved`: why the run's end state could
    not be kept (RUNNER.md section 1), so no transcript was read from it and its absence says
    nothing of how far the harness got: the rules that read a missing transcript do not apply
    (they named a run the harness had finished `preflight`, its version banner for a reason). The
    run is the model's then, unless the reason is the runner's own verification killed from
    outside (an OOM kill, an operator), which is `harness-signal`. `session_limit=False`: the rule
    before copperhead's `session-limit` exit (a provider's usage or session limit: the account's,
    as any provider error is) was read as the provider's too; it was the model's. `stdout`: what
    the harness printed there, read only for `sync`'s report when it exits without a transcript
    (said as "saying nothing" before it was read). `crash=False`: the rule before the harness's
    own uncaught exception was read as such (the model's stall)."""
    answered = len(transcript.of_type("assistant"))
    turn = answered + 1
    code = exit_code or 0  # the note states no exit 0, so a restored run reads None for it
    said = first_line(stderr)
    by_signal = outside_signal(exit_code, killed)
    if by_signal is not None:
        where = f" at model call {turn}" if transcript.path is not None else " before writing a transcript"
        return HarnessFailure(
            kind="harness-signal", turn=turn,
            detail=f"the harness was ended by {by_signal} (exit {exit_code}){where}, which the runner did not send",
        )
    provider = _provider_failure(transcript, killed, cassette, turn, agent_ms, before_402, session_limit)
    if provider is not None:
        return provider
    if unpreserved is not None and transcript.path is None:
        tool = _TOOL_SIGNALLED.fullmatch(unpreserved)
        if tool is None:
            return None
        return HarnessFailure(kind="harness-signal", detail=(
            f"the runner's own {tool['tool']} was ended by {tool['sig']}, which the runner did not send, "
            "so the end state could not be verified and kept"))
    crashed = crash_report(stderr) if crash and code != 0 and not killed and not transcript.of_type("run-end") else None
    if crashed is not None:
        return HarnessFailure(kind="harness-crash", turn=turn, detail=(
            f"the harness died of an uncaught exception after {answered} model turn(s): {crashed[:240]}"))
    if answered:
        for ev in transcript.of_type("run-failed"):
            reason = str(ev.data.get("reason", ""))
            if ev.data.get("exitPath") == "commit-failed" and _IDENTITY.search(reason):
                return HarnessFailure(kind="git-identity", detail=first_line(reason) or "git has no identity to commit under")
        return None
    if transcript.path is None:
        if killed:
            return HarnessFailure(kind="no-model-turn", detail="killed at the wall-clock cap before writing a transcript")
        if not said:
            return HarnessFailure(
                kind="harness-exit",
                detail=_sync_report(stdout, code) or f"the harness exited {code} at once, saying nothing and writing no transcript",
            )
        return HarnessFailure(kind="preflight", detail=said)
    if not transcript.of_type("run-start"):
        return HarnessFailure(
            kind="missing-key" if _MISSING_KEY.search(stderr) else "provider-config", detail=said or f"the harness exited {code} before its first model call")
    reasons = [first_line(str(ev.data.get("reason", ""))) for ev in transcript.of_type("run-failed")]
    detail = next((r for r in reasons if r), "") or said
    if killed:
        detail = detail or "killed at the wall-clock cap before the first model turn"
    return HarnessFailure(kind="no-model-turn", detail=detail or "the model never answered a turn")


def _sync_report(stdout: str, code: int) -> str | None:
    """What `copperhead sync` said when it called no model: its `{resolvable, violations}` report,
    printed before anything else (docs/RUNNER.md section 13): nothing to resolve (exit 0), or a
    requirement violation only the harness flags (exit 2). The task planted neither what a model
    could resolve, which its trial would show; the run is no measure of the model."""
    first = stdout.lstrip().split("\n", 1)[0] if stdout.lstrip().startswith("{") else ""
    try:
        report = json.loads(first) if first else None
    except ValueError:
        return None
    if not isinstance(report, dict) or not isinstance(report.get("resolvable"), list) or not isinstance(report.get("violations"), list):
        return None
    return (f"copperhead sync exited {code} without a model call: its report lists {len(report['resolvable'])} resolvable "
            f"item(s) and {len(report['violations'])} requirement violation(s), so there was nothing for a model to resolve")


def outside_signal(exit_code: int | None, killed: bool) -> str | None:
    """The name of the signal from outside that ended a process, if one did (None when the
    runner killed it at its own cap): the harness's, or the runner's own kicad-cli's."""
    if killed or exit_code is None:
        return None
    for sig in _OUTSIDE_SIGNALS:
        if exit_code in (-int(sig), 128 + int(sig)):
            return sig.name
    return None


def _provider_failure(
    transcript: Transcript, killed: bool, cassette: Cassette | None, turn: int, agent_ms: int, before_402: bool = False,
    session_limit: bool = True,
) -> HarnessFailure | None:
    last = _last_call(cassette)
    for ev in transcript.of_type("run-failed"):
        limited = session_limit and ev.data.get("exitPath") == "session-limit"
        if ev.data.get("exitPath") != "provider-error" and not limited:
            continue
        reason = first_line(str(ev.data.get("reason", ""))) or ("session limit" if limited else "provider error")
        if last is not None and _broken(last):
            # the wire broke before a whole answer: a status in the reason is the recording
            # proxy's own 502, not the provider's
            return HarnessFailure(kind="provider-transport", detail=reason, turn=turn)
        m = _STATUS.match(reason)
        if m is not None:
            status = int(m.group(1))
            if status == REFUSAL_STATUS and (before_402 or (last is not None and _limit_refusal(last))):
                return None  # this project's own money limit: a limit like the turn cap (docs/RUNNER.md)
            if limited or status in ENVIRONMENT_STATUSES or status >= 500:
                return HarnessFailure(kind="provider-status", detail=reason, turn=turn, status=status)
            return None
        if _TIMED_OUT.search(reason):
            return HarnessFailure(kind="provider-timeout", detail=reason, turn=turn)
        if last is None and _TRANSPORT.search(reason):
            return HarnessFailure(kind="provider-transport", detail=reason, turn=turn)
        if limited:
            # copperhead ends on a usage or session limit the provider's words name (a saved
            # login's weekly limit, say): the account ran out, whatever status came with it
            return HarnessFailure(kind="provider-status", detail=f"session limit: {reason}", turn=turn)
        return None
    # a cap that struck one call of a slow model in passing is the model's; a provider that sat
    # on one request for half the run is hung
    if killed and last is not None and _unanswered(last) and 2 * last.elapsed_ms >= agent_ms:
        return HarnessFailure(
            kind="provider-timeout", turn=turn,
            detail=f"killed at the wall-clock cap while the provider had not answered model call {turn} "
                   f"({last.elapsed_ms // 1000}s in)",
        )
    return None


def _limit_refusal(ex: Recorded) -> bool:
    """The recording proxy's own refusal of a call past a money limit (`budget.Meter.refuse`),
    not a provider's 402 (out of credit: the account's, not the model's)."""
    error = ex.body.get("error") if isinstance(ex.body, dict) else None
    return ex.status == REFUSAL_STATUS and isinstance(error, dict) and error.get("code") == REFUSAL_CODE


def _last_call(cassette: Cassette | None) -> Recorded | None:
    calls = model_calls(cassette) if cassette is not None else []
    return calls[-1] if calls else None


def _failure(ex: Recorded) -> str | None:
    return None if isinstance(ex.failure, UnsetType) else ex.failure


def _unanswered(ex: Recorded) -> bool:
    return _failure(ex) is not None and ex.status == 504


def _broken(ex: Recorded) -> bool:
    """The wire broke: the proxy saw no whole answer, or a 200 whose body is not JSON."""
    return _failure(ex) is not None or (ex.status < 300 and ex.events is None and isinstance(ex.body, str))

