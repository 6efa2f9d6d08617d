"""Every writing command killed at each of its write steps, or failing there as a full or broken
disk fails it (tests/faults.py): the ledger still verifies, every output is the old file or the
whole new one, and running the command again leaves exactly what an uninterrupted run leaves,
byte for byte, with no temporary file behind. A failing write is one line naming the file, exit 2.

Appends themselves (torn tails, acknowledged events never lost) are tests/test_ledger_crash.py;
`cbledger run` killed mid-suite is tests/test_runner_crash.py; the PostgreSQL store under a
restarting server is tests/test_ledger_postgres_restart.py.
"""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
from collections.abc import Callable, Sequence
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

import pytest

from cbledger.ledger import durable
from cbledger.ledger.verify import verify_chain
from cbledger.projections import packed, readmodel
from tests import faults
from tests.factories import Stream, new_ledger, run_cli

pytestmark = pytest.mark.slow  # some 25 s of forked commands: started first under xdist

REPO = Path(__file__).resolve().parent.parent
LEDGER = "results/ledger/events.jsonl"
SNAPSHOTS = "results/ledger/snapshots/"
BATCH_MARK = "results/ledger/.events.jsonl.batch"
BOARD = "antmicro-microphone-board"
#: what a killed writer may leave until the next run of the command clears it: a file staged
#: under a dead process's name, a fixture tree being staged, a scaffold under its marker,
#: SQLite's rollback journal (the next reader rolls it back)
DEBRIS = re.compile(r"(^|/)\.[^/]+\.\d+(-[a-z0-9_]+)?\.tmp$|(^|/)\.tree-(new|old)-\d+-[a-z0-9_]+/"
                    r"|\.sqlite-journal$")


def tiny_stream() -> Stream:
    s = Stream()
    s.task("rename-net")
    s.task("move-label", tier="medium")
    s.suite("1.0.0")
    s.graded_run("rename-net", "vendor:model-a", "pass")
    s.graded_run("move-label", "vendor:model-a", "fail", category="wrong-target")
    s.graded_run("rename-net", "cheap:model-b", "pass", segment="api-cheap", usd_micros=9000)
    bad = s.graded_run("move-label", "cheap:model-b", "fail", category="stalled", segment="api-cheap", usd_micros=9000)
    s.retract(bad)
    return s


def ledger_of(base: Path, upto: int | None = None) -> None:
    drafts = tiny_stream().drafts()
    new_ledger(base / LEDGER, "faults").append(drafts[1:upto])


def projected_then_grown(base: Path) -> None:
    """Outputs of an earlier ledger in place, then more events: a regeneration replaces files."""
    drafts = tiny_stream().drafts()
    store = new_ledger(base / LEDGER, "faults")
    store.append(drafts[1:6])
    assert run_cli(["project", "all", "--root", base]).exit_code == 0
    store.append(drafts[6:])


def packed_then_grown(base: Path) -> None:
    """Records packed into one SQLite file (`results/records.sqlite`), then more events."""
    drafts = tiny_stream().drafts()
    store = new_ledger(base / LEDGER, "faults")
    store.append(drafts[1:6])
    assert run_cli(["project", "records", "--layout", "packed", "--root", base]).exit_code == 0
    store.append(drafts[6:])


def with_key(base: Path) -> None:
    ledger_of(base)
    (base / "private").mkdir(mode=0o700)
    made = run_cli(["key", "generate", "--out", base / "private" / "l.skey", "--name", "test.example/ledger", "--root", base])
    assert made.exit_code == 0, made.output


def led_project(base: Path) -> None:
    for fixture in ("synthetic-led-resistor", "synthetic-mcu-sensor-drift"):
        shutil.copytree(REPO / "fixtures" / fixture, base / "fixtures" / fixture)
    for task in ("led-resistor-swap", "led-current-refusal", "mcu-pullup-drift-flag"):
        shutil.copytree(REPO / "tasks" / task, base / "tasks" / task)
    (base / "suites").mkdir()
    (base / "suites" / "trio.json").write_text(json.dumps(
        {"name": "trio", "tasks": ["led-resistor-swap", "led-current-refusal", "mcu-pullup-drift-flag"]}))


def led_ledger(base: Path) -> None:
    led_project(base)
    assert run_cli(["init", "--root", base]).exit_code == 0


def board_manifest(base: Path) -> None:
    shutil.copytree(REPO / "fixtures" / BOARD, base / "fixtures" / BOARD, ignore=shutil.ignore_patterns("tree", "baseline"))
    (base / "tasks").mkdir()


@dataclass(frozen=True)
class Command:
    name: str
    setup: Callable[[Path], None]
    args: Sequence[str]
    #: at most this many kill points, spread over the steps (0: every step)
    sample: int = 0
    #: needs ../shared/real
    shared: bool = False
    #: what a re-run says, exit 2, when the kill came after the command's work was recorded
    #: (a command that refuses to record the same thing twice rather than repeating it)
    done: str | None = None


COMMANDS = [
    Command("project-all", projected_then_grown, ["project", "all"], sample=8),
    Command("project-leaderboard", ledger_of, ["project", "leaderboard"]),
    Command("project-records", projected_then_grown, ["project", "records"]),
    Command("project-records-packed", packed_then_grown, ["project", "records"]),
    Command("project-readmodel", projected_then_grown, ["project", "readmodel"]),
    Command("project-site", projected_then_grown, ["project", "site"], sample=6),
    Command("project-snapshot", ledger_of, ["project", "snapshot", "-o", "{W}/snap.json"]),
    Command("watch-once", projected_then_grown, ["watch", "--once"], sample=6),
    Command("checkpoint", with_key, ["checkpoint", "--key", "{W}/private/l.skey"]),
    Command("pricing-publish", ledger_of, ["pricing", "publish", "{W}/prices.json"]),
    Command("import", ledger_of, ["import", "{SHARED}/reference-records/results", "--source", "ref"], shared=True),
    Command("export", ledger_of, ["export", "--jsonl", "-o", "{W}/out.jsonl"]),
    Command("init", led_project, ["init"], done="a ledger already exists here"),
    Command("suite-bump", led_ledger, ["suite", "bump", "--reason", "first", "--skip-trial"], sample=8,
            done="nothing changed since suite 1.0.0"),
    Command("task-new", led_project, ["task", "new", "led-note", "--fixture", "synthetic-led-resistor", "--tier", "simple",
                                      "--outcome", "edit", "--prompt", "Register the budget.", "--budget", "led_current_ma=10"]),
    Command("fixture-materialize", board_manifest, ["fixture", "materialize", BOARD, "--from", "{SHARED}/fixtures/" + BOARD],
            sample=9, shared=True),
]


def _prices(base: Path) -> None:
    (base / "prices.json").write_text(json.dumps({"tableVersion": "t-2026", "effectiveDate": "2026-01-01", "models": {
        "gpt-test": {"segment": "api-frontier", "pinning": "strong", "input": "1.00", "output": "10.00"}}}))


def tree(root: Path) -> dict[str, object]:
    """Every file under `root` by relative path: its bytes, or for an SQLite file (the read
    model, packed records) what it holds as SQLite reads it, a hot journal rolled back first
    (SQLite's bytes are not a function of its content)."""
    out: dict[str, object] = {}
    for p in sorted(root.rglob("*")):
        if p.is_file() and not p.name.startswith(".") and p.suffix == ".db":
            out[p.relative_to(root).as_posix()] = readmodel.content_digest(p)
        elif p.is_file() and not p.name.startswith(".") and p.suffix == ".sqlite":
            with closing(sqlite3.connect(p)) as conn:
                out[p.relative_to(root).as_posix()] = conn.execute(
                    f"SELECT path, body FROM {packed.TABLE} ORDER BY path").fetchall()
    for p in sorted(root.rglob("*")):  # after the databases' journals were rolled back
        rel = p.relative_to(root).as_posix()
        if p.is_file() and rel not in out:
            out[rel] = p.read_bytes()
    return out


def _events(data: object) -> list[tuple[str, str]]:
    assert isinstance(data, bytes)
    return [(e["event"]["id"], e["event"]["type"]) for e in map(json.loads, data.splitlines())]


class Workspaces:
    """The state before, the state an uninterrupted run leaves, and a scratch copy to break."""

    def __init__(self, tmp: Path, command: Command, shared: Path | None) -> None:
        self.base, self.work = tmp / "base", tmp / "work"
        self.base.mkdir()
        command.setup(self.base)
        _prices(self.base)
        self.args = [a.replace("{W}", str(self.work)).replace("{SHARED}", str(shared)) for a in command.args]
        self.args += ["--root", str(self.work)]
        self.old = tree(self.base)
        done = self.run()
        assert done.exit_code == 0, done.stderr
        self.steps = done.steps
        self.new = tree(self.work)

    def reset(self) -> None:
        shutil.rmtree(self.work, ignore_errors=True)
        shutil.copytree(self.base, self.work, symlinks=True)

    def run(self, at: int = 0, action: str = "kill") -> faults.Outcome:
        if at:
            self.reset()
        else:
            if not self.work.exists():
                self.reset()
        return faults.run(self.args, at, action, cwd=self.work)

    def check_ledger(self, where: str) -> None:
        ledger = self.work / LEDGER
        if ledger.exists() and ledger.stat().st_size:
            report = verify_chain(ledger)
            assert report.ok, f"{where}: {report.problem}"
            assert ledger.read_bytes().startswith(self.old.get(LEDGER, b"")), f"{where}: the ledger lost events"  # type: ignore[arg-type]

    def check_each_file_old_or_new(self, where: str, debris_allowed: bool) -> None:
        for rel, data in tree(self.work).items():
            if rel in (LEDGER, BATCH_MARK) or rel.startswith(SNAPSHOTS):
                # appended events carry their own time; checked by the chain (which reads a batch's
                # mark) and after the re-run
                continue
            if DEBRIS.search(rel) or rel.endswith("/.incomplete"):
                assert debris_allowed, f"{where}: {rel} left behind"
                continue
            if rel.startswith("tasks/led-note/") and (self.work / "tasks/led-note/.incomplete").exists():
                continue  # a scaffold under its marker is no task to any reader
            assert data in (self.old.get(rel), self.new.get(rel)), f"{where}: {rel} is neither the old file nor the new one"

    def check_same_as_uninterrupted(self, where: str) -> None:
        now = tree(self.work)
        assert sorted(now) == sorted(self.new), f"{where}: {sorted(set(now) ^ set(self.new))} differ from an uninterrupted run"
        same_ledger = now.get(LEDGER) == self.new.get(LEDGER)
        for rel, data in self.new.items():
            if rel == LEDGER:
                assert _events(now[rel]) == _events(data), f"{where}: other events than an uninterrupted run"
            elif same_ledger or not rel.startswith(SNAPSHOTS):
                assert now[rel] == data, f"{where}: {rel} differs from an uninterrupted run's"


def _points(command: Command, steps: int) -> list[int]:
    if not command.sample or steps <= command.sample:
        return list(range(1, steps + 1))
    stride = steps / command.sample
    return sorted({min(steps, 1 + round(i * stride)) for i in range(command.sample)} | {steps})


def _params() -> list:
    return [pytest.param(c, id=c.name, marks=[pytest.mark.shared] if c.shared else []) for c in COMMANDS]


@pytest.fixture
def shared_dir(request: pytest.FixtureRequest) -> Path | None:
    command: Command = request.node.callspec.params["command"]
    return request.getfixturevalue("shared_real") if command.shared else None


@pytest.mark.parametrize("command", _params())
def test_killed_at_every_write_step_then_run_again(command: Command, tmp_path: Path, shared_dir: Path | None) -> None:
    ws = Workspaces(tmp_path, command, shared_dir)
    points = _points(command, ws.steps)
    assert ws.steps >= 1 and points
    for n in points:
        where = f"{command.name} killed at write step {n} of {ws.steps}"
        killed = ws.run(n)
        assert killed.killed, f"{where}: exit {killed.exit_code} {killed.stderr[-300:]}"
        ws.check_ledger(where)
        ws.check_each_file_old_or_new(where, debris_allowed=True)
        again = ws.run()
        recorded = command.done is not None and again.exit_code == 2 and command.done in again.stderr
        assert again.exit_code == 0 or recorded, f"{where}, run again: {again.stderr[-500:]}"
        ws.check_ledger(f"{where}, run again")
        ws.check_same_as_uninterrupted(f"{where}, run again")


@pytest.mark.parametrize("action", ["ENOSPC", "EIO"])
@pytest.mark.parametrize("command", _params())
def test_a_failing_disk_is_one_line_naming_the_file_and_nothing_half_written(
    command: Command, action: str, tmp_path: Path, shared_dir: Path | None
) -> None:
    ws = Workspaces(tmp_path, command, shared_dir)
    # a full disk at the first write, the middle one and the last (its rename or its sync); a
    # failing one in the middle
    points = {1, (ws.steps + 1) // 2, ws.steps} if action == "ENOSPC" else {(ws.steps + 1) // 2}
    for n in sorted(points):
        where = f"{command.name} with {action} at write step {n} of {ws.steps}"
        failed = ws.run(n, action)
        ws.check_ledger(where)
        ws.check_each_file_old_or_new(where, debris_allowed=False)
        if failed.exit_code == 0:  # only a snapshot, a cache, failed: said on stderr, the command done
            assert "no snapshot written" in failed.stderr, f"{where}: {failed.stderr}"
        else:
            errors = [line for line in failed.stderr.splitlines() if line.startswith("error:")]
            assert failed.exit_code == 2 and len(errors) == 1 and "Traceback" not in failed.stderr, f"{where}: {failed.stderr}"
            named = errors[0].removeprefix("error: ").rsplit(": ", 1)[0]
            assert named.startswith(str(ws.work)) and named != str(ws.work), f"{where}: {errors[0]} names no file"
            assert not DEBRIS.search(named), f"{where}: {errors[0]} names a staged file, not the one being written"
        again = ws.run()
        recorded = command.done is not None and again.exit_code == 2 and command.done in again.stderr
        assert again.exit_code == 0 or recorded, f"{where}, run again: {again.stderr[-500:]}"
        ws.check_same_as_uninterrupted(f"{where}, run again")


def test_the_sweep_catches_a_writer_that_writes_in_place(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The check above can fail: with `write_atomic` writing straight into its target, a kill
    between the write and the close leaves LEADERBOARD.md truncated, and the sweep says so."""

    def in_place(path: Path, data: bytes | object) -> None:
        with open(path, "wb") as f:
            f.write(data[: len(data) // 2])  # type: ignore[index]
            f.write(data[len(data) // 2:])  # type: ignore[index]

    command = Command("project-leaderboard", ledger_of, ["project", "leaderboard"])
    monkeypatch.setattr(durable, "write_atomic", in_place)
    from cbledger.projections import writers

    monkeypatch.setattr(writers, "write_atomic", in_place)
    ws = Workspaces(tmp_path, command, None)
    with pytest.raises(AssertionError, match=r"LEADERBOARD\.md is neither the old file nor the new one"):
        for n in range(1, ws.steps + 1):
            ws.run(n)
            ws.check_each_file_old_or_new(f"step {n}", debris_allowed=True)


def test_key_generate_killed_at_every_step_leaves_no_empty_or_partial_key(tmp_path: Path) -> None:
    """A key is random, so a re-run makes another: what matters is that `--out` never holds less
    than a whole key, which a later `checkpoint` would refuse with a confusing message."""
    from cbledger.ledger.keys import SigningKey

    base = tmp_path / "base"
    ledger_of(base)
    (base / "private").mkdir(mode=0o700)
    work = tmp_path / "work"
    args = ["key", "generate", "--out", work / "private" / "l.skey", "--name", "test.example/ledger", "--root", work]
    shutil.copytree(base, work)
    steps = faults.run(args, cwd=work).steps
    assert steps >= 2
    for n in range(1, steps + 1):
        shutil.rmtree(work)
        shutil.copytree(base, work)
        assert faults.run(args, n, cwd=work).killed
        key = work / "private" / "l.skey"
        if key.exists():
            assert SigningKey.parse(key.read_text()).name == "test.example/ledger", f"step {n}: a partial key"
            assert key.stat().st_mode & 0o077 == 0, f"step {n}: the key is readable by others"
        else:
            again = faults.run(args, cwd=work)
            assert again.exit_code == 0, f"step {n}, run again: {again.stderr}"
            assert SigningKey.parse(key.read_text()).name == "test.example/ledger"


def test_only_a_dead_writers_staged_files_are_removed(tmp_path: Path) -> None:
    """What the next writer clears: files staged by a process that is gone, never a live
    writer's (its own included) nor a file named otherwise (a run's staged bundle)."""
    import os
    import subprocess
    import sys

    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True, check=True)
    dead, alive = int(gone.stdout), os.getppid()
    names = {
        f".run-1.json.{dead}.tmp": False, f".LEADERBOARD.md.{dead}-ab12cd_3.tmp": False,
        f".run-1.json.{os.getpid()}.tmp": True, f".index.html.{alive}.tmp": True,
        ".r-20260101.bundle.tmp": True, "run-1.json": True, f"run-1.json.{dead}.tmp": True,
    }
    for name in names:
        (tmp_path / name).write_bytes(b"x")
    durable.remove_dead_temps(tmp_path)
    assert {p.name for p in tmp_path.iterdir()} == {name for name, kept in names.items() if kept}
