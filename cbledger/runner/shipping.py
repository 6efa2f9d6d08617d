"""Tasks and fixtures as content-addressed packages: what a remote worker receives to run a task.

A worker has no checkout of the project's data; the driver packs each task directory and each
fixture directory a plan needs, once, named by the digest of its content. The worker unpacks a
package only after the bytes it received hash to the digest it was asked for, and uses it only
after the project's own hashes agree too: a fixture's tree must hash to its manifest's `sha256`
and a task's manifest to the hash the driver planned with. A package unpacked once is kept under
the worker's directory by digest, so a suite run ships each task and fixture once per worker.

The digest is the standard's file digest (`tasks.fixtures.hashing.digest_files`) over every file
of the directory, with the paths of the executable ones after it: the sandbox's seed commit keeps
a file's executable bit, so the bit is content too.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from pathlib import Path, PurePosixPath

import msgspec

from cbledger.errors import UserError
from cbledger.tasks.catalog import Fixture, Task, load_fixture, load_task
from cbledger.tasks.fixtures.hashing import digest_files, hash_directory, tree_files

#: the marker an unpacked package leaves once it has been checked
_CHECKED = ".cbledger-package"


class ShippedFile(msgspec.Struct, frozen=True):
    path: str
    data: bytes
    executable: bool = False


class Package(msgspec.Struct, frozen=True):
    """A task or fixture directory in transit."""

    kind: str  # "task" | "fixture"
    id: str
    digest: str
    files: tuple[ShippedFile, ...]


def content_digest(files: tuple[ShippedFile, ...] | list[ShippedFile]) -> str:
    content = digest_files((f.path, f.data) for f in files)
    executables = "\0".join(sorted(f.path for f in files if f.executable))
    return hashlib.sha256(f"{content}\0{executables}".encode()).hexdigest()


def pack(kind: str, item_id: str, directory: Path) -> Package:
    files = []
    for rel in sorted(tree_files(directory)):
        full = directory / rel
        files.append(ShippedFile(rel, full.read_bytes(), bool(os.stat(full).st_mode & 0o100)))
    shipped = tuple(files)
    return Package(kind, item_id, content_digest(shipped), shipped)


def pack_task(task: Task) -> Package:
    return pack("task", task.id, task.dir)


def pack_fixture(fixture: Fixture) -> Package:
    return pack("fixture", fixture.id, fixture.dir)


def _safe(path: str, package: Package) -> PurePosixPath:
    rel = PurePosixPath(path)
    if rel.is_absolute() or ".." in rel.parts or not rel.parts:
        raise UserError(f"{package.kind} {package.id}: shipped path {path!r} leaves its directory; refused")
    return rel


def unpack(package: Package, expected_digest: str, cache: Path) -> Path:
    """The package's directory under `cache/<kind>s/<digest>`, written once and only if the
    bytes received hash to `expected_digest`."""
    got = content_digest(package.files)
    if package.digest != expected_digest or got != expected_digest:
        raise UserError(
            f"{package.kind} {package.id}: arrived with content digest {got[:16]}…, expected "
            f"{expected_digest[:16]}…; refused"
        )
    final = cache / f"{package.kind}s" / expected_digest
    if (final / _CHECKED).is_file():
        return final
    final.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{expected_digest[:16]}.", dir=final.parent))
    try:
        for f in package.files:
            target = staging / _safe(f.path, package)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(f.data)
            os.chmod(target, 0o755 if f.executable else 0o644)
        (staging / _CHECKED).write_text(expected_digest + "\n")
        try:
            os.rename(staging, final)
        except OSError:
            if not (final / _CHECKED).is_file():  # not another thread's copy of the same package
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return final


def arrived_task(package: Package, expected_digest: str, manifest_hash: str, cache: Path) -> Task:
    """The shipped task, refused unless its manifest hashes to what the driver planned with."""
    task = load_task(unpack(package, expected_digest, cache))
    if task.manifest_hash != manifest_hash or task.id != package.id:
        raise UserError(
            f"task {package.id}: arrived with manifest hash {task.manifest_hash[:16]}…, the plan "
            f"has {manifest_hash[:16]}…; refused"
        )
    return task


def arrived_fixture(package: Package, expected_digest: str, cache: Path) -> Fixture:
    """The shipped fixture, refused unless its tree hashes to its manifest's sha256."""
    fixture = load_fixture(unpack(package, expected_digest, cache))
    tree_hash = hash_directory(fixture.tree)
    if tree_hash != fixture.manifest.sha256 or fixture.id != package.id:
        raise UserError(
            f"fixture {package.id}: its tree arrived hashing to {tree_hash[:16]}…, the manifest "
            f"pins {fixture.manifest.sha256[:16]}…; refused"
        )
    return fixture
