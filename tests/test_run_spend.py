"""The spend of a run copperhead never summed: a killed, crashed or capped run has no `run-end`,
but its cassette kept every answer the provider billed, usage included."""

from __future__ import annotations

import json

from cbledger.grading.evidence.transcript import parse_transcript
from cbledger.ledger.events import ModelPrice
from cbledger.runner import budget, spend
from cbledger.runner.cassette import FORMAT, Cassette, Recorded, SseEvent
from cbledger.runner.execute import spend_known, stats_from


def _call(usage: dict | None, status: int = 200, **extra) -> Recorded:
    body = {"choices": [], **({"usage": usage} if usage is not None else {})}
    return Recorded(method="POST", path="/chat/completions", status=status, body=body, **extra)


def _cassette(*exchanges: Recorded, route="openai-compat") -> Cassette:
    return Cassette(format=FORMAT, route=route, model_id="compat:x", exchanges=list(exchanges))


START = {"type": "run-start", "data": {"config": {"maxTurns": 40, "maxRepairCycles": 5}}}
ASSISTANT = {"type": "assistant", "data": {"text": "x", "toolCalls": []}}


def _transcript(*events: dict):
    return parse_transcript("".join(json.dumps(e) + "\n" for e in events).encode(), "t")


def test_every_answered_request_counts_and_no_failed_one_does():
    cassette = _cassette(
        _call({"prompt_tokens": 1000, "completion_tokens": 20}),
        _call(None, status=500),  # the provider failed: nothing billed
        _call({"prompt_tokens": 1100, "completion_tokens": 30}),
        Recorded(method="POST", path="/chat/completions", status=504, failure="no answer before the run ended"),
        Recorded(method="GET", path="/models", status=200, body={"usage": {"prompt_tokens": 9}}),  # no model call
    )
    assert spend.from_cassette(cassette) == spend.Usage(2100, 50, 2)
    assert spend.from_cassette(_cassette(_call(None, status=500))) is None
    assert spend.from_cassette(None) is None


def test_streams_and_anthropic_answers_are_read_too():
    openai_stream = Recorded(method="POST", path="/chat/completions", events=[
        SseEvent(data=json.dumps({"choices": [{"delta": {"content": "x"}}]})),
        SseEvent(data=json.dumps({"choices": [], "usage": {"prompt_tokens": 700, "completion_tokens": 11}})),
        SseEvent(data="[DONE]"),
    ])
    anthropic_stream = Recorded(method="POST", path="/messages", events=[
        SseEvent(event="message_start", data=json.dumps({"type": "message_start", "message": {"usage": {"input_tokens": 500, "output_tokens": 1}}})),
        SseEvent(event="message_delta", data=json.dumps({"type": "message_delta", "usage": {"output_tokens": 42}})),
    ])
    anthropic = Recorded(method="POST", path="/messages", body={"usage": {"input_tokens": 300, "output_tokens": 7}})
    assert spend.from_cassette(_cassette(openai_stream)) == spend.Usage(700, 11, 1)
    assert spend.from_cassette(_cassette(anthropic_stream, anthropic, route="anthropic")) == spend.Usage(800, 49, 2)


def test_an_anthropic_answers_cache_reads_and_writes_count_as_input_as_the_meter_counts_them():
    """copperhead marks every Anthropic request for prompt caching, so most of a run's input
    comes back as cache reads: a killed run's cost read off its cassette must count them as the
    meter counted them while it ran, or it is recorded at a fraction of what was billed."""
    cached = {"input_tokens": 50, "cache_read_input_tokens": 90_000, "cache_creation_input_tokens": 2_000}
    stream = Recorded(method="POST", path="/messages", events=[
        SseEvent(event="message_start", data=json.dumps({"type": "message_start", "message": {"usage": {**cached, "output_tokens": 1}}})),
        SseEvent(event="message_delta", data=json.dumps({"type": "message_delta", "usage": {"output_tokens": 400}})),
    ])
    body = {"type": "message", "usage": {**cached, "output_tokens": 400}}
    whole = Recorded(method="POST", path="/messages", body=body)
    meter = budget.Meter(ModelPrice(segment="api-frontier", pinning="strong", input="3", output="15"), None, None)
    for ex in (stream, whole):
        meter.answer(budget.usage(ex.body, ex.events))
    used = spend.from_cassette(_cassette(stream, whole, route="anthropic"))
    assert used == spend.Usage(184_100, 800, 2)
    assert (used.tokens_in, used.tokens_out) == (meter.tokens_in, meter.tokens_out)
    # the rule killed runs were recorded under before: what `replay --verify` still accepts of them
    assert spend.from_cassette(_cassette(stream, whole, route="anthropic"), cache=False) == spend.Usage(100, 800, 2)
    killed = _transcript(START, ASSISTANT)
    now, _ = stats_from(killed, "cap-exceeded", 40, _cassette(stream, whole, route="anthropic"), agent_ms=1)
    before, _ = stats_from(killed, "cap-exceeded", 40, _cassette(stream, whole, route="anthropic"), agent_ms=1, cache=False)
    assert now is not None and before is not None and (now.tokens_in, before.tokens_in) == (184_100, 100)


def test_a_killed_run_states_its_spend_its_repair_cap_and_its_time():
    transcript = _transcript(START, ASSISTANT, ASSISTANT)  # no run-end: killed at the cap
    cassette = _cassette(_call({"prompt_tokens": 1000, "completion_tokens": 20}), _call({"prompt_tokens": 1100, "completion_tokens": 30}))
    stats, note = stats_from(transcript, "cap-exceeded", 40, cassette, agent_ms=61_234)
    assert stats is not None
    assert (stats.exit_path, stats.turns_used, stats.tokens_in, stats.tokens_out) == ("cap-exceeded", 2, 2100, 50)
    assert (stats.max_repair_cycles, stats.duration_ms) == (5, 61_234)
    assert note is not None and "tokens from the cassette's 2 answered model call(s)" in note
    assert spend_known(transcript, cassette)
    # no cassette (a saved-login route): the spend stays unknown, not zero
    stats, _ = stats_from(transcript, "cap-exceeded", 40, None, agent_ms=61_234)
    assert stats is not None and (stats.tokens_in, stats.tokens_out) == (0, 0)
    assert not spend_known(transcript, None)
