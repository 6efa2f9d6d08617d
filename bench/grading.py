"""Grading throughput on the real boards, with the time spent per evidence source.

    python bench/grading.py [--runs N] [--distinct N] [--shared DIR] [--cpu]

The headline is **distinct runs**: `--distinct` sandboxes per board, each a different end state
(the net renamed to a name of its own), graded one after another in one process with every cache
kept, which is what `replay --verify` does over a ledger. No end-state cache can hit there, so it
is the cost that scales with a ledger (target: under 50 ms CPU per run on every real board). It is
measured twice in the same run, with the s-expression fast path (each top-level child of a sheet
parsed once across runs, `sexpr._piecewise_loads`) and with stock sexpdata parsing every file
whole, and the ratio printed: the baseline is measured beside the figure it is compared with.

For each real board under <shared>/real/fixtures (default: ../shared beside the repository, or
CBLEDGER_SHARED), in a temporary directory: the shipped manifest is materialized from the shared
data, a sandbox is built exactly as the runner builds one, and a realistic run is left in it — a
net renamed on every label of the schematic, docs/PINOUT.md written, one commit, an untracked
scratch file, the longest real copperhead transcript under `.copperhead/runs/<stamp>/`, and the
fixture's baseline reports as the captured ERC/DRC reports. A task of 16 assertions covering
all three evidence sources grades it.

Printed per board (median of N runs): one whole grade as `cbledger grade` does it (snapshot the
working tree into git objects, then grade), grades per second; and the split by source —
the snapshot, end state (schematic parse and connectivity cold, i.e. with the parse cache
cleared, plus every end-state check), diff (tree diff plus the diff checks) and transcript
(locate, parse, transcript checks). Nothing is written outside the temporary directory.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from cbledger.grading import checks_kicad
from cbledger.grading.context import EVALUATION_ERRORS, GradeContext
from cbledger.grading.evidence.bundle import LIVE_REPORTS_DIR, Evidence, from_sandbox
from cbledger.grading.evidence.tree import view
from cbledger.grading.grader import grade
from cbledger.grading.registry import all_checks
from cbledger.kicad import compute_nets, load_schematic
from cbledger.kicad.sexpr import PARSE_CACHE, PIECES
from cbledger.ledger.events import Ablations
from cbledger.runner import sandbox as sandbox_mod
from cbledger.tasks.catalog import load_fixture, load_task
from cbledger.tasks.fixtures.materialize import from_directory

#: wall time by default; `--cpu` times the process's CPU instead, steadier on a busy machine
CLOCK = time.perf_counter

BOARDS = {
    # board id: (old net label, new net label, a reference on that net, its pin)
    "antmicro-microphone-board": ("DATA", "PDM_DATA", "R1", "2"),
    "openlighting-dmxsun-baseboard": ("SDA", "I2C_SDA", "R1", "2"),
}


def a(ident: str, kind: str, args: dict | None = None, weight: float = 1, required: bool = True) -> dict:
    return {"id": ident, "type": kind, "args": args or {}, "weight": weight, "required": required}


def assertions(schematic: str, board: str, old: str, new: str, ref: str, pin: str) -> list[dict]:
    return [
        a("new-net", "net_present", {"net": new}),
        a("old-net-gone", "net_absent", {"net": old}),
        a("pin", "pin_net_equals", {"refdes": ref, "pin": pin, "net": new}),
        a("part-kept", "symbol_present", {"refdes": ref}),
        a("no-new-part", "symbol_absent", {"refdes": "R999"}),
        a("drift", "drift_clean", required=False),
        a("erc", "erc_no_new_violations"),
        a("drc", "drc_no_new_violations"),
        a("pinout", "doc_contains", {"doc": "PINOUT.md", "pattern": rf"\b{new}\b"}),
        a("surgical", "diff_ratio_max", {"path": schematic, "ratio": 0.01}),
        a("board-untouched", "file_unchanged", {"path": board}),
        a("bounded", "files_touched_subset", {"allowed": [schematic, "docs/*.md", ".copperhead/**"]}, required=False),
        a("one-commit", "commit_count", {"equals": 1}),
        a("no-secret", "no_secret"),
        a("finished", "exit_path_in", {"paths": ["done"]}),
        a("committed", "transcript_event", {"event": "run-committed"}),
    ]


def shared_dir(arg: str | None) -> Path:
    base = Path(arg or os.environ.get("CBLEDGER_SHARED") or REPO.parent / "shared")
    real = base / "real"
    if not (real / "fixtures").is_dir():
        sys.exit(f"no shared real data at {real}; pass --shared DIR or set CBLEDGER_SHARED")
    return real


def longest_transcript(real: Path) -> bytes:
    paths = sorted((real / "transcripts").glob("*.jsonl"), key=lambda p: p.stat().st_size)
    return paths[-1].read_bytes()


def prepare(work: Path, real: Path, board_id: str, distinct: int = 0) -> tuple:
    """The task, the fixture, one sandbox, the schematic's line count, and `distinct` more
    sandboxes whose end states differ from each other (the net renamed `NEW_<i>`)."""
    old, new, ref, pin = BOARDS[board_id]
    root = work / board_id / "project"
    fixture_dir = root / "fixtures" / board_id
    fixture_dir.mkdir(parents=True)
    shutil.copyfile(REPO / "fixtures" / board_id / "fixture.json", fixture_dir / "fixture.json")
    from_directory(fixture_dir, real / "fixtures" / board_id)
    fixture = load_fixture(fixture_dir)
    art = fixture.manifest.artifacts
    task_dir = root / "tasks" / "bench-rename"
    task_dir.mkdir(parents=True)
    task_doc = {
        "id": "bench-rename",
        "tier": "simple",
        "mode": "do",
        "fixture": {"path": f"fixtures/{board_id}", "sha256": fixture.manifest.sha256},
        "request": {"prompt": f"rename net {old} to {new}"},
        "expectedOutcome": "edit",
        "caps": {"turns": 40, "wallClockSec": 1200},
        "tags": ["bench"],
    }
    (task_dir / "task.json").write_text(json.dumps(task_doc, indent=2))
    (task_dir / "assertions.json").write_text(
        json.dumps(assertions(art.schematic, str(art.board), old, new, ref, pin), indent=2)
    )
    task = load_task(task_dir)
    box = sandbox(work / board_id / "sandbox", task, fixture, real, old, new, ref, pin)
    others = [sandbox(work / board_id / f"distinct-{i}", task, fixture, real, old, f"{new}_{i}", ref, pin) for i in range(distinct)]
    lines = len((fixture.tree / art.schematic).read_bytes().splitlines())
    return task, fixture, box, lines, others


def sandbox(box: Path, task, fixture, real: Path, old: str, new: str, ref: str, pin: str) -> Path:
    art = fixture.manifest.artifacts
    fixture_dir = fixture.dir
    repo, seed, _config = sandbox_mod.create(box, task, fixture, Ablations())
    sandbox_mod.commit_setup(repo, seed, "setup\n")
    sch = box / art.schematic
    text = sch.read_text(encoding="utf-8")
    sch.write_text(text.replace(f'(label "{old}"', f'(label "{new}"'), encoding="utf-8")
    (box / "docs").mkdir(exist_ok=True)
    (box / "docs" / "PINOUT.md").write_text(f"# Pinout\n\n| Net | Pins |\n| --- | --- |\n| {new} | {ref}.{pin} |\n")
    index = repo.index
    index.add_all()
    index.write()
    import pygit2

    sig = pygit2.Signature("copperhead", "copperhead@example.invalid", 1_800_000_000, 0)
    repo.create_commit("HEAD", sig, sig, f"rename {old} to {new}\n", index.write_tree(), [repo.head.target])
    (box / "scratch.txt").write_text("untracked notes\n")
    runs = box / ".copperhead" / "runs" / "2026-07-22T18-47-18-987Z"
    runs.mkdir(parents=True)
    (runs / "transcript.jsonl").write_bytes(longest_transcript(real))
    live = Path(repo.path) / LIVE_REPORTS_DIR
    live.mkdir()
    for kind in ("erc", "drc"):
        shutil.copyfile(fixture_dir / "baseline" / f"{kind}.json", live / f"{kind}.json")
    return box


def distinct_runs(task, fixture, boxes: list[Path], fast: bool) -> list[float]:
    """Each sandbox graded once, caches kept (as replay grades a ledger), with or without the
    s-expression fast path (`sexpr._fast_loads`; without it stock sexpdata parses everything)."""
    from cbledger.kicad import sexpr

    saved = sexpr._fast_loads
    if not fast:
        sexpr._fast_loads = lambda text, atoms=None: None
    try:
        clear_caches()
        grade(task, fixture, from_sandbox(boxes[0]))  # the fixture's baseline, read once per replay
        times = []
        for box in boxes[1:]:
            start = CLOCK()
            grade(task, fixture, from_sandbox(box))
            times.append(CLOCK() - start)
        return times
    finally:
        sexpr._fast_loads = saved


def clear_caches() -> None:
    PARSE_CACHE.clear()
    PIECES.clear()
    checks_kicad.END_STATE_CACHE.clear()


def split_once(task, fixture, box: Path) -> dict[str, float]:
    """One grade, timed by phase. Checks of one source run together, in source order."""
    clear_caches()
    checks = all_checks()
    t0 = CLOCK()
    evidence = from_sandbox(box)
    _ = evidence.end.files()
    t1 = CLOCK()
    ctx = GradeContext(task, fixture, evidence)
    times = {"snapshot": t1 - t0}
    # transcript before diff: `no_secret` (a diff check) also scans the transcript, and the
    # parse of it belongs to the transcript source
    for source in ("end-state", "transcript", "diff"):
        start = CLOCK()
        if source == "transcript":
            _ = evidence.transcript
        elif source == "diff":
            _ = evidence.diff, evidence.commits
        for spec in task.assertions:
            if spec.evidence_source != source:
                continue
            try:
                checks[spec.type](spec.args, ctx)
            except EVALUATION_ERRORS:
                pass
        times[source] = CLOCK() - start
    return times


def parse_once(fixture) -> float:
    clear_caches()
    start = CLOCK()
    compute_nets(load_schematic(fixture.tree / fixture.manifest.artifacts.schematic))
    return CLOCK() - start


def whole_once(task, fixture, box: Path, cold: bool) -> tuple[float, str, float]:
    if cold:
        clear_caches()
    start = CLOCK()
    g = grade(task, fixture, from_sandbox(box))
    return CLOCK() - start, g.verdict, g.partial_credit


def stored_evidence(box: Path) -> Evidence:
    """The run as `replay --verify` and re-scoring see it: git objects already written (the
    snapshot taken once), so a grade reads trees and blobs and writes nothing."""
    live = from_sandbox(box)
    return Evidence(live.repo, live.baseline_sha, live.head_sha, live.end, live.reports, live.runner_exit)


def stored_once(task, fixture, evidence: Evidence, cold: bool) -> float:
    if cold:
        clear_caches()
    fresh = Evidence(evidence.repo, evidence.baseline_sha, evidence.head_sha, view(evidence.repo, evidence.end.tree.id),
                     evidence.reports, evidence.runner_exit)
    start = CLOCK()
    grade(task, fixture, fresh)
    return CLOCK() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--distinct", type=int, default=12, help="distinct runs per board for the headline (at least 3)")
    parser.add_argument("--shared", help="the shared data directory (holding real/)")
    parser.add_argument("--cpu", action="store_true", help="time CPU used, not wall time (steadier on a busy machine)")
    args = parser.parse_args()
    global CLOCK
    if args.cpu:
        CLOCK = time.process_time
    real = shared_dir(args.shared)

    def ms(seconds: float) -> str:
        return f"{seconds * 1000:8.1f}"

    clock = "CPU" if args.cpu else "wall"
    distinct = max(3, args.distinct)
    print(f"headline: {distinct - 1} distinct runs per board graded in one process, caches kept (ms, {clock}; median)")
    print(f"{'board':<31}{'distinct':>10}{'sexpdata':>10}{'ratio':>8}{'target':>8}")
    with tempfile.TemporaryDirectory(prefix="cbledger-bench-grading-") as tmp:
        for board_id in BOARDS:
            task, fixture, box, _lines, others = prepare(Path(tmp), real, board_id, distinct)
            fast = statistics.median(distinct_runs(task, fixture, others, fast=True))
            stock = statistics.median(distinct_runs(task, fixture, others, fast=False))
            print(f"{board_id:<31}{ms(fast):>10}{ms(stock):>10}{stock / fast:>7.2f}x{'met' if fast < 0.050 else 'missed':>8}")
    print()
    print(f"grading one run on a real board, {args.runs} runs each: grade median and best, the rest best-of-{args.runs} (ms, {clock})")
    header = (
        f"{'board':<31}{'sch lines':>10}{'grade':>8}{'best':>8}{'grade/s':>9}{'warm':>8}"
        f"{'snapshot':>10}{'end-state':>10}{'(parse)':>9}{'transcript':>11}{'diff':>8}{'stored':>9}{'st.warm':>9}"
    )
    print(header)
    with tempfile.TemporaryDirectory(prefix="cbledger-bench-grading-") as tmp:
        for board_id in BOARDS:
            task, fixture, box, lines, _ = prepare(Path(tmp), real, board_id)
            whole_once(task, fixture, box, cold=True)  # warm up imports and the filesystem cache
            cold = [whole_once(task, fixture, box, cold=True) for _ in range(args.runs)]
            warm = [whole_once(task, fixture, box, cold=False)[0] for _ in range(args.runs)]
            splits = [split_once(task, fixture, box) for _ in range(args.runs)]
            parse = min(parse_once(fixture) for _ in range(args.runs))
            stored = stored_evidence(box)
            stored_cold = [stored_once(task, fixture, stored, cold=True) for _ in range(args.runs)]
            stored_warm = [stored_once(task, fixture, stored, cold=False) for _ in range(args.runs)]
            grade_s = statistics.median(c[0] for c in cold)
            best = {k: min(s[k] for s in splits) for k in splits[0]}
            print(
                f"{board_id:<31}{lines:>10}{ms(grade_s):>8}{ms(min(c[0] for c in cold)):>8}{1 / grade_s:>9.1f}"
                f"{ms(min(warm)):>8}{ms(best['snapshot']):>10}{ms(best['end-state']):>10}{ms(parse):>9}"
                f"{ms(best['transcript']):>11}{ms(best['diff']):>8}"
                f"{ms(statistics.median(stored_cold)):>9}{ms(statistics.median(stored_warm)):>9}"
            )
            verdict, partial = cold[0][1], cold[0][2]
            print(f"{'':<31}{len(task.assertions)} assertions; verdict {verdict}, partial credit {partial}")
    print(
        "grade: snapshot + every check, parse cache cleared (grade/s from the median); warm: the parse\n"
        "cache hit a re-grade sees; end-state includes (parse), the schematic parse + connectivity;\n"
        "diff includes no_secret's scan of every written file; stored / st.warm: the median grade of the\n"
        "same run from git objects already written (as replay --verify and re-scoring grade), caches\n"
        "cleared / kept (the in-process target: under 40 ms)"
    )


if __name__ == "__main__":
    main()
