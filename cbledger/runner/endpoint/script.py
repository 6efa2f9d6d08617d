"""Session scripts: a model's side of a copperhead run, written down as data.

A session is the list of exchanges a model would have with the harness, in order. Exchange k
answers the harness's k-th chat-completions request of a run, and the endpoint reads k off the
request itself (the number of assistant messages it carries), so serving needs no state: two runs
of the same session at once, a retried request and a resumed run all get the right turn.

An exchange is written in one of two forms, and a file may mix them:

* `turn`: what the model says — `text`, `toolCalls` (`{id?, name, args}`), `usage`
  (`{in, out}` tokens) — rendered by the endpoint as an OpenAI chat completion (or as a stream
  of chunks when the request asks for one). This is how a person authors a session.
* `response`: the HTTP answer itself — `status` and a `body` (or, for a stream, `chunks`, each
  one `data:` payload, or `events`, each recorded event with its name) — served byte for byte. This is the form a recorded exchange takes, so a
  recording of a real model's session (a cassette) is a session script of the same format.

Optional per exchange: `request` (what a recording saw the harness send: kept, never required),
`expect.toolResults` (regexes the tool results the harness sent back since the previous turn
must match, in order: a script that assumed a tool succeeded stops with a clear error instead of
steering a run that went elsewhere), `delayMs` (the model's thinking time), `repeat` (serve
this exchange N more times, or `"forever"`, which is how a loop that never finishes is written)
and `fault` (a provider failure served in its place, `faults.py`; an exchange with a fault that
never ends needs no answer).

A request for a turn the script does not have is answered with HTTP 400 naming the session, the
turn and the script's length; copperhead ends such a run with `provider-error`.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta, Struct, field

from cbledger import inputs
from cbledger.errors import UserError
from cbledger.runner.endpoint.faults import Fault

FORMAT = "cbledger-session/1"
FOREVER = "forever"

Count = Annotated[int, Meta(ge=0)]


class _Body(Struct, forbid_unknown_fields=True, rename="camel", frozen=True, kw_only=True):
    pass


class ToolCall(_Body, frozen=True):
    name: Annotated[str, Meta(min_length=1)]
    args: dict[str, Any] = field(default_factory=dict)
    id: str | None = None


class Usage(_Body, frozen=True):
    in_: Count = field(default=0, name="in")
    out: Count = 0


class Turn(_Body, frozen=True):
    text: str | None = None
    tool_calls: list[ToolCall] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)


class SseEvent(_Body, frozen=True):
    """A server-sent event served exactly as recorded (its `event:` name, its `data:` payload)."""

    data: str
    event: str | None = None


class RawResponse(_Body, frozen=True):
    status: Annotated[int, Meta(ge=100, le=599)] = 200
    body: Any = None
    chunks: list[Any] | None = None
    #: a recorded stream, event by event (`[DONE]` included when it was sent): what a cassette
    #: replays, where `chunks` is how a person writes one
    events: list[SseEvent] | None = None


class Expect(_Body, frozen=True):
    tool_results: list[str] = field(default_factory=list)


class Exchange(_Body, frozen=True):
    turn: Turn | None = None
    response: RawResponse | None = None
    request: Any = None
    expect: Expect | None = None
    delay_ms: Count = 0
    repeat: Count | Literal["forever"] = 0
    #: a provider fault served instead of the answer (`cbledger.runner.endpoint.faults`)
    fault: Fault | None = None


class FollowUp(_Body, frozen=True):
    """The model's side of one later feedback pass: a fresh `copperhead do`, so its requests are
    counted from the first again."""

    exchanges: Annotated[list[Exchange], Meta(min_length=1)]


class Session(_Body, frozen=True):
    format: Literal["cbledger-session/1"]
    name: Annotated[str, Meta(min_length=1)]
    exchanges: Annotated[list[Exchange], Meta(min_length=1)]
    description: str = ""
    #: the bundled task this session was written for; `cbledger run --session` serves it to
    #: that task's runs
    task: str | None = None
    #: the model id the endpoint names in its answers; by default the one each request asked for,
    #: as an OpenAI-compatible server echoes it
    model: Annotated[str, Meta(min_length=1)] | None = None
    #: what the model does in feedback passes 2, 3, …: `passes[k - 2]` answers pass k
    passes: list[FollowUp] = field(default_factory=list)
    #: a `copperhead create` run, one conversation per pipeline stage (`stage_session`): the
    #: stage's name, or `diagnose:<stage>` for the recovery supervisor's call after it failed
    stages: dict[str, list[Exchange]] = field(default_factory=dict)


#: Far above any real script (the bundled ones are under 100 kB).
MAX_SCRIPT_BYTES = 16 * inputs.MiB


def load(path: Path) -> Session:
    """Reads one session file; a bad file is refused naming the file and the field."""
    data = inputs.read_regular(path, MAX_SCRIPT_BYTES, "a session script")
    problem = inputs.json_problem(data, syntax=False)
    if problem is not None:
        raise UserError(f"{inputs.printable_path(path)}: {problem}")
    try:
        session = msgspec.json.decode(data, type=Session)
    except msgspec.ValidationError as exc:
        raise UserError(f"{path}: not a session script: {exc}") from None
    except msgspec.DecodeError as exc:
        raise UserError(f"{path}: not JSON: {exc}") from None
    _check_exchanges(session.exchanges, f"{path}: $.exchanges")
    for k, follow_up in enumerate(session.passes):
        _check_exchanges(follow_up.exchanges, f"{path}: $.passes[{k}].exchanges")
    for name, exchanges in session.stages.items():
        if not exchanges:
            raise UserError(f"{path}: $.stages.{name}: a stage needs at least one exchange")
        _check_exchanges(exchanges, f"{path}: $.stages.{name}")
    return session


def _check_exchanges(exchanges: list[Exchange], prefix: str) -> None:
    for i, ex in enumerate(exchanges):
        where = f"{prefix}[{i}]"
        if ex.turn is not None and ex.response is not None:
            raise UserError(f"{where}: give exactly one of `turn` and `response`")
        if ex.turn is None and ex.response is None:
            if ex.fault is None:
                raise UserError(f"{where}: give exactly one of `turn` and `response`")
            if ex.fault.times != "forever":
                raise UserError(f"{where}.fault.times: a fault that ends needs a `turn` or `response` to serve after it")
        if ex.repeat == FOREVER and i != len(exchanges) - 1:
            raise UserError(f"{where}.repeat: only the last exchange may repeat forever")
        for j, pattern in enumerate(ex.expect.tool_results if ex.expect else []):
            try:
                re.compile(pattern)
            except re.error as err:
                raise UserError(f"{where}.expect.toolResults[{j}]: not a regex ({err})") from None


_STAGE_REQUEST = re.compile(r"Request: create pipeline stage: ([\w-]+)\s*$")
_DIAGNOSIS = re.compile(r"\AStage: ([\w-]+)\n")


def stage_of(body: dict) -> str | None:
    """Which create-pipeline conversation a request belongs to: each stage's agent loop opens
    with a user message ending `Request: create pipeline stage: <name>`, and the recovery
    supervisor's tool-less call about a failed stage opens `Stage: <name>` (`diagnose:<name>`)."""
    messages = body.get("messages")
    if not isinstance(messages, list):
        return None
    for message in messages:
        if not isinstance(message, dict) or message.get("role") != "user" or not isinstance(message.get("content"), str):
            continue
        text = message["content"]
        if m := _STAGE_REQUEST.search(text):
            return m.group(1)
        if m := _DIAGNOSIS.match(text):
            return f"diagnose:{m.group(1)}"
        return None
    return None


def stage_session(session: Session, body: dict) -> Session:
    """The session a request is answered from: a create stage's own exchanges when the script
    has them (every stage is a fresh conversation, so its turns count from its first), else the
    session's `exchanges`, which answer every other request, any stage the script leaves out
    included."""
    stage = stage_of(body) if session.stages else None
    if stage is None or stage not in session.stages:
        return session
    return msgspec.structs.replace(session, name=f"{session.name} ({stage})", exchanges=session.stages[stage], stages={})


def for_pass(session: Session, index: int) -> Session:
    """The session as feedback pass `index` (1-based) is served it: pass 1 its `exchanges`,
    pass k its `passes[k - 2]`; a pass the script has no turns for is served none (the endpoint
    refuses its first request, naming the session)."""
    if index <= 1:
        return session
    later = session.passes[index - 2].exchanges if index - 2 < len(session.passes) else []
    return msgspec.structs.replace(session, name=f"{session.name} (pass {index})", exchanges=later, passes=[])


def load_all(paths: list[Path]) -> list[Session]:
    """Every session in the given files and directories (`*.json`, sorted, not recursive)."""
    files: list[Path] = []
    for p in paths:
        if p.is_dir():
            files.extend(sorted(p.glob("*.json")))
        else:
            files.append(p)
    if not files:
        raise UserError(f"no session scripts in {', '.join(map(str, paths))}")
    return [load(f) for f in files]


def by_task(sessions: list[Session]) -> dict[str, Session]:
    """The sessions keyed by the task they were written for; two for one task is ambiguous."""
    out: dict[str, Session] = {}
    for s in sessions:
        if s.task is None:
            raise UserError(f"session {s.name!r} names no `task`; the runner serves sessions to the task they name")
        if s.task in out:
            raise UserError(f"sessions {out[s.task].name!r} and {s.name!r} both name task {s.task}")
        out[s.task] = s
    return out


def length(session: Session) -> int | None:
    """How many requests the session answers; None when its last exchange repeats forever."""
    total = 0
    for ex in session.exchanges:
        if ex.repeat == FOREVER:
            return None
        total += 1 + int(ex.repeat)
    return total


def exchange_at(session: Session, k: int) -> Exchange | None:
    """The exchange answering the k-th request (0-based), repeats expanded."""
    for ex in session.exchanges:
        if ex.repeat == FOREVER:
            return ex
        span = 1 + int(ex.repeat)
        if k < span:
            return ex
        k -= span
    return None


def dumps(session: Session) -> bytes:
    doc = msgspec.to_builtins(session)
    for empty in ("passes", "stages"):  # a session without them is written as it always was
        if not doc.get(empty):
            doc.pop(empty, None)
    return json.dumps(doc, indent=2, ensure_ascii=False).encode() + b"\n"
