"""Which records may share a table (STANDARD-FACTS, Comparability), and why the others may not.

Records share a table only when schemaVersion, suiteVersion, task manifest hash, fixture hash and
kicad-cli MAJOR version agree. The hashes are per task, so "agree" means: for each task, every
record of the table carries the same manifest and fixture hash; across tasks only schemaVersion,
suiteVersion and the kicad-cli major must match. suiteVersion agrees by construction here: the
partition is made over the records of one suite version (grades made under it).

The main group is chosen mechanically:

* per task, the reference manifest hash is the one the latest `suite.bumped` for this suite
  version declares for the task id, and the reference fixture hash the one it declares for the
  record's fixture id; a task or fixture the bump does not name (or a suite with no bump) falls
  back to the hash carried by the most records of that task (ties: the one seen first in the
  ledger);
* the reference schemaVersion is the one carried by the most records (ties: the highest);
* the reference kicad-cli major is the one carried by the most records that matched every other
  reference (ties: the highest; a run without kicad-cli counts as lower than any version).

Every other record lands in a group keyed by what differs (schemaVersion, kicad-cli major, and —
for a hash mismatch — the task and its hashes), so each such group is comparable within itself.
Its label names each differing stamp field with the main group's value beside it.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

from msgspec import Struct

from cbledger.projections.fold import LedgerState, semver_key, suite_bump
from cbledger.projections.records import RecordEntry

NO_KICAD = "none"
MAIN = "main"


class TaskReference(Struct, frozen=True, kw_only=True):
    manifest: str
    manifest_source: str  # "suite.bumped" or "most records"


class Reference(Struct, frozen=True, kw_only=True):
    suite_version: str
    schema_version: str | None
    kicad_major: str | None
    bump_seq: int | None
    tasks: dict[str, TaskReference]
    fixtures: dict[str, str]  # fixture id -> reference hash (from the bump)
    task_fixtures: dict[str, str]  # task id -> majority fixture hash (fallback)


class Group(Struct, frozen=True, kw_only=True):
    key: str  # "main", or a stable description of the differing stamp
    main: bool
    label: str
    reasons: list[str]
    members: list[int]  # indices into the records handed to `partition`


class Partition(Struct, frozen=True, kw_only=True):
    reference: Reference
    groups: list[Group]

    def main_group(self) -> Group | None:
        return next((g for g in self.groups if g.main), None)


def kicad_major(version: str | None) -> str:
    if version is None:
        return NO_KICAD
    m = re.search(r"\d+", version)
    return m.group(0) if m else version


def _major_rank(major: str) -> tuple[int, int, str]:
    if major == NO_KICAD:
        return (0, 0, "")
    return (1, int(major), "") if major.isdigit() else (1, -1, major)


def _short(h: str) -> str:
    return h[:12]


def _first_most(counts: dict[str, int]) -> str:
    """The most frequent of `counts` (kept in first-seen order); ties go to the one seen first."""
    best = max(counts.values())
    return next(v for v, n in counts.items() if n == best)


class RefTally:
    """What the reference is chosen from, a record at a time: per task the manifest and fixture
    hashes with their counts in first-seen order, and the schemaVersions. A record added at the
    end of the order updates it alone (`reference_from` then says whether the reference moved)."""

    def __init__(self) -> None:
        self.manifests: dict[str, dict[str, int]] = {}
        self.fixtures: dict[str, dict[str, int]] = {}
        self.schemas: dict[str, int] = {}

    def add(self, r: RecordEntry) -> None:
        m = self.manifests.setdefault(r.task_id, {})
        m[r.manifest_hash] = m.get(r.manifest_hash, 0) + 1
        f = self.fixtures.setdefault(r.task_id, {})
        f[r.fixture_sha256] = f.get(r.fixture_sha256, 0) + 1
        self.schemas[r.schema_version] = self.schemas.get(r.schema_version, 0) + 1


def reference_for(state: LedgerState, suite_version: str, records: Sequence[RecordEntry]) -> Reference:
    tally = RefTally()
    for r in records:
        tally.add(r)
    return reference_from(state, suite_version, tally)


def reference_from(state: LedgerState, suite_version: str, tally: RefTally) -> Reference:
    """The reference stamp (without the kicad-cli major, which `partition` adds)."""
    bump = suite_bump(state, suite_version)
    tasks: dict[str, TaskReference] = {}
    for task_id in sorted(tally.manifests):
        if bump is not None and task_id in bump.body.task_manifest_hashes:
            tasks[task_id] = TaskReference(
                manifest=bump.body.task_manifest_hashes[task_id], manifest_source="suite.bumped"
            )
        else:
            tasks[task_id] = TaskReference(
                manifest=_first_most(tally.manifests[task_id]), manifest_source="most records"
            )
    schema_counts = tally.schemas
    schema = None
    if schema_counts:
        schema = max(schema_counts, key=lambda v: (schema_counts[v], semver_key(v)))
    return Reference(
        suite_version=suite_version,
        schema_version=schema,
        kicad_major=None,
        bump_seq=bump.seq if bump is not None else None,
        tasks=tasks,
        fixtures=dict(sorted(bump.body.fixture_hashes.items())) if bump is not None else {},
        task_fixtures={t: _first_most(v) for t, v in sorted(tally.fixtures.items())},
    )


def stamp_diffs(ref: Reference, r: RecordEntry) -> list[tuple[str, str]]:
    """(key part, reason) for each stamp field but the kicad-cli major that differs from `ref`."""
    diffs: list[tuple[str, str]] = []
    sv = r.schema_version
    if sv != ref.schema_version:
        diffs.append((f"schema:{sv}", f"schemaVersion {sv} (main group: {ref.schema_version})"))
    diffs.extend(_hash_reasons(ref, r))
    return diffs


def reference_major(majors: dict[str, int]) -> str | None:
    """The reference kicad-cli major among `majors` (the most records; ties: the highest)."""
    if not majors:
        return None
    return max(majors, key=lambda m: (majors[m], _major_rank(m)))


def kicad_diff(ref_major: str | None, r: RecordEntry) -> list[tuple[str, str]]:
    m = kicad_major(r.kicad_cli_version)
    if ref_major is None or m == ref_major:
        return []
    shown = "absent (run without kicad-cli)" if m == NO_KICAD else m
    main_shown = "absent" if ref_major == NO_KICAD else ref_major
    return [(f"kicad:{m}", f"kicad-cli major {shown} (main group: {main_shown})")]


def _hash_reasons(ref: Reference, r: RecordEntry) -> list[tuple[str, str]]:
    """(key part, reason) for each per-task hash that differs from the reference."""
    out = []
    task_ref = ref.tasks[r.task_id]
    got = r.manifest_hash
    if got != task_ref.manifest:
        out.append(
            (
                f"manifest:{r.task_id}:{got}",
                f"task manifest hash of {r.task_id} is {_short(got)} "
                f"(main group: {_short(task_ref.manifest)}, from {task_ref.manifest_source})",
            )
        )
    want = ref.fixtures.get(r.fixture_id)
    source = "suite.bumped"
    if want is None:
        want, source = ref.task_fixtures[r.task_id], "most records"
    got = r.fixture_sha256
    if got != want:
        out.append(
            (
                f"fixture:{r.task_id}:{got}",
                f"fixture hash of {r.task_id} ({r.fixture_id}) is {_short(got)} "
                f"(main group: {_short(want)}, from {source})",
            )
        )
    return out


def partition(state: LedgerState, suite_version: str, records: Sequence[RecordEntry]) -> Partition:
    """Splits one suite version's records into the main group and labelled others."""
    ref = reference_for(state, suite_version, records)
    stamp_ok: list[int] = []
    pending: dict[str, tuple[list[str], list[int]]] = {}
    deferred: list[tuple[int, list[tuple[str, str]]]] = []
    for i, r in enumerate(records):
        diffs = stamp_diffs(ref, r)
        if diffs:
            deferred.append((i, diffs))
        else:
            stamp_ok.append(i)
    # With no record matching the other stamps, the major still partitions the rest.
    basis = stamp_ok or range(len(records))
    majors = Counter(kicad_major(records[i].kicad_cli_version) for i in basis)
    ref_major = reference_major(majors)
    ref = Reference(
        suite_version=ref.suite_version,
        schema_version=ref.schema_version,
        kicad_major=ref_major,
        bump_seq=ref.bump_seq,
        tasks=ref.tasks,
        fixtures=ref.fixtures,
        task_fixtures=ref.task_fixtures,
    )
    main: list[int] = []

    for i in stamp_ok:
        diffs = kicad_diff(ref_major, records[i])
        if diffs:
            deferred.append((i, diffs))
        else:
            main.append(i)
    for i, diffs in sorted(deferred):
        if not any(k.startswith("kicad:") for k, _ in diffs):
            diffs = diffs + kicad_diff(ref_major, records[i])
        key = "; ".join(k for k, _ in diffs)
        reasons, members = pending.setdefault(key, ([reason for _, reason in diffs], []))
        members.append(i)
    groups: list[Group] = []
    if main:
        groups.append(Group(key=MAIN, main=True, label="main comparability group", reasons=[], members=main))
    for key in sorted(pending):
        reasons, members = pending[key]
        groups.append(
            Group(key=key, main=False, label="; ".join(reasons), reasons=reasons, members=members)
        )
    return Partition(reference=ref, groups=groups)
