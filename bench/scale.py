"""Scaling benchmark: the ledger's append throughput in PostgreSQL against the JSON Lines file,
runs per minute on a Dask cluster of one and two workers against the local executor, and the
projections of a synthetic ledger of millions of events from a snapshot against from seq 1.

    .venv/bin/python bench/scale.py                 # store and runs (3-5 minutes)
    .venv/bin/python bench/scale.py --only store    # append throughput only
    .venv/bin/python bench/scale.py --only runs     # runs per minute only
    .venv/bin/python bench/scale.py --only snapshots                    # 10^6 events (about 20 minutes)
    .venv/bin/python bench/scale.py --only snapshots --events 10000000  # 10^7, if disk and memory allow
    .venv/bin/python bench/scale.py --only snapshots --events 10000000 --keep DIR --resume-only

* Store: each writer is a process appending `--pairs` batches of one run.recorded and its
  grade.recorded (what a driver appends per run, through `LedgerStore.append`: validation,
  idempotency lookups, chain, durable write) to one ledger; 1 writer and `--writers` writers at
  once; the file store and the PostgreSQL store on the same events. Events per second over the
  wall time from the first append to the last acknowledgement, and each PostgreSQL figure as a
  ratio to the file store's with as many writers. The PostgreSQL server is the one
  $CBLEDGER_TEST_POSTGRES names, else a throwaway one started with scripts/start-postgres (on
  this machine: its WAL on the same disk as the file store's ledger, fsync on).
* Runs: the bundled suite's synthetic tasks (`--suite`, default `full`) with the gold agent,
  one repeat each, through `run_plan`: the local executor with `--jobs 1` and `--jobs 2`, then a
  Dask cluster on loopback (`dask scheduler` and `dask worker` processes, one thread each) with
  one worker and with two. Runs per minute over the wall time of the whole plan (first submit to
  last append), and each as a ratio to the local `--jobs 1` run.
* Snapshots: a ledger of `--events` events (runs and their grades, `bench/projections.py`'s
  synthetic ones; built through `LedgerStore.append`, not measured), then, each in a process of
  its own so its peak RSS is its own: the full rebuild of every output but the site from seq 1
  (fold, records, LEADERBOARD.md, read model) and the snapshot written after it; `--tail` more
  runs appended; `cbledger project leaderboard` from the latest snapshot and from seq 1 (the
  snapshot moved away), as whole processes (wall time and peak RSS from GNU time); the watch's
  start-up (the fold from the snapshot with the leaderboard's and read model's aggregates
  computed, what `cbledger watch` holds before its first write), the next snapshot after the
  `--tail` runs (what a watch's keeps cost: a spilled state's writes the rows changed since its
  base), and `cbledger watch --once --no-site` as a whole process (start-up and the first
  regeneration of every output). With `--resume-only` the first step folds and writes the
  snapshot without any output, and the two lanes from seq 1 are left out (for a size whose full
  rebuild was measured already, or does not fit on the disk). A size is skipped, with the reason
  printed, when the disk or the memory it needs is not free.

Everything is written under a temporary directory and removed afterwards; with `--keep DIR` the
snapshot lane's ledgers are built under DIR instead and kept, and a later run with the same DIR
reuses a ledger already built there (a 10^7-event ledger takes about 45 minutes to build here).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import multiprocessing as mp
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.ledger import RUNNER, Events
from cbledger.ledger.events import Ablations
from cbledger.ledger.store import LedgerStore
from cbledger.runner.plan import make_plan
from cbledger.runner.suite_run import run_plan
from cbledger.tasks.catalog import Catalog
from cbledger.workspace import Workspace
from tests.dask_cluster import Cluster

REPO = Path(__file__).resolve().parent.parent


# --------------------------------------------------------------------------- store


def _writer(args: tuple[str, int, int]) -> float:
    """Appends `pairs` (run, grade) batches; returns when its last one was acknowledged."""
    where, writer, pairs = args
    store = LedgerStore(where)
    events = Events()
    base = writer * pairs * 2  # each writer its own ids
    for k in range(pairs):
        store.append([events.draft(base + 2 * k), events.draft(base + 2 * k + 1)])
    return time.perf_counter()


def bench_store(where: str, writers: int, pairs: int) -> float:
    """Events per second with `writers` processes appending `pairs` pairs each."""
    LedgerStore(where).init("bench", RUNNER)
    with mp.get_context("fork").Pool(writers) as pool:
        started = time.perf_counter()
        ends = pool.map(_writer, [(where, w, pairs) for w in range(writers)])
    elapsed = max(ends) - started
    head = LedgerStore(where).head().seq
    assert head == 1 + writers * pairs * 2, f"{where}: {head} events after the run"
    return writers * pairs * 2 / elapsed


def postgres_server(work: Path) -> tuple[str, str | None]:
    """A server URL and, when this benchmark started it, the directory to stop it by."""
    url = os.environ.get("CBLEDGER_TEST_POSTGRES")
    if url:
        return url, None
    out = subprocess.run([str(REPO / "scripts" / "start-postgres")], check=True, capture_output=True, text=True).stdout
    values = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
    return values["CBLEDGER_TEST_POSTGRES"], values["CBLEDGER_TEST_POSTGRES_DIR"]


def run_store(work: Path, writer_counts: list[int], pairs: int) -> None:
    from tests.postgres import drop

    server, started = postgres_server(work)
    try:
        rows = []
        for n in writer_counts:
            file_rate = bench_store(str(work / f"store-{n}" / "events.jsonl"), n, pairs)
            url = f"{server}{'&' if '?' in server else '?'}ledger=bench_scale_{n}"
            drop(url)
            try:
                pg_rate = bench_store(url, n, pairs)
            finally:
                drop(url)
            rows.append((n, file_rate, pg_rate))
        print(f"\nappend throughput ({pairs} run+grade pairs per writer, one append each; events/s)")
        print(f"{'writers':>8} {'file':>10} {'postgresql':>11} {'pg / file':>10}")
        for n, file_rate, pg_rate in rows:
            print(f"{n:>8} {file_rate:>10,.0f} {pg_rate:>11,.0f} {pg_rate / file_rate:>9.2f}×")
        if len(rows) > 1:
            (_, f1, p1), (nn, fn, pn) = rows[0], rows[-1]
            print(f"  {nn} writers against 1: file {fn / f1:.2f}×, postgresql {pn / p1:.2f}×")
    finally:
        if started:
            subprocess.run([str(REPO / "scripts" / "start-postgres"), "--stop", started], check=False)


# --------------------------------------------------------------------------- runs


def project(work: Path) -> Path:
    root = work / "project"
    for part in ("fixtures", "tasks", "suites"):
        shutil.copytree(REPO / part, root / part)
    return root


def new_ledger(root: Path, name: str) -> Path:
    from tests.factories import run_cli

    ledger = root / f"{name}.jsonl"
    for args in (("init",), ("suite", "bump", "--reason", "bench")):
        result = run_cli([*args, "--root", root, "--ledger", ledger])
        if result.exit_code != 0:
            raise SystemExit(result.output)
    return ledger


def time_plan(root: Path, name: str, suite: str, **executor) -> tuple[int, float]:
    ledger = new_ledger(root, name)
    plan = make_plan(Catalog(root), agent="gold", model=None, suite=suite, task_ids=[], repeats=1, ablations=Ablations())
    started = time.perf_counter()
    result = run_plan(Workspace.at(root, ledger), plan, sandbox_root=root.parent / f"sandboxes-{name}", **executor)
    elapsed = time.perf_counter() - started
    if result.failures:
        raise SystemExit(f"{name}: runs failed: {result.failures}")
    return len(result.outputs), elapsed


def run_runs(work: Path, suite: str) -> None:
    from cbledger.runner.agents.copperhead import INSTALLED_CLI

    root = project(work)
    cli = str(REPO / INSTALLED_CLI)
    rows = []
    for jobs in (1, 2):
        n, s = time_plan(root, f"local-{jobs}", suite, jobs=jobs, copperhead_cli=cli)
        rows.append((f"local, --jobs {jobs}", n, s))
    cluster = Cluster(work / "dask").start()
    try:
        cluster.add_worker("w1")
        n, s = time_plan(root, "dask-1", suite, executor="dask", scheduler=cluster.address)
        rows.append(("dask, 1 worker", n, s))
        cluster.add_worker("w2")
        n, s = time_plan(root, "dask-2", suite, executor="dask", scheduler=cluster.address)
        rows.append(("dask, 2 workers", n, s))
    finally:
        cluster.stop()
    base = rows[0][1] / rows[0][2]
    print(f"\nruns per minute (suite {suite}, gold agent, one repeat each)")
    print(f"{'executor':<18} {'runs':>5} {'seconds':>8} {'runs/min':>9} {'/ local 1':>10}")
    for label, n, s in rows:
        print(f"{label:<18} {n:>5} {s:>8.1f} {60 * n / s:>9.1f} {n / s / base:>9.2f}×")
    one, two = rows[2], rows[3]
    print(f"  2 workers against 1: {(two[1] / two[2]) / (one[1] / one[2]):.2f}×")


# --------------------------------------------------------------------------- snapshots

#: bytes of ledger per event, of record files per run, of a full rebuild's peak RSS and of the
#: snapshot per event (measured at 10^6: 1,803 MiB ledger, 1.78 GiB peak, 1,322 MiB snapshot), and
#: of the fold's scratch file once the state spills to disk (`projections/spill.py`), per event
LEDGER_BYTES, RECORD_BYTES, REBUILD_BYTES, SNAPSHOT_BYTES, SPILL_BYTES = 1_900, 4_096, 1_910, 1_390, 1_100


def _whole(cmd: list[str]) -> tuple[float, float, str]:
    """(wall s, peak RSS MiB, stdout) of a command as a process of its own (GNU time)."""
    proc = subprocess.run(["/usr/bin/time", "-f", "%e %M", *cmd], capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stderr[-2000:]}")
    wall, kib = proc.stderr.strip().splitlines()[-1].split()
    return float(wall), int(kib) / 1024, proc.stdout


def _child(mode: str, root: Path) -> None:
    """One measurement in this process (the parent reads what it prints)."""
    import resource

    from cbledger.projections import writers
    from cbledger.reproduce.regenerate import _TrackingProjector

    where = Workspace.at(root)
    if mode in ("rebuild", "snapshot"):  # "snapshot": the fold, its aggregates and the snapshot, no output
        t = time.perf_counter()
        follower = writers.follow(where.ledger)
        fold_s = time.perf_counter() - t
        if mode == "rebuild":
            writers.regenerate_all(follower.state, where, views=follower.views)
        else:
            follower.views.record_counts()
        then_s = time.perf_counter() - t - fold_s
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        t = time.perf_counter()
        kept = writers.save_snapshot(follower, where.snapshots)
        snap_s = time.perf_counter() - t
        assert kept is not None
        print(f"{fold_s} {then_s} {peak} {snap_s} {kept.stat().st_size} {_tables_bytes(kept)}")
    elif mode == "resave":  # what a watch's next snapshot costs: the events since folded, then written
        follower = writers.follow(where.ledger, where.snapshots)
        follower.views.record_counts()
        t = time.perf_counter()
        kept = writers.save_snapshot(follower, where.snapshots)
        save_s = time.perf_counter() - t
        assert kept is not None and follower.base_seq > 0
        print(f"{save_s} {_tables_bytes(kept)} {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}")
    elif mode == "watch":
        t = time.perf_counter()
        follower = writers.follow(where.ledger, where.snapshots, print, projector=_TrackingProjector)
        follower.views.record_counts()  # the aggregates ready too: the snapshot's adopted, or computed
        ready = time.perf_counter() - t
        assert follower.base_seq > 0, "the watch did not resume from the snapshot"
        print(f"{ready} {follower.base_seq} {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}")


def _tables_bytes(kept: Path) -> int:
    """Bytes of the tables a snapshot wrote beside it (whole, or a delta since a base)."""
    seq = kept.name.split(".")[0]
    return sum(p.stat().st_size for p in kept.parent.glob(f"{seq}.*.sqlite"))


def _room(events: int, work: Path, built: bool, resume_only: bool = False) -> str | None:
    """Why a size cannot run here (disk or memory), or None. The fold holds its state in memory
    only up to `spill_at()` runs; past that, the scratch file takes disk instead."""
    from cbledger.projections.spill import spill_at

    runs = events // 2
    disk = (0 if built else events * LEDGER_BYTES) + (0 if resume_only else runs * RECORD_BYTES) + 2 * events * SNAPSHOT_BYTES
    free = shutil.disk_usage(work).free
    if disk > free * 0.8:
        return f"needs about {disk / 2**30:.0f} GiB of disk (ledger, records, snapshots), {free / 2**30:.0f} GiB free"
    scratch = 2 * events * SPILL_BYTES  # two processes' scratch files at once, at most
    tmp = tempfile.gettempdir()
    if scratch > shutil.disk_usage(tmp).free * 0.8:
        return (f"the fold's scratch files need about {scratch / 2**30:.0f} GiB under {tmp} ($TMPDIR), "
                f"{shutil.disk_usage(tmp).free / 2**30:.0f} GiB free")
    with open("/proc/meminfo") as f:
        info = {line.split(":")[0]: int(line.split()[1]) * 1024 for line in f}
    need = min(events, 4 * spill_at()) * REBUILD_BYTES
    if need > info["MemAvailable"] * 0.6:
        return (f"the full rebuild holds up to {need / 2**30:.0f} GiB of state at this size, against "
                f"{info['MemAvailable'] / 2**30:.0f} GiB available on a machine others share")
    return None


def _ledger(root: Path, runs: int) -> tuple[Workspace, str]:
    """The workspace at `root` with a ledger of `runs` runs and grades: built, or one a run with
    `--keep` built before (its size recorded beside it once complete)."""
    from bench.projections import build_ledger

    where = Workspace.at(root)
    done = root / "built-runs"
    if _kept(done, runs):
        with open(where.ledger, "r+b") as f:  # without the runs an earlier run appended after its snapshot
            f.truncate(int(done.read_text().split()[1]))
        for derived in ("records.sqlite", "cbledger.db", "LEADERBOARD.md"):
            (where.results / derived).unlink(missing_ok=True)
        for derived in (where.snapshots, where.results / "runs-by-date"):
            shutil.rmtree(derived, ignore_errors=True)
        _clear_records(where.results)
        return where, "kept from an earlier run"
    shutil.rmtree(root, ignore_errors=True)
    where.ledger.parent.mkdir(parents=True)
    setup = build_ledger(where.ledger, runs)
    done.write_text(f"{runs} {where.ledger.stat().st_size}")
    return where, f"built in {setup:.0f} s"


def _kept(marker: Path, runs: int) -> bool:
    return marker.is_file() and marker.read_text().split()[0] == str(runs)


def _clear_records(results: Path) -> None:
    """An earlier run's record files (every directory under results/ but the ledger's)."""
    for child in results.iterdir() if results.is_dir() else ():
        if child.is_dir() and child.name != "ledger":
            shutil.rmtree(child, ignore_errors=True)


def _watch_start(root: Path, label: str) -> None:
    """The watch's start-up from the latest snapshot, as a process of its own; `label` takes its seq."""
    _, _, out = _whole([sys.executable, __file__, "--_child", "watch", str(root)])
    ready, base, rss = out.split()[-3:]
    print(f"  {label.format(f'{int(base):,}')}: {float(ready):.1f} s, peak RSS {float(rss):,.0f} MiB")


def run_snapshots(work: Path, sizes: list[int], tail: int, keep: Path | None, resume_only: bool = False) -> None:
    from bench.projections import events_for

    cli = str(Path(sys.executable).with_name("cbledger"))
    for events in sizes:
        runs = (events - 2) // 2
        root = (keep or work) / f"snapshots-{events}"
        why = _room(events, keep or work, _kept(root / "built-runs", runs), resume_only)
        if why is not None:
            print(f"\n{events:,} events: skipped: {why}")
            continue
        where, how = _ledger(root, runs)
        print(f"\n{events:,} events ({runs:,} runs + grades, {where.ledger.stat().st_size / 2**20:,.0f} MiB ledger, "
              f"{how})")
        _, _, out = _whole([sys.executable, __file__, "--_child", "snapshot" if resume_only else "rebuild", str(root)])
        fold_s, write_s, peak, snap_s, snap_bytes, table_bytes = map(float, out.split())
        if resume_only:
            print(f"  fold from seq 1 and its aggregates, no output written: fold {fold_s:.1f} s + aggregates "
                  f"{write_s:.1f} s; peak RSS {peak:,.0f} MiB ({peak / 1024:.2f} GiB)")
        else:
            print(f"  full rebuild from seq 1 (every output but the site): fold {fold_s:.1f} s + writing {write_s:.1f} s; "
                  f"peak RSS {peak:,.0f} MiB ({peak / 1024:.2f} GiB)")
        print(f"  snapshot written after it: {snap_s:.1f} s (encode + durable write), "
              f"{snap_bytes / 2**20:,.0f} MiB" + (f", its tables beside it {table_bytes / 2**20:,.0f} MiB" if table_bytes else ""))
        store = LedgerStore(where.ledger)
        for k in range(0, tail, 500):
            store.append([e for i in range(runs + k, runs + min(k + 500, tail)) for e in events_for(i)])
        head = store.head().seq
        out_file = str(root / "LEADERBOARD-check.md")
        project = [cli, "project", "leaderboard", "--root", str(root), "--out", out_file]
        snap_wall, snap_rss, _ = _whole(project)
        print(f"  `cbledger project leaderboard` at seq {head:,} ({2 * tail:,} events after the snapshot):")
        print(f"    from the latest snapshot: {snap_wall:.1f} s, peak RSS {snap_rss:,.0f} MiB")
        if not resume_only:
            aside = root / "snapshots-aside"
            where.snapshots.rename(aside)
            full_wall, full_rss, _ = _whole(project)
            aside.rename(where.snapshots)
            print(f"    from seq 1:               {full_wall:.1f} s, peak RSS {full_rss:,.0f} MiB "
                  f"({full_wall / snap_wall:.1f}x the snapshot's time)")
        _watch_start(root, "watch start-up, fold ready from the snapshot at seq {} (aggregates included)")
        _, _, out = _whole([sys.executable, __file__, "--_child", "resave", str(root)])
        save_s, delta_bytes, rss = map(float, out.split()[-3:])
        print(f"  the next snapshot, {2 * tail:,} events later (as a watch keeps one; a spilled state's writes the rows "
              f"changed since its base): {save_s:.1f} s, {delta_bytes / 2**20:,.1f} MiB of tables, peak RSS {rss:,.0f} MiB")
        _watch_start(root, "watch start-up from that snapshot at seq {} (a spilled state's: its base and the delta)")
        if not resume_only:
            watch_wall, watch_rss, _ = _whole([cli, "watch", "--once", "--no-site", "--root", str(root)])
            print(f"  `cbledger watch --once --no-site` (start-up + first regeneration of every output): "
                  f"{watch_wall:.1f} s, peak RSS {watch_rss:,.0f} MiB")
        if keep is None:
            shutil.rmtree(root, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[attr-defined]
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", choices=("store", "runs", "snapshots"), default=None,
                    help="one part only (snapshots runs only when asked)")
    ap.add_argument("--events", type=int, nargs="+", default=[1_000_000], help="snapshots: ledger sizes (default 10^6)")
    ap.add_argument("--tail", type=int, default=1_000, help="snapshots: runs appended after the snapshot (default 1000)")
    ap.add_argument("--keep", type=Path, default=None,
                    help="snapshots: build the ledgers under this directory and keep them for a later run to reuse")
    ap.add_argument("--resume-only", action="store_true",
                    help="snapshots: fold and write the snapshot without writing any output, then measure the resumes "
                         "from it only (for a size whose full rebuild was measured already or does not fit)")
    ap.add_argument("--_child", nargs=2, help=argparse.SUPPRESS)
    ap.add_argument("--pairs", type=int, default=150, help="run+grade appends per writer (default 150)")
    ap.add_argument("--writers", type=int, default=8, help="writers at once in the second store run (default 8)")
    ap.add_argument("--suite", default="full", help="the suite the runs part runs (default full)")
    args = ap.parse_args(argv)
    if args._child:
        _child(args._child[0], Path(args._child[1]))
        return 0
    versions = ", ".join(f"{p} {importlib.metadata.version(p)}" for p in ("psycopg", "distributed"))
    print(f"cbledger scaling benchmark: Python {platform.python_version()}, {versions}; "
          f"{platform.system()} {platform.machine()}, {os.cpu_count()} CPUs")
    work = Path(tempfile.mkdtemp(prefix="cbledger-bench-scale-"))
    try:
        if args.only in (None, "store"):
            run_store(work, [1, args.writers], args.pairs)
        if args.only in (None, "runs"):
            run_runs(work, args.suite)
        if args.only == "snapshots":
            run_snapshots(work, args.events, args.tail, args.keep, args.resume_only)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
