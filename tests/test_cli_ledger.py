"""The ledger commands as a user drives them: init, append, log, show, replay --verify, and where
the ledger is looked for."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cbledger.ledger.chain import parse_line
from tests.factories import (
    draft_json,
    grade_recorded,
    one_of_each,
    run_cli,
    run_recorded,
    run_retracted,
)

NO_ENV = {"CBLEDGER_LEDGER": None, "CBLEDGER_ROOT": None}


def cli(*args, input=None, env=None):
    return run_cli(list(args), input=input, env={**NO_ENV, **(env or {})})


@pytest.fixture
def ledger(tmp_path: Path) -> Path:
    path = tmp_path / "events.jsonl"
    assert cli("init", "--ledger", path).exit_code == 0
    return path


@pytest.fixture
def filled(ledger: Path) -> Path:
    """seq 1 ledger.created, 2..8 one of each appendable type, 9..12 runs and grades."""
    events = one_of_each(1) + [run_recorded(2), grade_recorded(2), run_recorded(3), grade_recorded(3)]
    data = b"\n".join(draft_json(e) for e in events)
    result = cli("append", "--ledger", ledger, input=data)
    assert result.exit_code == 0, result.output
    return ledger


def hashes(path: Path) -> list[str]:
    return [parse_line(line).hash for line in path.read_bytes().splitlines()]


# --------------------------------------------------------------------------- init


def test_init(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "dir" / "events.jsonl"
    result = cli("init", "--ledger", path, "--name", "bench-ledger", "--description", "for tests")
    assert result.exit_code == 0, result.output
    [h] = hashes(path)
    assert result.stdout.strip() == f"initialised {path}: seq 1 {h}"
    shown = json.loads(cli("show", "1", "--json", "--ledger", path).stdout)
    assert shown["event"]["type"] == "ledger.created"
    assert shown["event"]["body"] == {"name": "bench-ledger", "description": "for tests", "format": "cbledger/1"}


def test_init_twice_is_refused(ledger: Path) -> None:
    before = ledger.read_bytes()
    result = cli("init", "--ledger", ledger)
    assert result.exit_code == 2
    assert "already exists" in result.stderr
    assert ledger.read_bytes() == before


# --------------------------------------------------------------------------- append


def test_append_reports_seq_hash_type_and_id(ledger: Path) -> None:
    result = cli("append", "--ledger", ledger, input=draft_json(run_recorded(1)))
    assert result.exit_code == 0, result.output
    h = hashes(ledger)[1]
    assert result.stdout.split() == ["seq", "2", h, "run.recorded", "run.recorded:run-000001"]
    # the outputs now lag the ledger, which `replay --verify` would report as differing
    assert "are behind the ledger now: `cbledger project all" in result.stderr, result.stderr


def test_append_again_is_a_reported_no_op(ledger: Path) -> None:
    cli("append", "--ledger", ledger, input=draft_json(run_recorded(1)))
    before = ledger.read_bytes()
    result = cli("append", "--ledger", ledger, input=draft_json(run_recorded(1)))
    assert result.exit_code == 0
    assert "seq 2" in result.stdout and "already recorded; no-op" in result.stdout
    assert "behind the ledger" not in result.stderr  # nothing appended, nothing behind
    as_json = json.loads(cli("append", "--json", "--ledger", ledger, input=draft_json(run_recorded(1))).stdout)
    assert as_json == [
        {"seq": 2, "id": "run.recorded:run-000001", "type": "run.recorded", "hash": hashes(ledger)[1], "created": False}
    ]
    assert ledger.read_bytes() == before


def test_append_conflict_exits_3(ledger: Path) -> None:
    cli("append", "--ledger", ledger, input=draft_json(run_recorded(1)))
    before = ledger.read_bytes()
    result = cli("append", "--ledger", ledger, input=draft_json(run_recorded(1, note="changed")))
    assert result.exit_code == 3
    assert "run.recorded:run-000001" in result.stderr and "seq 2" in result.stderr
    assert ledger.read_bytes() == before


def test_append_to_a_missing_ledger(tmp_path: Path) -> None:
    result = cli("append", "--ledger", tmp_path / "none.jsonl", input=draft_json(run_recorded(1)))
    assert result.exit_code == 2
    assert "cbledger init" in result.stderr
    assert not (tmp_path / "none.jsonl").exists()


# --------------------------------------------------------------------------- log


def test_log_lists_every_event(filled: Path) -> None:
    result = cli("log", "--ledger", filled)
    assert result.exit_code == 0, result.output
    rows = result.stdout.splitlines()
    assert [int(r.split()[0]) for r in rows] == list(range(1, 13))
    assert rows[0].split()[2:4] == ["ledger.created", "ledger.created:copperbench"]
    assert rows[3].split()[1] == "2026-03-01T12:01:36Z"  # run.recorded(1): 12:00:01 + 95 s, UTC
    assert "[runner:copperbench-runner]" in rows[3]


def test_log_filters_by_type_and_seq(filled: Path) -> None:
    def seqs(*args: str) -> list[int]:
        result = cli("log", "--ledger", filled, *args)
        assert result.exit_code == 0, result.output
        return [int(r.split()[0]) for r in result.stdout.splitlines()]

    assert seqs("--type", "run.recorded") == [4, 9, 11]
    assert seqs("--type", "run.recorded", "--type", "grade.recorded") == [4, 5, 9, 10, 11, 12]
    assert seqs("--since", "8") == [9, 10, 11, 12]
    assert seqs("--until", "3") == [1, 2, 3]
    assert seqs("--since", "3", "--until", "9", "--type", "grade.recorded") == [5]
    unknown = run_cli(["log", "--type", "no.such.type", "--ledger", filled])
    assert unknown.exit_code == 2 and "not an event type" in unknown.stderr


def test_log_json(filled: Path) -> None:
    result = cli("log", "--json", "--type", "grade.recorded", "--ledger", filled)
    assert result.exit_code == 0, result.output
    docs = [json.loads(line) for line in result.stdout.splitlines()]
    assert [d["seq"] for d in docs] == [5, 10, 12]
    all_hashes = hashes(filled)
    for d in docs:
        assert d["hash"] == all_hashes[d["seq"] - 1]
        assert d["event"]["type"] == "grade.recorded" and d["event"]["seq"] == d["seq"]
    assert docs[0]["event"]["body"]["partialCredit"] == 0.75


# --------------------------------------------------------------------------- show


def test_show_by_seq_and_by_id(filled: Path) -> None:
    by_seq = cli("show", "6", "--ledger", filled)
    by_id = cli("show", "run.retracted:run-000001", "--ledger", filled)
    assert by_seq.exit_code == by_id.exit_code == 0
    assert by_seq.stdout == by_id.stdout
    doc = json.loads(by_seq.stdout)
    all_hashes = hashes(filled)
    assert (doc["seq"], doc["hash"], doc["prev"]) == (6, all_hashes[5], all_hashes[4])
    assert doc["event"]["id"] == "run.retracted:run-000001"
    assert by_seq.stdout.count("\n") > 5  # pretty-printed for people


def test_show_json_is_one_line_and_matches_the_stored_bytes(filled: Path) -> None:
    result = cli("show", "4", "--json", "--ledger", filled)
    assert result.stdout.count("\n") == 1
    doc = json.loads(result.stdout)
    stored = filled.read_bytes().splitlines()[3]
    assert doc["event"] == json.loads(stored)["event"]


def test_show_unknown_key(filled: Path) -> None:
    for key in ("99", "no-such-id", "\u00b2"):
        result = cli("show", key, "--ledger", filled)
        assert result.exit_code == 2
        assert "no run, seq or event id" in result.stderr


# --------------------------------------------------------------------------- replay --verify


def test_replay_verify_reports_events_bytes_and_head(filled: Path) -> None:
    result = cli("replay", "--verify", "--chain-only", "--ledger", filled)
    assert result.exit_code == 0, result.output
    size = filled.stat().st_size
    first, second = result.stdout.splitlines()
    assert first == f"chain ok: 12 events, {size} bytes; head seq 12 {hashes(filled)[-1]}"
    # Without a checkpoint a ledger cut short at its end verifies: the reader is told what to compare.
    assert second.startswith(f"head: compare seq 12 {hashes(filled)[-1]} with the head the project published")


def test_replay_verify_json(filled: Path) -> None:
    result = cli("replay", "--verify", "--chain-only", "--json", "--ledger", filled)
    assert result.exit_code == 0
    chain = json.loads(result.stdout)["chain"]
    assert chain["ok"] is True and chain["problem"] is None
    assert chain["head"] == {"seq": 12, "hash": hashes(filled)[-1]}
    assert (chain["events"], chain["bytes"]) == (12, filled.stat().st_size)


def test_replay_verify_head_moves_with_appends(filled: Path) -> None:
    cli("append", "--ledger", filled, input=draft_json(run_retracted(2)))
    result = cli("replay", "--verify", "--chain-only", "--ledger", filled)
    assert f"head seq 13 {hashes(filled)[-1]}" in result.stdout


def test_replay_without_verify_is_refused(filled: Path) -> None:
    result = cli("replay", "--ledger", filled)
    assert result.exit_code != 0 and "--verify" in result.stderr


def test_repair_needs_to_be_told_what_to_repair(filled: Path) -> None:
    result = cli("repair", "--ledger", filled)
    assert result.exit_code != 0 and "--truncate-torn-tail" in result.stderr


def test_repair_restores_a_lost_newline_instead_of_deleting_the_event(filled: Path) -> None:
    whole = filled.read_bytes()
    filled.write_bytes(whole[:-1])  # `truncate -s -1`: the last, acknowledged event lost only its newline
    said = cli("replay", "--verify", "--chain-only", "--ledger", filled)  # what verify says agrees with repair
    assert said.exit_code == 1 and "is complete but its newline is missing" in said.output, said.output
    assert "it restores the newline and removes nothing" in said.output and "incomplete" not in said.output
    result = cli("repair", "--truncate-torn-tail", "--ledger", filled)
    assert result.exit_code == 0, result.output
    assert "newline restored, nothing removed" in result.stdout
    assert filled.read_bytes() == whole
    assert cli("replay", "--verify", "--chain-only", "--ledger", filled).exit_code == 0


def test_repair_removes_a_genuinely_incomplete_final_line(filled: Path) -> None:
    whole = filled.read_bytes()
    last = whole[:-1].rsplit(b"\n", 1)[1] + b"\n"
    filled.write_bytes(whole[:-10])  # a torn final line: its hash cut short
    said = cli("replay", "--verify", "--chain-only", "--ledger", filled)
    assert said.exit_code == 1 and "incomplete final line" in said.output, said.output
    result = cli("repair", "--truncate-torn-tail", "--ledger", filled)
    assert result.exit_code == 0 and "removed an incomplete final line" in result.stdout
    assert filled.read_bytes() == whole[: -len(last)]


def test_repair_removes_a_complete_line_that_does_not_link(filled: Path) -> None:
    whole = filled.read_bytes()
    lines = whole.splitlines(keepends=True)
    forged = lines[-1][:-1].replace(b'"prev":"', b'"prev":"0', 1)[:-2] + b'"}'  # parses, but links nowhere
    filled.write_bytes(b"".join(lines[:-1]) + forged)
    said = cli("replay", "--verify", "--chain-only", "--ledger", filled)  # as repair tells it: not complete
    assert said.exit_code == 1 and "incomplete final line" in said.output, said.output
    result = cli("repair", "--truncate-torn-tail", "--ledger", filled)
    assert result.exit_code == 0 and "removed an incomplete final line" in result.stdout
    assert filled.read_bytes() == b"".join(lines[:-1])


@pytest.mark.parametrize("content", [b"root:x:0:0:root:/root:/bin/bash\nno newline at the end", b"just text", b"{\"a\": 1}\n{\"b\""])
def test_repair_refuses_a_file_that_is_not_a_ledger(tmp_path: Path, content: bytes) -> None:
    other = tmp_path / "notes.txt"
    other.write_bytes(content)
    result = cli("repair", "--truncate-torn-tail", "--ledger", other)
    assert result.exit_code == 2 and "not a cbledger ledger" in result.stderr
    assert other.read_bytes() == content


# --------------------------------------------------------------------------- where the ledger is


def test_ledger_from_the_environment(tmp_path: Path) -> None:
    path = tmp_path / "env" / "events.jsonl"
    env = {"CBLEDGER_LEDGER": str(path)}
    assert cli("init", env=env).exit_code == 0
    assert path.is_file()
    assert cli("append", env=env, input=draft_json(run_recorded(1))).exit_code == 0
    result = cli("replay", "--verify", "--chain-only", env=env)
    assert result.exit_code == 0 and "chain ok: 2 events" in result.stdout
    assert "run.recorded:run-000001" in cli("log", env=env).stdout


def test_the_flag_overrides_the_environment(tmp_path: Path) -> None:
    from_env, from_flag = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    env = {"CBLEDGER_LEDGER": str(from_env)}
    assert cli("init", "--ledger", from_flag, env=env).exit_code == 0
    assert from_flag.is_file() and not from_env.exists()
    cli("append", "--ledger", from_flag, env=env, input=draft_json(run_recorded(1)))
    assert len(from_flag.read_bytes().splitlines()) == 2
    assert cli("log", env=env).exit_code != 0  # the environment's ledger does not exist


def test_default_location_under_the_project_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    expected = tmp_path / "results" / "ledger" / "events.jsonl"
    monkeypatch.chdir(tmp_path)
    assert cli("init").exit_code == 0
    assert expected.is_file()

    other = tmp_path / "other-root"
    assert cli("init", "--root", other).exit_code == 0
    assert (other / "results" / "ledger" / "events.jsonl").is_file()

    third = tmp_path / "third-root"
    assert cli("init", env={"CBLEDGER_ROOT": str(third)}).exit_code == 0
    assert (third / "results" / "ledger" / "events.jsonl").is_file()
    assert len(expected.read_bytes().splitlines()) == 1  # untouched by the other two
