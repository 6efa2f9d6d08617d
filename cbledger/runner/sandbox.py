"""Sandboxes: one git repository per (task, model, repeat), outside the project.

The seed commit (the fixture's `tree/` plus the task's `.copperhead/config.json`) is made with a
fixed signature, a fixed time and a fixed message, so the same fixture and config always give
the same SHA on any machine. That is what makes a preserved run cheap and checkable: only what
the run changed is stored, relative to a commit anyone can rebuild from the fixture.

When setup commands run (`init` through the copperhead CLI), their output is committed on top of
the seed as the baseline; otherwise the baseline is the seed. Either way the baseline SHA is
recorded under `refs/cbledger/baseline`.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pygit2

from cbledger.credentials import printable
from cbledger.errors import UserError
from cbledger.grading.evidence.bundle import BASELINE_REF
from cbledger.ledger.events import Ablations
from cbledger.runner.agents.base import COPPERHEAD_SIGNATURE
from cbledger.tasks.catalog import Fixture, Task
from cbledger.tasks.fixtures.hashing import tree_files
from cbledger.tasks.model import CONFIG_PATH

SEED_TIME = 946684800  # 2000-01-01T00:00:00Z
SEED_SIGNATURE = ("cbledger", "cbledger@copperbench.invalid")
BRANCH = "main"


def signature(name: str, email: str, when: int, offset: int = 0) -> pygit2.Signature:
    return pygit2.Signature(name, email, when, offset)


def seed_signature() -> pygit2.Signature:
    return signature(*SEED_SIGNATURE, SEED_TIME)


def copperhead_config(task: Task, fixture: Fixture, ablations: Ablations) -> dict:
    """`.copperhead/config.json` for a run: the task's overrides, ablations on top, cache off."""
    cfg = task.manifest.config
    art = fixture.manifest.artifacts
    out: dict = {
        "schematic": art.schematic,
        "board": art.board,
        "docs": "docs",
        "budgets": dict(cfg.budgets),
        "llmCache": False,
    }
    max_turns = ablations.max_turns or cfg.max_turns or task.manifest.caps.turns
    out["maxTurns"] = max_turns
    repair = ablations.max_repair_cycles if ablations.max_repair_cycles is not None else cfg.max_repair_cycles
    if repair is not None:
        out["maxRepairCycles"] = repair
    if cfg.stage_max_turns is not None:
        out["stageMaxTurns"] = cfg.stage_max_turns
    return out


def config_bytes(config: dict) -> bytes:
    return (json.dumps(config, indent=2, sort_keys=True) + "\n").encode()


def build_seed_tree(repo: pygit2.Repository, fixture: Fixture, config: bytes) -> pygit2.Oid:
    index = pygit2.Index()
    for rel in tree_files(fixture.tree):
        full = fixture.tree / rel
        if rel == CONFIG_PATH:
            continue
        mode = (
            pygit2.enums.FileMode.BLOB_EXECUTABLE
            if os.stat(full).st_mode & 0o100
            else pygit2.enums.FileMode.BLOB
        )
        index.add(pygit2.IndexEntry(rel, repo.create_blob(full.read_bytes()), mode))
    index.add(pygit2.IndexEntry(CONFIG_PATH, repo.create_blob(config), pygit2.enums.FileMode.BLOB))
    return index.write_tree(repo)


def seed_message(fixture_id: str, sha256: str) -> str:
    """The seed commit's message: which fixture, at which hash, a sandbox was seeded from."""
    return f"seed: fixture {fixture_id} {sha256}\n"


def seed_of(repo: pygit2.Repository, commit: str) -> pygit2.Commit:
    """The first commit under `commit`, first parents down: a runner's seed commit."""
    first = repo[commit].peel(pygit2.Commit)
    while first.parents:
        first = first.parents[0]
    return first


def seeded_from(repo: pygit2.Repository, commit: str) -> tuple[str, str] | None:
    """The (fixture id, tree hash) `commit`'s history was seeded from, by its seed commit's
    `seed_message`; None for a history no runner seeded (a sandbox made by hand)."""
    words = seed_of(repo, commit).message.split()
    if len(words) == 4 and words[:2] == ["seed:", "fixture"]:
        return words[2], words[3]
    return None


def seed_commit(repo: pygit2.Repository, fixture: Fixture, config: bytes) -> pygit2.Oid:
    """Creates (or finds) the deterministic seed commit in `repo`; does not move any ref."""
    tree = build_seed_tree(repo, fixture, config)
    sig = seed_signature()
    return repo.create_commit(None, sig, sig, seed_message(fixture.id, fixture.manifest.sha256), tree, [])


@dataclass(frozen=True)
class Sandbox:
    path: Path
    seed_sha: str
    baseline_sha: str

    @property
    def repo(self) -> pygit2.Repository:
        return pygit2.Repository(str(self.path))


def create(path: Path, task: Task, fixture: Fixture, ablations: Ablations) -> tuple[pygit2.Repository, str, bytes]:
    """A new sandbox at `path` checked out at the seed commit. Returns (repo, seed sha, config)."""
    if path.exists() and any(path.iterdir()):
        raise UserError(f"{path}: sandbox directory is not empty; repeats never share a sandbox")
    path.mkdir(parents=True, exist_ok=True)
    repo = pygit2.init_repository(str(path), initial_head=BRANCH)
    # Whatever commits in the sandbox (the harness, git hooks, a person inspecting it) does so
    # under the fixed project identity, never the operator's.
    repo.config["user.name"], repo.config["user.email"] = COPPERHEAD_SIGNATURE
    config = config_bytes(copperhead_config(task, fixture, ablations))
    seed = seed_commit(repo, fixture, config)
    repo.references.create(f"refs/heads/{BRANCH}", seed, force=True)
    repo.set_head(f"refs/heads/{BRANCH}")
    repo.checkout_head(strategy=pygit2.enums.CheckoutStrategy.FORCE)
    return repo, str(seed), config


def commit_setup(repo: pygit2.Repository, seed_sha: str, message: str) -> str:
    """Commits whatever setup commands wrote (all files, ignored ones included) as the baseline.
    With nothing written the baseline is the seed itself."""
    from cbledger.grading.evidence.tree import snapshot_directory

    tree = snapshot_directory(repo, Path(repo.workdir))
    if tree == repo[seed_sha].peel(pygit2.Tree).id:
        baseline = seed_sha
    else:
        sig = seed_signature()
        baseline = str(repo.create_commit(f"refs/heads/{BRANCH}", sig, sig, message, tree, [repo[seed_sha].id]))
        repo.checkout_head(strategy=pygit2.enums.CheckoutStrategy.FORCE)
    # The index must hold the baseline too: copperhead's preflight refuses a tree whose
    # `git status` shows anything, and an index still at the seed shows every file setup wrote
    # as a staged deletion plus an untracked copy.
    repo.index.read_tree(repo[baseline].peel(pygit2.Tree))
    repo.index.write()
    repo.references.create(BASELINE_REF, pygit2.Oid(hex=baseline), force=True)
    return baseline


def remove(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)


class Tampered(UserError):
    """The agent left its sandbox's repository in a state the runner will not read."""


#: what of an agent's `.git/` the runner removes before reading it: other object stores
#: (`objects/info/alternates`, `commondir`), history rewrites (`info/grafts`, `shallow`), and
#: the directory live reports are collected in (an agent could plant one there)
AGENT_GIT_DEBRIS = ("objects/info/alternates", "objects/info/http-alternates", "commondir", "info/grafts", "shallow")


def reclaim(workdir: Path, live_reports: str) -> None:
    """Makes the sandbox's repository the runner's again after the agent exited: `.git` must be
    a directory holding no symbolic link (through which the runner would read or write outside
    the sandbox), its configuration is replaced by the runner's own (an `[include]`, a hook
    path or a filter of the agent's must not apply to what the runner does next), and what could
    point git elsewhere is removed. Raises `Tampered` naming what it found."""
    git = workdir / ".git"
    if git.is_symlink() or not git.is_dir():
        raise Tampered(f"{workdir.name}: .git is no longer a directory")
    for dirpath, dirnames, filenames in os.walk(git):
        for name in (*dirnames, *filenames):
            if os.path.islink(os.path.join(dirpath, name)):
                rel = Path(dirpath, name).relative_to(workdir).as_posix()
                raise Tampered(f"{workdir.name}: the agent left a symbolic link at {printable(rel)}")
    for rel in AGENT_GIT_DEBRIS:
        target = git / rel
        if target.is_dir():
            shutil.rmtree(target)
        else:
            target.unlink(missing_ok=True)
    shutil.rmtree(git / live_reports, ignore_errors=True)
    (git / "config").write_text(_RUNNER_GIT_CONFIG)


_RUNNER_GIT_CONFIG = (
    "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n\tlogallrefupdates = true\n"
    f"[user]\n\tname = {COPPERHEAD_SIGNATURE[0]}\n\temail = {COPPERHEAD_SIGNATURE[1]}\n"
)


def unlink_first_link(workdir: Path, rel: str) -> None:
    """Removes the first symbolic link on the way from `workdir` to `rel` (the link itself, never
    what it points at), so that nothing reading `rel` from the host leaves the sandbox."""
    path = workdir
    for part in Path(rel).parts:
        path = path / part
        if path.is_symlink():
            path.unlink()
            return
        if not path.exists():
            return


def keep_baseline(repo: pygit2.Repository, baseline_sha: str, into: Path) -> pygit2.Repository:
    """A bare repository of the runner's own, outside the sandbox, holding the seed and the
    baseline: what the run is recorded from when the agent leaves its own repository unusable."""
    kept = pygit2.init_repository(str(into), bare=True)
    stack: list[pygit2.Oid] = [pygit2.Oid(hex=baseline_sha)]
    seen: set[pygit2.Oid] = set()
    while stack:
        oid = stack.pop()
        if oid in seen:
            continue
        seen.add(oid)
        obj = repo[oid]
        kept.odb.write(obj.type, obj.read_raw())
        if isinstance(obj, pygit2.Commit):
            stack.extend([obj.tree_id, *obj.parent_ids])
        elif isinstance(obj, pygit2.Tree):
            stack.extend(entry.id for entry in obj)
    kept.references.create(BASELINE_REF, pygit2.Oid(hex=baseline_sha), force=True)
    return kept


def require_root(root: Path) -> None:
    """Refuses a sandbox root no run could use, before a campaign's plan is kept: found out at
    the first run instead, the plan stayed behind holding repeat numbers of the tasks, and the
    error named neither the option nor the cause. Tried by making (and removing) a directory
    where the runs would make theirs, or in the nearest directory that exists."""
    where = root
    while not where.exists() and where != where.parent:
        where = where.parent
    try:
        if not where.is_dir():
            raise NotADirectoryError(f"{where} is not a directory")
        os.rmdir(tempfile.mkdtemp(prefix=".cbledger-try-", dir=where))
    except OSError as e:
        reason = e.strerror or str(e)
        raise UserError(
            f"--sandbox-root {root}: no sandbox can be made there ({where}: {reason}); name a writable directory"
        ) from None
