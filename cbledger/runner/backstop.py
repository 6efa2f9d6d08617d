"""The credential backstop: scan everything bound for `results/` before a byte of it is written.

copperhead redacts what it knows as it writes; this scan is the backstop for what it misses,
because benchmark output is the surface most likely to be published. Everything the bundle would
carry is scanned: every new blob (the files the run wrote, the transcript, the reports, the
harness logs), every path its commits name, and every commit's message, author and committer.

A match hard-fails the run, and the run is still recorded: each commit after the seed is rebuilt
with every match replaced by its kind (`<openai-or-anthropic-key>`; a PEM block from header to
END line), the refs are moved to the rebuilt commits, and the evidence commit gains
`runner.json` listing what was redacted (kind and place, never the text). The grade then fails
on that finding (`cbledger.grading.findings`), so an agent cannot erase its own failure by
writing one key, and replay re-grades the redacted bundle to the same verdict. Messages name the
pattern kind and the place, never the secret.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import pygit2

from cbledger import credentials
from cbledger.errors import SecretFound
from cbledger.grading.evidence.bundle import BASELINE_REF, CAPTURE_REF, EVIDENCE_REF, RUNNER_REPORT
from cbledger.runner import preserve
from cbledger.runner.rebuild import Rebuild


def scan_preserved(repo: pygit2.Repository, seed_sha: str) -> list[credentials.Match]:
    found: list[credentials.Match] = []
    for path, blob in preserve.new_blobs(repo, seed_sha):
        found.extend(credentials.scan_bytes(blob.data, path))
    for path in preserve.new_paths(repo, seed_sha):
        found.extend(credentials.scan_name(path, f"file name {path}"))
    for commit in preserve.new_commits(repo, seed_sha):
        sha = str(commit.id)[:12]
        found.extend(credentials.scan_text(commit.message, f"commit {sha} message"))
        for role, sig in (("author", commit.author), ("committer", commit.committer)):
            found.extend(credentials.scan_name(sig.name, f"commit {sha} {role} name"))
            found.extend(credentials.scan_name(sig.email, f"commit {sha} {role} e-mail"))
    return found


@dataclass(frozen=True)
class Redacted:
    """The run's commits as rebuilt without what matched, and what was redacted."""

    baseline_sha: str
    head_sha: str
    capture_sha: str
    evidence_sha: str
    stash_sha: str | None
    found: list[credentials.Match]


def require_clean(
    repo: pygit2.Repository, seed_sha: str, run_id: str, *, baseline_sha: str, head_sha: str, stash_sha: str | None,
) -> Redacted | None:
    """None when nothing matched; else the redacted rebuild, already in place under the refs."""
    found = scan_preserved(repo, seed_sha)
    if not found:
        return None
    rebuilt = _Rewriter(repo).run(seed_sha, found)
    mapped = rebuilt.mapping
    redacted = Redacted(
        baseline_sha=mapped.get(baseline_sha, baseline_sha),
        head_sha=mapped.get(head_sha, head_sha),
        capture_sha=str(repo.references[CAPTURE_REF].target),
        evidence_sha=str(repo.references[EVIDENCE_REF].target),
        stash_sha=mapped.get(stash_sha, stash_sha) if stash_sha else None,
        found=found,
    )
    left = scan_preserved(repo, seed_sha)
    if left:
        where = "; ".join(str(m) for m in left[:10])
        raise SecretFound(f"run {run_id}: credentials remain after redaction ({where}); nothing of this run was written")
    return redacted


def redacted_signature(sig: pygit2.Signature) -> pygit2.Signature:
    def clean(text: str) -> str:
        return credentials.redact(text).replace("<", "[").replace(">", "]") or "[redacted]"

    if not (credentials.has_match(sig.name) or credentials.has_match(sig.email)):
        return sig
    return pygit2.Signature(clean(sig.name), clean(sig.email), sig.time, sig.offset)


class _Rewriter(Rebuild):
    """Rebuilds every commit after the seed with its trees, blobs, names, messages and
    signatures redacted; the evidence commit also gets `runner.json`."""

    def run(self, seed_sha: str, found: list[credentials.Match]) -> _Rewriter:
        repo = self.repo
        evidence = str(repo.references[EVIDENCE_REF].target)
        report = json.dumps(
            {"redactions": [{"kind": m.kind, "location": m.location} for m in found]}, indent=2, sort_keys=True,
        ).encode() + b"\n"
        for commit in preserve.new_commits(repo, seed_sha):
            tree = self.tree(commit.tree)
            if str(commit.id) == evidence:
                builder = repo.TreeBuilder(repo[tree].peel(pygit2.Tree))
                builder.insert(f"{RUNNER_REPORT}.json", repo.create_blob(report), pygit2.enums.FileMode.BLOB)
                tree = builder.write()
            self.commit(commit, tree, redacted_signature(commit.author), redacted_signature(commit.committer),
                        credentials.redact(commit.message))
        self.move_refs((BASELINE_REF, CAPTURE_REF, EVIDENCE_REF, preserve.STASH_REF))
        return self

    def name(self, name: str) -> str:
        return credentials.redact(name) if credentials.has_match(name) else name

    def blob(self, oid: pygit2.Oid, path: str) -> pygit2.Oid:
        data = self.repo[oid].peel(pygit2.Blob).data
        text = data.decode("utf-8", errors="replace")
        return self.repo.create_blob(credentials.redact_bytes(data)) if credentials.has_match(text) else oid
