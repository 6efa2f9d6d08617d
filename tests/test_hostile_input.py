"""Input written by someone who means harm: every reader refuses it with one clear line naming the
file, field or seq, exits with a documented code, and changes nothing. Each case here once ended
in a traceback, a hang or a crashed projection.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cbledger.grading.evidence.transcript import parse_transcript
from cbledger.kicad.sexpr import parse_text
from cbledger.ledger.store import LedgerStore
from cbledger.runner.execute import stats_from
from tests.factories import MAINTAINER, draft_dict, draft_json, run_cli, run_recorded, run_retracted
from tests.runner_project import REPO

DEEP = "[" * 100_000 + "]" * 100_000


def _ledger(tmp_path: Path) -> Path:
    path = tmp_path / "project" / "results" / "ledger" / "events.jsonl"
    store = LedgerStore(path)
    store.init("hostile", MAINTAINER)
    store.append([run_recorded(1), run_recorded(2), run_retracted(2)])
    return path


def _bundled_suite(tmp_path: Path) -> Path:
    """The repository's tasks, fixtures and suites (tracked files only), as a fresh clone has them."""
    root = tmp_path / "suite"
    tracked = subprocess.run(["git", "ls-files", "-z", "fixtures", "tasks", "suites"], cwd=REPO,
                             capture_output=True, check=True).stdout.split(b"\0")
    for rel in filter(None, tracked):
        dest = root / rel.decode()
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / rel.decode(), dest)
    return root


def one_error_line(result) -> str:
    assert "Traceback" not in result.output, result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]


# --------------------------------------------------------------------------- agent-reported figures


def test_an_absurd_token_count_in_run_end_is_recorded_as_invalid_not_stored():
    transcript = parse_transcript(
        b'{"type":"run-start","data":{}}\n'
        b'{"type":"run-end","data":{"exitPath":"done","tokensIn":' + str(10**30).encode() + b',"tokensOut":5,'
        b'"turnsUsed":3,"maxTurns":40,"durationMs":' + str(10**20).encode() + b"}}\n"
    )
    stats, note = stats_from(transcript)
    assert stats is not None and (stats.tokens_in, stats.tokens_out, stats.turns_used) == (0, 5, 3)
    assert stats.duration_ms is None
    assert note is not None and "tokensIn 1000000000000000000000000000000 is out of range" in note
    assert "durationMs" in note


@pytest.mark.parametrize(
    ("key", "value", "why"),
    [
        ("tokensIn", -5, "tokensIn -5 is out of range"),
        ("tokensOut", 2.5, "tokensOut 2.5 is not a whole number"),
        ("turnsUsed", "7", 'turnsUsed "7" is not a whole number'),
        ("maxTurns", True, "maxTurns true is not a whole number"),
        ("durationMs", -1, "durationMs -1 is out of range"),
        ("durationMs", 1.5, "durationMs 1.5 is not a whole number"),
    ],
)
def test_a_negative_or_fractional_run_end_figure_is_named_in_the_note_not_zeroed_silently(key, value, why):
    figures = {"exitPath": "done", "tokensIn": 10, "tokensOut": 5, "turnsUsed": 3, "maxTurns": 40, "durationMs": 900,
               key: value}
    transcript = parse_transcript(b'{"type":"run-start","data":{}}\n' + json.dumps(
        {"type": "run-end", "data": figures}).encode() + b"\n")
    stats, note = stats_from(transcript)
    assert stats is not None and note is not None and why in note, note
    recorded = {"tokensIn": stats.tokens_in, "tokensOut": stats.tokens_out, "turnsUsed": stats.turns_used,
                "maxTurns": stats.max_turns, "durationMs": stats.duration_ms}
    assert recorded[key] == (None if key == "durationMs" else 0)


def test_an_event_carrying_an_absurd_figure_is_refused_and_projections_never_see_one(tmp_path):
    ledger = _ledger(tmp_path)
    before = ledger.read_bytes()
    draft = draft_dict(run_recorded(7))
    draft["body"]["stats"]["tokensIn"] = 10**30
    result = run_cli(["append", "-", "--ledger", ledger], input=json.dumps(draft))
    assert result.exit_code == 2
    assert "tokensIn" in one_error_line(result)
    assert ledger.read_bytes() == before
    projected = run_cli(["project", "all", "--ledger", ledger, "--root", ledger.parents[2]])
    assert projected.exit_code == 0, projected.output


# --------------------------------------------------------------------------- nesting and sizes


def test_a_transcript_nested_a_hundred_thousand_deep_is_a_malformed_line():
    t = parse_transcript(b'{"type":"run-start","data":{}}\n' + DEEP.encode() + b"\n")
    assert t.malformed == [2] and [e.type for e in t.events] == ["run-start"]


_JSON_PIECES = st.sampled_from(["[", "]", "{", "}", '"[{"', '"a\\"["', "1", ",", ":", '"k"', " "])


@settings(max_examples=300, deadline=None)
@given(st.lists(_JSON_PIECES, max_size=40), st.integers(min_value=0, max_value=12))
def test_the_bracket_count_never_hides_a_depth_past_the_limit(pieces: list[str], limit: int):
    from cbledger.inputs import json_deeper_than, json_depth

    data = "".join(pieces).encode()
    assert json_deeper_than(data, limit) == (json_depth(data) > limit)


def test_a_schematic_nested_a_hundred_thousand_deep_is_refused():
    with pytest.raises(Exception, match="nested 100001 deep, over the limit of 256") as info:
        parse_text("(kicad_sch " + "(" * 100_000 + ")" * 100_001, "board.kicad_sch")
    assert type(info.value).__name__ == "UserError"


@pytest.mark.parametrize("doc", [DEEP, '{"id": "a", "id": "b"}'])
def test_append_refuses_deep_nesting_and_duplicate_keys(tmp_path, doc):
    ledger = _ledger(tmp_path)
    before = ledger.read_bytes()
    result = run_cli(["append", "-", "--ledger", ledger], input=doc)
    line = one_error_line(result)
    assert result.exit_code == 2 and ("nested 100000 deep" in line or "duplicate key id" in line)
    assert ledger.read_bytes() == before


def test_an_empty_array_appends_nothing_and_says_so(tmp_path):
    ledger = _ledger(tmp_path)
    before = ledger.read_bytes()
    result = run_cli(["append", "-", "--ledger", ledger], input="[]")
    assert result.exit_code == 2 and "an empty array: no events in the input" in one_error_line(result)
    assert ledger.read_bytes() == before


def test_a_repeat_within_one_batch_is_reported_as_such(tmp_path):
    ledger = _ledger(tmp_path)
    event = draft_json(run_recorded(9)).decode()
    result = run_cli(["append", "-", "--ledger", ledger], input=f"{event}\n{event}\n")
    assert result.exit_code == 0, result.output
    first, second = result.stdout.splitlines()
    assert first.startswith("seq 5 ") and second.startswith("seq 5 ")
    assert second.endswith("(repeated in this input; appended once)")
    other = draft_dict(run_recorded(10))
    changed = json.loads(json.dumps(other))
    changed["body"]["repeat"] = 1 if other["body"]["repeat"] != 1 else 2
    before = ledger.read_bytes()
    conflict = run_cli(["append", "-", "--ledger", ledger], input=f"{json.dumps(other)}\n{json.dumps(changed)}\n")
    line = one_error_line(conflict)
    assert conflict.exit_code == 3 and "appears twice in this batch" in line and "seq" not in line
    # named by where the input holds them, not by 0-based places (`events 0 and 1`)
    assert "(<stdin>: line 1 and <stdin>: line 2)" in line, line
    assert ledger.read_bytes() == before
    stored = run_cli(["append", "-", "--ledger", ledger], input=f"{json.dumps(changed)}\n")
    assert stored.exit_code == 0, stored.output
    again = run_cli(["append", "-", "--ledger", ledger], input=f"{json.dumps(other)}\n{json.dumps(other)}\n")
    line = one_error_line(again)
    assert again.exit_code == 3 and "exists at seq" in line and "than <stdin>: line 1 gives" in line, line


def test_a_timestamp_that_overflows_in_utc_is_refused(tmp_path):
    ledger = _ledger(tmp_path)
    before = ledger.read_bytes()
    draft = draft_dict(run_retracted(1))
    draft["at"] = "0001-01-01T00:00:00+05:00"
    result = run_cli(["append", "-", "--ledger", ledger], input=json.dumps(draft))
    assert result.exit_code == 2 and "outside the range representable in UTC" in one_error_line(result)
    assert ledger.read_bytes() == before


def test_control_characters_in_a_name_are_never_echoed_raw(tmp_path):
    ledger = _ledger(tmp_path)
    draft = draft_dict(run_retracted(1))
    draft["actor"]["name"] = "evil\x1b[2J\x1b[31mname\nforged line"
    draft["id"] = "run.retracted:evil"
    result = run_cli(["append", "-", "--ledger", ledger], input=json.dumps(draft))
    assert result.exit_code == 0, result.output
    shown = run_cli(["log", "--ledger", ledger])
    assert "\x1b" not in shown.stdout and "forged line" in shown.stdout
    assert "evil\\x1b[2J\\x1b[31mname\\nforged line" in shown.stdout


def test_a_key_pasted_where_a_path_id_or_option_goes_is_never_echoed(tmp_path):
    """Every refusal quotes what was typed; a key pasted in its place (a file name, a run id, an
    option) was printed back whole by all but `--model`."""
    ledger = _ledger(tmp_path)
    anthropic, github = "sk-ant-api03-" + "A" * 40, "ghp_" + "b" * 36
    for argv in (
        ["append", tmp_path / f"{anthropic}.json", "--ledger", ledger],
        ["log", "--task", github, "--ledger", ledger],
        ["show", github, "--ledger", ledger, "--json"],
        [f"--bogus-{github}", "log"],
        ["replay", "--verify", "--run", github, "--ledger", ledger],
    ):
        result = run_cli(argv)
        assert result.exit_code == 2 and result.stderr.count("\n") == 1, (argv, result.output)
        assert anthropic not in result.output and github not in result.output, result.output
        assert "<openai-or-anthropic-key>" in result.stderr or "<github-token>" in result.stderr, result.stderr


# --------------------------------------------------------------------------- non-regular files


def _validate_in_subprocess(root: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cbledger.cli.app", "validate", "--root", str(root)],
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)


def test_a_fifo_in_a_fixture_tree_does_not_hang_validate(tmp_path):
    root = _bundled_suite(tmp_path)
    os.mkfifo(root / "fixtures" / "synthetic-led-resistor" / "tree" / "pipe")
    proc = _validate_in_subprocess(root)  # before: blocked forever reading the FIFO
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert "tree/pipe: not a regular file" in proc.stderr


@pytest.mark.parametrize("kind", ["directory", "symlink-loop"])
def test_task_json_that_is_not_a_file_is_an_error_not_a_traceback(tmp_path, kind):
    root = _bundled_suite(tmp_path)
    task_json = root / "tasks" / "led-resistor-swap" / "task.json"
    task_json.unlink()
    if kind == "directory":
        task_json.mkdir()
    else:
        task_json.symlink_to(task_json.name)
    proc = _validate_in_subprocess(root)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "led-resistor-swap" in proc.stderr


def test_duplicate_keys_in_a_task_file_are_an_error(tmp_path):
    root = _bundled_suite(tmp_path)
    path = root / "tasks" / "led-resistor-swap" / "task.json"
    path.write_text(path.read_text().replace('{\n', '{\n  "tier": "hard",\n', 1))
    proc = _validate_in_subprocess(root)
    assert proc.returncode == 1 and "duplicate key tier" in proc.stderr


# --------------------------------------------------------------------------- a corrupt ledger line


@pytest.mark.parametrize("how", ["undecodable", "edited", "invalid-utf8"])
@pytest.mark.parametrize("command", [["log"], ["show", "3"], ["rescore"], ["suite", "status"], ["project", "all"],
                                     ["project", "leaderboard"], ["export", "--jsonl"], ["replay", "--verify"]])
def test_every_command_on_a_corrupt_ledger_line_names_the_seq(tmp_path, how, command):
    ledger = _ledger(tmp_path)
    lines = ledger.read_bytes().splitlines(keepends=True)
    if how == "undecodable":
        lines[2] = lines[2][:200] + b"\n"
    elif how == "invalid-utf8":  # one byte inside a string of the body, a version-1 run.recorded
        at = lines[2].index(b'"body":{"ablations":{"') + 23
        lines[2] = lines[2][:at] + b"\xff" + lines[2][at + 1 :]
        lines[2] = lines[2].replace(b',"version":2', b"", 1)
    else:  # same size, still JSON: only the chain can tell
        lines[2] = lines[2].replace(b'"repeat":', b'"repeaT":', 1)
    ledger.write_bytes(b"".join(lines))
    root = ledger.parents[2]
    copy = tmp_path / "copy.jsonl"
    command = [*command, "-o", copy] if command[0] == "export" else command
    result = run_cli([*command, "--ledger", ledger, "--root", root] if command[0] != "show" else [*command, "--ledger", ledger])
    assert not copy.exists()  # an export of a damaged ledger is no copy of it
    if command[0] == "replay":  # a report rather than an error: the broken chain, exit 1
        assert "Traceback" not in result.output and result.exit_code == 1, result.output
        assert f"chain BROKEN: {ledger}: undecodable at line 3 (seq 3" in result.output, result.output
        return
    line = one_error_line(result)
    assert result.exit_code == 2 and "seq 3" in line, (result.exit_code, line)  # bad input, whichever command met it


# --------------------------------------------------------------------------- fuzz

#: docs/LEDGER.md and docs/REPRODUCE.md: 2 bad input, 3 an id conflict, 4 a credential; validate 1 on errors
_DOCUMENTED = {"append": {0, 2, 3, 4}, "import": {0, 2, 4}, "validate": {0, 1, 2}}

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(10**40), max_value=10**40) | st.floats(allow_nan=True)
    | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)
FIELDS = ["id", "type", "at", "actor", "body", "seq", "version", "surface_id", "case_slug", "prompt_path",
          "transcript_path", "run_timestamp", "tier", "fixture", "assertions"]
documents = st.dictionaries(st.sampled_from(FIELDS) | st.text(max_size=6), json_values, max_size=8).map(json.dumps)
raw_inputs = documents | st.binary(max_size=200).map(lambda b: b.decode("latin-1")) | st.sampled_from(
    [DEEP[:4000], "[]", "{}", '{"a":1,"a":2}', "\x1b[31m", "{" * 70 + "}" * 70, "\ufeff{}", "null", "1e999"])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(doc=raw_inputs, mutate=st.sampled_from(["as-is", "as-event", "as-lines"]))
def test_fuzz_append_never_tracebacks_and_never_changes_the_ledger(tmp_path_factory, doc, mutate):
    ledger = _ledger(tmp_path_factory.mktemp("fuzz-append"))
    before = ledger.read_bytes()
    if mutate == "as-event":
        base = draft_dict(run_retracted(3))
        try:
            extra = json.loads(doc)
        except (ValueError, RecursionError):
            extra = doc
        base["body"] = extra if not isinstance(extra, dict) else {**base["body"], **extra}
        doc = json.dumps(base)
    elif mutate == "as-lines":
        doc = doc + "\n" + doc
    result = run_cli(["append", "-", "--ledger", ledger], input=doc.encode("utf-8", "surrogatepass"))
    assert "Traceback" not in result.output
    assert result.exit_code in _DOCUMENTED["append"], result.output
    if result.exit_code != 0:
        assert ledger.read_bytes() == before


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(doc=raw_inputs, prompt=st.binary(max_size=64))
def test_fuzz_manual_import_never_tracebacks_and_writes_nothing_when_refused(tmp_path_factory, doc, prompt):
    base = tmp_path_factory.mktemp("fuzz-import")
    ledger = _ledger(base)
    before = ledger.read_bytes()
    review = base / "review"
    review.mkdir()
    (review / "prompt.md").write_bytes(prompt)
    (review / "t.jsonl").write_bytes(b"{}\n")
    (review / "import.json").write_text(doc, encoding="utf-8", errors="surrogatepass")
    root = ledger.parents[2]
    result = run_cli(["import", "--manual", review / "import.json", "--root", root])
    assert "Traceback" not in result.output
    assert result.exit_code in _DOCUMENTED["import"], result.output
    if result.exit_code != 0:
        assert ledger.read_bytes() == before and not (root / "results" / "imports").exists()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(doc=raw_inputs, which=st.sampled_from(["task.json", "assertions.json", "fixture.json", "suite"]))
def test_fuzz_validate_never_tracebacks(tmp_path_factory, doc, which):
    root = tmp_path_factory.mktemp("fuzz-validate") / "p"
    (root / "tasks" / "t-one").mkdir(parents=True)
    (root / "fixtures" / "f-one").mkdir(parents=True)
    (root / "suites").mkdir()
    target = {
        "task.json": root / "tasks" / "t-one" / "task.json",
        "assertions.json": root / "tasks" / "t-one" / "assertions.json",
        "fixture.json": root / "fixtures" / "f-one" / "fixture.json",
        "suite": root / "suites" / "s.json",
    }[which]
    for p in (root / "tasks" / "t-one" / "task.json", root / "tasks" / "t-one" / "assertions.json",
              root / "fixtures" / "f-one" / "fixture.json", root / "suites" / "s.json"):
        p.write_text("{}")
    target.write_text(doc, encoding="utf-8", errors="surrogatepass")
    result = run_cli(["validate", "--root", root])
    assert "Traceback" not in result.output
    assert result.exit_code in _DOCUMENTED["validate"], result.output


@settings(max_examples=200, deadline=None)
@given(data=st.lists(raw_inputs | json_values.map(lambda v: json.dumps({"type": "run-end", "data": v})), max_size=6))
def test_fuzz_the_transcript_reader_never_raises(data):
    t = parse_transcript("\n".join(data).encode("utf-8", "surrogatepass"))
    stats_from(t)  # and the runner's reading of its figures never raises either
    assert len(t.events) + len(t.malformed) <= sum(1 for line in "\n".join(data).splitlines() if line.strip())


def test_counts_are_bounded_by_the_types():
    # The figures the fuzz draws include integers past any count: the event types refuse them, so
    # no stored event can carry one into a projection or the read model's 64-bit integers.
    from cbledger.ledger.types import MAX_COUNT, MAX_TOKENS, TokenCount

    assert MAX_TOKENS * 1_000_000 < MAX_COUNT * 1024 < 2**63
    with pytest.raises(msgspec.ValidationError, match="in"):
        msgspec.convert({"in": MAX_TOKENS + 1}, type=dict[str, TokenCount])


# --------------------------------------------------------------------------- preserved runs are bounded


def test_a_capture_keeps_its_files_up_to_the_bounds_and_records_what_was_cut(tmp_path, monkeypatch):
    """An agent killed at the 128 MiB write limit was once preserved whole: a 139.5 MB bundle."""
    import pygit2
    from blake3 import blake3

    from cbledger.grading.evidence.tree import view
    from cbledger.runner import preserve
    from cbledger.runner.sandbox import signature

    monkeypatch.setattr(preserve, "MAX_KEPT_FILE_BYTES", 1000)
    monkeypatch.setattr(preserve, "MAX_KEPT_BYTES", 1500)
    work = tmp_path / "sandbox"
    repo = pygit2.init_repository(str(work))
    (work / "board.kicad_sch").write_bytes(b"s" * 5000)  # in the seed: unchanged, costs nothing
    index = repo.index
    index.add_all()
    index.write()
    sig = signature("t", "t@example.invalid", 0)
    repo.create_commit("HEAD", sig, sig, "seed", index.write_tree(), [])
    (work / "a.txt").write_bytes(b"a" * 900)
    (work / "big.bin").write_bytes(b"b" * 1001)
    (work / "c.txt").write_bytes(b"c" * 700)  # within the file bound, past the total
    (work / "d.txt").write_bytes(b"d" * 500)
    planted = work / ".git" / "cbledger-evidence" / "cut.json"  # the agent's own, never committed
    planted.parent.mkdir()
    planted.write_text('{"cut": []}')
    capture = preserve.capture(repo, 0).capture_sha
    end = view(repo, capture)
    assert end.read("board.kicad_sch") == b"s" * 5000 and end.read("a.txt") == b"a" * 900
    assert end.read("d.txt") == b"d" * 500
    for name, size in (("big.bin", 1001), ("c.txt", 700)):
        stand_in = end.read(name)
        assert stand_in is not None and f"{size} bytes".encode() in stand_in and len(stand_in) < 200
    evidence = preserve.record_evidence(repo, capture, 0)
    cut = json.loads(view(repo, evidence).read(preserve.CUT_RECORD) or b"null")
    assert [(c["path"], c["bytes"]) for c in cut["cut"]] == [("big.bin", 1001), ("c.txt", 700)]
    assert cut["cut"][0]["blake3"] == blake3(b"b" * 1001).hexdigest()


def test_a_capture_within_the_bounds_commits_no_cut_record_even_one_the_agent_planted(tmp_path):
    import pygit2

    from cbledger.grading.evidence.tree import view
    from cbledger.runner import preserve
    from cbledger.runner.sandbox import signature

    work = tmp_path / "sandbox"
    repo = pygit2.init_repository(str(work))
    (work / "a.txt").write_text("a")
    index = repo.index
    index.add_all()
    index.write()
    sig = signature("t", "t@example.invalid", 0)
    repo.create_commit("HEAD", sig, sig, "seed", index.write_tree(), [])
    planted = work / ".git" / "cbledger-evidence" / "cut.json"
    planted.parent.mkdir()
    planted.write_text('{"cut": []}')
    capture = preserve.capture(repo, 0).capture_sha
    assert view(repo, preserve.record_evidence(repo, capture, 0)).read(preserve.CUT_RECORD) is None


def _sandbox_with_seed(work: Path):
    import pygit2

    from cbledger.runner.sandbox import signature

    repo = pygit2.init_repository(str(work))
    (work / "board.kicad_sch").write_bytes(b"s" * 5000)
    index = repo.index
    index.add_all()
    index.write()
    sig = signature("t", "t@example.invalid", 0)
    seed = repo.create_commit("HEAD", sig, sig, "seed", index.write_tree(), [])
    return repo, str(seed)


def _agent_commit(repo, message: str, files: dict[str, bytes | None], when: int) -> str:
    from cbledger.runner.sandbox import signature

    work = Path(repo.workdir)
    for rel, data in files.items():
        if data is None:
            (work / rel).unlink()
        else:
            (work / rel).write_bytes(data)
    index = repo.index
    index.add_all()
    index.write()
    sig = signature("agent", "agent@example.invalid", when)
    return str(repo.create_commit("HEAD", sig, sig, message, index.write_tree(), [repo.head.target]))


def test_blobs_the_agent_committed_over_the_bounds_are_cut_from_its_commits_and_recorded(tmp_path, monkeypatch):
    """The agent's own commits once reached the bundle whole: a blob it committed, even one it
    removed again, was preserved at any size."""
    import pygit2
    from blake3 import blake3

    from cbledger.grading.evidence.bundle import BASELINE_REF
    from cbledger.grading.evidence.diff import commits_since
    from cbledger.grading.evidence.tree import view
    from cbledger.runner import preserve

    monkeypatch.setattr(preserve, "MAX_KEPT_FILE_BYTES", 64 * 1024)
    monkeypatch.setattr(preserve, "MAX_KEPT_BYTES", 100 * 1024)
    repo, seed = _sandbox_with_seed(tmp_path / "sandbox")
    repo.references.create(BASELINE_REF, pygit2.Oid(hex=seed))
    big, gone, small = os.urandom(200 * 1024), os.urandom(150 * 1024), os.urandom(1000)
    first = _agent_commit(repo, "add the big one\n", {"big.bin": big, "gone.bin": gone, "small.txt": small}, 1)
    head = _agent_commit(repo, "drop one\n", {"gone.bin": None}, 2)
    stashed = os.urandom(100 * 1024)  # within the file bound, past the total: a stash is bounded too
    builder = repo.TreeBuilder(repo[first].peel(pygit2.Tree))
    builder.insert("stashed.bin", repo.create_blob(stashed), pygit2.enums.FileMode.BLOB)
    sig = repo[first].peel(pygit2.Commit).author
    stash = repo.create_commit("refs/stash", sig, sig, "WIP\n", builder.write(), [pygit2.Oid(hex=first)])
    preserve.keep_stash(repo)
    captured = preserve.capture(repo, 0, seed)
    assert captured.head_sha != head and str(repo.head.target) == head  # the sandbox's own HEAD untouched
    kept_head = repo[captured.head_sha].peel(pygit2.Commit)
    assert [repo[c].message for c in commits_since(repo, captured.head_sha, seed)] == ["drop one\n", "add the big one\n"]
    assert kept_head.author == repo[head].peel(pygit2.Commit).author
    kept_first = str(kept_head.parent_ids[0])
    assert view(repo, kept_first).read("small.txt") == small and view(repo, kept_first).read("board.kicad_sch") == b"s" * 5000
    for name, data in (("big.bin", big), ("gone.bin", gone)):
        stand_in = view(repo, kept_first).read(name)
        assert stand_in is not None and f"{len(data)} bytes".encode() in stand_in and len(stand_in) < 200
    # the end state still holds big.bin: cut there too, as the same stand-in, so the diff is empty
    assert view(repo, captured.capture_sha).read("big.bin") == view(repo, kept_first).read("big.bin")
    evidence = preserve.record_evidence(repo, captured.capture_sha, 0)
    cut = json.loads(view(repo, evidence).read(preserve.CUT_RECORD) or b"null")["cut"]
    assert cut == [
        {"commit": kept_first, "agentCommit": first, "path": "big.bin", "bytes": len(big), "blake3": blake3(big).hexdigest()},
        {"commit": kept_first, "agentCommit": first, "path": "gone.bin", "bytes": len(gone), "blake3": blake3(gone).hexdigest()},
        {"commit": captured.stash_sha, "agentCommit": str(stash), "path": "stashed.bin", "bytes": len(stashed),
         "blake3": blake3(stashed).hexdigest()},
        {"path": "big.bin", "bytes": len(big), "blake3": blake3(big).hexdigest()},
    ]
    assert str(repo.references[preserve.STASH_REF].target) == captured.stash_sha != str(stash)
    assert [str(p) for p in repo[captured.stash_sha].peel(pygit2.Commit).parent_ids] == [kept_first]
    repo.references.create(preserve.EVIDENCE_REF, pygit2.Oid(hex=evidence), force=True)
    size, _ = preserve.write_bundle(repo, seed, tmp_path / "run.bundle")
    assert size < 100 * 1024  # neither random blob is in it
    assert not any(len(blob.data) > preserve.MAX_KEPT_FILE_BYTES for _, blob in preserve.new_blobs(repo, seed))


def test_commits_within_the_bounds_are_preserved_as_the_agent_made_them(tmp_path):
    import pygit2

    from cbledger.runner import preserve

    repo, seed = _sandbox_with_seed(tmp_path / "sandbox")
    _agent_commit(repo, "one\n", {"a.txt": b"a"}, 1)
    repo.references.create("refs/stash", repo.head.target)
    preserve.keep_stash(repo)
    head = _agent_commit(repo, "two\n", {"b.txt": b"b"}, 2)
    captured = preserve.capture(repo, 0, seed)
    assert captured.head_sha == head and captured.stash_sha == str(repo.references["refs/stash"].target)
    assert str(repo[captured.capture_sha].peel(pygit2.Commit).parent_ids[0]) == head


def test_a_harness_log_over_its_bound_keeps_its_tail_and_is_recorded(tmp_path, monkeypatch):
    from blake3 import blake3

    from cbledger.grading.evidence.tree import view
    from cbledger.runner import preserve

    monkeypatch.setattr(preserve, "MAX_KEPT_LOG_BYTES", 1000)
    repo, seed = _sandbox_with_seed(tmp_path / "sandbox")
    logs = Path(repo.path) / preserve.AGENT_LOG_DIR
    logs.mkdir()
    stdout = os.urandom(5000)
    (logs / "stdout.log").write_bytes(stdout)
    (logs / "stderr.log").write_bytes(b"short\n")
    evidence = preserve.record_evidence(repo, preserve.capture(repo, 0, seed).capture_sha, 0)
    kept = preserve.harness_logs(repo, evidence)
    assert kept["harness/stderr.log"] == b"short\n"
    first, tail = kept["harness/stdout.log"].split(b"\n", 1)
    assert tail == stdout[-1000:] and b"last 1000 of 5000 bytes" in first
    cut = json.loads(view(repo, evidence).read(preserve.CUT_RECORD) or b"null")
    assert cut["cut"] == [{"path": "harness/stdout.log", "bytes": 5000, "blake3": blake3(stdout).hexdigest(), "keptBytes": 1000}]
    assert cut["maxLogBytes"] == 1000


def test_a_bundle_over_its_bound_is_not_written(tmp_path, monkeypatch):
    import pygit2
    import pytest

    from cbledger.errors import UserError
    from cbledger.grading.evidence.bundle import BASELINE_REF
    from cbledger.runner import preserve

    repo, seed = _sandbox_with_seed(tmp_path / "sandbox")
    repo.references.create(BASELINE_REF, pygit2.Oid(hex=seed))
    _agent_commit(repo, "noise\n", {"noise.bin": os.urandom(20_000)}, 1)
    evidence = preserve.record_evidence(repo, preserve.capture(repo, 0, seed).capture_sha, 0)
    repo.references.create(preserve.EVIDENCE_REF, pygit2.Oid(hex=evidence), force=True)
    monkeypatch.setattr(preserve, "MAX_BUNDLE_BYTES", 10_000)
    dest = tmp_path / "run.bundle"
    with pytest.raises(UserError, match=r"over the bound of 10000"):
        preserve.write_bundle(repo, seed, dest)
    assert not dest.exists()


# --------------------------------------------------------------------------- the docs name what is checked


def test_reproduce_md_names_every_output_and_every_finding_kind_replay_compares():
    """docs/REPRODUCE.md once left the site out of the outputs `replay --verify` compares."""
    import re

    doc = (REPO / "docs" / "REPRODUCE.md").read_text()
    checked = doc[doc.index("4. **Every projection**"):doc.index("## Suite definitions")]
    for output in ("results/<date>/", "`LEADERBOARD.md`", "`results/cbledger.db`", "`results/site/`"):
        assert output in checked, output
    source = "".join(p.read_text() for p in (REPO / "cbledger" / "reproduce").glob("*.py"))
    kinds = set(re.findall(r'check="[a-z]+", kind="([a-z-]+)"', source))
    assert {"site-missing", "site-different", "site-extra", "rubric-not-kept"} <= kinds
    assert sorted(k for k in kinds if f"`{k}`" not in doc) == []


# --------------------------------------------------------------------------- the bad-input corpus

from tests import hostile_corpus as corpus  # noqa: E402  (the corpus section's own data)


def _corpus_cases() -> list[corpus.Case]:
    root = REPO
    task = json.loads((root / corpus.TASK).read_text())
    fixture = json.loads((root / corpus.FIXTURE).read_text())
    cases = [*corpus.file_kind_cases(), *corpus.append_cases(), *corpus.session_cases(), *corpus.manual_cases(),
             *corpus.jsonl_cases(_valid_ledger_bytes()), *corpus.definition_cases(task, fixture), *corpus.option_cases()]
    return [c for c in cases if (c.id.split("-", 1)[1].rsplit("-", 1)[0], c.bad) not in corpus.ACCEPTS]


def _valid_ledger_bytes() -> bytes:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        return _ledger(Path(tmp)).read_bytes()


CORPUS = _corpus_cases()


@pytest.fixture(scope="module")
def corpus_root(tmp_path_factory) -> Path:
    root = _bundled_suite(tmp_path_factory.mktemp("corpus"))
    store = LedgerStore(root / "results" / "ledger" / "events.jsonl")
    store.init("hostile", MAINTAINER)
    store.append([run_recorded(1), run_recorded(2), run_retracted(2)])
    from cbledger.ledger.keys import SigningKey

    (root / "keys").mkdir()
    (root / "keys" / "corpus.vkey").write_text(SigningKey.generate("corpus.example/ledger").verifier().text() + "\n")
    return root


def _tree(root: Path) -> dict[str, tuple[int, int]]:
    """Every entry under `root` by relative path: (size, 0 for a directory; mtime). Read with
    `os.scandir` and strings: it runs twice for each of some 300 cases."""
    out: dict[str, tuple[int, int]] = {}
    base = len(str(root)) + 1
    pending = [str(root)]
    while pending:
        with os.scandir(pending.pop()) as listing:
            for entry in listing:
                st = entry.stat(follow_symlinks=False)
                is_dir = entry.is_dir()
                out[entry.path[base:]] = (0 if is_dir else st.st_size, st.st_mtime_ns)
                if is_dir and not entry.is_symlink():
                    pending.append(entry.path)
    return out


def _lay(path: Path, bad: bytes | str | None, tmp_path: Path) -> None:
    if bad is None or bad == "missing":
        return
    if isinstance(bad, bytes):
        path.write_bytes(bad)
    elif bad == "fifo":
        os.mkfifo(path)
    elif bad == "directory":
        path.mkdir()
    elif bad == "symlink":
        target = tmp_path / "elsewhere.txt"
        target.write_text("not valid\n")
        path.symlink_to(target)
    elif bad == "dangling":
        path.symlink_to(tmp_path / "nothing-here")


class _Hang(Exception):
    pass


def _alarm(signum, frame):
    raise _Hang("no answer within 60 s")


def test_the_corpus_holds_at_least_two_hundred_kinds():
    assert len(CORPUS) >= 200 and len({c.id for c in CORPUS}) == len(CORPUS)


@pytest.mark.parametrize("case", CORPUS, ids=lambda c: c.id)
def test_every_bad_input_is_refused_in_one_line_with_exit_2_and_nothing_written(corpus_root, tmp_path, case):
    import signal

    inputs_dir = tmp_path / "input"
    inputs_dir.mkdir()
    (inputs_dir / "prompt.md").write_text("Rename the net.\n")  # what a manual import names
    (inputs_dir / "session.jsonl").write_text('{"type":"run-start","data":{}}\n')
    ok = tmp_path / "ok.txt"
    ok.write_text("a regular file, not what any command reads\n")
    bad = inputs_dir / "bad.json"
    saved: bytes | None = None
    if case.replaces is not None:
        bad = corpus_root / case.replaces
        saved = bad.read_bytes()
        bad.unlink()
    _lay(bad, case.bad, tmp_path)
    ledger = corpus_root / "results" / "ledger" / "events.jsonl"
    key = corpus_root / "keys" / "corpus.vkey"
    argv = [a.format(bad=bad, ledger=ledger, root=corpus_root, ok=ok, key=key) for a in case.argv]
    before = _tree(corpus_root)
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(60)
    try:
        result = run_cli(argv, input=case.stdin if case.stdin is not None else b"")
        after = _tree(corpus_root)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
        if saved is not None:
            if bad.is_dir() and not bad.is_symlink():
                bad.rmdir()
            else:
                bad.unlink(missing_ok=True)
            bad.write_bytes(saved)
    assert "Traceback" not in result.output, result.output
    assert result.exit_code == 2, (result.exit_code, result.output)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    if case.says is not None:
        assert case.says in lines[0]
    if case.bad in ("fifo", "directory") and case.id.startswith("file-"):  # named as what it is
        assert ("a FIFO" if case.bad == "fifo" else "directory") in lines[0], lines[0]
    assert after == before, sorted(set(after.items()) ^ set(before.items()))


# --------------------------------------------------------------------------- check code in the suite lock


def test_a_loosened_check_in_code_is_a_changed_suite_from_the_bump_that_locks_it(tmp_path, monkeypatch):
    """Loosening `diff_ratio_max`'s comparison tenfold once passed `suite status`, `validate`
    and `replay --verify`: the lock covered task criteria, not the code that checks them."""
    from cbledger.tasks import definitions

    root = _bundled_suite(tmp_path)
    assert run_cli(["init", "--root", root]).exit_code == 0
    bumped = run_cli(["suite", "bump", "--reason", "initial suite", "--skip-trial", "--root", root])
    assert bumped.exit_code == 0, bumped.stderr
    [kept] = (root / "results" / "suites").glob("*.json")
    locked = json.loads(kept.read_text())["checks"]
    assert "grading/checks_diff.py" in locked and "kicad/connectivity.py" in locked
    assert run_cli(["project", "all", "--root", root]).exit_code == 0
    assert run_cli(["replay", "--verify", "--root", root]).exit_code == 0

    package = tmp_path / "build"
    for name in definitions.CHECK_CODE:
        shutil.copytree(REPO / "cbledger" / name, package / name)
    checks = package / "grading" / "checks_diff.py"
    checks.write_text(checks.read_text().replace("ratio = changed / total", "ratio = changed / total / 10", 1))
    monkeypatch.setattr(definitions, "_PACKAGE", package)
    replay = run_cli(["replay", "--verify", "--json", "--root", root])
    assert replay.exit_code == 7, replay.output
    [finding] = [f for f in json.loads(replay.stdout)["failures"] if f["kind"] == "definitions-differ"]
    assert "check code cbledger: grading/checks_diff.py changed" in finding["message"]
    status = run_cli(["suite", "status", "--root", root])
    assert status.exit_code == 1 and "check code cbledger: grading/checks_diff.py changed" in status.stdout
    run = run_cli(["run", "led-resistor-swap", "--agent", "gold", "--root", root])
    assert run.exit_code == 2 and "check code cbledger: grading/checks_diff.py changed" in run.stderr
    again = run_cli(["suite", "bump", "--reason", "the loosened check", "--skip-trial", "--root", root])
    assert again.exit_code == 0, again.stderr  # a changed check is a changed suite: it can be bumped
    assert run_cli(["project", "all", "--root", root]).exit_code == 0
    assert run_cli(["replay", "--verify", "--root", root]).exit_code == 0


def test_definitions_kept_before_check_code_was_locked_hold_none_and_the_next_bump_locks_it():
    from cbledger.tasks import definitions

    kept = definitions.Definitions(format=definitions.FORMAT, tasks={}, fixtures={}, suites={})
    now = msgspec.structs.replace(kept, checks={"grading/x.py": definitions.FileEntry(sha256="0" * 64, bytes=1)})
    assert definitions.differences(kept, now) == []
    assert definitions.decode(definitions.encode(kept), "kept.json") == kept
    assert b"checks" not in definitions.encode(kept)  # a kept file from before reads and re-encodes as kept
    assert definitions.differences(now, kept) == ["check code cbledger: grading/x.py removed"]


def test_a_real_boards_reports_are_compared_only_where_both_sides_hold_them():
    """A version bumped where the real boards were not materialized names none of their reports;
    materialized later, the working tree was "fixture …: baseline/drc.json added" and `replay
    --verify` failed (exit 7) on a ledger nobody had touched."""
    from cbledger.tasks import definitions

    def with_reports(**reports: str) -> definitions.Definitions:
        board = definitions.FixtureDefinition(
            origin="upstream", tree_sha256="a" * 64, files={},
            referenced={name: definitions.FileEntry(sha256=sha * 64, bytes=1) for name, sha in reports.items()})
        return definitions.Definitions(format=definitions.FORMAT, tasks={}, fixtures={"board": board}, suites={})

    pinned, unpinned = with_reports(**{"baseline/drc.json": "1"}), with_reports()
    assert definitions.differences(unpinned, pinned) == []  # bumped unmaterialized, materialized now
    assert definitions.differences(pinned, unpinned) == []  # bumped materialized, not here
    assert definitions.differences(pinned, with_reports(**{"baseline/drc.json": "2"})) == [
        "fixture board: baseline/drc.json changed"]
    assert definitions.differences(pinned, with_reports(**{"baseline/drc.json": "1", "baseline/erc.json": "3"})) == [
        "fixture board: baseline/erc.json added"]


def test_two_runs_ending_alike_in_the_same_second_keep_evidence_of_their_own(tmp_path):
    """Repeats of a deterministic session leave the same tree on the same parent at the same
    second: the capture names its run, so neither run's bundle is the other's (`evidence-reused`)."""
    import pygit2

    from cbledger.runner import preserve
    from cbledger.runner.sandbox import signature

    shas = []
    for rid in ("run-a", "run-b"):
        work = tmp_path / rid
        repo = pygit2.init_repository(str(work))
        (work / "board.kicad_sch").write_bytes(b"seed")
        repo.index.add_all()
        repo.index.write()
        sig = signature("t", "t@example.invalid", 0)
        seed = repo.create_commit("HEAD", sig, sig, "seed", repo.index.write_tree(), [])
        (work / "board.kicad_sch").write_bytes(b"edited")
        captured = preserve.capture(repo, 7, str(seed), run_id=rid)
        assert rid in repo[captured.capture_sha].message
        shas.append((captured.capture_sha, preserve.record_evidence(repo, captured.capture_sha, 7)))
    assert shas[0][0] != shas[1][0] and shas[0][1] != shas[1][1]
    assert repo[shas[1][0]].tree_id == pygit2.Repository(str(tmp_path / "run-a"))[shas[0][0]].tree_id
