"""Cassettes: a run's model exchanges as the wire carried them, kept so the run can be re-executed.

A cassette is what the recording proxy (`cbledger.runner.recorder`) saw pass between the harness
and its provider, in order: each request's body, the answer's status and body (or, for a stream,
its server-sent events one by one), how long the provider took, and the model id the provider
named. Headers are never kept (they carry the keys), and every body has passed the credential
backstop before it is written. A cassette is stored under the BLAKE3 of its canonical bytes
(`results/cassettes/<blake3>.json`), and `run.recorded.cassette` names that digest, so the ledger
pins exactly which exchanges a run had.

Served back by the loopback endpoint (`as_session`), a cassette is a session script whose
exchanges are all in the recorded `response` form: one server answers both.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Literal

import msgspec
from blake3 import blake3
from msgspec import UNSET, Meta, Struct, UnsetType, field

from cbledger import credentials
from cbledger.errors import SecretFound, UserError
from cbledger.ledger.events import CassetteRef
from cbledger.runner.endpoint import script
from cbledger.runner.endpoint.faults import Fault
from cbledger.workspace import cassette_name

FORMAT: Literal["cbledger-cassette/1"] = "cbledger-cassette/1"

#: the route a cassette was recorded on: the compat route's endpoint, or a native provider's API
Route = Literal["openai-compat", "openai", "anthropic"]


class _Body(Struct, forbid_unknown_fields=True, rename="camel", frozen=True, kw_only=True):
    pass


class SseEvent(_Body, frozen=True):
    """One server-sent event of a streamed answer: its `event:` name (Anthropic names them) and
    its `data:` payload as sent, `[DONE]` included."""

    data: str
    event: str | None = None


class Recorded(_Body, frozen=True):
    """One request and its answer."""

    method: Literal["GET", "POST"]
    #: the request's path below the base URL (`/chat/completions`, `/messages`)
    path: str
    #: the request body as JSON (None for a GET)
    request: Any = None
    status: Annotated[int, Meta(ge=100, le=599)] = 200
    #: the answer's JSON body (or its text when it is not JSON); None for a stream
    body: Any = None
    #: the answer as server-sent events, when it was a stream
    events: list[SseEvent] | None = None
    #: from the request leaving the proxy to the answer's last byte
    elapsed_ms: Annotated[int, Meta(ge=0)] = 0
    #: the model id the provider's answer named
    model: str | None = None
    #: whether the credential backstop replaced anything in this exchange
    redacted: bool = False
    #: what broke on the wire, when the provider's answer never arrived whole (the connection
    #: reset, the answer cut short, no answer before the run ended); `status` is then the
    #: proxy's own (502, or 504 for no answer). Absent on an exchange that was answered.
    failure: str | UnsetType = UNSET


class Cassette(_Body, frozen=True):
    format: Literal["cbledger-cassette/1"]
    route: Route
    #: the model the harness was asked to use (`--model`)
    model_id: str
    exchanges: list[Recorded] = field(default_factory=list)
    #: the sandbox's path when it was recorded: a re-execution replaces it, and its own, by
    #: `<sandbox>` before comparing requests
    workdir: str | None = None


def encode(cassette: Cassette) -> bytes:
    """The canonical bytes a cassette is stored as and addressed by (sorted keys, compact)."""
    return json.dumps(msgspec.to_builtins(cassette), sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"


def digest(data: bytes) -> str:
    return blake3(data).hexdigest()


def relpath(blake3_hex: str) -> str:
    return cassette_name(blake3_hex)


def stored_form(cassette: Cassette, what: str) -> tuple[bytes, CassetteRef]:
    """The bytes a cassette is kept as and the reference an event records for them, once the
    credential backstop found nothing in them (the proxy redacts each body; this is the scan
    behind it). `what` names the run for the refusal."""
    data = encode(cassette)
    found = credentials.scan_bytes(data, "cassette")
    if found:
        raise SecretFound(f"{what}: credential pattern matched in its cassette ({'; '.join(map(str, found))}); nothing of this run was written")
    hexdigest = digest(data)
    return data, CassetteRef(path=relpath(hexdigest), blake3=hexdigest, bytes=len(data), exchanges=len(cassette.exchanges))


def load(path: Path, expect: str | None = None) -> Cassette:
    """Reads a stored cassette; refuses one that is not a cassette or whose bytes do not hash to
    the digest the ledger recorded for it."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise UserError(f"{path}: cannot read cassette ({exc.strerror})") from None
    if expect is not None and digest(data) != expect:
        raise UserError(f"{path}: its BLAKE3 is not the {expect} its run recorded")
    try:
        return msgspec.json.decode(data, type=Cassette)
    except msgspec.ValidationError as exc:
        raise UserError(f"{path}: not a cassette: {exc}") from None
    except msgspec.DecodeError as exc:
        raise UserError(f"{path}: not JSON: {exc}") from None


def clean(value: Any) -> tuple[Any, bool]:
    """`value` with every credential the backstop knows redacted, and whether one was."""
    if isinstance(value, str):
        out = credentials.redact(value)
        return out, out != value
    if isinstance(value, dict):
        changed = False
        items = {}
        for k, v in value.items():
            key, ck = clean(str(k))
            items[key], cv = clean(v)
            changed = changed or ck or cv
        return items, changed
    if isinstance(value, list):
        pairs = [clean(v) for v in value]
        return [p[0] for p in pairs], any(p[1] for p in pairs)
    return value, False


def named_model(body: Any, events: list[SseEvent] | None) -> str | None:
    """The model id an answer names: `model` of an OpenAI completion or chunk, `message.model` of
    Anthropic's `message_start`."""
    candidates: list[Any] = [body]
    for ev in events or []:
        try:
            candidates.append(json.loads(ev.data))
        except ValueError:
            continue
    for item in candidates:
        if not isinstance(item, dict):
            continue
        if isinstance(item.get("model"), str) and item["model"]:
            return item["model"]
        message = item.get("message")
        if isinstance(message, dict) and isinstance(message.get("model"), str) and message["model"]:
            return message["model"]
    return None


def served_models(cassette: Cassette) -> tuple[str, ...]:
    out: list[str] = []
    for ex in cassette.exchanges:
        if ex.model and ex.status < 400 and ex.model not in out:
            out.append(ex.model)
    return tuple(out)


def model_calls(cassette: Cassette) -> list[Recorded]:
    """The exchanges that are model calls (a POST), in order: what a re-execution serves."""
    return [ex for ex in cassette.exchanges if ex.method == "POST"]


def as_session(cassette: Cassette, name: str) -> script.Session:
    """The cassette as a session script the loopback endpoint serves: each model call's recorded
    answer, in order, with the request it answered kept for comparison. An answer that never
    arrived whole is served as the same failure of the wire (`endpoint.faults`), not as the
    proxy's own status, so the re-execution meets what the recording met."""
    exchanges = [
        script.Exchange(
            response=script.RawResponse(
                status=ex.status, body=ex.body,
                events=[script.SseEvent(data=e.data, event=e.event) for e in ex.events] if ex.events is not None else None,
            ) if isinstance(ex.failure, UnsetType) else None,
            fault=None if isinstance(ex.failure, UnsetType) else _wire_fault(ex),
            request=ex.request,
        )
        for ex in model_calls(cassette)
    ]
    if not exchanges:
        raise UserError(f"cassette for {name} holds no model call to serve")
    return script.Session(format="cbledger-session/1", name=name, exchanges=exchanges)


def _wire_fault(ex: Recorded) -> Fault:
    if ex.status == 504:
        return Fault(kind="hang")  # still unanswered when the run ended
    if str(ex.failure).startswith("answer cut short"):
        return Fault(kind="truncated-stream")
    return Fault(kind="reset")


def from_session(session: script.Session, model_id: str) -> Cassette:
    """A session script written down as a cassette of the same format: each `turn` rendered the
    way the endpoint answers a non-streaming request, each recorded `response` as it is."""
    from cbledger.runner.endpoint import server

    out: list[Recorded] = []
    n = script.length(session)
    if n is None:
        raise UserError(f"session {session.name!r} repeats forever: a cassette holds a finite run")
    for k in range(n):
        ex = script.exchange_at(session, k)
        assert ex is not None
        if ex.fault is not None:
            # how often the harness retried it is known only to a recording
            raise UserError(f"session {session.name!r}: exchange {k + 1} injects a fault, which only a recorded cassette can replay")
        if ex.response is not None:
            r = ex.response
            events = [SseEvent(data=e.data, event=e.event) for e in r.events] if r.events is not None else None
            if events is None and r.chunks is not None:
                events = [SseEvent(data=c if isinstance(c, str) else json.dumps(c)) for c in r.chunks] + [SseEvent(data="[DONE]")]
            body = None if events is not None else r.body
            out.append(Recorded(method="POST", path="/chat/completions", request=ex.request, status=r.status,
                                body=body, events=events, model=named_model(body, events)))
        else:
            assert ex.turn is not None
            body = server.completion(session, k, ex.turn, session.model or model_id.split(":", 1)[-1])
            body["created"] = 0
            out.append(Recorded(method="POST", path="/chat/completions", request=ex.request, status=200, body=body,
                                model=body["model"]))
    return Cassette(format=FORMAT, route="openai-compat", model_id=model_id, exchanges=out)
