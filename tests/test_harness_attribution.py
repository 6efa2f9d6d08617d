"""The attribution rule on preserved evidence: a provider's or the machine's failure at any turn
is the environment's, with its kind and turn; the model's own failures stay the model's."""

from __future__ import annotations

import json

import msgspec
import pytest

from cbledger.grading.evidence.transcript import parse_transcript
from cbledger.ledger.events import HarnessFailure, RunRecorded
from cbledger.runner.cassette import FORMAT, Cassette, Recorded
from cbledger.runner.harness_failure import detect, exit_code_from

START = {"type": "run-start", "data": {}}
ASSISTANT = {"type": "assistant", "data": {"text": "x", "toolCalls": []}}
TOOL = {"type": "tool", "data": {}}


def _transcript(*events: dict, failed: tuple[str, str] | None = None):
    lines = list(events)
    if failed is not None:
        lines.append({"type": "run-failed", "data": {"reason": failed[0], "exitPath": failed[1]}})
    return parse_transcript("".join(json.dumps(e) + "\n" for e in lines).encode(), ".copperhead/runs/x/transcript.jsonl")


def _two_turns(failed: tuple[str, str] | None = None):
    return _transcript(START, ASSISTANT, TOOL, ASSISTANT, TOOL, failed=failed)


def _cassette(*exchanges: Recorded) -> Cassette:
    return Cassette(format=FORMAT, route="openai-compat", model_id="compat:x", exchanges=list(exchanges))


OK = Recorded(method="POST", path="/chat/completions", status=200, body={"choices": []})


@pytest.mark.parametrize(("reason", "status"), [
    ("provider error: 500 upstream exploded", 500),
    ("provider error: 429 rate limited", 429),
    ("provider error: 503 overloaded", 503),
    ("provider error: 401 invalid key", 401),
])
def test_a_provider_status_after_the_models_answers_is_the_environments(reason, status):
    f = detect(_two_turns((reason, "provider-error")), "", 1, False)
    assert f == HarnessFailure(kind="provider-status", detail=reason, turn=3, status=status)


@pytest.mark.parametrize("reason", [
    "provider error: 400 context length exceeded",
    "provider error: 400 session script 'x' has 2 turn(s); the harness asked for turn 3",
])
def test_a_refused_request_stays_the_models(reason):
    assert detect(_two_turns((reason, "provider-error")), "", 1, False) is None


@pytest.mark.parametrize(("reason", "status"), [
    ("provider error: 503 Service unavailable: weekly limit reached, resets 9am", 503),
    ("provider error: 400 usage limit reached for this session", 400),
    ("You've hit your weekly limit. Resets Monday.", None),
])
def test_a_session_limit_is_the_accounts_not_the_models(reason, status):
    """copperhead ends on a provider's usage or session limit with exit `session-limit`, which
    was read as the model's failure (stalled) while the same status worded otherwise was the
    environment's; `replay --verify` accepts either for a run recorded before."""
    transcript = _two_turns((reason, "session-limit"))
    f = detect(transcript, "", 1, False)
    assert f is not None and f.kind == "provider-status" and f.turn == 3
    assert f.status == (status if status is not None else msgspec.UNSET)
    assert reason in f.detail
    assert detect(transcript, "", 1, False, session_limit=False) is None  # the earlier rule


def test_a_broken_wire_is_read_off_the_cassette():
    reason = ("provider error: Unterminated string in JSON at position 109", "provider-error")
    malformed = Recorded(method="POST", path="/chat/completions", status=200, body='{"id": "chatcmpl-')
    f = detect(_two_turns(reason), "", 1, False, _cassette(OK, OK, malformed))
    assert (f.kind, f.turn) == ("provider-transport", 3)
    # the provider answered well and copperhead still failed: nothing says the wire broke
    assert detect(_two_turns(reason), "", 1, False, _cassette(OK, OK, OK)) is None
    cut = Recorded(method="POST", path="/chat/completions", status=502, failure="answer cut short: IncompleteRead")
    f = detect(_two_turns(("provider error: Connection error.", "provider-error")), "", 1, False, _cassette(OK, OK, cut))
    assert f.kind == "provider-transport"
    # a reset: the recording proxy answers the harness 502 itself; the cassette says no answer came
    reset = Recorded(method="POST", path="/chat/completions", status=502, failure="no answer: Remote end closed connection without response")
    proxy = ("provider error: 502 the recording proxy could not reach the provider: Remote end closed connection", "provider-error")
    f = detect(_two_turns(proxy), "", 1, False, _cassette(OK, OK, reset))
    assert (f.kind, f.status) == ("provider-transport", msgspec.UNSET)
    # the same words with a provider that answered 502 itself: its status
    gateway = Recorded(method="POST", path="/chat/completions", status=502, body={"error": {"message": "bad gateway"}})
    assert detect(_two_turns(("provider error: 502 bad gateway", "provider-error")), "", 1, False, _cassette(OK, OK, gateway)).kind == "provider-status"


def test_a_hung_provider_killed_at_the_cap_is_the_environments_a_slow_model_is_not():
    hung = Recorded(method="POST", path="/chat/completions", status=504, failure="no answer before the run ended", elapsed_ms=55_000)
    f = detect(_two_turns(), "", None, True, _cassette(OK, OK, hung), agent_ms=60_000)
    assert (f.kind, f.turn) == ("provider-timeout", 3)
    assert "had not answered model call 3" in f.detail
    # one call caught in passing by the cap: the model's time ran out
    brief = msgspec.structs.replace(hung, elapsed_ms=4_000)
    assert detect(_two_turns(), "", None, True, _cassette(OK, OK, brief), agent_ms=60_000) is None
    # copperhead's own watchdog
    f = detect(_two_turns(("provider turns timed out 3× (>600000ms each)", "provider-error")), "", 1, False)
    assert f.kind == "provider-timeout"


@pytest.mark.parametrize("code", [137, -9, 143, -15])
def test_an_outside_signal_is_the_environments(code):
    f = detect(_two_turns(), "", code, False)
    assert (f.kind, f.turn) == ("harness-signal", 3)
    assert "which the runner did not send" in f.detail


def test_the_runners_own_kill_and_an_ordinary_exit_are_not_signals():
    assert detect(_two_turns(), "", None, True) is None  # killed at the cap: the model's run
    assert detect(_two_turns(("model stopped", "stalled")), "", 1, False) is None


#: what Node prints as an uncaught exception kills the process (a tool handler of the harness's own)
CRASH = (
    "/opt/copperhead/dist/agent/tools.js:412\n        x.crash();\n          ^\n\n"
    "TypeError: Cannot read properties of undefined (reading 'crash')\n"
    "    at Timeout._onTimeout (/opt/copperhead/dist/agent/tools.js:412:11)\n"
    "    at listOnTimeout (node:internal/timers:573:17)\n\nNode.js v22.17.0\n"
)


def test_the_harness_dying_of_its_own_exception_is_not_the_models_stall():
    """A copperhead build whose tool handler threw: both runs were recorded the model's `stalled`,
    in its row and its failure categories."""
    f = detect(_two_turns(), CRASH, 1, False)
    assert f is not None and (f.kind, f.turn) == ("harness-crash", 3), f
    assert f.detail == ("the harness died of an uncaught exception after 2 model turn(s): "
                        "TypeError: Cannot read properties of undefined (reading 'crash')")
    assert detect(_two_turns(), CRASH, 1, False, crash=False) is None  # the rule runs were recorded under before
    ended = _transcript(START, ASSISTANT, {"type": "run-end", "data": {"exitPath": "done"}})
    assert detect(ended, CRASH, 1, False) is None  # its run ended: whatever it printed after, not a crash of the run
    assert detect(_two_turns(), CRASH, None, True) is None  # killed at the cap by the runner
    # a model's words quoted on stderr are no stack: no `at` frame under the error, no runtime line
    assert detect(_two_turns(("model stopped", "stalled")), "Error: the model gave up\n", 1, False) is None
    assert detect(_two_turns(), "TypeError: x\n    at y (z.js:1:1)\n", 1, False) is None


@pytest.mark.parametrize(("report", "error"), [
    # as Node 20 and 22 print them, the process dying of each
    ("file:///opt/ch/dist/cli.js:9\n  throw new Error(\"boom\");\n  ^\n\nError: boom\n    at run (file:///opt/ch/dist/cli.js:9:9)\n\nNode.js v20.19.0\n",
     "Error: boom"),
    ("node:internal/fs/utils:351\n    throw err;\n    ^\n\nError: ENOENT: no such file or directory, open 'x'\n"
     "    at Object.openSync (node:fs:596:3)\n    at read (/opt/ch/dist/io.js:4:6) {\n  errno: -2,\n  code: 'ENOENT'\n}\n\nNode.js v22.17.0\n",
     "Error: ENOENT: no such file or directory, open 'x'"),
    ("node:events:497\n      throw er;\n      ^\n\nError [ERR_STREAM_PREMATURE_CLOSE]: Premature close\n    at onclose (node:internal/streams/end-of-stream:153:30)\n\nNode.js v22.17.0\n",
     "Error [ERR_STREAM_PREMATURE_CLOSE]: Premature close"),
    ("node:internal/process/promises:289\n            triggerUncaughtException(err, true /* fromPromise */);\n            ^\n\n"
     "[UnhandledPromiseRejection: This error originated either by throwing inside of an async function without a catch "
     "block, or by rejecting a promise which was not handled with .catch(). The promise rejected with the reason \"x\".] {\n"
     "  code: 'ERR_UNHANDLED_REJECTION'\n}\n\nNode.js v20.19.0\n", "[UnhandledPromiseRejection: This error originated"),
    ("/opt/ch/dist/a.js:1\n\nError: the first line\nand a second\n    at f (/opt/ch/dist/a.js:1:1)\n\nNode.js v22.17.0\n", "Error: the first line"),
    # copperhead's own execa, a command that failed: the message holds the child's output
    ("file:///opt/ch/node_modules/execa/lib/return/final-error.js:6\n\treturn new ErrorClass(message, options);\n\t       ^\n\n"
     "ExecaError: Command failed with exit code 3: kicad-cli sch erc\n\nerr\n\nout\n"
     "    at getFinalError (file:///opt/ch/node_modules/execa/lib/return/final-error.js:6:9) {\n  exitCode: 3\n}\n\nNode.js v20.20.2\n",
     "ExecaError: Command failed with exit code 3: kicad-cli sch erc"),
    ("[eval]:1\nsetTimeout(()=>{throw new Error(\"one\\n\\ntwo\")})\n                ^\n\nError: one\n\ntwo\n"
     "    at Timeout._onTimeout ([eval]:1:23)\n\nNode.js v20.20.2\n", "Error: one"),
    ("/opt/ch/dist/k.js:3\n    throw new KiFailure('x');\n    ^\n\nKiFailure: x\n    at k (/opt/ch/dist/k.js:3:11)\n\nNode.js v22.17.0\n", "KiFailure: x"),
    ("/opt/ch/dist/s.js:1\nthrow \"boom\"\n^\nboom\n(Use `node --trace-uncaught ...` to show where the exception was thrown)\n\nNode.js v20.20.2\n", "boom"),
])
def test_every_form_of_nodes_crash_report_is_read(report, error):
    f = detect(_two_turns(), report, 1, False)
    assert f is not None and f.kind == "harness-crash" and f.detail.split(": ", 1)[1].startswith(error), f


def test_a_crash_report_quoted_before_the_harness_went_on_is_not_its_crash():
    """copperhead logs the model's messages to stderr: a report quoted there, with more after it,
    is the model's words; only stderr ending as Node's report ends is the process's death."""
    quoted = CRASH + "[assistant] that was the stack trace you asked about\n"
    assert detect(_two_turns(), quoted, 1, False) is None


def test_a_harness_that_exits_at_once_is_not_called_preflight():
    nothing = parse_transcript(b"", None)
    f = detect(nothing, "", 1, False)
    assert f.kind == "harness-exit" and "saying nothing" in f.detail
    assert detect(nothing, "working tree is dirty; copperhead refuses\n", 1, False).kind == "preflight"


def test_a_sync_that_found_nothing_to_resolve_says_what_its_report_said():
    """copperhead sync prints `{resolvable, violations}` and calls no model when there is nothing
    to resolve (exit 0) or a violation only the harness flags (exit 2): the run was recorded as a
    harness that exited "saying nothing", which its stdout contradicts."""
    nothing = parse_transcript(b"", None)
    clean = detect(nothing, "", 0, False, stdout='{"resolvable": [], "violations": []}\n')
    assert clean.kind == "harness-exit" and clean.detail == (
        "copperhead sync exited 0 without a model call: its report lists 0 resolvable item(s) and 0 requirement "
        "violation(s), so there was nothing for a model to resolve")
    flagged = detect(nothing, "", 2, False, stdout='{"resolvable": [{"kind": "drift"}], "violations": [{"pin": 5}]}\n')
    assert "exited 2" in flagged.detail and "1 resolvable item(s) and 1 requirement violation(s)" in flagged.detail
    for other in ("", "copperhead 0.9.0\n", '{"ok": true}\n', "{not json\n"):
        assert "saying nothing" in detect(nothing, "", 0, False, stdout=other).detail


def test_the_exit_status_is_read_back_from_the_runners_note():
    assert exit_code_from("copperhead exited 137; session script: turn 3: x") == 137
    assert exit_code_from("copperhead exited -9") == -9
    assert exit_code_from("killed at the 60s wall-clock cap") is None
    assert exit_code_from(None) is None
    assert exit_code_from("session script: turn 2: tool result 1 does not match (it begins 'copperhead exited 137')") is None


def test_the_new_fields_leave_an_old_body_byte_identical():
    old = b'{"kind":"no-model-turn","detail":"the model never answered a turn"}'
    body = msgspec.json.decode(old, type=HarnessFailure)
    assert msgspec.json.encode(body) == old
    new = msgspec.json.encode(HarnessFailure(kind="provider-status", detail="provider error: 500 x", turn=3, status=500))
    assert json.loads(new) == {"kind": "provider-status", "detail": "provider error: 500 x", "turn": 3, "status": 500}
    assert "harness_failure" in RunRecorded.__struct_fields__


def test_a_recorded_wire_failure_replays_as_the_same_failure():
    from cbledger.errors import UserError
    from cbledger.runner.cassette import as_session, from_session
    from cbledger.runner.endpoint.faults import Fault

    cassette = _cassette(
        OK,
        Recorded(method="POST", path="/chat/completions", status=502, failure="no answer: Remote end closed connection"),
        Recorded(method="POST", path="/chat/completions", status=502, failure="answer cut short: IncompleteRead"),
        Recorded(method="POST", path="/chat/completions", status=504, failure="no answer before the run ended"),
    )
    served = as_session(cassette, "x").exchanges
    assert served[0].response is not None and served[0].fault is None
    assert [e.fault for e in served[1:]] == [Fault(kind="reset"), Fault(kind="truncated-stream"), Fault(kind="hang")]
    assert all(e.response is None for e in served[1:])
    with pytest.raises(UserError, match="exchange 2 injects a fault"):
        from_session(as_session(cassette, "x"), "compat:x")


def test_a_run_whose_end_state_was_not_kept_is_not_read_as_one_that_never_started():
    """The transcript lay in the end state the runner could not keep, so it was never read: the
    rule for "no transcript, copperhead said why" named such a run `preflight`, with copperhead's
    version banner for a reason, though the harness had run to its end."""
    from cbledger.grading.evidence.transcript import Transcript

    banner = "copperhead v0.9.0 · kicad-cli 9.0.8 · node v20.20.2\n"
    assert detect(Transcript(path=None), banner, 0, False).kind == "preflight"  # the rule as it stands
    assert detect(Transcript(path=None), banner, 0, False, unpreserved="a symbolic link at .git/objects") is None
    # a signal from outside is still said, whatever was kept
    assert detect(Transcript(path=None), banner, -9, False, unpreserved="a symbolic link at .git/objects").kind == "harness-signal"
    # and so is the runner's own verification killed from outside: no fault of the model's
    why = "kicad-cli ERC on led.kicad_sch was ended by SIGKILL, which the runner did not send"
    found = detect(Transcript(path=None), banner, 0, False, unpreserved=why)
    assert found.kind == "harness-signal" and "the runner's own kicad-cli ERC was ended by SIGKILL" in found.detail


def test_a_reason_the_agent_can_word_never_reads_as_the_runners_tool_killed():
    """The kill sentence was searched for anywhere in the reason, and a reason may quote a path the
    agent chose: a link named with that sentence took the run out of the model's rows."""
    from cbledger.grading.evidence.transcript import Transcript
    from cbledger.runner.harness_failure import UNPRESERVED, unpreserved_reason

    kill = "kicad-cli ERC on led.kicad_sch was ended by SIGKILL, which the runner did not send"
    planted = f"the agent left a symbolic link at .git/{kill}"
    assert detect(Transcript(path=None), "", 0, False, unpreserved=planted) is None
    # read back from a recorded note, the runner's own reason is the part before the other notes
    assert unpreserved_reason(f"{UNPRESERVED}{kill}; exit 0; 3 turns") == kill
    assert unpreserved_reason(f"{UNPRESERVED}{planted}; exit 0") == f"{planted}; exit 0"
    assert unpreserved_reason(f"{UNPRESERVED}{kill}x") == f"{kill}x"  # not the whole reason
    assert unpreserved_reason("exit 0") is None and unpreserved_reason(None) is None


def test_a_rerun_names_an_attribution_that_differs_and_takes_a_later_rules_mark_as_the_same_run():
    """A rerun compared the attribution with the runner exit and said only `runner exit 'X',
    recorded 'X'`; and a run recorded before the crash rule came back diverged."""
    from cbledger.reproduce.rerun import stats_differences
    from tests.factories import run_recorded

    was = run_recorded(1).body
    crash = HarnessFailure(kind="harness-crash", turn=3, detail="the harness died of an uncaught exception after 2 model turn(s): Error: x")
    limit = HarnessFailure(kind="provider-status", turn=2, detail="session limit: weekly limit reached")
    for later in (crash, limit):
        assert stats_differences(was, msgspec.structs.replace(was, harness_failure=later)) == []
    other = HarnessFailure(kind="no-model-turn", detail="the model never answered a turn")
    (said,) = stats_differences(msgspec.structs.replace(was, harness_failure=crash), msgspec.structs.replace(was, harness_failure=other))
    assert said.startswith("harnessFailure {'kind': 'no-model-turn'") and "recorded {'kind': 'harness-crash'" in said, said
    # a crash before the model answered was a no-turn kind before the rule; a crash that
    # reproduces is the same by its turn, whatever temporary path its words name
    early = msgspec.structs.replace(crash, turn=1)
    assert stats_differences(msgspec.structs.replace(was, harness_failure=other), msgspec.structs.replace(was, harness_failure=early)) == []
    renamed = msgspec.structs.replace(crash, detail=crash.detail + " (/tmp/cbledger-sandboxes-x/run)")
    assert stats_differences(msgspec.structs.replace(was, harness_failure=crash), msgspec.structs.replace(was, harness_failure=renamed)) == []
    assert stats_differences(msgspec.structs.replace(was, harness_failure=crash), msgspec.structs.replace(was, harness_failure=early)) != []
    # a no-turn kind is no crash after the model answered
    assert stats_differences(msgspec.structs.replace(was, harness_failure=other), msgspec.structs.replace(was, harness_failure=crash)) != []

