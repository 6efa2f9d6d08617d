"""Restoring a preserved run for verification, checking every link on the way.

`cbledger.runner.preserve.restore` stops at the first thing that is wrong, which is right for
re-scoring. Verification needs to say *what* is wrong: a rewritten bundle both changes its
BLAKE3 and loses the recorded commits, and the useful finding is which evidence changed. So this
walks the same steps — bundle digest, seed rebuilt from the fixture, the bundle read in (in-process,
`runner/bundle_read.py`), recorded commits —
records a finding at each failed step instead of raising, and goes on as far as the evidence
allows, falling back to the bundle's own refs to recompute the evidence digests.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pygit2
from blake3 import blake3

from cbledger import invocation
from cbledger.errors import UserError
from cbledger.grading.evidence.bundle import EVIDENCE_REF
from cbledger.grading.evidence.tree import view
from cbledger.ledger.events import RunRecorded
from cbledger.reproduce.findings import Finding
from cbledger.runner import sandbox as sandbox_mod
from cbledger.runner.bundle_read import BundleError, unbundle
from cbledger.tasks.catalog import Catalog, Fixture
from cbledger.tasks.fixtures.hashing import hash_directory
from cbledger.workspace import Workspace

COMMITS = ("baseline", "head", "capture", "evidence")


@dataclass
class RestoredRun:
    repo: pygit2.Repository | None = None
    fixture: Fixture | None = None
    #: every recorded commit is present and the seed rebuilt: the run can be graded as recorded
    complete: bool = False
    failures: list[Finding] = field(default_factory=list)
    #: the fixture's tree is not materialized here (a clone's real boards): the run's evidence
    #: is whole, this checkout cannot read it
    unmaterialized: bool = False


def _finding(run: RunRecorded, seq: int, kind: str, message: str, **extra) -> Finding:
    return Finding(check="run", kind=kind, message=message, seq=seq, run_id=run.run_id, **extra)


def restore_run(workspace: Workspace, catalog: Catalog, run: RunRecorded, seq: int, into: Path) -> RestoredRun:
    """Restores `run` into a new bare repository at `into`, recording each failed check."""
    out = RestoredRun()
    ref = run.sandbox
    bundle = workspace.stored(ref.store)
    if bundle is None:
        out.failures.append(_finding(run, seq, "bundle-missing", f"recorded store path {ref.store!r} is outside the project", file=ref.store))
        return out
    if not bundle.is_file():
        out.failures.append(_finding(run, seq, "bundle-missing", "the preserved run is missing", file=ref.store))
        return out
    data = bundle.read_bytes()
    digest = blake3(data).hexdigest()
    if digest != ref.store_blake3:
        out.failures.append(
            _finding(run, seq, "bundle-digest", "the bundle's BLAKE3 differs from the recorded one",
                     file=ref.store, field="sandbox.storeBlake3", expected=ref.store_blake3, actual=digest)
        )
    try:
        fixture = catalog.fixture(run.fixture.id)
    except UserError as exc:
        out.failures.append(_finding(run, seq, "fixture-missing", f"fixture {run.fixture.id}: {exc}"))
        return out
    if not fixture.tree.is_dir():
        out.unmaterialized = True
        # run from outside the project, materializing is not the way out: the root is
        way_out = (f"materialize it: `{invocation.command('fixture', 'materialize', fixture.id, '--from', 'DIR')}`, or "
                   "`scripts/materialize-real` for the real boards" if (workspace.root / "tasks").is_dir() else
                   f"{workspace.root} is not the project that materializes it: run from the project, or pass --root DIR")
        out.failures.append(
            _finding(run, seq, "fixture-missing",
                     f"fixture {fixture.id} has no tree/ ({way_out})",
                     file=str(fixture.tree.relative_to(workspace.root)) if fixture.tree.is_relative_to(workspace.root) else str(fixture.tree))
        )
        return out
    out.fixture = fixture
    repo = pygit2.init_repository(str(into), bare=True, initial_head=sandbox_mod.BRANCH)
    out.repo = repo
    seed = str(sandbox_mod.seed_commit(repo, fixture, ref.seed_config.encode()))
    if seed != ref.seed_sha:
        tree_hash = hash_directory(fixture.tree)
        why = (
            f"its tree now hashes to {tree_hash}, the run recorded {run.fixture.sha256}"
            if tree_hash != run.fixture.sha256
            else f"its tree still hashes to {tree_hash}; the manifest or seed config differs"
        )
        out.failures.append(
            _finding(run, seq, "seed-mismatch",
                     f"the seed rebuilt from fixture {fixture.id} is {seed}, the run recorded {ref.seed_sha}: {why}",
                     field="sandbox.seedSha", file=f"fixtures/{fixture.id}/tree", expected=ref.seed_sha, actual=seed)
        )
        return out
    repo.references.create("refs/cbledger/seed", pygit2.Oid(hex=seed), force=True)
    try:
        unbundle(repo, data)
    except BundleError as exc:
        out.failures.append(_finding(run, seq, "bundle-unreadable", f"the bundle could not be read: {exc}", file=ref.store))
        return out
    missing = []
    for name in (*COMMITS, "stash"):
        sha = getattr(ref, f"{name}_sha")
        if sha is None:  # only a failed copperhead run leaves a stash
            continue
        try:
            repo[sha]
        except KeyError:
            missing.append(name)
            out.failures.append(
                _finding(run, seq, "commit-missing", f"the recorded {name} commit {sha} is not in the preserved run",
                         field=f"sandbox.{name}Sha", file=ref.store, expected=sha)
            )
    out.complete = not missing
    return out


def evidence_commits(repo: pygit2.Repository, run: RunRecorded, complete: bool) -> tuple[str | None, str | None]:
    """(capture, evidence) to recompute digests from: the recorded commits, or — when the bundle
    lost them — the commits its evidence ref names, so a changed file can still be named."""
    if complete:
        return run.sandbox.capture_sha, run.sandbox.evidence_sha
    try:
        evidence = repo.references[EVIDENCE_REF].peel(pygit2.Commit)
    except (KeyError, pygit2.GitError):
        return None, None
    capture = evidence.parents[0] if evidence.parents else None
    return (str(capture.id) if capture else None), str(evidence.id)


def check_digests(repo: pygit2.Repository, run: RunRecorded, seq: int, complete: bool) -> list[Finding]:
    """Recomputes every evidence digest of `run.recorded` from the restored objects."""
    capture, evidence = evidence_commits(repo, run, complete)
    trees = {}
    if capture:
        trees["capture"] = view(repo, capture)
    if evidence:
        trees["evidence"] = view(repo, evidence)
    found = []
    for name, d in sorted(run.evidence.items()):
        source = "capture" if name == "transcript" else "evidence"
        tree = trees.get(source)
        data = tree.read(d.path) if tree is not None else None
        if data is None:
            found.append(
                _finding(run, seq, "evidence-missing", f"{name} ({d.path}) is not in the restored {source} commit",
                         field=f"evidence.{name}", file=d.path, expected=d.blake3)
            )
            continue
        actual = blake3(data).hexdigest()
        if actual != d.blake3 or len(data) != d.bytes:
            found.append(
                _finding(run, seq, "evidence-digest",
                         f"{name} ({d.path}) restored as {len(data)} bytes with BLAKE3 {actual}; the run recorded "
                         f"{d.bytes} bytes with {d.blake3}",
                         field=f"evidence.{name}", file=d.path, expected=d.blake3, actual=actual)
            )
    return found
