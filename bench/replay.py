"""Reproduction benchmark: what `replay --verify` and `watch` cost.

    .venv/bin/python bench/replay.py            # real boards (2 runs per board and agent), 10k and 100k runs
    .venv/bin/python bench/replay.py --quick    # 1 run per board and agent, 2k and 10k runs

Three figures, each measured in this run:

* Full verification per run on the real boards: a temporary project around the shared microphone
  and dmxsun boards (the tasks `bench/runner.py` uses), gold and noop runs through the real runner,
  every projection written; then `replay --verify` end to end (chain, every run restored and
  re-graded, projections compared), serially and with --jobs, split into restore (bundle digest,
  seed rebuilt from the fixture, bundle read), evidence digests and the re-grade.
* Chain-only verification per event (`verify_chain`) on synthetic ledgers of run + grade pairs
  (the projections benchmark's builders) at each size.
* Watch latency: `cbledger watch` running as its own process over the same synthetic ledger, one
  run + grade appended by this process, time until LEADERBOARD.md holds the new head — that is
  the debounce (the ledger must be quiet that long) plus the fold, the touched records and the
  render — with the regeneration's own time as the watcher reports it; then the same latency
  with a run + grade appended every second on a timer (`--rate-appends`), whatever the watcher
  is doing. The watch runs with `--no-site` unless `--with-site` is given: the site's aggregate
  pages are rendered from the whole state on every regeneration.

Shared data: CBLEDGER_SHARED, or ../shared beside the repository (real/fixtures under it).
Everything is written under a temporary directory and removed afterwards.
"""

from __future__ import annotations

import argparse
import os
import queue
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.projections import build_ledger, events_for
from bench.runner import build as build_real_project
from bench.runner import init_ledger
from cbledger.ledger.events import Ablations
from cbledger.ledger.store import LedgerStore
from cbledger.ledger.verify import verify_chain
from cbledger.projections import writers
from cbledger.reproduce import runs, site_evidence
from cbledger.reproduce import verify as verify_mod
from cbledger.runner import suite_run
from cbledger.runner.plan import make_plan
from cbledger.tasks.catalog import Catalog
from cbledger.workspace import Workspace


def shared_real() -> Path:
    base = Path(os.environ.get("CBLEDGER_SHARED") or REPO.parent / "shared")
    real = base / "real"
    if not (real / "fixtures").is_dir():
        sys.exit(f"no real fixtures under {real}: set CBLEDGER_SHARED to the shared directory")
    return real


# --------------------------------------------------------------------------- real boards


class Phases:
    """Seconds per phase of the run being checked (serial verification only)."""

    def __init__(self) -> None:
        self.totals: dict[str, float] = defaultdict(float)

    def wrap(self, owner, name: str, phase: str) -> None:
        fn = getattr(owner, name)

        def timed(*args, **kwargs):
            t = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.totals[phase] += time.perf_counter() - t

        setattr(owner, name, timed)


def real_boards(work: Path, repeats: int, jobs: int, rounds: int = 1) -> None:
    root = work / "real-project"
    root.mkdir()
    tasks = build_real_project(root, shared_real())
    ledger = init_ledger(root)
    where = Workspace.at(root, ledger)
    catalog = Catalog(root)
    t = time.perf_counter()
    for agent in ("gold", "noop"):
        plan = make_plan(catalog, agent=agent, model=None, suite=None, task_ids=list(tasks), repeats=repeats,
                         ablations=Ablations())
        result = suite_run.run_plan(where, plan, jobs=2, sandbox_root=work / "sandboxes")
        if result.failures:
            sys.exit(f"a run was not recorded: {result.failures}")
    made = time.perf_counter() - t
    state = writers.load_state(ledger)
    writers.regenerate_all(state, where, site_evidence=site_evidence.source(where))  # as `cbledger run` does
    n = len(state.runs)
    bundles = sum(p.stat().st_size for p in where.runs.glob("*.bundle"))
    print(f"real boards: {n} preserved runs ({', '.join(tasks)}; gold and noop x {repeats}), "
          f"made in {made:.1f} s, bundles {bundles / 1024:.0f} KiB in all")

    phases = Phases()
    phases.wrap(runs, "restore_run", "restore")
    phases.wrap(runs, "check_digests", "digests")
    phases.wrap(runs, "grade_preserved", "grade")
    per_run: list[float] = []
    t = time.perf_counter()
    report = verify_mod.verify(where, verify_mod.Options(),
                               run_progress=lambda _d, _t, check: per_run.append(check.seconds))
    in_process = time.perf_counter() - t
    if report.exit_code != 0:
        sys.exit(f"verification failed: {[str(f) for f in report.failures]}")
    # Serial against --jobs as a user runs them: whole processes (start-up, cold parse caches and
    # all), interleaved round by round with the order alternating, so the machine's load falls on
    # both alike; each round's pair gives one ratio.
    command = [str(Path(sys.executable).with_name("cbledger")), "replay", "--verify"]
    serials: list[float] = []
    parallels: list[float] = []
    for r in range(rounds):
        for kind in (("serial", "jobs") if r % 2 == 0 else ("jobs", "serial")):
            argv = [*command, "--jobs", str(jobs if kind == "jobs" else 1)]
            t = time.perf_counter()
            done = subprocess.run(argv, cwd=root, capture_output=True, text=True, check=False)
            (parallels if kind == "jobs" else serials).append(time.perf_counter() - t)
            if done.returncode != 0:
                sys.exit(f"{' '.join(argv)} exited {done.returncode}: {done.stderr[-600:]}")
    serial, par = statistics.median(serials), statistics.median(parallels)
    t = time.perf_counter()
    verify_mod.verify(where, verify_mod.Options(run_ids=(), projections=True, since=10**9))
    no_runs = time.perf_counter() - t
    print(f"  replay --verify, in this process:       {in_process:7.2f} s = {in_process / n:.3f} s per run "
          f"(median run {statistics.median(per_run):.3f} s, slowest {max(per_run):.3f} s)")
    print("    per run: " + ", ".join(f"{k} {v / n:.3f} s" for k, v in phases.totals.items())
          + f"; the chain and the projections (no run re-graded) {no_runs * 1e3:.0f} ms in all")
    print(f"  cbledger replay --verify, serial:       {serial:7.2f} s = {serial / n:.3f} s per run (median of {rounds})")
    print(f"  cbledger replay --verify --jobs {jobs}:     {par:7.2f} s = {par / n:.3f} s per run (median of {rounds})")
    ratios = [s / p for s, p in zip(serials, parallels, strict=True)]
    print(f"  serial / --jobs {jobs}, {rounds} interleaved pairs: " + ", ".join(f"{x:.2f}x" for x in ratios)
          + f" (serial {', '.join(f'{x:.2f}' for x in serials)} s; --jobs {', '.join(f'{x:.2f}' for x in parallels)} s); "
          + f"target: faster than serial with >= 8 runs: {'met' if n >= 8 and statistics.median(ratios) > 1 else 'MISSED'}")


# --------------------------------------------------------------------------- synthetic ledgers


class Watch:
    """`cbledger watch` in its own process; its lines arrive on a queue."""

    def __init__(self, root: Path, ledger: Path, debounce_ms: int, site: bool) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "cbledger.cli.app", "watch", "--root", str(root), "--ledger", str(ledger),
             "--debounce-ms", str(debounce_ms), *([] if site else ["--no-site"])],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=REPO,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:  # type: ignore[union-attr]
            self.lines.put(line.rstrip("\n"))

    def until(self, text: str, timeout: float = 900) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=1)
            except queue.Empty:
                if self.proc.poll() is not None:
                    sys.exit(f"watch exited {self.proc.returncode}")
                continue
            if text in line:
                return line
        sys.exit(f"watch did not say {text!r} in {timeout} s")

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=60)


def leaderboard_head(path: Path) -> int | None:
    try:
        m = re.search(r"\| Ledger head \| seq (\d+),", path.read_text())
    except FileNotFoundError:
        return None
    return int(m[1]) if m else None


def at_a_rate(d: Path, store: LedgerStore, first: int, count: int, period: float = 1.0) -> list[float]:
    """Appends a run and its grade every `period` seconds, whatever the watcher is doing, and
    returns each append's latency until LEADERBOARD.md holds its head (or a later one)."""
    board = Workspace.at(d).leaderboard
    seen: list[tuple[float, int]] = []  # (when, head) each time LEADERBOARD.md's head moved
    done = threading.Event()

    def look() -> None:
        last = None
        while not done.is_set():
            head = leaderboard_head(board)
            if head is not None and head != last:
                seen.append((time.perf_counter(), head))
                last = head
            time.sleep(0.002)

    watcher = threading.Thread(target=look, daemon=True)
    watcher.start()
    sent: list[tuple[float, int]] = []
    start = time.perf_counter() + period
    for k in range(count):
        time.sleep(max(0.0, start + k * period - time.perf_counter()))
        t = time.perf_counter()
        store.append(events_for(first + k))
        sent.append((t, store.head().seq))
    deadline = time.perf_counter() + 60
    while (not seen or seen[-1][1] < sent[-1][1]) and time.perf_counter() < deadline:
        time.sleep(0.01)
    done.set()
    watcher.join()
    return [next(when for when, head in seen if head >= seq) - t for t, seq in sent]


def synthetic(work: Path, sizes: list[int], debounce_ms: int, appends: int, rate_appends: int = 0,
              site: bool = False) -> None:
    for n in sizes:
        d = work / f"synthetic-{n}"
        ledger = Workspace.at(d).ledger
        ledger.parent.mkdir(parents=True)
        build_ledger(ledger, n)
        with open(ledger, "rb") as f:
            events = sum(1 for _ in f)
        size = ledger.stat().st_size
        t = time.perf_counter()
        chain = verify_chain(ledger)
        chain_s = time.perf_counter() - t
        assert chain.ok
        print(f"{n:>7} runs ({events} events, {size / 1e6:.0f} MB):")
        print(f"  chain only (verify_chain):   {chain_s:7.2f} s = {chain_s / events * 1e6:6.1f} µs per event")

        watch = Watch(d, ledger, debounce_ms, site)
        t = time.perf_counter()
        first = watch.until("folded")
        start_s = time.perf_counter() - t
        watch.until("watching")
        latencies, regen = [], []
        store = LedgerStore(ledger)
        for k in range(appends):
            head = store.head().seq
            time.sleep(debounce_ms / 1000 + 0.3)  # let the previous regeneration finish
            t = time.perf_counter()
            store.append(events_for(n + k))
            while leaderboard_head(Workspace.at(d).leaderboard) != head + 2:
                time.sleep(0.002)
            latencies.append(time.perf_counter() - t)
            line = watch.until(f"head seq {head + 2};")
            regen.append(float(re.search(r"\(([\d.]+) s\)$", line)[1]))
        steady = at_a_rate(d, store, n + appends, rate_appends) if rate_appends else []
        watch.stop()
        print(f"  watch{'' if site else ' --no-site'}, first build of every output: {start_s:6.1f} s ({first.split('; ', 1)[1]})")
        print(f"  watch latency, append -> LEADERBOARD.md rewritten (debounce {debounce_ms} ms): "
              f"median {statistics.median(latencies):.3f} s, max {max(latencies):.3f} s over {appends} appends; "
              f"the regeneration itself (every output it writes): median {statistics.median(regen):.2f} s")
        if steady:
            print(f"  watch latency under one append per second ({len(steady)} appends): median "
                  f"{statistics.median(steady):.3f} s, max {max(steady):.3f} s")
        shutil.rmtree(d, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="1 run per board and agent; 2k and 10k runs")
    ap.add_argument("--runs", type=int, nargs="+", help="synthetic ledger sizes (runs)")
    ap.add_argument("--repeats", type=int, help="real-board runs per board and agent")
    ap.add_argument("--jobs", type=int, default=2, help="processes for the parallel verification")
    ap.add_argument("--debounce-ms", type=int, default=200)
    ap.add_argument("--appends", type=int, default=3, help="appends timed per size")
    ap.add_argument("--rate-appends", type=int, default=10, help="appends at one a second timed per size (0: none)")
    ap.add_argument("--with-site", action="store_true", help="watch with the HTML site (default: --no-site)")
    ap.add_argument("--skip-real", action="store_true", help="synthetic ledgers only")
    ap.add_argument("--real-only", action="store_true", help="the real boards only (no synthetic ledgers)")
    ap.add_argument("--rounds", type=int, default=1, help="interleaved serial / --jobs pairs on the real boards")
    args = ap.parse_args()
    sizes = args.runs or ([2_000, 10_000] if args.quick else [10_000, 100_000])
    repeats = args.repeats or (1 if args.quick else 2)
    work = Path(tempfile.mkdtemp(prefix="cbledger-bench-replay-"))
    try:
        if not args.skip_real:
            real_boards(work, repeats, args.jobs, args.rounds)
        if not args.real_only:
            synthetic(work, sizes, args.debounce_ms, args.appends, args.rate_appends, args.with_site)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
