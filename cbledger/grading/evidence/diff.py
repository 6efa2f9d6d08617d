"""The diff source: what the run changed, measured against the baseline commit.

`git diff <baseline>..HEAD` plus the untracked set is, in tree terms, the difference between the
baseline tree and the end-state tree (which already holds untracked and ignored files). Line
counts come from libgit2's patches with zero context, so a large schematic costs one C-level diff.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pygit2

from cbledger.grading.evidence.tree import TreeView


@dataclass(frozen=True)
class FileChange:
    path: str
    status: str  # added | deleted | modified | mode
    added: int
    deleted: int
    binary: bool
    old_mode: int | None
    new_mode: int | None


@dataclass
class DiffSummary:
    changes: dict[str, FileChange] = field(default_factory=dict)

    @property
    def paths(self) -> list[str]:
        return sorted(self.changes)

    def get(self, path: str) -> FileChange | None:
        return self.changes.get(path)


def compute_diff(baseline: TreeView, end: TreeView) -> DiffSummary:
    summary = DiffSummary()
    if baseline.tree.id == end.tree.id:
        return summary
    diff = baseline.tree.diff_to_tree(end.tree, context_lines=0, interhunk_lines=0)
    for patch in diff:
        if patch is None:  # libgit2 makes no patch for an unmodified entry; a tree diff lists none
            continue
        delta = patch.delta
        if delta.status == pygit2.enums.DeltaStatus.ADDED:
            status, path = "added", delta.new_file.path
        elif delta.status == pygit2.enums.DeltaStatus.DELETED:
            status, path = "deleted", delta.old_file.path
        else:
            path = delta.new_file.path
            status = "modified" if delta.old_file.id != delta.new_file.id else "mode"
        _ctx, added, deleted = patch.line_stats
        summary.changes[path] = FileChange(
            path=path,
            status=status,
            added=added,
            deleted=deleted,
            binary=bool(delta.is_binary),  # None (not yet known) cannot remain once a patch is made
            old_mode=None if status == "added" else int(delta.old_file.mode),
            new_mode=None if status == "deleted" else int(delta.new_file.mode),
        )
    return summary


def commits_since(repo: pygit2.Repository, head: pygit2.Oid | str, baseline: pygit2.Oid | str) -> list[str]:
    """Commits reachable from `head` but not from `baseline`, newest first."""
    head_oid = repo[str(head)].id if not isinstance(head, pygit2.Oid) else head
    base_oid = repo[str(baseline)].id if not isinstance(baseline, pygit2.Oid) else baseline
    if head_oid == base_oid:
        return []
    walker = repo.walk(head_oid, pygit2.enums.SortMode.TOPOLOGICAL)
    walker.hide(base_oid)
    return [str(c.id) for c in walker]


def line_count(data: bytes) -> int:
    """Lines as a reader counts them: a final line without a newline still counts."""
    return len(data.splitlines())
