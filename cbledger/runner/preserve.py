"""Preserving a run as git objects relative to its reproducible seed, and restoring it.

After the agent stops, the end state (tracked, untracked and ignored files, the transcript under
`.copperhead/runs/` included) is snapshotted as a capture commit on top of the agent's HEAD, and
the verification reports as an evidence commit on top of that. A git bundle whose prerequisite is
the seed commit then holds exactly what the run added — thin-packed against the seed's objects, so
a one-line edit of a large schematic costs a delta, not a copy of the board. What the run adds
is bounded in size before anything reads it (`capture`): the agent's commits and stash, then
its end state, so the grade and its replay read the same bounded commits.

Restoring rebuilds the seed from the fixture, checks it reproduces the recorded SHA (a moved
fixture or config is caught here, before anything is graded), and reads the bundle in on top.

A bundle is the standard, inspectable way git ships "these commits, relative to that one", but
libgit2 (pygit2) has no bundle support: bundles are written with `git bundle create` (once per
run, where git's delta search earns its process) and read in-process by `runner/bundle_read.py`
(once per restore, which `replay --verify` does for every run). Everything else here goes
through pygit2.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pygit2
from blake3 import blake3

from cbledger import scratch as scratch_dir
from cbledger.errors import UserError
from cbledger.grading.evidence.bundle import (
    BASELINE_REF,
    CAPTURE_REF,
    EVIDENCE_REF,
    LIVE_REPORTS_DIR,
    REPORT_NAMES,
)
from cbledger.grading.evidence.tree import snapshot_directory
from cbledger.ledger.events import SandboxRef
from cbledger.runner import sandbox as sandbox_mod
from cbledger.runner.bundle_read import BundleError, unbundle
from cbledger.runner.rebuild import Rebuild
from cbledger.tasks.catalog import Fixture

CAPTURE_SIGNATURE = ("cbledger capture", "capture@copperbench.invalid")
AGENT_LOG_DIR = "cbledger-agent"  # inside .git/, where the copperhead adapter logs
HARNESS_LOGS = ("stdout.log", "stderr.log")
HARNESS_LOG_PREFIX = "harness/"
#: the stash of a failed copperhead run, kept in the bundle
STASH_REF = "refs/cbledger/stash"


def keep_stash(repo: pygit2.Repository) -> str | None:
    """Points `refs/cbledger/stash` at the newest stash entry (copperhead stashes a failed run's
    work before rolling the tree back), so the bundle carries it; returns its SHA or None."""
    try:
        target = repo.references["refs/stash"].target
    except KeyError:
        return None
    repo.references.create(STASH_REF, target, force=True)
    return str(target)


def git_cli() -> str:
    path = shutil.which("git")
    if path is None:
        raise UserError("the git command is required to write and read preserved runs (install git)")
    return path


def _git(args: list[str], cwd: Path) -> str:
    proc = subprocess.run(
        [git_cli(), *args], cwd=cwd, capture_output=True, text=True, stdin=subprocess.DEVNULL,
        # the repository was the agent's: its replace refs and grafts must not change what git
        # reads, and no configuration but the runner's applies (sandbox.reclaim rewrote it)
        env={**os.environ, "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C", "GIT_NO_REPLACE_OBJECTS": "1",
             "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"},
    )
    if proc.returncode != 0:
        raise UserError(f"git {' '.join(args[:2])} failed in {cwd}: {proc.stderr.strip()}")
    return proc.stdout


#: A preserved run is a file committed to the results: bounded under the 100 MB a common git host
#: takes for one file. A blob the run added over the first bound, or past the second in all —
#: in a commit the agent made or in its end state — is kept as a stand-in naming its size and
#: BLAKE3, and listed in the evidence commit's CUT_RECORD.
MAX_KEPT_FILE_BYTES = 32 * 1024 * 1024
MAX_KEPT_BYTES = 64 * 1024 * 1024
#: The harness's stdout and stderr are kept up to their last 4 MiB each (the end says why a
#: harness stopped), and the bundle as written must come in under MAX_BUNDLE_BYTES, which leaves
#: room above MAX_KEPT_BYTES for the logs, the reports, the trees and the commits themselves. A
#: bundle over it is not kept: the run is recorded from its baseline, failed, with the reason.
MAX_KEPT_LOG_BYTES = 4 * 1024 * 1024
MAX_BUNDLE_BYTES = 80 * 1024 * 1024
CUT_RECORD = "preserve/cut.json"


def cut_record(cut: dict[str, object]) -> bytes:
    return json.dumps(cut, indent=1, sort_keys=True).encode() + b"\n"


def stand_in(data: bytes) -> tuple[bytes, str]:
    """What is kept in place of a blob over the bounds, and the blob's BLAKE3."""
    digest = blake3(data).hexdigest()
    return (f"cbledger: not preserved, over the size bound of a preserved run: {len(data)} bytes, "
            f"BLAKE3 {digest}\n").encode(), digest


class _Bound:
    """Keeps what a run adds up to the bounds, first come first kept: the agent's commits
    parents first, then its end state, each in path order. A blob the seed or the baseline
    holds, or one already kept, costs nothing: the bundle is thin against the seed and carries
    each object once."""

    def __init__(self, known: set[pygit2.Oid]) -> None:
        self.known, self.kept = known, 0
        self.cut: list[dict[str, object]] = []

    def keeps(self, oid: pygit2.Oid, size: int) -> bool:
        if oid in self.known:
            return True
        if size <= MAX_KEPT_FILE_BYTES and self.kept + size <= MAX_KEPT_BYTES:
            self.kept += size
            self.known.add(oid)
            return True
        return False

    def record(self, rel: str, data: bytes, **where: str) -> bytes:
        kept, digest = stand_in(data)
        self.cut.append({**where, "path": rel, "bytes": len(data), "blake3": digest})
        return kept

    def __call__(self, rel: str, data: bytes) -> bytes:
        """A file of the end state (`snapshot_directory`'s filter)."""
        return data if self.keeps(pygit2.hash(data), len(data)) else self.record(rel, data)


class _BoundCommits(Rebuild):
    """The agent's commits rebuilt with every blob `_Bound` does not keep replaced by its
    stand-in; each cut names the commit it was first met in, as the agent made it and as kept."""

    def __init__(self, repo: pygit2.Repository, bound: _Bound) -> None:
        super().__init__(repo)
        self.bound = bound
        self.agent_commit = ""

    def blob(self, oid: pygit2.Oid, path: str) -> pygit2.Oid:
        blob = self.repo[oid].peel(pygit2.Blob)
        if self.bound.keeps(oid, blob.size):
            return oid
        return self.repo.create_blob(self.bound.record(path, blob.data, agentCommit=self.agent_commit))

    def run(self, commits: list[pygit2.Commit]) -> None:
        for commit in commits:
            self.agent_commit = str(commit.id)
            cuts = len(self.bound.cut)
            kept = self.commit(commit)
            for entry in self.bound.cut[cuts:]:
                entry["commit"] = kept


@dataclass(frozen=True)
class Captured:
    """The capture commit and the agent's HEAD and stash as preserved (rebuilt when a blob of
    theirs was cut)."""

    capture_sha: str
    head_sha: str
    stash_sha: str | None


def capture(repo: pygit2.Repository, when: int, baseline_sha: str | None = None, *, run_id: str = "") -> Captured:
    """Bounds the agent's commits since `baseline_sha` (HEAD when None) and its stash, then
    snapshots the working tree as a commit on top of HEAD as preserved (`refs/cbledger/capture`),
    within what is left of the bounds (`_Bound`); what was cut is listed for `record_evidence`
    to commit. The sandbox's own HEAD and branches are left as the agent left them.

    The commit message names `run_id`: two repeats of a deterministic session (a scripted agent)
    that end in the same second leave the same tree on the same parent, and without it their
    capture, evidence commit and bundle would be the same bytes, which `replay --verify` must
    take for one run's evidence copied to another (`evidence-reused`)."""
    head = repo.head.target
    base = repo[baseline_sha].peel(pygit2.Commit) if baseline_sha else repo[head].peel(pygit2.Commit)
    known: set[pygit2.Oid] = set()
    rebuild = _BoundCommits(repo, _Bound(known))
    for commit in repo.walk(base.id):  # the seed and the baseline: the runner's, never cut
        _collect(repo, commit.tree, "", {}, known)
        rebuild.keep_tree(commit.tree)
    walker = repo.walk(head, pygit2.enums.SortMode.TOPOLOGICAL | pygit2.enums.SortMode.REVERSE)
    stash = repo.references[STASH_REF].target if STASH_REF in repo.references else None
    if stash is not None:
        walker.push(stash)
    walker.hide(base.id)
    rebuild.run(list(walker))
    rebuild.move_refs((STASH_REF,))
    bound = rebuild.bound
    tree = snapshot_directory(repo, Path(repo.workdir), bound)
    cut_file = live_reports_dir(repo) / Path(CUT_RECORD).name
    cut_file.unlink(missing_ok=True)  # only ever the runner's own: never one the agent left
    if bound.cut:
        cut_file.parent.mkdir(parents=True, exist_ok=True)
        cut_file.write_bytes(cut_record({"cut": bound.cut, "maxFileBytes": MAX_KEPT_FILE_BYTES, "maxBytes": MAX_KEPT_BYTES}))
    head_sha = rebuild.mapping.get(str(head), str(head))
    sig = sandbox_mod.signature(*CAPTURE_SIGNATURE, when)
    message = f"capture: end state of run {run_id}\n" if run_id else "capture: end state of the run\n"
    oid = repo.create_commit(None, sig, sig, message, tree, [pygit2.Oid(hex=head_sha)])
    repo.references.create(CAPTURE_REF, oid, force=True)
    stash_sha = None if stash is None else rebuild.mapping.get(str(stash), str(stash))
    return Captured(str(oid), head_sha, stash_sha)


def live_reports_dir(repo: pygit2.Repository) -> Path:
    return Path(repo.path) / LIVE_REPORTS_DIR


def captured_another_tree(repo: pygit2.Repository, end: pygit2.Tree) -> bool:
    """Did the run that left this sandbox's reports capture a tree other than `end`? The runner
    verifies and captures in one go (`refs/cbledger/capture`, and the evidence commit on it), so
    its reports describe that capture; a sandbox edited since (a gold tried by hand, a fix) is
    another end state. A file the capture holds as a stand-in (past the size bounds, listed in
    the cut record) is the same file when its BLAKE3 is the one listed. Reports made without a
    run (no capture) are taken as they are."""
    ref = repo.references.get(EVIDENCE_REF)
    if ref is not None:
        parents = repo[ref.target].peel(pygit2.Commit).parents
        captured = parents[0].tree if parents else None
    else:
        capture_ref = repo.references.get(CAPTURE_REF)
        captured = repo[capture_ref.target].peel(pygit2.Tree) if capture_ref is not None else None
    if captured is None or captured.id == end.id:
        return False
    cut_file = live_reports_dir(repo) / Path(CUT_RECORD).name
    cut = json.loads(cut_file.read_bytes()).get("cut", []) if cut_file.is_file() else []
    stood_in = {c.get("path"): c.get("blake3") for c in cut if isinstance(c, dict) and "commit" not in c}
    for delta in captured.diff_to_tree(end).deltas:
        path = delta.new_file.path
        if delta.status != pygit2.enums.DeltaStatus.MODIFIED or path not in stood_in:
            return True
        if blake3(repo[delta.new_file.id].peel(pygit2.Blob).data).hexdigest() != stood_in[path]:
            return True
    return False


def record_evidence(repo: pygit2.Repository, capture_sha: str, when: int) -> str:
    """Commits the verification reports of `.git/cbledger-evidence/` and the harness's stdout
    and stderr (`.git/cbledger-agent/`, as `harness/*.log`) as `refs/cbledger/evidence`. The
    logs are never graded; they are what says why a harness stopped before the model began."""
    index = pygit2.Index()
    live = live_reports_dir(repo)
    for name in REPORT_NAMES:
        p = live / f"{name}.json"
        if p.is_file():
            index.add(pygit2.IndexEntry(f"{name}.json", repo.create_blob(p.read_bytes()), pygit2.enums.FileMode.BLOB))
    cut_file = live / Path(CUT_RECORD).name
    cut: dict[str, object] = json.loads(cut_file.read_bytes()) if cut_file.is_file() else {}
    logs = {name: (Path(repo.path) / AGENT_LOG_DIR / name) for name in HARNESS_LOGS}
    for name, data in bounded_logs({n: p.read_bytes() for n, p in logs.items() if p.is_file()}, cut).items():
        index.add(pygit2.IndexEntry(f"{HARNESS_LOG_PREFIX}{name}", repo.create_blob(data), pygit2.enums.FileMode.BLOB))
    if cut:
        index.add(pygit2.IndexEntry(CUT_RECORD, repo.create_blob(cut_record(cut)), pygit2.enums.FileMode.BLOB))
    tree = index.write_tree(repo)
    sig = sandbox_mod.signature(*CAPTURE_SIGNATURE, when)
    oid = repo.create_commit(None, sig, sig, "evidence: verification reports\n", tree, [pygit2.Oid(hex=capture_sha)])
    repo.references.create(EVIDENCE_REF, oid, force=True)
    return str(oid)


def bounded_logs(logs: dict[str, bytes], cut: dict[str, object]) -> dict[str, bytes]:
    """Each harness log as kept: one over MAX_KEPT_LOG_BYTES loses its beginning to a line
    saying so, and is listed (`keptBytes`: the tail kept) in `cut`, the CUT_RECORD's document."""
    out: dict[str, bytes] = {}
    for name, data in logs.items():
        if len(data) <= MAX_KEPT_LOG_BYTES:
            out[name] = data
            continue
        digest = blake3(data).hexdigest()
        out[name] = (f"cbledger: only the last {MAX_KEPT_LOG_BYTES} of {len(data)} bytes preserved, "
                     f"BLAKE3 {digest}\n").encode() + data[-MAX_KEPT_LOG_BYTES:]
        entries = cut.setdefault("cut", [])
        assert isinstance(entries, list)
        entries.append({"path": f"{HARNESS_LOG_PREFIX}{name}", "bytes": len(data), "blake3": digest,
                        "keptBytes": MAX_KEPT_LOG_BYTES})
        cut.update(maxFileBytes=MAX_KEPT_FILE_BYTES, maxBytes=MAX_KEPT_BYTES, maxLogBytes=MAX_KEPT_LOG_BYTES)
    return out


def plain_agent_logs(workdir: Path) -> dict[str, bytes]:
    """The harness's stdout and stderr from a sandbox whose repository could not be used, each
    only while it is a plain file of the sandbox (never through a link the agent left)."""
    out: dict[str, bytes] = {}
    d = workdir / ".git" / AGENT_LOG_DIR
    if d.is_symlink() or (workdir / ".git").is_symlink() or not d.is_dir():
        return out
    for name in HARNESS_LOGS:
        try:
            fd = os.open(d / name, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:
            continue
        with os.fdopen(fd, "rb") as f:
            if stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                out[name] = f.read()
    return out


def harness_logs(repo: pygit2.Repository, evidence_sha: str) -> dict[str, bytes]:
    """The harness logs the evidence commit holds, by path (`harness/stdout.log`, …)."""
    tree = repo[evidence_sha].peel(pygit2.Tree)
    out: dict[str, bytes] = {}
    for name in HARNESS_LOGS:
        path = HARNESS_LOG_PREFIX + name
        try:
            out[path] = repo[tree[path].id].peel(pygit2.Blob).data
        except KeyError:
            continue
    return out


def new_blobs(repo: pygit2.Repository, seed_sha: str) -> list[tuple[str, pygit2.Blob]]:
    """Every blob the bundle would carry (reachable from the capture/evidence/baseline refs and
    not already in the seed), with a path it appears at, for the credential backstop."""
    seed_tree = repo[seed_sha].peel(pygit2.Tree)
    known: set[pygit2.Oid] = set()
    _collect(repo, seed_tree, "", {}, known)
    found: dict[pygit2.Oid, str] = {}
    walker = repo.walk(repo.references[EVIDENCE_REF].target, pygit2.enums.SortMode.TOPOLOGICAL)
    for extra in (BASELINE_REF, STASH_REF):
        try:
            walker.push(repo.references[extra].target)
        except KeyError:
            pass
    walker.hide(pygit2.Oid(hex=seed_sha))
    for commit in walker:
        _collect(repo, commit.tree, "", found, known)
    return [(path, repo[oid].peel(pygit2.Blob)) for oid, path in sorted(found.items(), key=lambda kv: kv[1])]


def new_commits(repo: pygit2.Repository, seed_sha: str) -> list[pygit2.Commit]:
    """Every commit the bundle would carry (after the seed), parents before children."""
    walker = repo.walk(repo.references[EVIDENCE_REF].target, pygit2.enums.SortMode.TOPOLOGICAL | pygit2.enums.SortMode.REVERSE)
    for extra in (BASELINE_REF, STASH_REF):
        if extra in repo.references:
            walker.push(repo.references[extra].target)
    walker.hide(pygit2.Oid(hex=seed_sha))
    return list(walker)


def new_paths(repo: pygit2.Repository, seed_sha: str) -> list[str]:
    """Every path (file or directory) the bundle's commits name that the seed does not: file
    names are published too."""
    seed: set[str] = set()
    _paths(repo, repo[seed_sha].peel(pygit2.Tree), "", seed, set())
    found: set[str] = set()
    seen: set[pygit2.Oid] = set()
    for commit in new_commits(repo, seed_sha):
        _paths(repo, commit.tree, "", found, seen)
    return sorted(found - seed)


def _paths(repo: pygit2.Repository, tree: pygit2.Tree, prefix: str, out: set[str], seen: set[pygit2.Oid]) -> None:
    if tree.id in seen:
        return
    seen.add(tree.id)
    for entry in tree:
        path = f"{prefix}{entry.name}"
        out.add(path)
        if entry.type_str == "tree":
            _paths(repo, repo[entry.id].peel(pygit2.Tree), path + "/", out, seen)


def _collect(
    repo: pygit2.Repository, tree: pygit2.Tree, prefix: str, found: dict[pygit2.Oid, str], known: set[pygit2.Oid]
) -> None:
    for entry in tree:
        if entry.type_str == "tree":
            _collect(repo, repo[entry.id].peel(pygit2.Tree), f"{prefix}{entry.name}/", found, known)
        elif entry.type_str == "blob" and entry.id not in known:
            known.add(entry.id)
            if found is not None:
                found.setdefault(entry.id, f"{prefix}{entry.name}")


def write_bundle(repo: pygit2.Repository, seed_sha: str, dest: Path) -> tuple[int, str]:
    """Writes the bundle to `dest` (a staging path: the caller moves it into place once the
    run's events are ready); returns (bytes, blake3)."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    refs = [EVIDENCE_REF, BASELINE_REF] + ([STASH_REF] if STASH_REF in repo.references else [])
    _git(["bundle", "create", str(dest), *refs, f"^{seed_sha}"], Path(repo.path))
    size = dest.stat().st_size
    if size > MAX_BUNDLE_BYTES:
        dest.unlink()
        raise UserError(f"the preserved run would be {size} bytes, over the bound of {MAX_BUNDLE_BYTES} "
                        "for one preserved run")
    with open(dest, "rb") as f:
        data = f.read()
        os.fsync(f.fileno())
    return len(data), blake3(data).hexdigest()


@dataclass(frozen=True)
class Restored:
    repo: pygit2.Repository
    path: Path


def restore(
    bundle: Path,
    ref: SandboxRef,
    fixture: Fixture,
    into: Path | None = None,
    checkout: bool = False,
) -> Restored:
    """Rebuilds the seed from the fixture, checks its SHA, and reads the preserved run in."""
    if not bundle.is_file():
        raise UserError(f"{bundle}: preserved run missing")
    data = bundle.read_bytes()
    digest = blake3(data).hexdigest()
    if digest != ref.store_blake3:
        raise UserError(f"{bundle}: BLAKE3 {digest} differs from the recorded {ref.store_blake3}")
    path = into or scratch_dir.mkdtemp("cbledger-restore-")
    try:
        return _read_in(bundle, data, ref, fixture, path, checkout)
    except BaseException:
        # a directory made here is the caller's only when returned: a run that does not restore
        # (tampered, or its fixture changed) would otherwise leave one behind in memory per try
        if into is None:
            shutil.rmtree(path, ignore_errors=True)
        raise


def _read_in(bundle: Path, data: bytes, ref: SandboxRef, fixture: Fixture, path: Path, checkout: bool) -> Restored:
    repo = pygit2.init_repository(str(path), bare=not checkout, initial_head=sandbox_mod.BRANCH)
    seed = str(sandbox_mod.seed_commit(repo, fixture, ref.seed_config.encode()))
    if seed != ref.seed_sha:
        raise UserError(
            f"rebuilt seed {seed} from fixture {fixture.id} differs from the recorded {ref.seed_sha}: "
            "the fixture tree or the task config changed since the run"
        )
    repo.references.create("refs/cbledger/seed", pygit2.Oid(hex=seed), force=True)
    try:
        unbundle(repo, data)
    except BundleError as exc:
        raise UserError(f"{bundle}: {exc}") from None
    for name, sha in (
        ("baseline", ref.baseline_sha),
        ("head", ref.head_sha),
        ("capture", ref.capture_sha),
        ("evidence", ref.evidence_sha),
        *((("stash", ref.stash_sha),) if ref.stash_sha else ()),
    ):
        try:
            repo[sha]
        except KeyError:
            raise UserError(f"{bundle}: the recorded {name} commit {sha} is not in the preserved run") from None
    if str(repo.references[EVIDENCE_REF].target) != ref.evidence_sha:
        raise UserError(f"{bundle}: evidence ref does not point at the recorded {ref.evidence_sha}")
    if checkout:
        repo.references.create(f"refs/heads/{sandbox_mod.BRANCH}", pygit2.Oid(hex=ref.head_sha), force=True)
        repo.checkout_tree(repo[ref.capture_sha].peel(pygit2.Tree), strategy=pygit2.enums.CheckoutStrategy.FORCE)
        repo.set_head(f"refs/heads/{sandbox_mod.BRANCH}")
    return Restored(repo, path)
