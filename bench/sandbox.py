"""What the agent sandbox costs a run: one confined process against the same process unconfined.

    python bench/sandbox.py [--runs N] [--board antmicro-microphone-board]

For a no-op (`/bin/true`) and for `node -e 0` (the harness's interpreter starting), the wall time
of `isolation.run` under bubblewrap and with `--unsandboxed`, median of N; then the fixed work
the sandbox adds around a run on a real board's tree: handing the sandbox to the run's own id and
back (when root) and one measurement of its size (the write limit polls it every 0.25 s).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cbledger.runner import isolation

REPO = Path(__file__).resolve().parent.parent


def timed(fn, runs: int) -> float:
    samples = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--board", default="antmicro-microphone-board")
    args = parser.parse_args()
    confined = isolation.confinement(False, ())
    bare = isolation.confinement(True, ())
    node = shutil.which("node") or "node"
    work = Path(tempfile.mkdtemp(prefix="cbledger-bench-sandbox-"))
    try:
        box = work / "box"
        box.mkdir()
        print(f"{'process':<14} {'bubblewrap ms':>14} {'unsandboxed ms':>15} {'added ms':>9}")
        for label, argv, tools in (("/bin/true", ["/bin/true"], ()), ("node -e 0", [node, "-e", "0"], (node,))):
            job = isolation.Job(argv, box, {}, 60, tools=tools)
            for how in (confined, bare):  # warm both paths once
                isolation.run(job, how)
            sandboxed = timed(lambda job=job: isolation.run(job, confined), args.runs) * 1000
            plain = timed(lambda job=job: isolation.run(job, bare), args.runs) * 1000
            print(f"{label:<14} {sandboxed:>14.1f} {plain:>15.1f} {sandboxed - plain:>9.1f}")

        shared = Path(os.environ.get("CBLEDGER_SHARED", REPO.parent / "shared")) / "real" / "fixtures" / args.board / "tree"
        if shared.is_dir():
            tree = work / "tree"
            shutil.copytree(shared, tree)
            files = sum(1 for p in tree.rglob("*") if p.is_file())
            size = timed(lambda: isolation.tree_bytes(tree), args.runs) * 1000
            print(f"\n{args.board}: {files} files, {isolation.tree_bytes(tree) / 2**20:.1f} MiB as the write limit counts it")
            print(f"  one size measurement: {size:.2f} ms (every {isolation.WRITE_POLL_SEC}s while a run goes on)")
            if os.geteuid() == 0:
                hand = timed(lambda: (isolation._hand_over(tree, 200_001, 200_001), isolation._hand_over(tree, 0, 0)), args.runs) * 1000
                print(f"  hand the sandbox to the run's id and back: {hand:.2f} ms")
        else:
            print(f"\n{shared} not found: the per-tree figures need ../shared/real")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
