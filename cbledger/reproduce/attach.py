"""A cassette for a run recorded before cassettes existed: recorded at a re-execution, attached
only when that re-execution reproduced the run.

`run.recorded` is immutable, so such a run can never gain its `cassette` field. What can be done
honestly is to run it again from the session script it was served (its suite version's kept
definitions pin that script), with the recording proxy in front of the endpoint as on any run,
and keep what the harness sent this time — but only if the re-execution is identical to the
preserved run (end state, diff, transcript, grade, run-end figures). `cassette.attached` then
says so: which run, which cassette, which session script (by SHA-256) and which copperhead build.
From then on `rerun RUN` is strict against it, requests included.

All or nothing: every run asked for is checked first (known, scripted, not retracted, without a
cassette of its own or attached) and re-executed; if any is refused or any re-execution is not
identical, nothing is written at all. Otherwise the cassettes are written content-addressed under
`results/cassettes/` and the events appended in one batch; a refused append removes the files
this call wrote.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from cbledger.errors import UserError
from cbledger.ledger import durable, semantics
from cbledger.ledger.events import Actor, CassetteAttached, EventBase, make_event
from cbledger.ledger.store import LedgerStore, remove_unless_landed
from cbledger.reproduce import rerun as rerun_mod
from cbledger.runner import cassette as cassette_mod
from cbledger.runner import ledger_view
from cbledger.workspace import Workspace

ACTOR = Actor(kind="runner", name="cbledger-rerun")


@dataclass
class Attached:
    run_id: str
    body: CassetteAttached
    seq: int


@dataclass
class AttachOutcome:
    results: list[rerun_mod.RerunResult] = field(default_factory=list)
    #: empty unless every re-execution was identical and the batch was appended
    attached: list[Attached] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        return max((r.exit_code for r in self.results), default=0)


def event_id(run_id: str) -> str:
    """One attachment per run: a second with another cassette is a conflict the store refuses."""
    return f"cassette.attached:{run_id}"


def candidates(view: ledger_view.LedgerView) -> list[str]:
    """The runs that can be given a cassette: scripted, not retracted, with none yet."""
    return [r.run_id for r in view.runs.values()
            if r.run_mode == "scripted" and r.run_id not in view.retracted and view.cassette(r) is None]


def refusal(view: ledger_view.LedgerView, run_id: str) -> str | None:
    run = view.runs.get(run_id)
    if run is None:
        return f"no run {run_id} in the ledger"
    if run_id in view.retracted:
        return f"run {run_id} is retracted: it is in no view, and a cassette would re-execute nothing anyone reads"
    if view.cassette(run) is not None:
        whose = "was given one" if run_id in view.attached else "recorded its own"
        return f"run {run_id} already has a cassette: it {whose}"
    if run.run_mode != "scripted":
        return f"run {run_id} is a {run.run_mode} run: only a scripted run's session is known, so only it can be re-executed without its model"
    return None


def attach(
    workspace: Workspace, run_ids: list[str], *, copperhead_cli: str | None = None, unsandboxed: bool = False,
    on_done: Callable[[rerun_mod.RerunResult], None] | None = None,
) -> AttachOutcome:
    """Re-executes each run strictly from its kept session (through the run's own copperhead
    build: the project's install, or `copperhead_cli` if it is that build) and, when every one is
    identical, keeps what the proxy recorded as its cassette."""
    view = ledger_view.read(workspace.ledger)
    refused = [why for r in dict.fromkeys(run_ids) if (why := refusal(view, r)) is not None]
    if refused:
        raise UserError("nothing attached: " + "; ".join(refused))
    out = AttachOutcome()
    with rerun_mod.kept_suites(workspace, view) as kept:
        for run_id in dict.fromkeys(run_ids):
            result = rerun_mod.rerun(workspace, run_id, copperhead_cli=copperhead_cli, strict=True,
                                     unsandboxed=unsandboxed, view=view, from_session=True, kept=kept)
            out.results.append(result)
            if on_done is not None:
                on_done(result)
    if any(r.status != "identical" or r.recorded is None or r.session is None for r in out.results):
        return out
    out.attached = _keep(workspace, out.results)
    return out


def _keep(workspace: Workspace, results: list[rerun_mod.RerunResult]) -> list[Attached]:
    files: list[tuple[Path, bytes]] = []
    events: list[EventBase] = []
    bodies: list[CassetteAttached] = []
    for r in results:
        assert r.recorded is not None and r.session is not None
        data, ref = cassette_mod.stored_form(r.recorded, f"run {r.run_id}")
        version, commit = r.build
        if version is None:
            raise UserError(f"run {r.run_id}: the copperhead build that re-executed it does not say its version; nothing attached")
        body = CassetteAttached(run_id=r.run_id, cassette=ref, session=r.session, copperhead_version=version,
                                copperhead_commit=commit)
        target = workspace.stored(ref.path)
        if target is None:
            raise UserError(f"{ref.path}: not a path in the project")
        files.append((target, data))
        bodies.append(body)
        events.append(make_event(body, id=event_id(r.run_id), actor=ACTOR))
    written: list[Path] = []
    store: LedgerStore | None = None
    try:
        for target, data in files:
            if target.is_file() and target.read_bytes() == data:
                continue
            durable.write_atomic(target, data)  # synced, as the bundle is before its event
            written.append(target)
        for directory in {p.parent for p in written}:
            durable.fsync_directory(directory)  # an event never names a cassette a power cut lost
        store = LedgerStore(workspace.ledger)
        appended = store.append(events, check=semantics.check_batch)
    except BaseException:
        remove_unless_landed(store, [e.id for e in events], written)
        raise
    return [Attached(b.run_id, b, a.seq) for b, a in zip(bodies, appended, strict=True)]
