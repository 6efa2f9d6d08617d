"""`publish` and the cassette: `run.recorded` names the cassette, so the cassette must survive a
power cut that the event survives. Its bytes are synced before it takes its name under
`results/cassettes/`, and that directory is synced after the rename, all before the append.

The order is observed, not timed: every fsync, rename and append is logged as it happens, files
and directories by inode (a staged file is renamed more than once on its way)."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from cbledger.runner import cassette as cassette_mod
from cbledger.runner import dask_executor, execute
from cbledger.runner.agents.base import AgentResult
from cbledger.workspace import Workspace, bundle_name

RUN_ID = "run-durable-1"


def _tape() -> cassette_mod.Cassette:
    call = cassette_mod.Recorded(method="POST", path="/chat/completions", request={"messages": []}, body={"id": "x"})
    return cassette_mod.Cassette(format=cassette_mod.FORMAT, route="openai-compat", model_id="compat:m", exchanges=[call])


def _stage_local(workspace: Workspace) -> tuple[Path, Path] | None:
    return execute.stage_cassette(workspace, RUN_ID, AgentResult(cassette=_tape()))[1]


def _stage_received(workspace: Workspace) -> tuple[Path, Path] | None:
    """A worker's cassette as the driver stages it (only the fields `received_cassette` reads)."""
    data, ref = cassette_mod.stored_form(_tape(), "run")
    run = SimpleNamespace(run_id=RUN_ID, cassette=ref)
    return dask_executor.received_cassette(workspace, run, SimpleNamespace(worker="w", cassette=data))  # type: ignore[arg-type]


class _Store:
    def __init__(self, log: list[tuple]) -> None:
        self.log = log

    def append(self, events: list) -> list:
        self.log.append(("append",))
        return []


@pytest.mark.parametrize("stage", [_stage_local, _stage_received], ids=["local", "from-worker"])
def test_the_cassette_and_its_directory_are_synced_before_the_event_naming_it_is_appended(tmp_path, monkeypatch, stage):
    workspace = Workspace.at(tmp_path)
    staged_bundle = workspace.staged_bundle(RUN_ID)
    staged_bundle.parent.mkdir(parents=True)
    staged_bundle.write_bytes(b"bundle")
    log: list[tuple] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        log.append(("fsync", os.fstat(fd).st_ino))
        real_fsync(fd)

    def replace(src: str | Path, dst: str | Path) -> None:
        log.append(("replace", os.stat(src).st_ino, Path(dst)))
        real_replace(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    files = stage(workspace)
    assert files is not None
    final_bundle = workspace.stored(bundle_name(RUN_ID))
    assert final_bundle is not None
    output = execute.RunOutput(
        run=None, grade=None, events=[], staged=staged_bundle, final=final_bundle,  # type: ignore[arg-type]
        sandbox=None, pending=workspace.pending_events(RUN_ID), cassette=files,
    )
    execute.publish(_Store(log), output)  # type: ignore[arg-type]

    final = files[1]
    assert final.is_file() and not files[0].exists()
    assert final.parent.name == "cassettes" and final.parent != final_bundle.parent
    ino = os.stat(final).st_ino
    renamed = log.index(("replace", ino, final))
    appended = log.index(("append",))
    assert ("fsync", ino) in log[:renamed], "the cassette's bytes were not synced before it took its name"
    assert ("fsync", os.stat(final.parent).st_ino) in log[renamed:appended], "results/cassettes/ was not synced after the rename, before the append"
    assert ("fsync", os.stat(final_bundle.parent).st_ino) in log[:appended]


class _InterruptedStore:
    """A store whose append is interrupted, after writing the batch (`durable`) or before it;
    `holds` answers from what was written, as the ledger would, or raises as a database away
    does (`away`)."""

    def __init__(self, durable: bool, away: bool = False) -> None:
        self.durable, self.away, self.written = durable, away, set()

    def append(self, events: list) -> list:
        if self.durable:
            self.written.update(e.id for e in events)
        raise KeyboardInterrupt

    def holds(self, event_ids) -> bool:
        if self.away:
            from cbledger.ledger.recorder import StoreUnavailable

            raise StoreUnavailable("postgresql://h/db: cannot connect to PostgreSQL: connection refused")
        return set(event_ids) <= self.written


def _published_output(workspace: Workspace, *, cassette_already_there: bool) -> execute.RunOutput:
    from tests.factories import run_recorded

    staged_bundle = workspace.staged_bundle(RUN_ID)
    staged_bundle.parent.mkdir(parents=True)
    staged_bundle.write_bytes(b"bundle")
    files = _stage_local(workspace)
    assert files is not None
    if cassette_already_there:  # another run's cassette with the same content
        files[1].parent.mkdir(parents=True, exist_ok=True)
        files[1].write_bytes(files[0].read_bytes())
    final_bundle = workspace.stored(bundle_name(RUN_ID))
    assert final_bundle is not None
    return execute.RunOutput(
        run=None, grade=None, events=[run_recorded(1, id=f"run.recorded:{RUN_ID}")],  # type: ignore[arg-type]
        staged=staged_bundle, final=final_bundle, sandbox=None,
        pending=workspace.pending_events(RUN_ID), cassette=files,
    )


def test_an_interrupt_after_the_batch_was_made_durable_keeps_the_files_its_events_name(tmp_path):
    output = _published_output(Workspace.at(tmp_path), cassette_already_there=False)
    with pytest.raises(KeyboardInterrupt):
        execute.publish(_InterruptedStore(durable=True), output)  # type: ignore[arg-type]
    assert output.final.is_file() and not output.pending.exists()
    assert output.cassette is not None and output.cassette[1].is_file()


@pytest.mark.parametrize("away", [False, True])
def test_an_interrupt_before_the_batch_landed_keeps_the_finished_run_for_the_next_invocation(tmp_path, away):
    """The run was finished and paid for: it was removed, and the interrupt's line said every
    finished run was recorded. A database that cannot say whether the batch landed (the reason
    Ctrl-C was pressed, often) keeps it too, and the interrupt is what propagates: the ledger's
    error replaced it, and the driver went on running paid runs."""
    output = _published_output(Workspace.at(tmp_path), cassette_already_there=False)
    with pytest.raises(KeyboardInterrupt):
        execute.publish(_InterruptedStore(durable=False, away=away), output)  # type: ignore[arg-type]
    assert output.final.is_file()
    assert output.cassette is not None and output.cassette[1].is_file()
    (line,) = output.pending.read_text().splitlines()
    assert f'"id":"run.recorded:{RUN_ID}"' in line and '"seq"' not in line


def test_an_interrupt_in_the_pause_between_tries_keeps_the_run_too(tmp_path, monkeypatch):
    """The pause ran inside the handler of the failed try, so Ctrl-C there skipped keeping the
    run: its bundle stayed without its events, and the next invocation removed it as an orphan."""
    class Failing(_InterruptedStore):
        def append(self, events: list) -> list:
            raise OSError(5, "Input/output error")

    def interrupted(_seconds: float) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(execute.time, "sleep", interrupted)
    output = _published_output(Workspace.at(tmp_path), cassette_already_there=False)
    with pytest.raises(KeyboardInterrupt):
        execute.publish(Failing(durable=False), output)  # type: ignore[arg-type]
    assert output.final.is_file() and output.pending.is_file()


def test_an_interrupt_whose_run_cannot_be_kept_withdraws_only_what_it_put_in_place(tmp_path, monkeypatch):
    """Events that cannot be kept either: the bundle (and a cassette this run brought) go, a
    cassette already in place stays."""
    def full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    for already in (False, True):
        output = _published_output(Workspace.at(tmp_path / str(already)), cassette_already_there=already)
        monkeypatch.setattr(execute.durable, "write_atomic", full)
        with pytest.raises(KeyboardInterrupt):
            execute.publish(_InterruptedStore(durable=False), output)  # type: ignore[arg-type]
        assert not output.final.exists() and not output.pending.exists()
        assert output.cassette is not None and output.cassette[1].is_file() == already
        monkeypatch.undo()
    # a ledger that cannot say whether the batch landed: the bundle stays for the next
    # invocation to decide (removed, a landed batch would name files it lost)
    output = _published_output(Workspace.at(tmp_path / "away"), cassette_already_there=False)
    monkeypatch.setattr(execute.durable, "write_atomic", full)
    with pytest.raises(KeyboardInterrupt):
        execute.publish(_InterruptedStore(durable=False, away=True), output)  # type: ignore[arg-type]
    assert output.final.is_file() and not output.pending.exists()


