"""The driver's half of a run on a Dask cluster (`cbledger run --executor dask --scheduler URL`).

One Dask task per planned run (`runner.remote.run_remote`); for an attempt allowed feedback
passes, one task for the whole attempt, since its passes revise one sandbox pass after pass on
one worker: it returns a `RemoteResult` per pass, which the driver checks one by one and appends
in order, like the passes of a local attempt (`received_attempt`). The tasks and fixtures a plan
needs are submitted once each, as tasks of their own whose keys are their content digests, so the
scheduler holds them and moves them to whichever worker needs them (and can give them to another
worker if the one holding them is lost); each worker checks them on arrival. The results come back
in whatever order the workers finish; the caller appends them in plan order (`suite_run`).

What happens when things go wrong:

* A worker without kicad-cli or copperhead is refused by the `RequirementsPlugin` at
  registration, and says why on the cbledger topic; the driver reports each refusal, and gives
  up at once if no worker is left.
* A worker lost mid-run: the scheduler gives the run to another worker (a Dask task whose worker
  dies is rescheduled), or, if the scheduler gives up first (`KilledWorker`), the driver submits
  it again. Either way a run is attempted at most `ATTEMPTS` times: a third start is cancelled and
  the run reported as not recorded. The lost attempt returned nothing, so nothing of it is
  appended: a run is recorded once.
* A run that fails on its own (a secret found, a fixture refused on arrival) is reported like a
  local run's failure, and the suite continues.
* No worker at all for `NO_WORKER_SECONDS`: the driver stops waiting and reports the runs left.
* The scheduler lost: the runs not yet back are reported as not recorded, one line each naming
  the scheduler (no `CancelledError`); the campaign's next invocation runs them.
* The driver lost (killed): the scheduler releases its runs, and each worker kills the run it was
  running within a poll (`isolation.abandon_when`), so no model is paid for a result no one will
  collect; the campaign's next invocation runs those slots.
"""

from __future__ import annotations

import collections
import logging
import queue
import secrets
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
from blake3 import blake3

from cbledger.errors import UserError
from cbledger.ledger import durable
from cbledger.ledger.events import GradeRecordedEvent, RunRecorded, RunRecordedEvent
from cbledger.runner.execute import RunOutput
from cbledger.runner.remote import (
    TOPIC,
    RemoteResult,
    RemoteRun,
    RequirementsPlugin,
    run_remote,
    verdict,
)
from cbledger.runner.shipping import Package
from cbledger.workspace import Workspace, bundle_name, cassette_name

#: attempts of one run: the first, and one retry after a lost worker
ATTEMPTS = 2
NO_WORKER_SECONDS = 120.0
#: why a run is not run when the driver's hold on its campaign was taken by another driver
TAKEN_OVER = "not run: another driver holds the campaign now"

#: refusals the scheduler recorded this recently are named to a driver that finds no worker
RECENT_REFUSAL_SECONDS = 600.0
CONNECT_SECONDS = 30.0


@dataclass(frozen=True)
class Activity:
    """What a worker is doing, for progress: `accepted`, `refused`, `started`, `finished`,
    `failed` or `lost` (a run's worker went away and the run was given to another); `waiting`
    when none is connected at all."""

    worker: str
    kind: str
    label: str = ""
    detail: str = ""


OnActivity = Callable[[Activity], None]


def _identity(package: Package) -> Package:
    return package


class DaskCluster:
    """A connection to a scheduler with the requirements plugin registered. A context manager."""

    def __init__(self, scheduler: str, on_activity: OnActivity | None = None) -> None:
        self.scheduler = scheduler
        self.on_activity = on_activity
        self.client: Any = None
        self._events: queue.Queue[tuple[str, Any]] = queue.Queue()
        self._token = secrets.token_hex(4)
        self._verdicts: set[tuple[str, str, str]] = set()

    def __enter__(self) -> DaskCluster:
        from distributed import Client

        try:
            self.client = Client(self.scheduler, timeout=CONNECT_SECONDS, set_as_default=False)
        except (OSError, TimeoutError) as exc:
            raise UserError(f"--scheduler {self.scheduler}: cannot reach the Dask scheduler ({exc})") from None
        self.client.subscribe_topic(TOPIC, self._on_topic)
        self.client.register_plugin(RequirementsPlugin(), name=RequirementsPlugin.name)
        verdicts = self.client.run(verdict, on_error="return")
        if not verdicts:
            # a worker that refused before this driver came has closed itself: what it said is
            # still on the scheduler's record of the topic, and the wait is said rather than silent
            latest: dict[str, str] = {}  # each worker's last refusal of the last ten minutes
            for when, msg in self.client.get_events(TOPIC):
                if isinstance(msg, dict) and msg.get("kind") == "refused" and time.time() - when < RECENT_REFUSAL_SECONDS:
                    latest[str(msg.get("name") or msg.get("worker") or "")] = str(msg.get("why") or "")
            for worker, why in latest.items():
                self._activity(Activity(worker, "refused", detail=f"{why} (before this driver connected)"))
            self._activity(Activity("", "waiting", detail=f"no worker is connected to {self.scheduler}; waiting "
                                                           f"{NO_WORKER_SECONDS:.0f} s for one before giving up"))
        accepted = [w for w, why in verdicts.items() if why is None]
        if verdicts and not accepted:
            listed = "; ".join(f"{w}: {why}" for w, why in sorted(verdicts.items()))
            raise UserError(f"no worker of {self.scheduler} can run cbledger runs: {listed}")
        return self

    def __exit__(self, *exc: object) -> None:
        if self.client is None:
            return
        if not self._scheduler_lost():
            self.client.close()
            return
        # closing cancels the client's attempts to reconnect, which it logs as a traceback of a
        # CancelledError: the plan already said, one line per run, that the scheduler was lost
        quiet = [logging.getLogger(name) for name in ("distributed.client", "distributed.utils")]
        levels = [logger.level for logger in quiet]
        for logger in quiet:
            logger.setLevel(logging.CRITICAL)
        try:
            self.client.close(timeout=5)
        finally:
            for logger, level in zip(quiet, levels, strict=True):
                logger.setLevel(level)

    def _on_topic(self, event: tuple[float, Any]) -> None:
        """On the client's own thread: a worker's verdict is reported at once (it can come at any
        time, a worker joining late); a run's start goes to `run`, which counts attempts."""
        msg = event[1]
        if not isinstance(msg, dict):
            return
        if msg.get("kind") in ("accepted", "refused"):
            # each worker's verdict once: another driver's registration of the plugin has every
            # worker say it again, which printed `accepted` lines amid this driver's progress
            worker = str(msg.get("name") or msg.get("worker") or "")
            said = (worker, str(msg["kind"]), str(msg.get("why") or ""))
            if said in self._verdicts:
                return
            self._verdicts.add(said)
            self._activity(Activity(worker, str(msg["kind"]), detail=str(msg.get("why") or "")))
        elif msg.get("kind") == "started":
            self._events.put(("event", msg))

    def _activity(self, activity: Activity) -> None:
        if self.on_activity is not None:
            self.on_activity(activity)

    def _workers(self) -> int:
        return len(self.client.scheduler_info(n_workers=-1).get("workers", {}))

    def _threads(self) -> int:
        """The threads of the connected workers: how many runs can go at once."""
        try:
            return sum(self.client.nthreads().values())
        except (OSError, TimeoutError):
            return 0

    def run(
        self, specs: Sequence[RemoteRun], packages: dict[str, Package], held: Callable[[], bool] | None = None,
    ) -> Iterator[tuple[int, list[RemoteResult] | None, str | None]]:
        """Submits the runs, no more at a time than the workers have threads; yields (plan index,
        its passes' results, None) or (plan index, None, why) as each run ends, in the order they
        end. `held`: whether the driver still holds its campaign, asked before each run is
        submitted and as the runs go; once it does not, every run not yet come back is cancelled
        and yielded as `TAKEN_OVER` (another driver runs those slots now: a run both made would be
        paid twice, and one of the two discarded).

        Why a window and not the whole plan up front: the scheduler runs what it holds whatever
        becomes of the driver, so a driver stopped (SIGSTOP, a laptop lid) while its hold was taken
        had its whole queued plan run by the workers beside the new driver's, every slot paid
        twice. With the window only the runs already on a worker when the hold went are."""
        from distributed import KilledWorker

        client = self.client
        shipped = {
            digest: client.submit(_identity, pkg, key=f"cbledger-{pkg.kind}-{digest}", pure=False)
            for digest, pkg in packages.items()
        }
        by_index = {s.index: s for s in specs}
        current: dict[int, Any] = {}
        attempts: dict[int, int] = {}
        starts: dict[int, list[str]] = {}
        why_cancelled: dict[int, str] = {}

        def submit(spec: RemoteRun) -> None:
            attempts[spec.index] = attempts.get(spec.index, 0) + 1
            # the slot's attempt too: a --retry-env retry is submitted in a later round, under a key of its own
            key = f"cbledger-run-{self._token}-{spec.index}-a{attempts[spec.index]}-t{spec.attempt}"
            future = client.submit(
                run_remote, spec, shipped[spec.task_digest], shipped[spec.fixture_digest], key=key, pure=False,
            )
            current[spec.index] = future
            future.add_done_callback(lambda f: self._events.put(("done", f)))

        pending = set(by_index)
        still_held = held or (lambda: True)
        window = _Window(specs, submit, self._threads, still_held)
        window.fill()
        no_worker_since: float | None = None
        last_check = time.monotonic()
        try:
            while pending:
                item: Any = None
                try:
                    kind, item = self._events.get(timeout=1.0)
                except queue.Empty:
                    kind = "idle"
                if kind == "event":
                    self._on_event(item, by_index, pending, current, starts, why_cancelled)
                elif kind == "done":
                    index = self._index_of(item.key)
                    if index is None or index not in pending or current[index] is not item:
                        continue  # an attempt that was replaced
                    spec = by_index[index]
                    if item.status == "finished":
                        results: list[RemoteResult] = item.result()
                        item.release()
                        pending.discard(index)
                        window.done(index)
                        self._activity(Activity(results[0].worker if results else "", "finished", spec.label))
                        yield index, results, None
                        last_check = 0.0  # a run came back: the checks below come next, the hold's first
                        continue
                    if item.status == "cancelled":
                        if index not in why_cancelled and self._scheduler_lost():
                            break
                        pending.discard(index)
                        window.done(index)
                        yield index, None, why_cancelled.get(index, "cancelled")
                        continue
                    error = item.exception()
                    item.release()
                    if isinstance(error, KilledWorker) and max(attempts[index], len(starts.get(index, []))) < ATTEMPTS:
                        if not still_held():  # the slot is another driver's now: not paid for twice
                            pending.discard(index)
                            window.done(index)
                            yield index, None, TAKEN_OVER
                            continue
                        self._activity(Activity(str(getattr(error, "last_worker", "") or "?"), "lost", spec.label, "retried"))
                        submit(spec)
                        continue
                    pending.discard(index)
                    window.done(index)
                    yield index, None, self._failed(spec, error, starts.get(index, []))
                if kind == "idle" and self._scheduler_lost():
                    break
                now = time.monotonic()
                if now - last_check >= 5.0:
                    last_check = now
                    why, no_worker_since = self._why_stop(still_held, no_worker_since, now)
                    if why is not None:
                        window.waiting.clear()
                        yield from _cancelled(pending, current, why)
                    else:
                        window.fill()  # a worker that joined takes a run of its own
            if pending:  # the scheduler is gone: what it held is lost with it
                lost = f"the Dask scheduler {self.scheduler} was lost; not recorded (run the campaign again: it runs the missing slots)"
                for index in sorted(pending):
                    yield index, None, lost
                pending.clear()
        finally:
            if not self._scheduler_lost():
                for future in [*current.values(), *shipped.values()]:
                    future.release()

    def _why_stop(self, held: Callable[[], bool], no_worker_since: float | None, now: float) -> tuple[str | None, float | None]:
        """Why no run left may come back to this driver (its campaign taken by another driver, or
        no worker for a long while), or None; and since when no worker has been connected."""
        if not held():
            return TAKEN_OVER, no_worker_since
        since = None if self._workers() else (no_worker_since or now)
        if since is not None and now - since > NO_WORKER_SECONDS:
            return f"no worker connected to {self.scheduler} for {NO_WORKER_SECONDS:.0f} s; not run", since
        return None, since

    def _failed(self, spec: RemoteRun, error: BaseException | None, starts: list[str]) -> str:
        """Why a run that came back with an error is not recorded, reported as a failure."""
        from distributed import KilledWorker

        message = str(error) if isinstance(error, UserError) else f"{type(error).__name__}: {error}"
        if isinstance(error, KilledWorker):
            message = _lost_each_time(starts)
        self._activity(Activity("", "failed", spec.label, message))
        return message

    def _scheduler_lost(self) -> bool:
        """Whether the client lost its scheduler (a cancelled future is then no one's decision)."""
        return self.client is None or self.client.status not in ("running", "newly-created")

    def _index_of(self, key: object) -> int | None:
        prefix = f"cbledger-run-{self._token}-"
        if not isinstance(key, str) or not key.startswith(prefix):
            return None
        return int(key[len(prefix):].split("-", 1)[0])

    def _on_event(
        self, msg: Any, by_index: dict[int, RemoteRun], pending: set[int], current: dict[int, Any],
        starts: dict[int, list[str]], why_cancelled: dict[int, str],
    ) -> None:
        worker = str(msg.get("name") or msg.get("worker") or "")
        index = self._index_of(msg.get("key"))
        if index is None or index not in by_index:
            return  # another driver's run
        spec = by_index[index]
        seen = starts.setdefault(index, [])
        if seen:
            self._activity(Activity(seen[-1], "lost", spec.label, f"retried on {worker}"))
        seen.append(worker)
        # a worker lost under it: tried again under the same run id, not a --retry-env attempt (-aN)
        self._activity(Activity(worker, "started", spec.label, f"try {len(seen)}, a worker lost" if len(seen) > 1 else ""))
        if len(seen) > ATTEMPTS and index in pending:
            why_cancelled[index] = _lost_each_time(seen[:-1])
            current[index].cancel()


def _lost_each_time(workers: list[str]) -> str:
    """Why a run whose worker died on each try is given up: a run that kills its worker may do
    so again, so it is not started a third time; the campaign run again tries the slot anew."""
    return (f"the worker running it was lost on each of its {ATTEMPTS} tries (on {', '.join(workers) or '?'}); "
            "not recorded (run the campaign again: it runs the missing slots)")


def received_attempt(
    where: Path | Workspace, spec: RemoteRun, results: Sequence[RemoteResult],
) -> list[RunOutput | tuple[str, str]]:
    """An attempt's passes as the driver publishes them, each checked by `received_output` and
    against the attempt: at least one, no more than its allowance, each naming its place (index,
    allowance, pass 1 and the pass before it) as a local attempt's passes do. A pass refused
    ends the attempt there: the passes before it are kept, and the refusal is reported in place
    of the rest (a later pass names the one before it, so none is kept without it)."""
    if not results or len(results) > spec.passes:
        raise UserError(f"worker {results[0].worker if results else '?'}: {spec.label} came back with "
                        f"{len(results)} passes; {spec.passes} allowed; refused")
    kept: list[RunOutput | tuple[str, str]] = []
    first: str | None = None
    previous: str | None = None
    for k, result in enumerate(results, 1):
        label = spec.label if k == 1 else f"{spec.label} pass {k}"
        try:
            if result.index != spec.index:
                raise UserError(f"worker {result.worker}: a pass of run {result.index} came back as {spec.label}'s; refused")
            output = received_output(where, result)
            try:
                _check_pass(result.worker, output.run, k, spec.passes, first, previous)
            except UserError:
                output.discard_staged()
                raise
        except UserError as exc:
            kept.append((label, str(exc)))
            break
        kept.append(output)
        first, previous = first or output.run.run_id, output.run.run_id
    return kept


def _check_pass(worker: str, run: RunRecorded, k: int, allowed: int, first: str | None, previous: str | None) -> None:
    ref = run.passes
    if allowed == 1:
        if not isinstance(ref, msgspec.UnsetType):
            raise UserError(f"worker {worker}: run {run.run_id} names a pass, in an attempt of one; refused")
        return
    if isinstance(ref, msgspec.UnsetType) or (ref.index, ref.allowed, ref.first, ref.previous) != (k, allowed, first, previous):
        said = "no pass" if isinstance(ref, msgspec.UnsetType) else f"pass {ref.index} of {ref.allowed} after {ref.previous}"
        raise UserError(f"worker {worker}: run {run.run_id} came back as pass {k} of {allowed}, "
                        f"after {previous}, but its event says {said}; refused")


def received_output(where: Path | Workspace, result: RemoteResult) -> RunOutput:
    """A worker's run as the driver publishes it: the bundle checked against the digest and
    size its own event states, then staged (synced) beside its final place under `results/runs/`."""
    if len(result.events) != 2:
        raise UserError(f"worker {result.worker}: a run came back with {len(result.events)} events, not 2")
    run_event, grade_event = result.events
    if not isinstance(run_event, RunRecordedEvent) or not isinstance(grade_event, GradeRecordedEvent):
        raise UserError(f"worker {result.worker}: a run came back without run.recorded and grade.recorded")
    run, grade = run_event.body, grade_event.body
    ref = run.sandbox
    if ref.store != bundle_name(run.run_id):
        raise UserError(f"worker {result.worker}: run {run.run_id} names its bundle {ref.store!r}; refused")
    digest = blake3(result.bundle).hexdigest()
    if digest != ref.store_blake3 or len(result.bundle) != ref.store_bytes:
        raise UserError(
            f"worker {result.worker}: the bundle of run {run.run_id} arrived as {len(result.bundle)} bytes "
            f"hashing to {digest[:16]}…; its event says {ref.store_bytes} bytes, {ref.store_blake3[:16]}…; refused"
        )
    workspace = where if isinstance(where, Workspace) else Workspace.at(where)
    cassette = received_cassette(workspace, run, result)
    staged = workspace.staged_bundle(run.run_id)
    durable.write_atomic(staged, result.bundle)
    final = workspace.stored(ref.store) or workspace.root / ref.store
    return RunOutput(run, grade, list(result.events), staged, final, None, workspace.pending_events(run.run_id), cassette)


def received_cassette(workspace: Workspace, run: RunRecorded, result: RemoteResult) -> tuple[Path, Path] | None:
    """A worker's cassette, checked against the digest and size its event states and staged;
    one the event names but the worker did not send (or sent unasked) is refused."""
    ref = run.cassette
    if isinstance(ref, msgspec.UnsetType):
        if result.cassette is not None:
            raise UserError(f"worker {result.worker}: run {run.run_id} came back with a cassette its event does not name; refused")
        return None
    data = result.cassette or b""
    if ref.path != cassette_name(ref.blake3) or blake3(data).hexdigest() != ref.blake3 or len(data) != ref.bytes:
        raise UserError(f"worker {result.worker}: the cassette of run {run.run_id} is not the one its event names; refused")
    staged = workspace.staged_cassette(run.run_id)
    durable.write_atomic(staged, data)
    return staged, workspace.stored(ref.path) or workspace.root / ref.path


class _Window:
    """The runs of a plan not yet submitted, and those out on the cluster: no more go out at once
    than the connected workers have threads (one at least, so a plan waits for its first worker on
    the scheduler), and none while the driver no longer holds its campaign (`DaskCluster.run`)."""

    def __init__(self, specs: Sequence[RemoteRun], submit: Callable[[RemoteRun], None],
                 threads: Callable[[], int], held: Callable[[], bool]) -> None:
        self.waiting = collections.deque(specs)
        self.in_flight: set[int] = set()
        self._submit, self._threads, self._held = submit, threads, held

    def fill(self) -> None:
        if not self.waiting:
            return
        room = max(1, self._threads()) - len(self.in_flight)
        if room <= 0 or not self._held():
            return
        for _ in range(min(room, len(self.waiting))):
            spec = self.waiting.popleft()
            self._submit(spec)
            self.in_flight.add(spec.index)

    def done(self, index: int) -> None:
        self.in_flight.discard(index)
        self.fill()


def _cancelled(pending: set[int], current: dict[int, Any], why: str) -> Iterator[tuple[int, None, str]]:
    """Every run not yet come back, cancelled (one still going on a worker ends there, unheard;
    one never submitted is only said)."""
    for index in sorted(pending):
        if index in current:
            current[index].cancel()
        yield index, None, why
    pending.clear()
