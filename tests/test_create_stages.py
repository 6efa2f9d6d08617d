"""A `copperhead create` run as the grader and the endpoint see it: its stage transcripts merged
into one run (exit path where the pipeline stopped, figures summed), and each stage's
conversation answered from its own part of a session script."""

from __future__ import annotations

import json

import pytest

from cbledger.errors import UserError
from cbledger.grading.evidence.transcript import merge_stages, parse_transcript
from cbledger.runner.endpoint import script


def _stage(name: str, exit_path: str, turns: int, tokens: int, *, end: bool = True) -> bytes:
    lines = [{"type": "run-start", "data": {"command": "create", "stage": {"name": name}}},
             {"type": "assistant", "data": {"text": name}}]
    if end:
        lines.append({"type": "run-end", "data": {"exitPath": exit_path, "turnsUsed": turns, "maxTurns": 12,
                                                  "tokensIn": tokens, "tokensOut": 10, "durationMs": 100}})
    return "\n".join(json.dumps(x) for x in lines).encode()


def test_stages_merge_into_one_run_ending_where_the_pipeline_stopped():
    stages = [parse_transcript(_stage("outputs", "done", 1, 2500), "a"),
              parse_transcript(_stage("firmware", "refused", 2, 5000), "b"),
              parse_transcript(_stage("devplan", "done", 1, 100), "c")]
    merged = merge_stages(stages)
    end = merged.run_end
    assert end is not None and merged.path == "c"
    assert (end["exitPath"], end["turnsUsed"], end["maxTurns"], end["tokensIn"], end["stages"]) == ("refused", 4, 36, 7600, 3)
    assert len(merged.of_type("run-end")) == 1 and len(merged.of_type("run-start")) == 3
    done = merge_stages(stages[:1] + stages[2:])
    assert done.exit_path == "done"


def test_a_stage_without_run_end_leaves_the_run_without_one():
    merged = merge_stages([parse_transcript(_stage("outputs", "done", 1, 1), "a"),
                           parse_transcript(_stage("firmware", "", 0, 0, end=False), "b")])
    assert merged.run_end is None and len(merged.of_type("assistant")) == 2


def _body(first_user: str, assistants: int = 0) -> dict:
    return {"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": first_user},
                         *({"role": "assistant", "content": "x"} for _ in range(assistants))]}


def _session(tmp_path, stages: dict) -> script.Session:
    turn = {"turn": {"text": "fallback"}}
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"format": "cbledger-session/1", "name": "s", "exchanges": [turn], "stages": stages}))
    return script.load(path)


def test_each_stage_is_answered_from_its_own_exchanges(tmp_path):
    session = _session(tmp_path, {"outputs": [{"turn": {"text": "o1"}}, {"turn": {"text": "o2"}}],
                                  "diagnose:outputs": [{"turn": {"text": '{"verdict":"abort"}'}}]})

    def text(body: dict) -> str | None:
        chosen = script.stage_session(session, body)
        ex = script.exchange_at(chosen, script_turn(body))
        return ex.turn.text if ex is not None and ex.turn is not None else None

    def script_turn(body: dict) -> int:
        return sum(1 for m in body["messages"] if m["role"] == "assistant")

    assert text(_body("Stage 6 …\n\nRequest: create pipeline stage: outputs")) == "o1"
    assert text(_body("Stage 6 …\n\nRequest: create pipeline stage: outputs", 1)) == "o2"
    assert text(_body("Stage: outputs\nStage goal: …")) == '{"verdict":"abort"}'
    assert text(_body("Stage 7 …\n\nRequest: create pipeline stage: firmware")) == "fallback"
    assert text(_body("make R1 680")) == "fallback"


def test_an_empty_stage_is_refused_naming_it(tmp_path):
    with pytest.raises(UserError, match=r"\$\.stages\.outputs: a stage needs at least one exchange"):
        _session(tmp_path, {"outputs": []})
