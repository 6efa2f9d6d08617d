"""Restore benchmark: one preserved run restored as `replay --verify` restores it, with the bundle
read in-process (`runner/bundle_read.py`) against the `git fetch` subprocess it replaced.

    scripts/materialize-real && .venv/bin/python bench/restore.py             # every run of the committed ledger
    .venv/bin/python bench/restore.py --rounds 3 --limit 40

For every run of the committed ledger that is not retracted, `reproduce/restore.py`
`restore_run` (bundle digest, seed rebuilt from the fixture, bundle read, recorded commits) runs
twice into fresh scratch repositories: once as it is, once with the read step swapped for the
`git fetch <bundle> 'refs/cbledger/*:refs/cbledger/*'` it used to run. The two lanes alternate
their order run by run, so the machine's load falls on both alike. Reported: the whole restore
and the read step alone, per run (median, mean) and in all, and the ratio. Both lanes must
restore every run complete.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import pygit2

from cbledger.projections.writers import load_state
from cbledger.reproduce import restore as restore_mod
from cbledger.reproduce.runs import _restore_catalog
from cbledger.reproduce.verify import _every_run, prepare_suites
from cbledger.runner.bundle_read import BundleError, unbundle
from cbledger.runner.preserve import git_cli
from cbledger.workspace import Workspace


class Lanes:
    """The read step `restore_run` calls, timed, either in-process or as the old subprocess."""

    def __init__(self) -> None:
        self.bundle: Path | None = None
        self.git = False
        self.read_seconds = 0.0

    def __call__(self, repo: pygit2.Repository, data: bytes, *args, **kwargs):
        t = time.perf_counter()
        try:
            if not self.git:
                return unbundle(repo, data, *args, **kwargs)
            assert self.bundle is not None
            proc = subprocess.run(
                [git_cli(), "fetch", "--quiet", "--no-tags", str(self.bundle.resolve()), "refs/cbledger/*:refs/cbledger/*"],
                cwd=repo.path, capture_output=True, text=True, stdin=subprocess.DEVNULL,
                env={**os.environ, "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"},
            )
            if proc.returncode != 0:
                raise BundleError(proc.stderr.strip())
            return None
        finally:
            self.read_seconds = time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=1, help="restores of each run per lane")
    ap.add_argument("--limit", type=int, default=0, help="only the first N runs (0: all)")
    args = ap.parse_args()
    ws = Workspace.at(REPO)
    state = load_state(ws.ledger)
    runs = [(rid, e) for rid, e in sorted(_every_run(state).items()) if rid not in state.retracted]
    if args.limit:
        runs = runs[: args.limit]
    lanes = Lanes()
    restore_mod.unbundle = lanes  # type: ignore[assignment]
    work = Path(tempfile.mkdtemp(prefix="cbledger-bench-restore-"))
    whole: dict[str, list[float]] = {"reader": [], "git fetch": []}
    read: dict[str, list[float]] = {"reader": [], "git fetch": []}
    try:
        suites, problems = prepare_suites(ws, state, {e.run.comparability.suite_version for _, e in runs}, work / "suites")
        if problems:
            sys.exit(f"kept definitions do not verify: {[f.message for f in problems]}")
        n = 0
        for r in range(args.rounds):
            for i, (rid, entry) in enumerate(runs):
                catalog = _restore_catalog(ws, entry.run, suites)
                lanes.bundle = ws.stored(entry.run.sandbox.store)
                order = ("reader", "git fetch") if (i + r) % 2 == 0 else ("git fetch", "reader")
                for lane in order:
                    lanes.git = lane == "git fetch"
                    into = work / f"r{n}"
                    n += 1
                    t = time.perf_counter()
                    done = restore_mod.restore_run(ws, catalog, entry.run, entry.seq, into)
                    whole[lane].append(time.perf_counter() - t)
                    read[lane].append(lanes.read_seconds)
                    if not done.complete or done.failures:
                        sys.exit(f"{rid} ({lane}): {[f.message for f in done.failures]}")
                    shutil.rmtree(into)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    count = len(whole["reader"])
    print(f"{len(runs)} runs of the committed ledger x {args.rounds} round(s), lanes interleaved; "
          f"load average {os.getloadavg()[0]:.1f}")
    for name, figures in (("whole restore", whole), ("read step", read)):
        for lane in ("git fetch", "reader"):
            xs = figures[lane]
            print(f"  {name:13} {lane:9}: median {statistics.median(xs) * 1e3:6.1f} ms, mean {statistics.mean(xs) * 1e3:6.1f} ms, "
                  f"{sum(xs):6.2f} s for {count} restores")
        ratio = sum(figures["git fetch"]) / sum(figures["reader"])
        print(f"  {name:13} git fetch / reader: {ratio:.2f}x in all")


if __name__ == "__main__":
    main()
