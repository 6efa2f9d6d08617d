"""Schematic parse + connectivity against `kicad-cli sch export netlist`, board by board.

    python bench/kicad.py [--runs N] [--shared DIR]

For every real board under <shared>/real/fixtures (default: ../shared beside the repository, or
CBLEDGER_SHARED) and for a generated 20,000+ line schematic, prints the best-of-N time of:
a cold parse (file read, sexpdata, model), connectivity, their sum, a warm load (the digest
cache hit that repeated grading sees), and kicad-cli's netlist export of the same file, with the
ratio kicad-cli / ours. kicad-cli runs on a temporary copy so the shared data stays untouched.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "data" / "kicad"))

from cbledger.kicad import compute_nets, load_schematic
from cbledger.kicad.hierarchy import find_root_schematics
from cbledger.kicad.sexpr import PARSE_CACHE


def best(runs: int, fn) -> tuple[float, object]:
    times = []
    result = None
    for _ in range(runs):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return min(times), result


def generated_schematic(folder: Path, parts: int = 400) -> Path:
    """A flat sheet of resistor ladders with labels and power, well past 20,000 lines."""
    import sch_writer

    w = sch_writer.Writer("bench", "bench")
    for n in range(parts):
        x, y = 25.4 + (n % 20) * 12.7, 25.4 + (n // 20) * 15.24
        r = sch_writer.resistor(w, f"R{n + 1}", x, y)
        w.wire(r.p1, (x, y - 6.35))
        w.label(f"SIG{n % 37}", x, y - 6.35)
        if n % 5 == 0:
            w.symbol(sch_writer.GND, f"#PWR{n + 1:03d}", x, y + 6.35)
            w.wire(r.p2, (x, y + 6.35))
    path = folder / "generated.kicad_sch"
    path.write_text(w.text(), encoding="utf-8")
    return path


def measure(name: str, schematic: Path, runs: int, kicad_cli: str | None, work: Path) -> dict:
    lines = schematic.read_text(encoding="utf-8").count("\n")

    def cold_load():
        PARSE_CACHE.clear()
        return load_schematic(schematic)

    parse_s, design = best(runs, cold_load)
    nets_s, netlist = best(runs, lambda: compute_nets(design))
    warm_s, _ = best(runs, lambda: load_schematic(schematic))
    row = {"board": name, "lines": lines, "nets": len(netlist.nets), "parse": parse_s, "nets_s": nets_s, "ours": parse_s + nets_s, "warm": warm_s}
    if kicad_cli:
        copy = work / name
        shutil.copytree(schematic.parent, copy, dirs_exist_ok=True)
        target = copy / schematic.name
        out = work / f"{name}.net"

        def export():
            subprocess.run(
                [kicad_cli, "sch", "export", "netlist", "--format", "kicadsexpr", "-o", str(out), str(target)],
                check=True,
                capture_output=True,
            )

        row["kicad"], _ = best(max(1, min(runs, 3)), export)
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--shared", type=Path, default=Path(os.environ.get("CBLEDGER_SHARED", REPO.parent / "shared")))
    args = parser.parse_args()
    kicad_cli = shutil.which("kicad-cli")
    boards = sorted(p for p in (args.shared / "real" / "fixtures").glob("*") if (p / "tree").is_dir())
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for board in boards:
            roots = find_root_schematics(board / "tree")
            if roots:
                rows.append(measure(board.name, roots[0], args.runs, kicad_cli, work))
        (work / "gen-src").mkdir()
        generated = generated_schematic(work / "gen-src")
        rows.append(measure("generated-400-parts", generated, args.runs, kicad_cli, work))

    print(f"best of {args.runs} runs; kicad-cli: {kicad_cli or 'not installed'}")
    header = f"{'board':32} {'lines':>6} {'nets':>5} {'parse ms':>9} {'nets ms':>8} {'ours ms':>8} {'warm ms':>8} {'kicad ms':>9} {'ratio':>7}"
    print(header)
    print("-" * len(header))
    slower = []
    for r in rows:
        kicad = r.get("kicad")
        ratio = f"{kicad / r['ours']:.1f}x" if kicad else "-"
        kicad_ms = f"{kicad * 1000:9.1f}" if kicad else f"{'-':>9}"
        print(
            f"{r['board']:32} {r['lines']:6d} {r['nets']:5d} {r['parse'] * 1000:9.1f} {r['nets_s'] * 1000:8.1f} "
            f"{r['ours'] * 1000:8.1f} {r['warm'] * 1000:8.2f} {kicad_ms} {ratio:>7}"
        )
        if kicad and kicad < r["ours"]:
            slower.append(r["board"])
    if slower:
        print("slower than kicad-cli on: " + ", ".join(slower))
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
