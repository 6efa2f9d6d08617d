"""Projection snapshots: resuming a fold from one equals folding from seq 1, and a snapshot the
ledger does not confirm (or another code's) is ignored with one line saying why."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cbledger.ledger.store import LedgerStore
from cbledger.projections import snapshot
from cbledger.projections.fold import ProjectionError
from cbledger.projections.writers import (
    LedgerFollower,
    follow,
    load_state,
    save_snapshot,
    snapshot_files,
)
from cbledger.reproduce.regenerate import Regenerator
from cbledger.workspace import Workspace
from tests.factories import (
    MAINTAINER,
    grade_recorded,
    rich_stream,
    run_cli,
    run_id,
    runs_and_grades,
)
from tests.test_ledger_checkpoints import Project
from tests.test_projections_fold import build, op, views
from tests.test_watch import _edit_in_place, assert_equals_full_rebuild


def _ledger(path: Path, drafts: list) -> LedgerStore:
    store = LedgerStore(path)
    store.init("projection-test", MAINTAINER)
    if drafts[1:]:
        store.append(drafts[1:])
    return store


def _snapshot_at(path: Path, directory: Path, seq: int) -> Path | None:
    """A snapshot of the ledger's first `seq` events, as a process that folded only those writes it."""
    follower = LedgerFollower(path)
    follower.projector.apply(follower.store.read(until=seq))
    return save_snapshot(follower, directory)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=st.lists(op, max_size=30), cut=st.integers(0, 200))
def test_folding_on_from_a_snapshot_equals_folding_from_seq_1(ops, cut):
    drafts = build(ops).drafts()
    with tempfile.TemporaryDirectory() as tmp:
        path, directory = Path(tmp) / "events.jsonl", Path(tmp) / "snapshots"
        store = _ledger(path, drafts)
        at = 1 + cut % store.head().seq  # 1..head
        written = _snapshot_at(path, directory, at)
        assert written == directory / f"{at}.msgpack"
        notes: list[str] = []
        resumed = follow(path, directory, notes.append)
        assert notes == []
        assert resumed.base_seq == at  # it did resume, rather than fold from seq 1
        assert views(resumed.state) == views(load_state(path))


def test_a_snapshot_at_the_head_is_the_state_and_later_appends_fold_onto_it(tmp_path):
    drafts = rich_stream().drafts()
    path, directory = tmp_path / "events.jsonl", tmp_path / "snapshots"
    store = _ledger(path, drafts[: len(drafts) // 2])
    follower = follow(path, directory)
    assert save_snapshot(follower, directory) is not None
    again = follow(path, directory)
    assert again.base_seq == store.head().seq
    assert save_snapshot(again, directory) is None  # nothing newer than the snapshot it resumed from
    store.append(drafts[len(drafts) // 2:])
    assert views(follow(path, directory).state) == views(load_state(path))


def test_a_resumed_fold_reads_the_file_from_the_snapshot_on(tmp_path):
    """The snapshot's offset is where reading starts: an event before it is not read again (an
    edit in place there is `replay --verify`'s to find, not a projection's)."""
    path, directory = tmp_path / "events.jsonl", tmp_path / "snapshots"
    _ledger(path, rich_stream().drafts())
    _snapshot_at(path, directory, 40)
    data = path.read_bytes()
    lines = data.split(b"\n")
    lines[2] = b"x" * len(lines[2])  # seq 3 mangled, every offset kept
    path.write_bytes(b"\n".join(lines))
    with pytest.raises(ProjectionError, match="seq 3"):
        load_state(path)
    state = follow(path, directory).state
    assert state.head_seq == len(rich_stream().events)


def test_only_the_two_newest_snapshots_are_kept(tmp_path):
    path, directory = tmp_path / "events.jsonl", tmp_path / "snapshots"
    _ledger(path, rich_stream().drafts())
    for seq in (10, 20, 30):
        _snapshot_at(path, directory, seq)
    assert [seq for seq, _ in snapshot_files(directory)] == [30, 20]
    # one written behind the newest (another ledger sharing the directory) is not removed at once
    # and named as kept: it goes with the next one written past it
    behind = _snapshot_at(path, directory, 15)
    assert behind is not None and behind.is_file()
    assert [seq for seq, _ in snapshot_files(directory)] == [30, 20, 15]
    _snapshot_at(path, directory, 40)
    assert [seq for seq, _ in snapshot_files(directory)] == [40, 30]


def _ignored(path: Path, directory: Path) -> str:
    notes: list[str] = []
    follower = follow(path, directory, notes.append)
    assert follower.base_seq == 0  # folded from seq 1
    assert views(follower.state) == views(load_state(path))
    assert len(notes) == 1 and notes[0].startswith("snapshot ignored, folding from seq 1: ")
    assert str(directory) in notes[0]
    return notes[0]


@pytest.mark.parametrize(("kept", "why"), [
    (lambda d: d[:5] + d[6:], "rewritten"),  # the same events but one: every hash from seq 6 on differs
    (lambda d: d[:20], "no event at seq 30"),  # cut short before the snapshot's seq
])
def test_a_snapshot_of_a_ledger_rewritten_or_cut_short_is_ignored(tmp_path, kept, why):
    path, directory = tmp_path / "events.jsonl", tmp_path / "snapshots"
    drafts = rich_stream().drafts()
    _ledger(path, drafts)
    _snapshot_at(path, directory, 30)
    path.unlink()
    _ledger(path, kept(drafts))
    assert why in _ignored(path, directory)


class _Taken:
    """A ledger and its snapshot at `seq`, whose frames (MAGIC, then length-prefixed MessagePack:
    the header, the state's rest, its chunks) a test edits and writes back."""

    def __init__(self, tmp_path: Path, seq: int) -> None:
        self.path, self.directory = tmp_path / "events.jsonl", tmp_path / "snapshots"
        _ledger(self.path, rich_stream().drafts())
        target = _snapshot_at(self.path, self.directory, seq)
        assert target is not None
        self.target = target
        data = target.read_bytes()
        assert data.startswith(snapshot.MAGIC)
        self.frames, i = [], len(snapshot.MAGIC)
        while i < len(data):
            n = int.from_bytes(data[i:i + 8], "little")
            self.frames.append(data[i + 8:i + 8 + n])
            i += 8 + n
        self.header = msgspec.msgpack.decode(self.frames[0])

    def write(self, header: dict | None = None, rest: object = None) -> None:
        frames = [msgspec.msgpack.encode({**self.header, **(header or {})}),
                  self.frames[1] if rest is None else msgspec.msgpack.encode(rest), *self.frames[2:]]
        self.target.write_bytes(snapshot.MAGIC + b"".join(len(f).to_bytes(8, "little") + f for f in frames))

    def ignored(self) -> str:
        return _ignored(self.path, self.directory)


def test_a_snapshot_of_another_projection_version_or_format_is_ignored(tmp_path):
    taken = _Taken(tmp_path, 30)
    assert len(taken.frames) > 3  # header, the rest, chunks of runs and grades
    taken.write({"projection": "0.old"})
    assert "projection version 0.old" in taken.ignored()
    taken.write({"format": snapshot.FORMAT + 1})
    assert f"snapshot format {snapshot.FORMAT + 1}" in taken.ignored()
    taken.write(rest={"head_seq": "thirty"})
    assert "does not decode" in taken.ignored()
    taken.write()
    taken.target.write_bytes(taken.target.read_bytes()[:-10])
    assert "cut short" in taken.ignored()
    taken.target.write_bytes(b"not a snapshot")
    assert "not a snapshot" in taken.ignored()


def test_a_snapshot_damaged_where_it_still_decodes_is_ignored_not_projected(tmp_path):
    """Only the header was checked: a tier changed in a run chunk decoded, folded on, and became
    the published records and LEADERBOARD.md (a full verify caught it; `--since-checkpoint`,
    which starts from the snapshot, did not)."""
    taken = _Taken(tmp_path, 30)
    chunk = next(i for i, f in enumerate(taken.frames) if i > 1 and b"simple" in f)
    taken.frames[chunk] = taken.frames[chunk].replace(b"simple", b"medium", 1)
    taken.write()
    assert "its seal does not verify with this user's snapshot key" in taken.ignored()
    del taken.frames[-1]  # the closing frame, with the digest
    taken.write()
    assert "cut short (no closing frame)" in taken.ignored()


def test_a_snapshot_sealed_by_another_key_is_ignored_and_the_check_compares_with_seq_1(tmp_path, monkeypatch, request):
    """A results directory handed over with a snapshot in it (forced into git, in a tarball)
    decided what `project leaderboard --check` and `replay --verify --since-checkpoint` compared
    the published outputs with: a forger's state, folded into forged outputs, passed both, since
    the digest was one anyone could compute. Now only this user's key seals a snapshot."""
    drafts = rich_stream().drafts()
    root, ledger = _project(tmp_path, drafts)
    theirs, mine = tmp_path / "theirs.key", tmp_path / "mine.key"
    request.addfinalizer(snapshot._key.cache_clear)  # read again, under the environment restored
    monkeypatch.setenv(snapshot.KEY_ENV, str(theirs))
    snapshot._key.cache_clear()
    # the forger: a state whose first graded run passed, sealed with their own key, and the
    # outputs projected from it
    follower = follow(ledger)
    run = next(rid for rid, per in follower.state.grades.items() if any(e.grade.verdict == "fail" for e in per.values()))
    per = follower.state.grades[run]
    version = next(v for v, e in per.items() if e.grade.verdict == "fail")
    per[version] = msgspec.structs.replace(per[version], grade=msgspec.structs.replace(
        per[version].grade, verdict="pass", partial_credit=1.0, first_failed_required=None, failure_category=None,
        assertions=[msgspec.structs.replace(a, status="pass") for a in per[version].grade.assertions]))
    forged = save_snapshot(follower, root / "results" / "ledger" / "snapshots")
    assert forged is not None and theirs.stat().st_mode & 0o777 == 0o600
    assert run_cli(["project", "all", "--root", root]).exit_code == 0
    assert run_cli(["project", "leaderboard", "--check", "--root", root]).exit_code == 0  # their own key: consistent
    monkeypatch.setenv(snapshot.KEY_ENV, str(mine))
    snapshot._key.cache_clear()
    check = run_cli(["project", "leaderboard", "--check", "--root", root])
    assert check.exit_code == 1, check.output
    assert f"snapshot ignored, folding from seq 1: {forged}: its seal does not verify" in check.stderr
    assert mine.read_bytes() != theirs.read_bytes() and len(mine.read_bytes()) == 32
    records = run_cli(["project", "records", "--check", "--root", root])
    assert records.exit_code == 1, records.output


def test_without_a_snapshot_key_to_keep_no_snapshot_is_written_and_the_command_says_why(tmp_path, monkeypatch, request):
    """Sealed with a key of its own, each command wrote a snapshot the next one refused as
    "written on another machine or by another user"; with no home at all, every project command
    ended in a traceback."""
    root, _ledger_path = _project(tmp_path, rich_stream().drafts())
    request.addfinalizer(snapshot._key.cache_clear)
    blocked = tmp_path / "file"
    blocked.write_text("")
    monkeypatch.setenv("XDG_STATE_HOME", str(blocked / "state"))  # under a file: never made
    monkeypatch.delenv(snapshot.KEY_ENV, raising=False)
    snapshot._key.cache_clear()
    first = run_cli(["project", "all", "--root", root])
    assert first.exit_code == 0, first.output
    assert "no snapshot written: the snapshot key " in first.stderr and "every fold starts at seq 1" in first.stderr
    # why, and the way out: it said only "cannot be made or is not 32 bytes"
    assert "cannot be read (Not a directory; set $CBLEDGER_SNAPSHOT_KEY to a file of your own)" in first.stderr, first.stderr
    assert not (root / "results" / "ledger" / "snapshots").exists() or not list((root / "results" / "ledger" / "snapshots").iterdir())
    monkeypatch.delenv("XDG_STATE_HOME")
    monkeypatch.delenv("HOME", raising=False)
    monkeypatch.setattr(Path, "home", classmethod(lambda cls: (_ for _ in ()).throw(RuntimeError("no home"))))
    snapshot._key.cache_clear()
    again = run_cli(["project", "all", "--root", root])
    assert again.exit_code == 0, again.output
    assert "no snapshot written: no home directory to keep the snapshot key in" in again.stderr


def test_a_snapshot_of_a_database_ledger_is_checked_by_seq(tmp_path):
    """Without a byte offset (a database ledger keeps none) the event is found by its seq."""
    taken = _Taken(tmp_path, 25)
    assert taken.header["offset"] > 0
    taken.write({"offset": None})
    path, directory = taken.path, taken.directory
    resumed = follow(path, directory)
    assert resumed.base_seq == 25
    assert views(resumed.state) == views(load_state(path))


# --------------------------------------------------------------------------- the commands


def _project(tmp_path: Path, drafts: list) -> tuple[Path, Path]:
    root = tmp_path / "project"
    ledger = root / "results" / "ledger" / "events.jsonl"
    _ledger(ledger, drafts)
    return root, ledger


def _cli_json(root: Path, *args: str | Path) -> dict:
    result = run_cli([*args, "--json", "--root", root])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_project_all_keeps_a_snapshot_and_the_next_fold_resumes_from_it(tmp_path):
    drafts = rich_stream().drafts()
    half = len(drafts) // 2
    root, ledger = _project(tmp_path, drafts[:half])
    first = _cli_json(root, "project", "all")["snapshot"]
    assert first == {"path": str(root / "results" / "ledger" / "snapshots" / f"{half}.msgpack"),
                     "seq": half, "resumedFrom": 0}
    LedgerStore(ledger).append(drafts[half:])
    second = _cli_json(root, "project", "all")["snapshot"]
    assert second["resumedFrom"] == half and second["seq"] == len(drafts)
    assert_equals_full_rebuild(root, ledger, tmp_path)
    # a snapshot that cannot be used costs a line on stderr, never the result
    Path(second["path"]).write_bytes(b"garbage")
    result = run_cli(["project", "leaderboard", "--check", "--root", root])
    assert result.exit_code == 0, result.output
    assert result.stderr.startswith(f"snapshot ignored, folding from seq 1: {second['path']}: not a snapshot")


def test_watch_starts_from_the_snapshot_and_equals_a_full_rebuild(tmp_path):
    drafts = rich_stream().drafts()
    root, ledger = _project(tmp_path, drafts[:-5])
    assert run_cli(["project", "all", "--root", root]).exit_code == 0
    LedgerStore(ledger).append(drafts[-5:])
    result = run_cli(["watch", "--once", "--root", root])
    assert result.exit_code == 0, result.output
    assert f"5 event(s) folded, head seq {len(drafts)}; rebuilt from the snapshot at seq {len(drafts) - 5}" in result.stdout
    assert_equals_full_rebuild(root, ledger, tmp_path)


def test_a_watch_keeps_a_snapshot_once_it_folded_enough_past_the_last(tmp_path, monkeypatch):
    from cbledger.reproduce import watch

    drafts = rich_stream().drafts()
    root, ledger = _project(tmp_path, drafts[:-5])
    assert run_cli(["project", "all", "--root", root]).exit_code == 0
    LedgerStore(ledger).append(drafts[-5:])
    snapshots = root / "results" / "ledger" / "snapshots"
    monkeypatch.setattr(watch, "SNAPSHOT_AFTER", 6)  # five folded: not enough
    assert run_cli(["watch", "--once", "--root", root]).exit_code == 0
    assert [seq for seq, _ in snapshot_files(snapshots)] == [len(drafts) - 5]
    monkeypatch.setattr(watch, "SNAPSHOT_AFTER", 5)
    result = run_cli(["watch", "--once", "--root", root])
    assert result.exit_code == 0, result.output
    assert f"snapshot at seq {len(drafts)}" in result.stdout
    assert [seq for seq, _ in snapshot_files(snapshots)] == [len(drafts), len(drafts) - 5]
    # the next start-up resumes from it: nothing left to fold
    result = run_cli(["watch", "--once", "--root", root])
    assert f"0 event(s) folded, head seq {len(drafts)}; rebuilt from the snapshot at seq {len(drafts)}" in result.stdout
    assert_equals_full_rebuild(root, ledger, tmp_path)


def test_a_watch_resumed_from_a_snapshot_still_refuses_an_edit_in_place_after_it(tmp_path):
    drafts = rich_stream().drafts()
    root, ledger = _project(tmp_path, drafts[:20])
    assert run_cli(["project", "all", "--root", root]).exit_code == 0
    LedgerStore(ledger).append(drafts[20:30])
    regen = Regenerator(Workspace.at(root, ledger))
    update = regen.refresh()
    assert update is not None and update.resumed_from == 20 and update.folded == 10
    _edit_in_place(ledger, 25)
    assert regen.refresh() is None
    assert regen.problem is not None and "seq 25" in regen.problem and regen.written_seq == 30


def _replay(root: Path) -> dict:
    """`replay --verify --since-checkpoint` of a ledger whose runs have no bundles: which runs it
    selects is what is looked at (each selected one fails: exit 3)."""
    result = run_cli(["replay", "--verify", "--since-checkpoint", "--no-projections", "--json", "--root", root])
    assert result.exit_code == 3, result.output
    return json.loads(result.stdout)


def test_checkpoint_keeps_a_snapshot_and_since_checkpoint_regrades_only_what_came_after(tmp_path):
    p = Project(tmp_path)
    assert p.cli("key", "generate", "--out", p.skey, "--name", "test.example/ledger").exit_code == 0
    none = _replay(p.root)
    assert none["sinceCheckpoint"] is None and none["runs"]["counts"]["notSelected"] == 0
    assert "no-checkpoint" in [n["kind"] for n in none["notes"]]
    doc = _cli_json(p.root, "checkpoint", "--key", p.skey)
    assert doc["snapshot"] == "results/ledger/snapshots/12.msgpack" and (p.root / doc["snapshot"]).is_file()
    p.append(runs_and_grades(4, start=5))  # runs 5 and 6, after the checkpoint
    p.append([grade_recorded(2, suite_version="1.2.0")])  # run 2 re-graded after it
    report = _replay(p.root)
    assert report["sinceCheckpoint"] == {"path": "results/checkpoints/11.txt", "size": 11}
    assert report["options"]["since"] == 11 and report["options"]["sinceCheckpoint"] is True
    assert sorted(r["runId"] for r in report["runs"]["results"]) == [run_id(2), run_id(5), run_id(6)]
    assert report["runs"]["counts"]["notSelected"] == 3 and report["chain"]["events"] == 17
    text = run_cli(["replay", "--verify", "--since-checkpoint", "--no-projections", "--root", p.root]).stdout
    assert "since checkpoint: results/checkpoints/11.txt (size 11): runs recorded at seq 11 or before" in text
    both = run_cli(["replay", "--verify", "--since-checkpoint", "--since", "3", "--root", p.root])
    assert both.exit_code == 2 and "--since-checkpoint" in both.stderr


def _distinct_values(state) -> tuple[int, int]:
    """How many distinct objects the runs' tasks and the grades' assertion outcomes are."""
    tasks = {id(e.run.task) for e in state.runs.values()}
    outcomes = {id(a) for per in state.grades.values() for g in per.values() for a in g.grade.assertions}
    return len(tasks), len(outcomes)


def test_a_resumed_state_shares_the_values_its_runs_repeat_as_a_fold_does(tmp_path):
    path, directory = tmp_path / "events.jsonl", tmp_path / "snapshots"
    _ledger(path, rich_stream().drafts())
    _snapshot_at(path, directory, len(rich_stream().events))
    resumed, folded = follow(path, directory).state, load_state(path)
    assert _distinct_values(resumed) == _distinct_values(folded)
    assert _distinct_values(folded)[0] < len(folded.runs)


def test_runs_grades_and_passes_in_many_chunks_come_back_in_order(tmp_path, monkeypatch):
    monkeypatch.setattr(snapshot, "CHUNK", 4)
    taken = _Taken(tmp_path, len(rich_stream().events))
    state = load_state(taken.path)
    assert len(taken.frames) - 2 >= len(state.runs) // 4 + len(state.grades) // 4
    resumed = follow(taken.path, taken.directory)
    assert resumed.base_seq == state.head_seq
    assert views(resumed.state) == views(state)
    assert list(resumed.state.runs) == list(state.runs) and list(resumed.state.grades) == list(state.grades)
