"""Everything a grade may read, gathered in one place: the three sources plus the verification
reports captured when the run ended.

Evidence is always git objects in one repository: the baseline commit, the agent's HEAD, the
end-state tree (a snapshot holding tracked, untracked and ignored files) and the verification
reports. A live sandbox and a restored preserved run produce the same `Evidence`, so
`cbledger grade`, the runner and `replay --verify` share one grading path.

Where the runner keeps things inside a sandbox repository (never in its working tree, so they
are never part of the end state or the diff):

* `refs/cbledger/baseline` → the baseline commit
* `refs/cbledger/capture`  → the end-state snapshot commit (parent: the agent's HEAD)
* `refs/cbledger/evidence` → a commit whose tree holds `erc.json`, `drc.json`, `check.json`
  (whichever were captured) and `runner.json` (when the runner had findings), parent: the
  capture commit
* before preservation, reports are written to `.git/cbledger-evidence/` of a live sandbox
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import pygit2

from cbledger.errors import UserError
from cbledger.grading.evidence import transcript as transcript_mod
from cbledger.grading.evidence.diff import DiffSummary, commits_since, compute_diff
from cbledger.grading.evidence.tree import TreeView, snapshot_directory, view

BASELINE_REF = "refs/cbledger/baseline"
CAPTURE_REF = "refs/cbledger/capture"
EVIDENCE_REF = "refs/cbledger/evidence"
LIVE_REPORTS_DIR = "cbledger-evidence"  # inside .git/
#: `runner.json` holds what the runner itself found and grading must honour (the credential
#: backstop's redactions, an end state it could not preserve): `cbledger.grading.findings`
RUNNER_REPORT = "runner"
REPORT_NAMES = ("erc", "drc", "check", RUNNER_REPORT)


@dataclass
class Evidence:
    repo: pygit2.Repository
    baseline_sha: str
    head_sha: str
    end: TreeView
    reports: dict[str, bytes] = field(default_factory=dict)
    runner_exit: str | None = None

    @cached_property
    def baseline(self) -> TreeView:
        return view(self.repo, self.baseline_sha)

    @cached_property
    def diff(self) -> DiffSummary:
        return compute_diff(self.baseline, self.end)

    @cached_property
    def commits(self) -> list[str]:
        return commits_since(self.repo, self.head_sha, self.baseline_sha)

    @cached_property
    def transcript(self) -> transcript_mod.Transcript:
        return transcript_mod.load(self.end, self.baseline)

    @property
    def exit_path(self) -> str | None:
        """The run-end exit path, or the runner's own exit when the run never wrote one."""
        return self.transcript.exit_path or self.runner_exit


def _open_repo(path: Path) -> pygit2.Repository:
    try:
        return pygit2.Repository(str(path))
    except pygit2.GitError:
        raise UserError(f"{path}: not a git repository") from None


def _ref_target(repo: pygit2.Repository, name: str) -> str | None:
    try:
        return str(repo.references[name].peel(pygit2.Commit).id)
    except KeyError:
        return None


def _resolve(repo: pygit2.Repository, rev: str, what: str) -> str:
    try:
        return str(repo.revparse_single(rev).peel(pygit2.Commit).id)
    except (KeyError, ValueError, pygit2.GitError):
        raise UserError(f"{repo.workdir or repo.path}: {what} {rev!r} is not a commit here") from None


def reports_from_commit(repo: pygit2.Repository, sha: str) -> dict[str, bytes]:
    tree = view(repo, sha)
    out = {}
    for name in REPORT_NAMES:
        data = tree.read(f"{name}.json")
        if data is not None:
            out[name] = data
    return out


def from_repo(
    repo: pygit2.Repository,
    *,
    baseline_sha: str,
    head_sha: str,
    capture_sha: str,
    evidence_sha: str | None,
    runner_exit: str | None = None,
) -> Evidence:
    """Evidence of a preserved run restored into `repo`."""
    reports = reports_from_commit(repo, evidence_sha) if evidence_sha else {}
    return Evidence(repo, baseline_sha, head_sha, view(repo, capture_sha), reports, runner_exit)


def from_sandbox(
    sandbox: Path, baseline: str | None = None, runner_exit: str | None = None
) -> Evidence:
    """Evidence of a live sandbox directory: its working tree as it stands now."""
    repo = _open_repo(sandbox)
    if repo.is_bare or repo.workdir is None:
        raise UserError(f"{sandbox}: a sandbox must have a working tree")
    if baseline is None:
        baseline = _ref_target(repo, BASELINE_REF)
        if baseline is None:
            raise UserError(
                f"{sandbox}: no baseline recorded ({BASELINE_REF}); pass --baseline SHA"
            )
    baseline_sha = _resolve(repo, baseline, "baseline")
    head_sha = _resolve(repo, "HEAD", "HEAD")
    end_tree = snapshot_directory(repo, Path(repo.workdir))
    reports: dict[str, bytes] = {}
    live = Path(repo.path) / LIVE_REPORTS_DIR
    for name in REPORT_NAMES:
        p = live / f"{name}.json"
        if p.is_file():
            reports[name] = p.read_bytes()
    if not reports:
        evidence_sha = _ref_target(repo, EVIDENCE_REF)
        # the reports recorded for a run describe its captured end state; a restored run edited
        # since is another end state, which they must not be taken to describe
        if evidence_sha and _captured_tree(repo, evidence_sha) == str(end_tree):
            reports = reports_from_commit(repo, evidence_sha)
    return Evidence(repo, baseline_sha, head_sha, view(repo, end_tree), reports, runner_exit)


def _captured_tree(repo: pygit2.Repository, evidence_sha: str) -> str | None:
    """The tree of the capture the evidence commit sits on (its parent)."""
    parents = repo[evidence_sha].peel(pygit2.Commit).parents
    return str(parents[0].tree.id) if parents else None
