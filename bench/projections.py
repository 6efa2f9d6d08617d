"""Projection benchmark: full rebuild at 10k and 100k runs, and the incremental update of every
output for one new run at 100k as a ratio to the full rebuild of every output.

    .venv/bin/python bench/projections.py                   # 10k and 100k runs (each with a grade)
    .venv/bin/python bench/projections.py --runs 2000
    .venv/bin/python bench/projections.py --rss-runs 250000 # peak RSS of a full rebuild, own process
    .venv/bin/python bench/projections.py --runs 100000 --records-only  # files vs packed records

Each size builds a real ledger file through `LedgerStore.append` (setup, not measured), then
measures, best of `--repeat` where it says so:

* fold:        read + decode + fold the whole file (`load_state`), best of --repeat
* views:       the leaderboard's and the read model's aggregates from the state (`Views`)
* records:     build every result record from the state, best of --repeat
* leaderboard: render LEADERBOARD.md from the state (aggregates included)
* every output, full rebuild: fold + `regenerate_all` into an empty results directory (every
               record file written and synced, LEADERBOARD.md, the read model)
* incremental (largest size): append one run and its grade, then fold just those
               (`LedgerFollower.poll`, aggregates kept by `Views.attach`) and update every
               output (`regenerate_all(runs=…, views=…)`: the run's records, LEADERBOARD.md, the
               read model by row), as a ratio to the full rebuild of every output; the result
               is checked against a full rebuild (LEADERBOARD.md bytes, read-model content, the
               record files)
* records, files vs packed (every size): every record and retraction mark written into an empty
               directory, once as one file each (synced, `sync_records`) and once as rows of the
               packed store (`packed=True`, one transaction); for each the time, the bytes
               allocated on disk and the inodes (files and directories), and the time to read
               1,000 records back by their standard path, and one run's record written again by
               the incremental path (`sync_run_records`, median of 5); then the packed store exported as the
               file tree (`export_records`), and both layouts checked equal byte for byte
* --records-only: only the fold and the two records lanes
* --rss-runs N: the full rebuild of every output at N runs (2N+2 events) in a process of its own,
               reporting its peak RSS (`ru_maxrss`)
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import os
import resource
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cbledger.ledger.events import (
    Actor,
    AssertionOutcome,
    Comparability,
    Cost,
    EvidenceDigest,
    FixtureIdentity,
    GradeRecorded,
    GradeRecordedEvent,
    ModelIdentity,
    RunRecorded,
    RunRecordedEvent,
    RunStats,
    SandboxRef,
    SuiteBumped,
    SuiteBumpedEvent,
    TaskIdentity,
    Timings,
)
from cbledger.ledger.store import LedgerStore
from cbledger.projections import leaderboard, readmodel, records, writers
from cbledger.projections.aggregates import Views
from cbledger.projections.fold import Projector
from cbledger.projections.writers import LedgerFollower, load_state
from cbledger.reproduce.outputs import record_files
from cbledger.workspace import Workspace

UTC = dt.UTC
T0 = dt.datetime(2026, 9, 1, tzinfo=UTC)
ACTOR = Actor(kind="runner", name="bench")
TASKS = [(f"task-{i:02d}", ("simple", "medium", "hard")[i % 3], "refusal" if i % 7 == 0 else "edit") for i in range(21)]
MODELS = [("vendor:frontier-a", "api-frontier"), ("vendor:cheap-b", "api-cheap"), ("hosted:open-c", "open-weight-hosted"),
          ("claude-code", "saved-login"), ("vendor:frontier-d", "api-frontier")]


def h(*parts: object) -> str:
    return hashlib.sha256("\0".join(map(str, parts)).encode()).hexdigest()


def _sandbox(**fields) -> SandboxRef:
    return SandboxRef(**{k: v for k, v in fields.items() if k in SandboxRef.__struct_fields__})


def events_for(i: int) -> list:
    """Run i and its grade, as drafts."""
    task_id, tier, outcome = TASKS[i % len(TASKS)]
    model, segment = MODELS[(i // len(TASKS)) % len(MODELS)]
    rid = f"bench-{i:07d}"
    started = T0 + dt.timedelta(seconds=37 * i)
    passed = (i * 2654435761) % 100 < 70
    run = RunRecorded(
        run_id=rid,
        task=TaskIdentity(id=task_id, tier=tier, mode="do", expected_outcome=outcome, manifest_hash=h("m", task_id)),
        fixture=FixtureIdentity(id="bench-board", sha256=h("fixture")),
        model=ModelIdentity(id=model, provider="p", segment=segment, pinning="strong", selection_source="flag"),
        repeat=1 + (i // (len(TASKS) * len(MODELS))) % 3,
        repeats_planned=3,
        run_mode="agent",
        comparability=Comparability(
            schema_version="1.0.0", suite_version="1.0.0", task_manifest_hash=h("m", task_id),
            fixture_sha256=h("fixture"), copperhead_version="0.9.0", copperhead_commit=None,
            kicad_cli_version="9.0.8", runtime="python-3.11", node_version="v22.17.0", platform="linux-x64",
        ),
        stats=RunStats(exit_path="done" if passed else "stalled", turns_used=9, max_turns=40, repair_cycles_used=1,
                       max_repair_cycles=3, tokens_in=40_000 + i % 997, tokens_out=3_000 + i % 101),
        cost=Cost(usd_micros=None if segment == "saved-login" else 90_000 + i % 5_000,
                  price_table_version=None if segment == "saved-login" else "2026-09"),
        sandbox=_sandbox(
            seed_sha=h("seed", task_id)[:40], seed_config='{"maxTurns": 40}', baseline_sha=h("b", task_id)[:40],
            head_sha=h("h", i)[:40], capture_sha=h("c", i)[:40], evidence_sha=h("e", i)[:40],
            store=f"results/runs/{rid}.bundle", store_blake3=h("s", i), store_bytes=100_000,
        ),
        evidence={"transcript": EvidenceDigest(path=f".copperhead/runs/{rid}/transcript.jsonl", blake3=h("t", i), bytes=90_000)},
        timings=Timings(started_at=started, ended_at=started + dt.timedelta(seconds=30), duration_ms=30_000,
                        agent_ms=25_000, verify_ms=5_000),
    )
    grade = GradeRecorded(
        run_id=rid, suite_version="1.0.0", grader_version="1.0.0", task_manifest_hash=h("m", task_id),
        assertions=[
            AssertionOutcome(id=f"a{k}", type="net_present", status="fail" if (not passed and k == 0) else "pass",
                             weight=1.0 + k, required=True, evidence_source="end-state", detail="observed")
            for k in range(6)
        ],
        verdict="pass" if passed else "fail", partial_credit=1.0 if passed else 0.75,
        first_failed_required=None if passed else "a0", failure_category=None if passed else "stalled",
    )
    return [
        RunRecordedEvent(id=f"run:{rid}", at=started, actor=ACTOR, body=run),
        GradeRecordedEvent(id=f"grade:{rid}", at=started + dt.timedelta(seconds=40), actor=ACTOR, body=grade),
    ]


def build_ledger(path: Path, runs: int) -> float:
    store = LedgerStore(path)
    store.init("bench", Actor(kind="maintainer", name="bench"))
    t = time.perf_counter()
    store.append([SuiteBumpedEvent(id="suite:1.0.0", at=T0, actor=ACTOR, body=SuiteBumped(
        suite_version="1.0.0", previous=None, reason="bench", vocabulary_hash=h("v"),
        credential_patterns_hash=h("c"), grader_version="1.0.0",
        task_manifest_hashes={t[0]: h("m", t[0]) for t in TASKS}, fixture_hashes={"bench-board": h("fixture")}))])
    batch: list = []
    for i in range(runs):
        batch.extend(events_for(i))
        if len(batch) >= 10_000:
            store.append(batch)
            batch = []
    if batch:
        store.append(batch)
    return time.perf_counter() - t


def best(fn, repeat: int) -> tuple[float, object]:
    times, result = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t)
    return min(times), result


def full_rebuild(ledger: Path, root: Path) -> tuple[float, float]:
    """Every output from scratch into an empty results directory: (fold s, writing s)."""
    t = time.perf_counter()
    state = load_state(ledger)
    fold_s = time.perf_counter() - t
    t = time.perf_counter()
    writers.regenerate_all(state, Workspace.at(root, ledger))
    return fold_s, time.perf_counter() - t


def incremental(ledger: Path, root: Path, n: int, repeat: int, full_s: float) -> None:
    """One new run and its grade, every output updated, against the full rebuild."""
    projector = Projector()
    views = Views.attach(projector)
    follower = LedgerFollower(ledger, projector)
    follower.poll()
    where = Workspace.at(root, ledger)
    writers.regenerate_all(follower.state, where, views=views)  # what was published before the new run
    built = views.rebuilds
    store = LedgerStore(ledger)
    times, fold_times = [], []
    for k in range(repeat):
        store.append(events_for(n + k))
        t = time.perf_counter()
        assert follower.poll() == 2
        folded = time.perf_counter() - t
        done = writers.regenerate_all(follower.state, where, runs=[f"bench-{n + k:07d}"], views=views)
        times.append(time.perf_counter() - t)
        fold_times.append(folded)
        assert done.leaderboard and done.read_model and len(done.records.created) == 1
    assert views.rebuilds == built, "the aggregates were computed again: not the incremental path"
    inc = statistics.median(times)
    print(f"          incremental, one new run + its grade, every output: {inc * 1e3:8.1f} ms median of {repeat} "
          f"(fold {statistics.median(fold_times) * 1e3:.1f} ms) = {inc / full_s:.2%} of the full rebuild of every "
          f"output ({full_s / inc:,.0f}x faster)")
    t = time.perf_counter()
    fresh = root.parent / f"{root.name}-check"
    _, _ = full_rebuild(ledger, fresh)
    state = load_state(ledger)
    assert where.leaderboard.read_bytes() == Workspace.at(fresh, ledger).leaderboard.read_bytes()
    assert readmodel.canonical_dump(where.read_model) == readmodel.canonical_dump(Workspace.at(fresh, ledger).read_model)
    ours, theirs = record_files(where.results), record_files(Workspace.at(fresh, ledger).results)
    assert ours == theirs and all((where.results / r).read_bytes() == (Workspace.at(fresh, ledger).results / r).read_bytes()
                                  for r in ours)
    assert state.head_seq == follower.state.head_seq
    shutil.rmtree(fresh, ignore_errors=True)
    print(f"          ... and equals a full rebuild (LEADERBOARD.md bytes, read-model content, {len(ours)} record "
          f"files; checked in {time.perf_counter() - t:.0f} s)")


def disk_use(path: Path) -> tuple[int, int]:
    """(bytes allocated, inodes) under `path`, its files and directories."""
    blocks = inodes = 0
    for directory, dirs, files in os.walk(path):
        for name in (*dirs, *files):
            blocks += os.lstat(os.path.join(directory, name)).st_blocks
            inodes += 1
    return blocks * 512, inodes


def one_run_again(state, out: Path, packed: bool, repeat: int = 5) -> float:
    """Median time of `sync_run_records` writing one run's record that went missing (what a new
    run costs the records writer), into a store or a tree already holding every other record."""
    run_id = next(reversed(state.runs))
    [(relpath, _, _)] = records.record_paths(state, run_id)
    times = []
    for _ in range(repeat):
        if packed:
            with sqlite3.connect(out / "records.sqlite") as conn:
                conn.execute("DELETE FROM records WHERE path = ?", (relpath,))
        else:
            (out / relpath).unlink()
        t = time.perf_counter()
        assert writers.sync_run_records(state, out, [run_id]).created == [relpath]
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def record_lanes(state, tmp: Path) -> None:
    """Every record written into an empty directory as files and as the packed store."""
    outs = {}
    for label, packed in (("files", False), ("packed", True)):
        out = outs[label] = tmp / f"records-{label}"
        t = time.perf_counter()
        report = writers.sync_records(state, out, packed=packed)
        write_s = time.perf_counter() - t
        size, inodes = disk_use(out)
        with writers.RecordStore(out) as store:
            names = sorted(store.paths())
            sample = names[:: max(1, len(names) // 1_000)][:1_000]
            t = time.perf_counter()
            assert all(store.read(name) for name in sample)
            read_s = time.perf_counter() - t
        one_s = one_run_again(state, out, packed)
        print(f"          records, {label:<6} layout: {len(report.created):,} written in {write_s:7.2f} s; "
              f"{size / 2**20:7.1f} MiB on disk in {inodes:,} inodes; {len(sample):,} read by path in "
              f"{read_s * 1e3:.0f} ms; one run's record written by the incremental path in {one_s * 1e3:.1f} ms")
    exported = tmp / "records-exported"
    exported.mkdir()
    t = time.perf_counter()
    report = writers.export_records(outs["packed"], exported)
    print(f"          packed store exported as the file tree: {len(report.created):,} files in "
          f"{time.perf_counter() - t:.2f} s")
    with writers.RecordStore(outs["files"]) as a, writers.RecordStore(outs["packed"]) as b, \
            writers.RecordStore(exported) as c:
        assert all(x == y == z for x, y, z in zip(a.items(), b.items(), c.items(), strict=True))
    for out in (*outs.values(), exported):
        shutil.rmtree(out, ignore_errors=True)
    print("          ... the three hold the same paths and bytes")


def peak_rss(runs: int) -> None:
    """The full rebuild of every output at `runs` runs, in a child process; its peak RSS."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "project"
        ledger = Workspace.at(root).ledger
        ledger.parent.mkdir(parents=True)
        setup = build_ledger(ledger, runs)
        events = 2 * runs + 2
        print(f"{runs:>7} runs ({events:,} events, {ledger.stat().st_size / 1e6:,.0f} MB ledger, built in {setup:.0f} s):")
        child = subprocess.run(
            [sys.executable, __file__, "--_rebuild", str(ledger), str(root)], capture_output=True, text=True, check=True,
        )
        print(child.stdout.rstrip())


def _child_rebuild(ledger: Path, root: Path) -> None:
    fold_s, write_s = full_rebuild(ledger, root)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    print(f"          full rebuild of every output: fold {fold_s:.1f} s + writing {write_s:.1f} s; peak RSS {peak:,.0f} MiB")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, nargs="+", default=[10_000, 100_000])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--records-only", action="store_true", help="only the fold and the files and packed records lanes")
    ap.add_argument("--rss-runs", type=int, nargs="+", help="measure only the peak RSS of a full rebuild at these sizes")
    ap.add_argument("--_rebuild", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args._rebuild:
        _child_rebuild(Path(args._rebuild[0]), Path(args._rebuild[1]))
        return
    if args.rss_runs:
        for n in args.rss_runs:
            peak_rss(n)
        return
    incremental_at = max(args.runs)
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.runs:
            root = Path(tmp) / f"project-{n}"
            path = Workspace.at(root).ledger
            path.parent.mkdir(parents=True)
            setup = build_ledger(path, n)
            size = path.stat().st_size
            fold_s, state = best(lambda: load_state(path), args.repeat)
            if args.records_only:
                print(f"{n:>7} runs + {n} grades ({size / 1e6:.0f} MB ledger, fold {fold_s:.1f} s):")
                record_lanes(state, Path(tmp))
                continue
            views_s, _ = best(lambda: Views(state), 1)
            rec_s, _ = best(lambda: records.record_entries(state), args.repeat)
            lb_s, _ = best(lambda: leaderboard.render(state), 1)
            print(f"{n:>7} runs + {n} grades ({size / 1e6:.0f} MB ledger, built in {setup:.1f} s):")
            print(f"          full rebuild, fold (read + decode + fold): {fold_s:8.3f} s")
            print(f"          aggregates of the leaderboard and read model: {views_s:5.3f} s")
            print(f"          result records from the state:             {rec_s:8.3f} s")
            print(f"          LEADERBOARD.md from the state (+ aggregates): {lb_s:5.3f} s")
            out = Path(tmp) / f"out-{n}"
            f_s, w_s = full_rebuild(path, out)
            full_s = f_s + w_s
            print(f"          every output, full rebuild:                {full_s:8.3f} s (fold {f_s:.1f} s, records + "
                  f"LEADERBOARD.md + read model written {w_s:.1f} s)")
            if n == incremental_at:
                shutil.rmtree(out, ignore_errors=True)
                incremental(path, out, n, args.repeat, full_s)
            shutil.rmtree(out, ignore_errors=True)
            record_lanes(state, Path(tmp))


if __name__ == "__main__":
    main()
