"""The credential backstop: scan everything bound for `results/` before a byte of it is written.

copperhead redacts what it knows as it writes; this scan is the backstop for what it misses,
because benchmark output is the surface most likely to be published. A match hard-fails the run
and nothing of it is written. Messages name the pattern kind and the file, never the secret.
"""

from __future__ import annotations

import pygit2

from cbledger import credentials
from cbledger.errors import SecretFound
from cbledger.runner import preserve


def scan_preserved(repo: pygit2.Repository, seed_sha: str) -> list[credentials.Match]:
    found: list[credentials.Match] = []
    for path, blob in preserve.new_blobs(repo, seed_sha):
        found.extend(credentials.scan_bytes(blob.data, path))
    for sha, message in preserve.commit_messages(repo, seed_sha):
        found.extend(credentials.scan_text(message, f"commit {sha[:12]} message"))
    return found


def require_clean(repo: pygit2.Repository, seed_sha: str, run_id: str) -> None:
    found = scan_preserved(repo, seed_sha)
    if found:
        where = "; ".join(str(m) for m in found[:10])
        raise SecretFound(f"run {run_id}: credential pattern matched in what would be preserved ({where}); nothing of this run was written")
