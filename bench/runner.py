"""The cost of one preserved run on the real boards, against a plain copy of the board.

    python bench/runner.py [--repeats N] [--shared DIR]

Each real board (<shared>/real/fixtures; default: ../shared beside the repository, or
CBLEDGER_SHARED) is copied into a temporary project with one gold-like task — a net rename on
the microphone board, a resistor value change on the dmxsun baseboard — and the task is run N
times with the gold agent and N times with noop, through the real runner (sandbox, agent,
kicad-cli verification, grading, credential backstop, git bundle, ledger append).

Printed per board and agent: seconds per run split into sandbox (seed commit, checkout, setup),
agent, verify (kicad-cli ERC + DRC), grade (evidence + assertions), preserve (capture and
evidence commits, backstop scan, bundle, publish) and the rest (digests, events, cleanup); then
the preserved bundle's bytes against the bytes and `du` of a plain copy of tree/ and the time
that copy takes. The claim under test: a preserved run costs a small fraction of a copy.
"""

from __future__ import annotations

import argparse
import functools
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from cbledger.grading import suite_version
from cbledger.grading.evidence import bundle as evidence_mod
from cbledger.kicad.oracle import kicad_cli_version
from cbledger.ledger.events import Ablations, Actor, make_event
from cbledger.ledger.store import LedgerStore
from cbledger.runner import backstop, preserve, suite_run
from cbledger.runner import execute as execute_mod
from cbledger.runner import sandbox as sandbox_mod
from cbledger.runner.agents import scripted
from cbledger.runner.plan import make_plan
from cbledger.tasks import suite_archive
from cbledger.tasks.catalog import Catalog
from cbledger.workspace import Workspace
from tests.runner_project import (
    DMX_BOARD,
    MIC_BOARD,
    MIC_PCB,
    MIC_SCH,
    PINOUT,
    add_board_fixture,
    add_task,
    reference_assertions,
    rename_transcript,
    renamed_schematic,
)

DMX_SCH = "hardware/baseboard_2slots/baseboard_2slots.kicad_sch"
DMX_PCB = "hardware/baseboard_2slots/baseboard_2slots.kicad_pcb"
PHASES = ("sandbox", "agent", "verify", "grade", "preserve")
ACTOR = Actor(kind="maintainer", name="bench")

# --------------------------------------------------------------------------- timing


class Clock:
    """Seconds spent in each phase of the run in progress (runs are sequential here)."""

    def __init__(self):
        self.current: dict[str, float] = defaultdict(float)

    def wrap(self, owner, name: str, phase: str) -> None:
        fn = getattr(owner, name)

        @functools.wraps(fn)
        def timed(*args, **kwargs):
            t = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.current[phase] += time.perf_counter() - t

        setattr(owner, name, timed)

    def take(self) -> dict[str, float]:
        out, self.current = dict(self.current), defaultdict(float)
        return out


def instrument(clock: Clock) -> None:
    clock.wrap(sandbox_mod, "create", "sandbox")
    clock.wrap(sandbox_mod, "commit_setup", "sandbox")
    clock.wrap(execute_mod, "run_setup", "sandbox")
    clock.wrap(scripted.GoldAgent, "run", "agent")
    clock.wrap(scripted.NoopAgent, "run", "agent")
    clock.wrap(execute_mod, "verify_tree", "verify")
    clock.wrap(evidence_mod, "from_repo", "grade")
    clock.wrap(execute_mod, "grade", "grade")
    clock.wrap(preserve, "capture", "preserve")
    clock.wrap(preserve, "record_evidence", "preserve")
    clock.wrap(preserve, "write_bundle", "preserve")
    clock.wrap(backstop, "require_clean", "preserve")
    clock.wrap(suite_run, "publish", "preserve")


# --------------------------------------------------------------------------- the project


def changed_value(shared: Path, refdes: str, old: str, new: str) -> bytes:
    """The dmxsun schematic with one resistor's Value property changed (only that symbol's)."""
    text = (shared / "fixtures" / DMX_BOARD / "tree" / DMX_SCH).read_text()
    anchor = text.index(f'(property "Reference" "{refdes}"')
    value = text.index(f'(property "Value" "{old}"', anchor)
    assert value - anchor < 400, f"{refdes}'s Value is not next to its Reference"
    return (text[:value] + f'(property "Value" "{new}"' + text[value + len(f'(property "Value" "{old}"'):]).encode()


def value_assertions(refdes: str, new: str) -> list[dict]:
    def a(id_, type_, args, weight=1):
        return {"id": id_, "type": type_, "args": args, "weight": weight, "required": True}

    return [
        a("new-value", "symbol_present", {"refdes": refdes, "value": new}, 3),
        a("no-new-erc-violations", "erc_no_new_violations", {"severity": "error"}),
        a("no-new-drc-violations", "drc_no_new_violations", {"severity": "error"}),
        a("surgical", "diff_ratio_max", {"path": DMX_SCH, "ratio": 0.01}),
        a("board-untouched", "file_unchanged", {"path": DMX_PCB}),
        a("one-commit", "commit_count", {"equals": 1}),
        a("finished-cleanly", "exit_path_in", {"paths": ["done"]}),
        a("no-secret", "no_secret", {}),
    ]


def build(root: Path, shared: Path) -> dict[str, tuple[str, str]]:
    """Returns {task id: (board, fixture id)}."""
    add_board_fixture(root, shared, MIC_BOARD, "microphone-board", schematic=MIC_SCH, board_file=MIC_PCB,
                      extra_files={"docs/PINOUT.md": PINOUT})
    add_task(root, "mic-rename-net", fixture_id="microphone-board", prompt="rename net DATA to PDM_DATA", expected="edit",
             assertions=reference_assertions(shared, "do-rename-net"),
             gold_files={MIC_SCH: renamed_schematic(shared), "docs/PINOUT.md": PINOUT.replace("| DATA |", "| PDM_DATA |")},
             gold_transcript=rename_transcript("DATA", "PDM_DATA", MIC_SCH))
    add_board_fixture(root, shared, DMX_BOARD, "dmxsun-baseboard", schematic=DMX_SCH, board_file=DMX_PCB)
    transcript = rename_transcript("2k", "2.2k", DMX_SCH)
    add_task(root, "dmx-change-r1", fixture_id="dmxsun-baseboard", prompt="change R1 from 2k to 2.2k", expected="edit",
             assertions=value_assertions("R1", "2.2k"), gold_files={DMX_SCH: changed_value(shared, "R1", "2k", "2.2k")},
             gold_transcript=transcript)
    return {"mic-rename-net": (MIC_BOARD, "microphone-board"), "dmx-change-r1": (DMX_BOARD, "dmxsun-baseboard")}


def init_ledger(root: Path) -> Path:
    ledger = Workspace.at(root).ledger
    store = LedgerStore(ledger)
    store.init("runner-bench", ACTOR)
    body, kept = suite_version.bump_and_keep(None, Workspace.at(root), "benchmark suite")
    store.append([
        make_event(body, id=f"suite:{body.suite_version}", actor=ACTOR),
        make_event(kept, id=suite_archive.event_id(kept), actor=ACTOR),
    ])
    return ledger


# --------------------------------------------------------------------------- sizes


def plain_copy(tree: Path, into: Path) -> tuple[float, int, int]:
    """(seconds, apparent bytes, disk bytes as `du` counts them) of copying tree/."""
    t = time.perf_counter()
    shutil.copytree(tree, into)
    seconds = time.perf_counter() - t
    apparent = disk = 0
    for p in into.rglob("*"):
        st = p.lstat()
        disk += st.st_blocks * 512
        if p.is_file():
            apparent += st.st_size
    return seconds, apparent, disk


def human(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


# --------------------------------------------------------------------------- main


def shared_dir(arg: str | None) -> Path:
    base = Path(arg or os.environ.get("CBLEDGER_SHARED") or REPO.parent / "shared")
    real = base / "real"
    if not (real / "fixtures").is_dir():
        sys.exit(f"no real fixtures under {real}: pass --shared DIR or set CBLEDGER_SHARED")
    return real


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=3, help="runs per board and agent (default 3)")
    ap.add_argument("--shared", help="the shared directory holding real/ (default: CBLEDGER_SHARED or ../shared)")
    args = ap.parse_args()
    shared = shared_dir(args.shared)

    clock = Clock()
    instrument(clock)
    work = Path(tempfile.mkdtemp(prefix="cbledger-bench-runner-"))
    try:
        root = work / "project"
        root.mkdir()
        tasks = build(root, shared)
        ledger = init_ledger(root)
        catalog = Catalog(root)
        rows = []
        for task_id, (board, _fixture_id) in tasks.items():
            for agent in ("gold", "noop"):
                plan = make_plan(catalog, agent=agent, model=None, suite=None, task_ids=[task_id], repeats=args.repeats,
                                 ablations=Ablations())
                per_run: list[dict] = []
                started = [time.perf_counter()]

                def done(output, error, _done, _total, per_run=per_run, started=started):
                    if error:
                        raise SystemExit(f"run failed: {error}")
                    phases = clock.take()
                    phases["total"] = time.perf_counter() - started[0]
                    phases["bytes"] = output.run.sandbox.store_bytes
                    phases["verdict"] = output.grade.verdict
                    per_run.append(phases)
                    started[0] = time.perf_counter()

                clock.take()
                suite_run.run_plan(Workspace.at(root, ledger), plan, sandbox_root=work / "sandboxes", on_done=done)
                rows.append((board, agent, per_run))

        versions = f"kicad-cli {kicad_cli_version() or '?'}"
        print(f"cbledger runner benchmark: {args.repeats} run(s) per board and agent, {versions}, gold-like edits and noop")
        print()
        header = f"{'board':<31} {'agent':<5} {'verdicts':<9}" + "".join(f"{p:>9}" for p in (*PHASES, "other", "total"))
        print("seconds per run (median)")
        print(header)
        for board, agent, runs in rows:
            med = {p: statistics.median(r.get(p, 0.0) for r in runs) for p in (*PHASES, "total")}
            other = statistics.median(r["total"] - sum(r.get(p, 0.0) for p in PHASES) for r in runs)
            verdicts = "/".join(sorted({r["verdict"] for r in runs}))
            print(f"{board:<31} {agent:<5} {verdicts:<9}" + "".join(f"{med[p]:>9.3f}" for p in PHASES) + f"{other:>9.3f}{med['total']:>9.3f}")
        print()
        print("bytes per preserved run against a plain copy of tree/")
        print(f"{'board':<31} {'agent':<5} {'bundle':>10} {'copy (bytes)':>13} {'copy (du)':>11} {'bundle/du':>10} {'preserve s':>11} {'copy s':>8}")
        for board, agent, runs in rows:
            fixture_id = next(f for t, (b, f) in tasks.items() if b == board)
            seconds, apparent, disk = plain_copy(root / "fixtures" / fixture_id / "tree", work / "copies" / f"{fixture_id}-{agent}")
            bundle = statistics.median(r["bytes"] for r in runs)
            preserve_s = statistics.median(r.get("preserve", 0.0) for r in runs)
            print(f"{board:<31} {agent:<5} {human(bundle):>10} {human(apparent):>13} {human(disk):>11} {bundle / disk:>10.2%} {preserve_s:>11.3f} {seconds:>8.3f}")
        runs_dir = Workspace.at(root).runs
        total_bundles = sum(p.stat().st_size for p in runs_dir.glob("*.bundle"))
        count = len(list(runs_dir.glob("*.bundle")))
        print()
        print(f"{count} preserved runs in {human(total_bundles)}; ledger {human(ledger.stat().st_size)} "
              f"({len(ledger.read_bytes().splitlines())} events)")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
