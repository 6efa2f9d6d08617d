"""Re-executing a run: its recorded model exchanges served back to the real harness, offline.

Re-grading a preserved end state proves the grade; re-executing proves the run. `rerun` plants the
run's seed again (the same fixture, task config and ablations, so the same seed commit), runs the
task's setup, and starts copperhead with the run's own arguments, caps and configuration against
the loopback endpoint serving the run's cassette. The new end state, its diff and its transcript
are then compared with the preserved ones (`cbledger.runner.normalise` says what may differ), and
the new grade with the recorded one.

Strict (the same harness build): the k-th request must equal the recorded k-th request, or the
endpoint refuses it and the rerun names it. Lenient (`--copperhead-cli NEW`, a different build):
the k-th recorded answer is served whatever was asked, the requests that differ are flagged, and
what is reported is whether the outcome (verdict, exit path) changed. Nothing is written to the
ledger or to `results/`: the new run lives in a scratch directory that is removed afterwards.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import msgspec
import pygit2
from msgspec import UNSET

from cbledger.credentials import printable
from cbledger.errors import UserError
from cbledger.ledger.events import (
    Actor,
    CassetteRef,
    GradeRecorded,
    HarnessFailure,
    RunRecorded,
    SessionSource,
)
from cbledger.projections.fold import semver_key
from cbledger.runner import cassette as cassette_mod
from cbledger.runner import isolation, ledger_view, normalise, preserve
from cbledger.runner.agents.base import AgentInput, AgentResult
from cbledger.runner.agents.copperhead import (
    CopperheadAgent,
    CopperheadCli,
    locate,
    recording_route,
)
from cbledger.runner.endpoint import script
from cbledger.runner.endpoint.server import Endpoint, Served
from cbledger.runner.environment import probe
from cbledger.runner.execute import RunOutput, RunSettings, execute
from cbledger.runner.passes import execute_passes
from cbledger.runner.plan import PlannedRun
from cbledger.tasks.catalog import Catalog, Fixture
from cbledger.tasks.suite_archive import open_kept
from cbledger.workspace import Workspace

Status = Literal["identical", "diverged", "exhausted"]
#: `cbledger rerun`'s exit codes (2 is bad input, as everywhere)
EXIT_CODES: dict[Status, int] = {"identical": 0, "diverged": 1, "exhausted": 3}
#: the transcript's directory name is copperhead's run stamp (its start time)
_RUNS_DIR = ".copperhead/runs/"


@dataclass
class RerunResult:
    run_id: str
    mode: Literal["strict", "lenient"]
    status: Status
    #: what differs between the preserved run and its re-execution, first first
    differences: list[str] = field(default_factory=list)
    #: the first request the harness sent that is not the recorded one ("request 3 at $.messages[5]")
    first_request: str | None = None
    #: lenient: every request that differed from the recorded one
    flagged: list[str] = field(default_factory=list)
    original: tuple[str, str | None] = ("", None)  # (verdict, exit path)
    rerun: tuple[str, str | None] = ("", None)
    #: what the recording proxy saw pass at this re-execution (what `--attach` keeps)
    recorded: cassette_mod.Cassette | None = None
    #: the session script served, for a run re-executed from its kept session
    session: SessionSource | None = None
    #: the copperhead build that re-executed the run (version, commit)
    build: tuple[str | None, str | None] = (None, None)

    @property
    def outcome_changed(self) -> bool:
        return self.original != self.rerun

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.status]

    def to_dict(self) -> dict:
        return {
            "runId": self.run_id, "mode": self.mode, "status": self.status, "differences": self.differences,
            "firstDifferingRequest": self.first_request, "flaggedRequests": self.flagged,
            "original": {"verdict": self.original[0], "exitPath": self.original[1]},
            "rerun": {"verdict": self.rerun[0], "exitPath": self.rerun[1]},
            "outcomeChanged": self.outcome_changed,
        }


class _Keeping:
    """The agent, its result kept: what the endpoint served is in it, not in the run's output."""

    def __init__(self, agent: CopperheadAgent):
        self.agent, self.kind = agent, agent.kind
        self.result: AgentResult | None = None
        self.sandbox: Path | None = None

    def run(self, inp: AgentInput) -> AgentResult:
        self.sandbox = inp.sandbox
        self.result = self.agent.run(inp)
        return self.result


def recorded_grade(view: ledger_view.LedgerView, run: RunRecorded) -> GradeRecorded:
    version = view.suite_version
    for key in ((run.run_id, version or ""), (run.run_id, run.comparability.suite_version)):
        if key in view.grades:
            return view.grades[key]
    raise UserError(f"run {run.run_id} has no grade to compare with")


class KeptSuites:
    """Suite versions' kept definitions, each laid out once under `root` and checked against the
    ledger, for every rerun of a batch (laying one out is about half a second and hundreds of
    files; a batch of reruns from kept sessions would pay it per run, twice for a later script)."""

    def __init__(self, workspace: Workspace, view: ledger_view.LedgerView, root: Path):
        self.workspace, self.view, self.root = workspace, view, root
        self._opened: dict[str, Catalog | str] = {}
        self._lock = threading.Lock()  # reruns in parallel share it: each version laid out once

    def catalog(self, run: RunRecorded, version: str) -> Catalog:
        with self._lock:
            if version not in self._opened:
                self._opened[version] = self._open(version)
            found = self._opened[version]
        if isinstance(found, str):
            raise UserError(f"run {run.run_id}: {found}")
        return found

    def _open(self, version: str) -> Catalog | str:
        archived = self.view.archives.get(version)
        if archived is None:
            return f"suite {version} has no kept definitions, so the session it was served is not known"
        opened = open_kept(self.workspace, archived, self.view.bumps.get(version), self.root / version)
        if opened.catalog is None or opened.problems:
            return f"suite {version}'s kept definitions do not verify ({len(opened.problems)} problem(s))"
        return opened.catalog


@contextlib.contextmanager
def kept_suites(workspace: Workspace, view: ledger_view.LedgerView) -> Iterator[KeptSuites]:
    root = Path(tempfile.mkdtemp(prefix="cbledger-rerun-suites-"))
    try:
        yield KeptSuites(workspace, view, root)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def rerun(
    workspace: Workspace, run_id: str, *, copperhead_cli: str | None = None, strict: bool | None = None,
    unsandboxed: bool = False, view: ledger_view.LedgerView | None = None, from_session: bool = False,
    kept: KeptSuites | None = None,
) -> RerunResult:
    """Re-executes `run_id`. Strict unless another harness build is given (`copperhead_cli`).
    With `from_session`, a scripted run recorded before cassettes is served the session script
    it was served, as its suite version's kept definitions hold it. `kept`: the batch's laid-out
    definitions (`view` must be the one they were opened with)."""
    view = view or ledger_view.read(workspace.ledger)
    run = view.runs.get(run_id)
    if run is None:
        raise UserError(f"no run {run_id} in {workspace.ledger}")
    if kept is None:
        with kept_suites(workspace, view) as own:
            return rerun(workspace, run_id, copperhead_cli=copperhead_cli, strict=strict, unsandboxed=unsandboxed,
                         view=view, from_session=from_session, kept=own)
    scratch = Path(tempfile.mkdtemp(prefix="cbledger-rerun-"))
    try:
        return _rerun(workspace, view, run, copperhead_cli, strict, unsandboxed, from_session, scratch, kept)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _rerun(
    workspace: Workspace, view: ledger_view.LedgerView, run: RunRecorded, copperhead_cli: str | None,
    strict: bool | None, unsandboxed: bool, from_session: bool, scratch: Path, kept: KeptSuites,
) -> RerunResult:
    run_id = run.run_id
    catalog = Catalog(workspace.root)
    ref = view.cassette(run)
    source: SessionSource | None = None
    if ref is None:
        if not (from_session and run.run_mode == "scripted"):
            why = f" ({run.runner_note})" if run.runner_note and "not recorded" in run.runner_note else ""
            hint = "; a scripted run can be served its session script instead (--from-session)" if run.run_mode == "scripted" else ""
            raise UserError(f"run {run_id} has no cassette: its model exchanges were not recorded{why}, so it cannot be re-executed{hint}")
        catalog, recorded, source = session_cassette(workspace, view, run, kept)
    else:
        recorded = _load_cassette(workspace, ref)
        if run.cassette is UNSET:  # attached later: the run's own suite version's definitions, as from its session
            catalog = kept.catalog(run, run.comparability.suite_version)
    if recording_route(run.model.id) != recorded.route:
        raise UserError(f"run {run_id} was recorded on the {recorded.route} route, which its model {run.model.id} does not take")
    task = catalog.task(run.task.id) if run.task.id in catalog.task_ids() else None
    if task is None or task.manifest_hash != run.task.manifest_hash:
        # the task changed since (a later suite version): the run's own version's kept definitions
        catalog = kept.catalog(run, run.comparability.suite_version)
        task = catalog.task(run.task.id)
    if task.manifest_hash != run.task.manifest_hash:
        raise UserError(f"task {run.task.id} changed since run {run_id} (manifest hash {task.manifest_hash[:12]}…, "
                        f"the run's {run.task.manifest_hash[:12]}…): a re-execution needs the run's own definitions")
    fixture = catalog.fixture_for(task)
    cli = locate(copperhead_cli, workspace.root)
    if cli is None:
        raise UserError("rerun needs the copperhead CLI: run scripts/install-copperhead, or pass --copperhead-cli")
    strict = copperhead_cli is None if strict is None else strict
    if strict:
        same_build(cli, run)
    original = recorded_grade(view, run)
    earlier = earlier_passes(workspace, view, run)
    output, served, workdir, tape = _execute(workspace, run, recorded, catalog, cli, strict, unsandboxed, scratch, earlier)
    result = compare(run, original, recorded, output, served, fixture, workspace, strict, workdir)
    result.recorded, result.session, result.build = tape, source, (cli.version(), cli.commit())
    return result


def earlier_passes(workspace: Workspace, view: ledger_view.LedgerView, run: RunRecorded) -> list[cassette_mod.Cassette]:
    """For a later feedback pass, the cassettes of the passes before it, in order: a pass starts
    where the one before it ended, so it is re-executed by re-executing its attempt up to it."""
    ref = run.passes
    if not ref or ref.index < 2:
        return []
    by_index = {1: view.runs.get(ref.first or "")}
    for other in view.runs.values():
        if other.passes and other.passes.first == ref.first and other.passes.index < ref.index:
            by_index[other.passes.index] = other
    out = []
    for index in range(1, ref.index):
        before = by_index.get(index)
        tape = view.cassette(before) if before is not None else None
        if tape is None:
            raise UserError(f"run {run.run_id} is pass {ref.index} of an attempt whose pass {index} has no cassette; it cannot be re-executed")
        out.append(_load_cassette(workspace, tape))
    return out


def _load_cassette(workspace: Workspace, ref: CassetteRef) -> cassette_mod.Cassette:
    """A recorded or attached cassette, read from the workspace and checked against its digest."""
    return cassette_mod.load(workspace.stored(ref.path) or workspace.root / ref.path, expect=ref.blake3)


SCRIPTED_PREFIX = "compat:scripted-"


def session_cassette(
    workspace: Workspace, view: ledger_view.LedgerView, run: RunRecorded, kept: KeptSuites,
) -> tuple[Catalog, cassette_mod.Cassette, SessionSource]:
    """The session a scripted run was served, written down as a cassette (its requests were not
    recorded, so they are not compared), from the definitions its suite version kept — the task's
    own `sessions/<name>.json` — else from the project's `sessions/<name>.json`, else from the
    first later suite version that kept one (a session added to a task without a bump); and the
    kept catalog of the run's own suite version, whose task and fixture the rerun then uses.
    Whichever is served, the rerun's comparison of end state and transcript is what shows it was
    the one the run had. The third value says which script it was, and its SHA-256."""
    if not run.model.id.startswith(SCRIPTED_PREFIX):
        raise UserError(f"run {run.run_id}: model {run.model.id} does not name the session it was served")
    name = run.model.id[len(SCRIPTED_PREFIX):]
    version = run.comparability.suite_version
    own = kept.catalog(run, version)
    in_task = f"tasks/{run.task.id}/sessions/{name}.json"
    candidates: list[tuple[Path, str, str | None]] = [
        (own.tasks_dir / run.task.id / "sessions" / f"{name}.json", in_task, version),
        (workspace.root / "sessions" / f"{name}.json", f"sessions/{name}.json", None),
    ]
    later = sorted((v for v in view.archives if semver_key(v) > semver_key(version)), key=semver_key)
    for path, rel, kept_in in candidates:
        if path.is_file():
            return own, cassette_mod.from_session(script.load(path), run.model.id), _source(path, rel, kept_in)
    for v in later:
        path = kept.catalog(run, v).tasks_dir / run.task.id / "sessions" / f"{name}.json"
        if path.is_file():
            return own, cassette_mod.from_session(script.load(path), run.model.id), _source(path, in_task, v)
    raise UserError(f"run {run.run_id}: no kept session script {name!r} for task {run.task.id}")


def _source(path: Path, rel: str, suite_version: str | None) -> SessionSource:
    return SessionSource(path=rel, suite_version=suite_version if suite_version is not None else UNSET,
                         sha256=hashlib.sha256(path.read_bytes()).hexdigest())


def same_build(cli: CopperheadCli, run: RunRecorded) -> None:
    version, commit = cli.version(), cli.commit()
    want_v, want_c = run.comparability.copperhead_version, run.comparability.copperhead_commit
    if version != want_v or (want_c and commit and commit != want_c):
        raise UserError(
            f"run {run.run_id} was made by copperhead {want_v} ({want_c or 'commit unknown'}); this CLI is "
            f"{version} ({commit or 'commit unknown'}): a strict rerun needs the same build "
            "(pass --copperhead-cli for a lenient rerun through another one)"
        )


def _execute(
    workspace: Workspace, run: RunRecorded, recorded: cassette_mod.Cassette, catalog: Catalog, cli: CopperheadCli,
    strict: bool, unsandboxed: bool, scratch: Path, earlier: list[cassette_mod.Cassette] | None = None,
) -> tuple[RunOutput, tuple[Served, ...], str, cassette_mod.Cassette | None]:
    """One run re-executed; a later feedback pass with the passes before it (`earlier`), each
    served its own cassette, and the last one's output compared."""
    earlier = earlier or []
    sandboxes = scratch / "sandboxes"
    hidden = tuple(p for p in (workspace.root, workspace.ledger_file and workspace.ledger_file.parent) if p)
    confinement = isolation.confinement(unsandboxed, (*hidden, sandboxes))
    session = cassette_mod.as_session(recorded, f"cassette-{run.run_id}")
    if earlier:
        chain = [cassette_mod.as_session(c, f"cassette-{run.run_id}-{i}") for i, c in enumerate(earlier, 1)]
        session = msgspec.structs.replace(chain[0], passes=[
            script.FollowUp(exchanges=s.exchanges) for s in (*chain[1:], session)
        ])
    with Endpoint() as endpoint:
        agent = _Keeping(CopperheadAgent(
            cli, endpoint, {run.task.id: session}, confinement, replay=(strict, recorded.workdir),
        ))
        settings = RunSettings(
            root=scratch, catalog=catalog, agent=agent, run_mode="scripted",
            suite_version=run.comparability.suite_version, environment=probe(cli), price_table=None,
            ablations=run.ablations, sandbox_root=sandboxes, keep_sandboxes=False, copperhead=cli,
            actor=Actor(kind="runner", name="cbledger-rerun"), confinement=confinement,
        )
        task = catalog.task(run.task.id)
        planned = PlannedRun(task, run.model.id, run.repeat, run.repeats_planned)
        if earlier:
            outputs = execute_passes(settings, planned, len(earlier) + 1)
            if len(outputs) <= len(earlier):
                raise UserError(f"run {run.run_id}: re-executing its attempt stopped at pass {len(outputs)}, before this pass")
            output = outputs[-1]
        else:
            output = execute(settings, planned)
    result = agent.result
    if result is None:
        return output, (), str(agent.sandbox or ""), None
    return output, result.served, str(agent.sandbox or ""), result.cassette


# ------------------------------------------------------------------------------------ comparing


def compare(
    run: RunRecorded, original: GradeRecorded, recorded: cassette_mod.Cassette, output: RunOutput,
    served: tuple[Served, ...], fixture: Fixture, workspace: Workspace, strict: bool, workdir: str,
) -> RerunResult:
    new = output.run
    res = RerunResult(
        run.run_id, "strict" if strict else "lenient", "identical",
        original=(original.verdict, run.stats.exit_path if run.stats else None),
        rerun=(output.grade.verdict, new.stats.exit_path if new.stats else None),
    )
    calls = len(cassette_mod.model_calls(recorded))
    for s in served:
        if s.differs is not None:
            res.flagged.append(f"request {s.turn} at {s.differs}")
    if res.flagged:
        res.first_request = res.flagged[0]
    if any(s.code == "cassette_exhausted" for s in served):
        res.status = "exhausted"
        res.differences.append(f"the harness made more requests than the cassette's {calls}")
    elif strict and res.first_request:
        res.differences.append(f"{res.first_request} differs from the recorded request")
    elif res.flagged:
        res.differences.append(f"{len(res.flagged)} request(s) differ from the recorded ones, the first {res.first_request}")
    elif len(served) < calls:
        res.differences.append(f"the harness made {len(served)} of the cassette's {calls} model calls")
    if new.sandbox.seed_sha != run.sandbox.seed_sha:
        res.differences.append(f"seed {new.sandbox.seed_sha} is not the run's {run.sandbox.seed_sha}")
    res.differences += grade_differences(original, output.grade)
    res.differences += stats_differences(run, new)
    res.differences += tree_differences(run, output, fixture, workspace, (recorded.workdir or "", workdir))
    if res.differences and res.status == "identical":
        res.status = "diverged"
    return res


def grade_differences(a: GradeRecorded, b: GradeRecorded) -> list[str]:
    out = []
    if a.verdict != b.verdict:
        out.append(f"grade: verdict {b.verdict}, recorded {a.verdict}")
    if a.partial_credit != b.partial_credit:
        out.append(f"grade: partial credit {b.partial_credit}, recorded {a.partial_credit}")
    was = {x.id: x.status for x in a.assertions}
    now = {x.id: x.status for x in b.assertions}
    for aid in sorted(set(was) | set(now)):
        if was.get(aid) != now.get(aid):
            out.append(f"grade: assertion {aid} {now.get(aid, 'absent')}, recorded {was.get(aid, 'absent')}")
    return out


def stats_differences(a: RunRecorded, b: RunRecorded) -> list[str]:
    if a.stats is None or b.stats is None:
        return [] if a.stats is b.stats else ["stats: one run has none"]
    out = []
    for name in ("exit_path", "turns_used", "tokens_in", "tokens_out", "repair_cycles_used", "files_touched"):
        x, y = getattr(a.stats, name), getattr(b.stats, name)
        if x != y:
            out.append(f"stats: {name} {y!r}, recorded {x!r}")
    if a.runner_exit != b.runner_exit:
        out.append(f"runner exit {b.runner_exit!r}, recorded {a.runner_exit!r}")
    if a.harness_failure != b.harness_failure and not _marked_by_a_later_rule(a.harness_failure, b.harness_failure):
        recorded, again = (msgspec.to_builtins(f) if f is not None else None for f in (a.harness_failure, b.harness_failure))
        out.append(f"harnessFailure {again!r}, recorded {recorded!r}")
    return out


#: what a run the harness's crash ended before the model answered was called before the crash rule
_NO_TURN_KINDS = frozenset({"preflight", "no-model-turn", "missing-key", "provider-config"})


def _marked_by_a_later_rule(recorded: HarnessFailure | None, again: HarnessFailure | None) -> bool:
    """A run recorded before a rule that now marks it otherwise (the harness's own crash: the
    model's, or a no-turn kind before the model answered; a provider's session limit: the
    model's) re-executes marked: the same run, read by the later rule, as `replay --verify`
    accepts it (`reproduce/attribution.py`). A crash that reproduces is the same by kind and
    turn: its words may name the sandbox's own temporary paths."""
    if again is None:
        return False
    if again.kind == "harness-crash":
        if recorded is not None and recorded.kind == "harness-crash":
            return recorded.turn == again.turn
        return recorded is None or (recorded.kind in _NO_TURN_KINDS and again.turn == 1)
    return recorded is None and again.kind == "provider-status" and again.detail.startswith("session limit")


def tree_differences(
    run: RunRecorded, output: RunOutput, fixture: Fixture, workspace: Workspace, workdirs: tuple[str, ...],
) -> list[str]:
    """The end state (the capture), the diff (the agent's HEAD) and the transcript, file by file
    after normalisation."""
    bundle = workspace.stored(run.sandbox.store) or workspace.root / run.sandbox.store
    with contextlib.ExitStack() as stack:
        a = preserve.restore(bundle, run.sandbox, fixture)
        stack.callback(shutil.rmtree, a.path, True)
        b = preserve.restore(output.staged, output.run.sandbox, fixture)
        stack.callback(shutil.rmtree, b.path, True)
        out = []
        commits_a = run_commits(a.repo, run.sandbox.head_sha, run.sandbox.baseline_sha, run.sandbox.stash_sha)
        commits_b = run_commits(b.repo, output.run.sandbox.head_sha, output.run.sandbox.baseline_sha, output.run.sandbox.stash_sha)
        for label, sha_a, sha_b in (
            ("end state", run.sandbox.capture_sha, output.run.sandbox.capture_sha),
            ("diff", run.sandbox.head_sha, output.run.sandbox.head_sha),
        ):
            files_a = normalised_files(a.repo, sha_a, workdirs, commits_a)
            files_b = normalised_files(b.repo, sha_b, workdirs, commits_b)
            for path in sorted(set(files_a) | set(files_b)):
                if path not in files_a:
                    out.append(f"{label}: {path} is new in the rerun")
                elif path not in files_b:
                    out.append(f"{label}: {path} is missing from the rerun")
                elif files_a[path] != files_b[path]:
                    out.append(f"{label}: {path} differs{_first_line(files_a[path], files_b[path], path.endswith('.jsonl'))}")
        return out


def _first_line(a: bytes, b: bytes, jsonl: bool = False) -> str:
    la, lb = a.split(b"\n"), b.split(b"\n")
    for i, (x, y) in enumerate(zip(la, lb, strict=False)):
        if x != y and jsonl:
            try:
                where = normalise.first_difference(json.loads(x), json.loads(y))
            except ValueError:
                where = None
            if where is not None:
                return f" (first at line {i + 1}, {where})"
        if x != y:
            now, was = (printable(v.decode("utf-8", "replace"), limit=160) for v in (y, x))
            return f" (first at line {i + 1}: {now!r}, recorded {was!r})"
    return f" (line count {len(lb)}, recorded {len(la)})"


def run_commits(repo: pygit2.Repository, head: str, baseline: str, stash: str | None) -> dict[str, str]:
    """The commits the harness made during the run (first parents from HEAD back to the
    baseline, then the stash), each id mapped to its placeholder in the order they were made."""
    made: list[str] = []
    commit = repo[head].peel(pygit2.Commit)
    while str(commit.id) != baseline and commit.parents:
        made.append(str(commit.id))
        commit = commit.parents[0]
    made.reverse()
    if stash:
        made.append(stash)
    return {sha: f"<commit-{i + 1}>" for i, sha in enumerate(made)}


def normalised_files(
    repo: pygit2.Repository, sha: str, workdirs: tuple[str, ...], commits: dict[str, str],
) -> dict[str, bytes]:
    tree = repo[sha].peel(pygit2.Tree)
    out: dict[str, bytes] = {}

    def walk(t: pygit2.Tree, prefix: str) -> None:
        for entry in t:
            path = prefix + (entry.name or "")
            obj = repo[entry.id]
            if isinstance(obj, pygit2.Tree):
                walk(obj, path + "/")
            elif isinstance(obj, pygit2.Blob):
                out[normalise.text(path, workdirs)] = normalised_content(path, obj.data, workdirs, commits)

    walk(tree, "")
    return out


def normalised_content(path: str, data: bytes, workdirs: tuple[str, ...], commits: dict[str, str]) -> bytes:
    """Files the harness writes about its own run (under `.copperhead/`, the transcript first)
    are compared after normalisation; the design and the docs byte for byte."""
    if not path.startswith(".copperhead/"):
        if path.rsplit("/", 1)[-1].split(".")[-1].startswith("kicad_") or b"\0" in data:
            return data
        try:
            return normalise.doc_text(data.decode("utf-8")).encode()
        except UnicodeDecodeError:
            return data
    text = data.decode("utf-8", "replace")
    if path.endswith(".json"):  # one document (create's report.json), else compared line by line below
        try:
            return json.dumps(normalise.value(json.loads(text), workdirs, commits), sort_keys=True).encode()
        except ValueError:
            pass
    if path.endswith((".jsonl", ".json")):
        lines = []
        for line in text.splitlines():
            try:
                lines.append(json.dumps(normalise.value(json.loads(line), workdirs, commits), sort_keys=True))
            except ValueError:
                lines.append(normalise.text(line, workdirs, commits))
        return "\n".join(lines).encode()
    return normalise.text(text, workdirs, commits).encode()


def rerun_many(workspace: Workspace, run_ids: list[str], **options: Any) -> list[RerunResult]:
    view = ledger_view.read(workspace.ledger)
    with kept_suites(workspace, view) as kept:
        return [rerun(workspace, r, view=view, kept=kept, **options) for r in run_ids]


def runs_with_cassettes(view: ledger_view.LedgerView, from_session: bool = False) -> list[str]:
    """The runs a re-execution covers: those with a cassette (their own or one attached later)
    and, with `from_session`, the scripted runs with neither (served their kept session script)."""
    return [
        r.run_id for r in view.runs.values()
        if (view.cassette(r) is not None or (from_session and r.run_mode == "scripted")) and r.run_id not in view.retracted
    ]


#: `replay --verify --rerun`'s exit code when verification passed but a re-execution did not
RERUN_FAILED_EXIT = 8


def rerun_all(
    workspace: Workspace, only: tuple[str, ...] = (), unsandboxed: bool = False, from_session: bool = True,
    on_done: Callable[[int, int, str, RerunResult | str], None] | None = None, jobs: int = 1,
) -> list[tuple[str, RerunResult | str]]:
    """Every run with a cassette, and every scripted run from its kept session (or those of
    `only`), re-executed strictly; a run that cannot be (its harness build is not here, its task
    changed, its session was not kept) is reported with why, never skipped. `on_done(k, n, run,
    result)` after each, in the order they finish: a rerun takes seconds, the set minutes.
    `jobs` re-executions at once, on threads as the runner's `--jobs` runs them (each is mostly
    the harness and kicad-cli as processes of their own); the list keeps the ledger's order."""
    view = ledger_view.read(workspace.ledger)
    chosen = [r for r in runs_with_cassettes(view, from_session) if not only or r in only]
    done: dict[str, RerunResult | str] = {}
    with kept_suites(workspace, view) as kept:

        def one(run_id: str) -> RerunResult | str:
            try:
                return rerun(workspace, run_id, strict=True, unsandboxed=unsandboxed, view=view,
                             from_session=from_session, kept=kept)
            except UserError as exc:
                return str(exc)

        def finished(run_id: str, result: RerunResult | str) -> None:
            done[run_id] = result
            if on_done is not None:
                on_done(len(done), len(chosen), run_id, result)

        if jobs <= 1:
            for run_id in chosen:
                finished(run_id, one(run_id))
        else:
            pool = ThreadPoolExecutor(max_workers=jobs)
            futures = {pool.submit(one, run_id): run_id for run_id in chosen}
            try:
                for fut in as_completed(futures):
                    finished(futures[fut], fut.result())
            except BaseException:
                pool.shutdown(wait=True, cancel_futures=True)  # Ctrl-C: start no further rerun
                raise
            pool.shutdown()
    return [(run_id, done[run_id]) for run_id in chosen]

