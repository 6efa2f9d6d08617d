"""The bad-input corpus: every kind of input a command must refuse, as data.

Each case is a command line and the input it is given: a file of the wrong kind (FIFO, directory,
symlink, nothing), a document that is not what the command reads (an event, a session script, a
manual import, a ledger, a task or fixture file, each broken one way), or an option value out of
its range. `tests/test_hostile_input.py` runs every case in-process and holds it to the house
rule: one line on stderr, exit 2, nothing written, no traceback, no hang.

Placeholders in `argv`: `{bad}` the bad input file, `{ledger}` the project's ledger, `{root}` the
project root, `{ok}` a regular file (when the command needs a second one), `{key}` a trusted
public key.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from tests.factories import draft_dict, run_recorded, run_retracted


@dataclass(frozen=True)
class Case:
    id: str
    argv: tuple[str, ...]
    #: the bytes of {bad}, or a kind of file: "fifo", "directory", "symlink", "dangling", "missing"
    bad: bytes | str | None = None
    stdin: bytes | None = None
    #: a project file to replace with `bad` for this case (relative to the root), restored after
    replaces: str | None = None
    #: a needle the one error line must hold
    says: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


KINDS = ("fifo", "directory", "symlink", "dangling", "missing")

#: every command that reads a file the user names: (id, argv)
FILE_COMMANDS: list[tuple[str, tuple[str, ...]]] = [
    ("append", ("append", "{bad}", "--ledger", "{ledger}")),
    ("import-jsonl", ("import", "--jsonl", "{bad}", "--ledger", "{ledger}")),
    ("import-manual", ("import", "--manual", "{bad}", "--root", "{root}")),
    ("import-records", ("import", "{bad}", "--root", "{root}")),
    ("pricing-publish", ("pricing", "publish", "{bad}", "--root", "{root}")),
    ("endpoint-check", ("endpoint", "check", "{bad}")),
    ("endpoint-serve", ("endpoint", "serve", "{bad}")),
    ("judge-session", ("judge", "--select", "all", "--session", "{bad}", "--root", "{root}")),
    ("kicad-nets", ("kicad", "nets", "{bad}")),
    ("kicad-symbols", ("kicad", "symbols", "{bad}")),
    ("replay-checkpoint", ("replay", "--verify", "--chain-only", "--checkpoint", "{bad}", "--key", "{key}", "--root", "{root}")),
    ("replay-key", ("replay", "--verify", "--chain-only", "--key", "{bad}", "--root", "{root}")),
    ("checkpoint-key", ("checkpoint", "--key", "{bad}", "--root", "{root}")),
    ("verify-proof", ("verify-proof", "{bad}", "--checkpoint", "{ok}", "--key", "{key}")),
]

#: a kind a command accepts as valid input (a directory of records or of session scripts) is not
#: a case for it: an empty directory is still refused, for want of anything in it
ACCEPTS = {("import-records", "directory"), ("endpoint-check", "directory")}


def file_kind_cases() -> Iterator[Case]:
    for name, argv in FILE_COMMANDS:
        for kind in KINDS:
            yield Case(f"file-{name}-{kind}", argv, bad=kind)


# --------------------------------------------------------------------------- append


def _leaves(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], Any]]:
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _leaves(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _leaves(v, (*path, i))
    else:
        yield path, value


def _mistyped(value: Any) -> Any:
    if isinstance(value, bool):
        return "yes"
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, str):
        return 12345
    return None


def _set(doc: Any, path: tuple[Any, ...], value: Any) -> Any:
    doc = json.loads(json.dumps(doc))
    target = doc
    for k in path[:-1]:
        target = target[k]
    target[path[-1]] = value
    return doc


def _edited(edit: Callable[[dict[str, Any]], None], event: Any = None) -> bytes:
    doc = draft_dict(event if event is not None else run_recorded(7))
    edit(doc)
    return json.dumps(doc).encode()


def append_cases() -> Iterator[Case]:
    argv = ("append", "-", "--ledger", "{ledger}")
    base = draft_dict(run_recorded(7))
    for path, value in _leaves(base):
        wrong = _mistyped(value)
        if wrong is None:
            continue
        where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path)
        yield Case(f"append-mistyped{where}", argv, stdin=json.dumps(_set(base, path, wrong)).encode())
    retraction = draft_dict(run_retracted(1))
    documents: dict[str, bytes] = {
        "empty": b"",
        "whitespace": b" \n\t\n",
        "empty-array": b"[]",
        "null": b"null",
        "number": b"42",
        "string": b'"run.recorded"',
        "truncated": json.dumps(retraction).encode()[:-5],
        "trailing-garbage": json.dumps(retraction).encode() + b" x",
        "bom": b"\xef\xbb\xbf" + json.dumps(retraction).encode(),
        "invalid-utf8": json.dumps(retraction).encode().replace(b"runId", b"run\xffId"),
        "nan": _edited(lambda d: d["body"]["stats"].update(tokensIn=float("nan"))),
        "infinity": _edited(lambda d: d["body"]["stats"].update(tokensIn=float("inf"))),
        "deep": b"[" * 5000 + b"]" * 5000,
        "duplicate-key": b'{"id": "a", "id": "b"}',
        "unknown-type": _edited(lambda d: d.update(type="run.deleted")),
        "no-type": _edited(lambda d: d.pop("type")),
        "unknown-field": _edited(lambda d: d.update(extra=1)),
        "unknown-body-field": _edited(lambda d: d["body"].update(extra=1)),
        "missing-body": _edited(lambda d: d.pop("body")),
        "seq-0": _edited(lambda d: d.update(seq=0)),
        "seq-negative": _edited(lambda d: d.update(seq=-3)),
        "version-0": _edited(lambda d: d.update(version=0)),
        "version-1-stated": _edited(lambda d: d.update(version=1)),
        "version-future": _edited(lambda d: d.update(version=99)),
        "id-all-digits": _edited(lambda d: d.update(id="12345")),
        "id-newline": _edited(lambda d: d.update(id="run.recorded:x\n")),
        "id-too-long": _edited(lambda d: d.update(id="a" * 201)),
        "id-ansi": _edited(lambda d: d.update(id="\x1b[31mred")),
        "at-no-timezone": _edited(lambda d: d.update(at="2026-03-01T12:00:00")),
        "at-not-a-date": _edited(lambda d: d.update(at="yesterday")),
        "at-far-future": _edited(lambda d: d.update(at="2999-01-01T00:00:00Z")),
        "at-overflow": _edited(lambda d: d.update(at="9999-12-31T23:59:59-14:00")),
        "actor-kind": _edited(lambda d: d["actor"].update(kind="robot")),
        "actor-name-empty": _edited(lambda d: d["actor"].update(name="")),
        "actor-name-huge": _edited(lambda d: d["actor"].update(name="x" * 70_000)),
        "event-huge": _edited(lambda d: d["actor"].update(name="x" * 5_000_000)),
        "tokens-negative": _edited(lambda d: d["body"]["stats"].update(tokensIn=-1)),
        "tokens-absurd": _edited(lambda d: d["body"]["stats"].update(tokensIn=10**30)),
        "run-id-slash": _edited(lambda d: d["body"].update(runId="../../etc")),
        "model-id-dotdot": _edited(lambda d: d["body"]["model"].update(id="a..b")),
        "retract-unknown-run": json.dumps({**retraction, "body": {**retraction["body"], "runId": "run-nobody"}}).encode(),
        "second-line-bad": json.dumps(retraction).encode() + b"\n{not json}\n",
        "array-item-bad": b"[" + json.dumps(retraction).encode() + b", 7]",
        "ledger-created-again": _edited(lambda d: None, event=None).replace(b'"run.recorded"', b'"ledger.created"'),
    }
    for name, data in documents.items():
        yield Case(f"append-{name}", argv, stdin=data)


# --------------------------------------------------------------------------- session scripts


def _session(**overrides: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "format": "cbledger-session/1", "name": "s", "description": "d",
        "exchanges": [{"turn": {"text": "done", "toolCalls": [{"name": "finish", "args": {"outcome": "done"}}],
                                "usage": {"in": 1, "out": 1}}}],
    }
    return _overridden(doc, overrides)


def _overridden(doc: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """`doc` with each override set, or dropped where it is None."""
    out = dict(doc)
    for k, v in overrides.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = v
    return out


def session_cases() -> Iterator[Case]:
    argv = ("endpoint", "check", "{bad}")
    good = _session()
    documents: dict[str, bytes] = {
        "empty": b"",
        "not-json": b"exchanges: []",
        "array": b"[]",
        "null": b"null",
        "deep": b"[" * 5000 + b"]" * 5000,
        "duplicate-key": json.dumps(good)[:-1].encode() + b', "name": "t"}',
        "invalid-utf8": json.dumps(good).encode().replace(b'"s"', b'"\xff"'),
        "format-wrong": json.dumps(_session(format="cbledger-session/9")).encode(),
        "format-missing": json.dumps(_session(format=None)).encode(),
        "name-missing": json.dumps(_session(name=None)).encode(),
        "exchanges-missing": json.dumps(_session(exchanges=None)).encode(),
        "exchanges-empty": json.dumps(_session(exchanges=[])).encode(),
        "exchanges-object": json.dumps(_session(exchanges={})).encode(),
        "exchange-not-object": json.dumps(_session(exchanges=[7])).encode(),
        "exchange-unknown-field": json.dumps(_session(exchanges=[{"turn": {"text": "x"}, "extra": 1}])).encode(),
        "turn-text-number": json.dumps(_session(exchanges=[{"turn": {"text": 5}}])).encode(),
        "usage-negative": json.dumps(_session(exchanges=[{"turn": {"text": "x", "usage": {"in": -1, "out": 1}}}])).encode(),
        "tool-calls-string": json.dumps(_session(exchanges=[{"turn": {"text": "x", "toolCalls": "finish"}}])).encode(),
        "unknown-top-field": json.dumps(_session(extra=1)).encode(),
        "model-empty": json.dumps(_session(model="")).encode(),
        "passes-not-list": json.dumps(_session(passes={})).encode(),
        "task-number": json.dumps(_session(task=3)).encode(),
    }
    for name, data in documents.items():
        yield Case(f"session-{name}", argv, bad=data)


# --------------------------------------------------------------------------- manual imports


def manual_cases() -> Iterator[Case]:
    """Broken `import --manual` files; the files they name sit beside them (tests write them)."""
    argv = ("import", "--manual", "{bad}", "--root", "{root}")
    good: dict[str, Any] = {
        "surface_id": "manual-reviewer-import", "benchmark": "copperbench suite 1.0.0", "case_slug": "do-rename-net",
        "variant": "baseline", "fixture_path": "fixtures/antmicro-microphone-board", "prompt_path": "prompt.md",
        "transcript_path": "session.jsonl", "run_timestamp": "2026-09-10T14:30:00+02:00",
    }

    def doc(**overrides: Any) -> bytes:
        return json.dumps(_overridden(good, overrides)).encode()

    documents: dict[str, bytes] = {
        "empty": b"",
        "not-json": b"surface_id = x",
        "array": b"[]",
        "deep": b"[" * 5000 + b"]" * 5000,
        "duplicate-key": doc()[:-1] + b', "case_slug": "other"}',
        "invalid-utf8": doc().replace(b"baseline", b"base\xffline"),
        "prompt-absolute": doc(prompt_path="/etc/passwd"),
        "prompt-dotdot": doc(prompt_path="../../etc/passwd"),
        "prompt-missing-file": doc(prompt_path="nope.md"),
        "transcript-absolute": doc(transcript_path="/etc/hostname"),
        "transcript-dotdot": doc(transcript_path="../x.jsonl"),
        "transcript-nul": doc(transcript_path="a\u0000b"),
        "surface-missing": doc(surface_id=None),
        "case-slug-missing": doc(case_slug=None),
        "timestamp-bad": doc(run_timestamp="last week"),
        "timestamp-number": doc(run_timestamp=5),
        "case-slug-number": doc(case_slug=7),
        "prompt-path-list": doc(prompt_path=["prompt.md"]),
        "prompt-is-directory": doc(prompt_path="."),
    }
    for name, data in documents.items():
        yield Case(f"manual-{name}", argv, bad=data)


# --------------------------------------------------------------------------- import --jsonl


def jsonl_cases(valid_ledger: bytes) -> Iterator[Case]:
    argv = ("import", "--jsonl", "{bad}", "--ledger", "{ledger}")
    lines = valid_ledger.splitlines(keepends=True)
    documents: dict[str, bytes] = {
        "empty": b"",
        "not-json": b"hello\n",
        "torn-tail": valid_ledger[:-10],
        "line-dropped": b"".join(lines[:1] + lines[2:]),
        "line-edited": b"".join(lines[:1] + [lines[1].replace(b'"repeat":', b'"repeaT":', 1)] + lines[2:]),
        "invalid-utf8": b"".join(lines[:1] + [lines[1][:100] + b"\xff" + lines[1][101:]] + lines[2:]),
        "reordered": b"".join([lines[1], lines[0], *lines[2:]]),
        "duplicated-line": b"".join([*lines, lines[-1]]),
        "no-genesis": b"".join(lines[1:]),
        "deep": b"[" * 5000 + b"]" * 5000 + b"\n",
    }
    for name, data in documents.items():
        yield Case(f"jsonl-{name}", argv, bad=data)


# --------------------------------------------------------------------------- task and fixture files


TASK = "tasks/led-resistor-swap/task.json"
ASSERTIONS = "tasks/led-resistor-swap/assertions.json"
FIXTURE = "fixtures/synthetic-led-resistor/fixture.json"


def definition_cases(task: dict[str, Any], fixture: dict[str, Any]) -> Iterator[Case]:
    argv = ("run", "led-resistor-swap", "--agent", "gold", "--dry-run", "--root", "{root}")

    def with_(doc: dict[str, Any], **overrides: Any) -> bytes:
        return json.dumps(_overridden(doc, overrides)).encode()

    task_docs: dict[str, bytes | str] = {
        "empty": b"",
        "not-json": b"{",
        "array": b"[]",
        "deep": b"[" * 5000 + b"]" * 5000,
        "duplicate-key": json.dumps(task)[:-1].encode() + b', "tier": "hard"}',
        "invalid-utf8": json.dumps(task).encode().replace(b"led-resistor-swap", b"led-\xffresistor-swap", 1),
        "tier-unknown": with_(task, tier="legendary"),
        "id-missing": with_(task, id=None),
        "fixture-missing": with_(task, fixture=None),
        "fixture-path-dotdot": with_(task, fixture={**task["fixture"], "path": "fixtures/../../etc"}),
        "unknown-field": with_(task, extra=1),
        "directory": "directory",
        "fifo": "fifo",
        "symlink": "symlink",
    }
    for name, data in task_docs.items():
        yield Case(f"task-{name}", argv, bad=data, replaces=TASK)
    for name, data in {"not-json": b"[", "deep": b"[" * 5000 + b"]" * 5000, "fifo": "fifo", "directory": "directory",
                       "duplicate-key": b'{"a": 1, "a": 2}', "empty": b""}.items():
        yield Case(f"assertions-{name}", argv, bad=data, replaces=ASSERTIONS)
    fixture_docs: dict[str, bytes | str] = {
        "empty": b"",
        "not-json": b"{",
        "deep": b"[" * 5000 + b"]" * 5000,
        "duplicate-key": json.dumps(fixture)[:-1].encode() + b', "origin": "real"}',
        "origin-unknown": with_(fixture, origin="found-on-a-bus"),
        "unknown-field": with_(fixture, extra=1),
        "id-missing": with_(fixture, id=None),
        "fifo": "fifo",
        "directory": "directory",
    }
    grade = ("grade", "led-resistor-swap", "{root}", "--root", "{root}")  # reads the fixture before the sandbox
    for name, data in fixture_docs.items():
        yield Case(f"fixture-{name}", grade, bad=data, replaces=FIXTURE)


# --------------------------------------------------------------------------- options


OPTION_CASES: list[tuple[str, tuple[str, ...]]] = [
    ("log-since-text", ("log", "--since", "abc", "--ledger", "{ledger}")),
    ("log-since-negative", ("log", "--since", "-1", "--ledger", "{ledger}")),
    ("log-type-unknown", ("log", "--type", "run.deleted", "--ledger", "{ledger}")),
    ("log-verdict-unknown", ("log", "--verdict", "maybe", "--ledger", "{ledger}")),
    # a verdict is a grade's: with only runs asked for it listed nothing, exit 0
    ("log-verdict-of-runs", ("log", "--type", "run.recorded", "--verdict", "pass", "--ledger", "{ledger}")),
    # written with exit 0 once, left for validate (or nothing) to find
    ("fixture-freeze-complexity", ("fixture", "freeze", "--from", "{root}", "--id", "x-board", "--complexity", "trivial",
                                   "--root", "{root}")),
    ("fixture-freeze-authored-version", ("fixture", "freeze", "--from", "{root}", "--id", "x-board",
                                         "--authored-version", "banana", "--root", "{root}")),
    ("task-new-brief-outside", ("task", "new", "x-brief", "--fixture", "synthetic-led-resistor", "--tier", "simple",
                                "--outcome", "edit", "--mode", "create", "--brief", "../../etc/passwd", "--root", "{root}")),
    ("log-unknown-option", ("log", "--limit", "5", "--ledger", "{ledger}")),
    ("show-no-such-seq", ("show", "99999", "--ledger", "{ledger}")),
    ("show-no-such-id", ("show", "run.recorded:nobody", "--ledger", "{ledger}")),
    ("show-missing-argument", ("show", "--ledger", "{ledger}")),
    ("replay-jobs-zero", ("replay", "--verify", "--jobs", "0", "--root", "{root}")),
    ("replay-since-text", ("replay", "--verify", "--since", "x", "--root", "{root}")),
    ("replay-no-such-run", ("replay", "--verify", "--run", "run-nobody", "--root", "{root}")),
    ("task-variant-seed-negative", ("task", "variant", "led-resistor-swap", "--seed", "-1", "--root", "{root}")),
    ("task-variant-seed-huge", ("task", "variant", "led-resistor-swap", "--seed", str(10**30), "--root", "{root}")),
    ("task-variant-no-such-task", ("task", "variant", "no-such-task", "--root", "{root}")),
    ("run-no-such-task", ("run", "no-such-task", "--agent", "gold", "--dry-run", "--root", "{root}")),
    ("run-no-such-agent", ("run", "led-resistor-swap", "--agent", "wizard", "--dry-run", "--root", "{root}")),
    ("run-jobs-zero", ("run", "led-resistor-swap", "--agent", "gold", "--jobs", "0", "--dry-run", "--root", "{root}")),
    ("run-scripted-agent-with-session", ("run", "led-resistor-swap", "--agent", "noop", "--session", "solve", "--dry-run", "--root", "{root}")),
    ("run-dry-unpriced-model", ("run", "led-resistor-swap", "--agent", "copperhead", "--model", "openai:gpt-unpriced-x", "--dry-run", "--root", "{root}")),
    ("run-max-turns-zero", ("run", "led-resistor-swap", "--agent", "gold", "--max-turns", "0", "--dry-run", "--root", "{root}")),
    ("grade-no-such-task", ("grade", "no-such-task", "{root}", "--root", "{root}")),
    ("judge-empty-selection", ("judge", "--select", "", "--model", "compat:x", "--root", "{root}")),
    ("unknown-command", ("frobnicate",)),
    ("kicad-nets-missing-argument", ("kicad", "nets")),
    ("results-is-a-file", ("--results", "{ok}", "log")),
    ("root-missing", ("log", "--root", "{root}/no/such/dir")),
    ("suite-bump-no-reason", ("suite", "bump", "--root", "{root}")),
    ("suite-bump-level-unknown", ("suite", "bump", "--reason", "r", "--level", "huge", "--root", "{root}")),
    ("suite-bump-version-text", ("suite", "bump", "--reason", "r", "--version", "abc", "--skip-trial", "--root", "{root}")),
    ("suite-bump-version-prefixed", ("suite", "bump", "--reason", "r", "--version", "v2.0.0", "--skip-trial", "--root", "{root}")),
    ("suite-bump-version-prerelease", ("suite", "bump", "--reason", "r", "--version", "2.0.0-rc1", "--skip-trial", "--root", "{root}")),
    ("suite-bump-version-two-parts", ("suite", "bump", "--reason", "r", "--version", "1.5", "--skip-trial", "--root", "{root}")),
    ("suite-bump-level-and-version", ("suite", "bump", "--reason", "r", "--level", "patch", "--version", "9.0.0", "--skip-trial", "--root", "{root}")),
    ("suite-bump-reason-blank", ("suite", "bump", "--reason", " ", "--skip-trial", "--root", "{root}")),
    ("export-out-is-a-directory", ("export", "--jsonl", "-o", "{root}", "--ledger", "{ledger}")),
    ("prove-inclusion-text", ("prove", "inclusion", "x", "--ledger", "{ledger}")),
    ("prove-consistency-backwards", ("prove", "consistency", "3", "2", "--ledger", "{ledger}")),
    ("project-leaderboard-no-such-suite", ("project", "leaderboard", "--suite", "9.9.9", "--check", "--root", "{root}")),
]


def option_cases() -> Iterator[Case]:
    for name, argv in OPTION_CASES:
        yield Case(f"option-{name}", argv)
