"""Rebuilding a run's commits with some of their blobs or names replaced, parents first.

Two things replace part of what an agent committed before a run is preserved: the credential
backstop (a match redacted, `backstop`) and the size bound (a blob over it kept as a stand-in,
`preserve`). Either way each commit is rebuilt onto its rebuilt tree with its author, committer,
time and message unless the caller replaces them, so commit counts and messages read as the agent
left them; a commit in which nothing changed, on parents that did not change, is kept as it is,
SHA and all.
"""

from __future__ import annotations

from collections.abc import Iterable

import pygit2


class Rebuild:
    """One rebuild of one repository's commits; `blob` and `name` say what to replace (nothing,
    here). Trees and blobs are rebuilt once each, whichever commit reaches them first."""

    def __init__(self, repo: pygit2.Repository) -> None:
        self.repo = repo
        #: old commit SHA -> new commit SHA, for every commit rebuilt (kept ones map to themselves)
        self.mapping: dict[str, str] = {}
        self._trees: dict[pygit2.Oid, pygit2.Oid] = {}
        self._blobs: dict[pygit2.Oid, pygit2.Oid] = {}

    def blob(self, oid: pygit2.Oid, path: str) -> pygit2.Oid:
        """The blob to keep in place of `oid`, first met at `path`."""
        return oid

    def name(self, name: str) -> str:
        return name

    def keep_tree(self, tree: pygit2.Tree) -> None:
        """Marks `tree` and all it holds as kept as it is (the seed's, the baseline's: the
        runner's own, never the agent's)."""
        if tree.id in self._trees:
            return
        self._trees[tree.id] = tree.id
        for entry in tree:
            if entry.type_str == "tree":
                self.keep_tree(self.repo[entry.id].peel(pygit2.Tree))
            elif entry.type_str == "blob":
                self._blobs[entry.id] = entry.id

    def tree(self, tree: pygit2.Tree, prefix: str = "") -> pygit2.Oid:
        done = self._trees.get(tree.id)
        if done is not None:
            return done
        entries: list[tuple[str, pygit2.Oid, int]] = []
        changed = False
        for entry in tree:
            old_name = entry.name or ""
            new_name = self.name(old_name)
            if entry.type_str == "tree":
                oid = self.tree(self.repo[entry.id].peel(pygit2.Tree), f"{prefix}{old_name}/")
            elif entry.type_str == "blob":
                oid = self._blob(entry.id, f"{prefix}{old_name}")
            else:  # a submodule's commit: no object of this repository
                oid = entry.id
            changed = changed or oid != entry.id or new_name != old_name
            entries.append((new_name, oid, entry.filemode))
        new = tree.id
        if changed:
            builder = self.repo.TreeBuilder()
            for name, oid, mode in entries:
                builder.insert(name, oid, mode)
            new = builder.write()
        self._trees[tree.id] = new
        return new

    def _blob(self, oid: pygit2.Oid, path: str) -> pygit2.Oid:
        done = self._blobs.get(oid)
        if done is None:
            done = self._blobs[oid] = self.blob(oid, path)
        return done

    def commit(
        self,
        commit: pygit2.Commit,
        tree: pygit2.Oid | None = None,
        author: pygit2.Signature | None = None,
        committer: pygit2.Signature | None = None,
        message: str | None = None,
    ) -> str:
        """Rebuilds `commit` on its rebuilt parents and tree (or `tree`), recording the mapping."""
        tree = self.tree(commit.tree) if tree is None else tree
        parents = [pygit2.Oid(hex=self.mapping.get(str(p), str(p))) for p in commit.parent_ids]
        author = commit.author if author is None else author
        committer = commit.committer if committer is None else committer
        message = commit.message if message is None else message
        same = (tree == commit.tree_id and parents == list(commit.parent_ids) and author == commit.author
                and committer == commit.committer and message == commit.message)
        new = str(commit.id) if same else str(self.repo.create_commit(None, author, committer, message, tree, parents))
        self.mapping[str(commit.id)] = new
        return new

    def move_refs(self, refs: Iterable[str]) -> None:
        """Points each of `refs` that exists at its commit's rebuild."""
        for ref in refs:
            if ref in self.repo.references:
                old = str(self.repo.references[ref].target)
                self.repo.references.create(ref, pygit2.Oid(hex=self.mapping.get(old, old)), force=True)
