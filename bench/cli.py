"""The `cbledger` command as a user feels it: whole processes, start-up included.

    python bench/cli.py [--rounds N] [--shared DIR]

For every real board under <shared>/real/fixtures (default: ../shared beside the repository, or
CBLEDGER_SHARED), runs `cbledger kicad nets --json ROOT.kicad_sch` and `kicad-cli sch export
netlist` of the same file (on a temporary copy) as separate processes, interleaved round by
round so the machine's load falls on both alike; then `cbledger --help` and `cbledger
--version` against `python -c pass`; then the app called in one process again and again, as an
embedding program or the tests' CliRunner calls it (CPU per call after the first, against the
first, which builds the command's module); then what commands pay before their own work (the
definitions' check, the kept suite versions laid out, the fixture trees listed) against a floor
for each. Prints each one's median and best wall time, its median CPU
time (user + system, which a busy machine inflates less), its peak resident set, and the ratios
of the medians, with the targets: kicad nets faster than kicad-cli on every board and under
40 MB peak; `--help` and `--version` under 150 ms (the console script answers both without
importing typer: cli/entry.py). Exits 1 when a target is missed.
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
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from cbledger.kicad.hierarchy import find_root_schematics

HELP_TARGET_S = 0.150
GNU_TIME = "/usr/bin/time"
RSS_TARGET_MB = 40.0


@dataclass
class Samples:
    label: str
    wall: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    rss_mb: list[float] = field(default_factory=list)

    def run(self, argv: list[str], cwd: Path | None = None) -> None:
        """One whole process: wall time from spawn to reap; its CPU time and peak RSS as GNU time
        reports them (a child's own rusage would count the pages of this process it was forked
        from)."""
        with tempfile.NamedTemporaryFile("r", suffix=".time") as report:
            start = time.perf_counter()
            done = subprocess.run(
                [GNU_TIME, "-f", "%U %S %M", "-o", report.name, *argv], cwd=cwd,
                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False,
            )
            self.wall.append(time.perf_counter() - start)
            if done.returncode != 0:
                raise SystemExit(f"{' '.join(argv)} exited {done.returncode}: {done.stderr.decode(errors='replace')[-400:]}")
            user, system, rss_kb = report.read().split()[-3:]
        self.cpu.append(float(user) + float(system))
        self.rss_mb.append(int(rss_kb) / 1024)

    @property
    def median(self) -> float:
        return statistics.median(self.wall)

    def line(self) -> str:
        return (
            f"  {self.label:<34} median {self.median * 1000:7.1f} ms  best {min(self.wall) * 1000:7.1f} ms  "
            f"cpu {statistics.median(self.cpu) * 1000:7.1f} ms  peak {max(self.rss_mb):6.1f} MB"
        )


def in_process(calls: int = 20) -> None:
    """Each command's `--help` through the app object, in one process: the first call imports and
    builds its module's commands, and every later one should cost only parsing and printing
    (cli/lazy.py builds a module's commands once per process; typer rebuilt them at every call)."""
    from typer.testing import CliRunner

    from cbledger.cli.app import app

    runner = CliRunner()
    print(f"in-process calls (CPU, median of {calls} after the first)")
    for argv in (["run", "--help"], ["replay", "--help"], ["project", "all", "--help"], ["kicad", "nets", "--help"]):
        started = time.process_time()
        first = runner.invoke(app, argv)
        cold = time.process_time() - started
        if first.exit_code != 0:
            raise SystemExit(f"cbledger {' '.join(argv)} exited {first.exit_code}: {first.output[-400:]}")
        each = []
        for _ in range(calls):
            started = time.process_time()
            runner.invoke(app, argv)
            each.append(time.process_time() - started)
        warm = statistics.median(each)
        print(f"  cbledger {' '.join(argv):<24} first {cold * 1000:7.1f} ms  then {warm * 1000:6.1f} ms  ({cold / warm:.1f}x)")


def fixed_costs(rounds: int = 6) -> None:
    """What commands pay before their own work, in one process, best of `rounds`, each against a
    floor measured beside it: the definitions' `collect` (each `run`'s check that the suite is
    current, `validate`, `suite bump`) against reading and hashing every file under tasks/,
    fixtures/ and suites/; every kept suite version of this repository's ledger laid out
    (`prepare_suites`: each command that restores a run) against copying every kept object once;
    the bundled fixture trees listed (`tree_files`) against a bare `os.walk` of them."""
    import hashlib

    from cbledger import scratch
    from cbledger.projections.writers import load_state
    from cbledger.reproduce.verify import prepare_suites
    from cbledger.tasks.definitions import DirectorySource, collect
    from cbledger.tasks.fixtures.hashing import tree_files
    from cbledger.workspace import Workspace

    def timed(run) -> float:
        started = time.perf_counter()
        run()
        return time.perf_counter() - started

    def best(run) -> float:
        return min(run() for _ in range(rounds))

    def read_and_hash() -> None:
        for top in ("tasks", "fixtures", "suites"):
            for d, _, names in os.walk(REPO / top):
                for name in names:
                    with open(os.path.join(d, name), "rb") as f:
                        hashlib.sha256(f.read())

    workspace = Workspace.at(REPO)
    state = load_state(workspace.ledger)
    versions = {e.run.comparability.suite_version for e in state.runs.values()}
    trees = [p / "tree" for p in sorted((REPO / "fixtures").iterdir()) if (p / "tree").is_dir()]

    def in_scratch(fill) -> float:
        """`fill(directory)` timed in a scratch directory where commands lay suites out (in
        memory when the machine has room: cbledger/scratch.py), its removal not counted."""
        into = scratch.mkdtemp("cbledger-bench-")
        try:
            return timed(lambda: fill(into))
        finally:
            shutil.rmtree(into, ignore_errors=True)

    lanes = (
        ("definitions collect", lambda: timed(lambda: collect(DirectorySource(REPO), REPO)),
         "read + SHA-256 of the same trees", lambda: timed(read_and_hash)),
        (f"prepare_suites, {len(versions)} versions", lambda: in_scratch(lambda d: prepare_suites(workspace, state, versions, d)),
         "copy of every kept object", lambda: in_scratch(lambda d: shutil.copytree(workspace.suites / "objects", d / "objects"))),
        (f"tree_files, {len(trees)} fixture trees", lambda: timed(lambda: [tree_files(t) for t in trees]),
         "os.walk of them", lambda: timed(lambda: [list(os.walk(t)) for t in trees])),
    )
    print(f"fixed costs per command (in process, best of {rounds}, against a floor)")
    for label, ours, floor_label, floor in lanes:
        a, b = best(ours), best(floor)
        print(f"  {label:<34} {a * 1000:7.1f} ms   {floor_label:<34} {b * 1000:7.1f} ms   {a / b:5.2f}x")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--shared", type=Path, default=Path(os.environ.get("CBLEDGER_SHARED", REPO.parent / "shared")))
    args = parser.parse_args()
    cbledger = shutil.which("cbledger", path=str(Path(sys.executable).parent)) or shutil.which("cbledger")
    kicad_cli = shutil.which("kicad-cli")
    if cbledger is None or kicad_cli is None or not os.access(GNU_TIME, os.X_OK):
        print(f"needs the cbledger command ({cbledger}), kicad-cli ({kicad_cli}) and GNU time ({GNU_TIME}, Debian's time)", file=sys.stderr)
        return 2
    boards = sorted(p for p in (args.shared / "real" / "fixtures").glob("*") if (p / "tree").is_dir())
    if not boards:
        print(f"no real boards under {args.shared / 'real' / 'fixtures'}", file=sys.stderr)
        return 2
    missed: list[str] = []
    print(f"{args.rounds} interleaved rounds; {cbledger}; {kicad_cli}; load average {os.getloadavg()[0]:.2f}")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for board in boards:
            copy = work / board.name
            shutil.copytree(board / "tree", copy)
            (root,) = find_root_schematics(copy)[:1]
            ours, theirs = Samples("cbledger kicad nets --json"), Samples("kicad-cli sch export netlist")
            for n in range(args.rounds):
                pair = [
                    (ours, [cbledger, "kicad", "nets", "--json", str(root)]),
                    (theirs, [kicad_cli, "sch", "export", "netlist", "-o", str(work / "out.net"), str(root)]),
                ]
                for samples, argv in pair if n % 2 == 0 else reversed(pair):
                    samples.run(argv, cwd=work)
            ratio = theirs.median / ours.median
            print(f"{board.name}")
            print(ours.line())
            print(theirs.line())
            print(f"  kicad-cli / cbledger: {ratio:.2f}x wall, {statistics.median(theirs.cpu) / statistics.median(ours.cpu):.2f}x cpu")
            if ours.median >= theirs.median:
                missed.append(f"kicad nets slower than kicad-cli on {board.name}")
            if max(ours.rss_mb) >= RSS_TARGET_MB:
                missed.append(f"kicad nets peak {max(ours.rss_mb):.1f} MB on {board.name}")

        bare, typer_only = Samples("python -c pass"), Samples("python -c 'import typer'")
        helped, version = Samples("cbledger --help"), Samples("cbledger --version")
        for _ in range(args.rounds):
            bare.run([sys.executable, "-c", "pass"])
            typer_only.run([sys.executable, "-c", "import typer"])
            helped.run([cbledger, "--help"])
            version.run([cbledger, "--version"])
        print("start-up")
        for s in (bare, typer_only, helped, version):
            print(s.line())
        print(
            f"  --help / python -c pass: {helped.median / bare.median:.2f}x, --version / python -c pass: "
            f"{version.median / bare.median:.2f}x; target both < {HELP_TARGET_S * 1000:.0f} ms"
        )
        for s in (helped, version):
            if s.median >= HELP_TARGET_S:
                missed.append(f"{s.label} median {s.median * 1000:.0f} ms")
    in_process()
    fixed_costs()
    for m in missed:
        print(f"missed: {m}")
    if not missed:
        print("every target met")
    return 1 if missed else 0


if __name__ == "__main__":
    raise SystemExit(main())
