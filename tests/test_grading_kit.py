"""The grading tests' kit: a small synthetic board, tasks built from assertion lists, real-shaped
sandboxes and copperhead transcripts. Its own tests (at the bottom) pin what the kit promises:
the board's ERC and DRC are clean under kicad-cli, and a fresh sandbox is its baseline.

The board (`demo-board`, built here rather than committed so every grading test shows its own
inputs): R1 (10k) from VCC to SIG, R2 (10k) from SIG to GND, PWR_FLAGs on both rails, a project
file that ignores library resolution and missing footprints (so ERC and DRC are clean under
kicad-cli), an empty board with an outline, docs/BOM.md, docs/PINOUT.md and docs/SPEC.md
that agree with the schematic, a constraint registry, a shell script and a .gitignore.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pygit2

from cbledger.grading.evidence.bundle import LIVE_REPORTS_DIR, from_sandbox
from cbledger.grading.grader import Grade, grade
from cbledger.kicad import oracle
from cbledger.ledger.events import Ablations
from cbledger.runner import sandbox as sandbox_mod
from cbledger.tasks.catalog import Fixture, Task, load_fixture, load_task
from cbledger.tasks.fixtures import summary
from cbledger.tasks.fixtures.hashing import hash_directory

sys.path.insert(0, str(Path(__file__).resolve().parent / "data" / "kicad"))
from sch_writer import GND, PWR_FLAG, VCC, Writer, resistor

FIXTURE_ID = "demo-board"
SCHEMATIC = "hardware/demo.kicad_sch"
BOARD = "hardware/demo.kicad_pcb"
PROJECT = "hardware/demo.kicad_pro"
STAMP = "2026-07-22T18-47-18-987Z"
TRANSCRIPT = f".copperhead/runs/{STAMP}/transcript.jsonl"
R_FOOTPRINT = "Resistor_SMD:R_0603_1608Metric"


# --------------------------------------------------------------------------- the board


def demo_schematic(
    *,
    sig: str = "SIG",
    r2_value: str = "10k",
    add_r3: bool = False,
    pwr_flags: bool = True,
) -> str:
    """The demo schematic, or a variant of it as an agent might leave it."""
    w = Writer("demo", "demo")
    r1 = resistor(w, "R1", 50.8, 50.8, value="10k", footprint=R_FOOTPRINT)
    r2 = resistor(w, "R2", 50.8, 76.2, value=r2_value, footprint=R_FOOTPRINT)
    w.symbol(VCC, "#PWR01", 50.8, 38.1, value="VCC")
    w.wire(r1.p1, (50.8, 38.1))
    w.wire(r1.p2, r2.p1)
    w.label(sig, 50.8, 63.5)
    w.symbol(GND, "#PWR02", 50.8, 88.9)
    w.wire(r2.p2, (50.8, 88.9))
    if pwr_flags:
        w.symbol(PWR_FLAG, "#FLG01", 40.64, 38.1)
        w.wire((40.64, 38.1), (50.8, 38.1))
        w.symbol(PWR_FLAG, "#FLG02", 40.64, 88.9, angle=180)
        w.wire((40.64, 88.9), (50.8, 88.9))
    if add_r3:
        r3 = resistor(w, "R3", 76.2, 50.8, value="4k7", footprint=R_FOOTPRINT)
        w.path(r3.p1, (76.2, 38.1), (50.8, 38.1))
        w.path(r3.p2, (76.2, 63.5), (50.8, 63.5))
    return w.text()


PROJECT_FILE = json.dumps(
    {
        "board": {"design_settings": {"rule_severities": {"missing_footprint": "ignore"}}},
        "erc": {"rule_severities": {"lib_symbol_issues": "ignore", "footprint_link_issues": "ignore"}},
        "meta": {"filename": "demo.kicad_pro", "version": 3},
    },
    indent=2,
) + "\n"

BOARD_FILE = """(kicad_pcb
\t(version 20241229)
\t(generator "pcbnew")
\t(generator_version "9.0")
\t(general
\t\t(thickness 1.6)
\t\t(legacy_teardrops no)
\t)
\t(paper "A4")
\t(layers
\t\t(0 "F.Cu" signal)
\t\t(2 "B.Cu" signal)
\t\t(25 "Edge.Cuts" user)
\t)
\t(setup
\t\t(pad_to_mask_clearance 0)
\t)
\t(net 0 "")
\t(gr_rect
\t\t(start 100 100)
\t\t(end 130 120)
\t\t(stroke (width 0.05) (type default))
\t\t(fill no)
\t\t(layer "Edge.Cuts")
\t\t(uuid "7d6b8a2e-1b9c-4c7e-9a55-0f3c1e2d4b01")
\t)
)
"""

BOM = """# BOM

| Refdes | Value | Footprint | Notes |
| --- | --- | --- | --- |
| `R1` | 10k | R_0603_1608Metric | top of the divider |
| R2 | 10k | R_0603_1608Metric | bottom of the divider |
"""

PINOUT = """# PINOUT

| Net | Pins | Purpose |
| --- | --- | --- |
| SIG | R1.2, R2.1 | divider midpoint |
| VCC | R1.1 | supply |
"""

SPEC = """# SPEC

The divider halves VCC. The budget `divider_current_ua` caps the divider current at 200 uA.
Line three.
Line four.
"""

CONSTRAINTS = {
    "divider_current_ua": {
        "max": 200,
        "source": "docs/SPEC.md budget table",
        "affects": ["R1", "R2"],
    }
}


def tree_files() -> dict[str, bytes]:
    return {
        SCHEMATIC: demo_schematic().encode(),
        BOARD: BOARD_FILE.encode(),
        PROJECT: PROJECT_FILE.encode(),
        "docs/BOM.md": BOM.encode(),
        "docs/PINOUT.md": PINOUT.encode(),
        "docs/SPEC.md": SPEC.encode(),
        ".copperhead/constraints.json": (json.dumps(CONSTRAINTS, indent=2) + "\n").encode(),
        "scripts/check.sh": b"#!/bin/sh\necho ok\n",
        ".gitignore": b"build/\n",
        "README.md": b"# demo board\n",
    }


def _report_json(kind: str, violations: list[dict] | None = None, **drc: list[dict]) -> bytes:
    """A kicad-cli 9 report of the real shape, for tests that do not run kicad-cli."""
    head = {
        "$schema": f"https://schemas.kicad.org/{kind}.v1.json",
        "coordinate_units": "mm",
        "date": "2026-01-01T00:00:00+0000",
        "included_severities": ["error", "warning", "exclusion"],
        "kicad_version": "9.0.8",
    }
    if kind == "erc":
        body = {"sheets": [{"path": "/", "uuid_path": "/root", "violations": violations or []}], "source": "demo.kicad_sch"}
    else:
        body = {
            "schematic_parity": drc.get("parity", []),
            "source": "demo.kicad_pcb",
            "unconnected_items": drc.get("unconnected", []),
            "violations": violations or [],
        }
    return (json.dumps({**head, **body}, indent=2) + "\n").encode()


def violation(kind: str, severity: str = "error", description: str = "", excluded: bool | None = None) -> dict:
    v: dict[str, Any] = {"description": description or kind, "items": [], "severity": severity, "type": kind}
    if excluded is not None:
        v["excluded"] = excluded
    return v


def erc_report(*violations: dict) -> bytes:
    return _report_json("erc", list(violations))


def drc_report(*violations: dict, unconnected: list[dict] | None = None, parity: list[dict] | None = None) -> bytes:
    return _report_json("drc", list(violations), unconnected=unconnected or [], parity=parity or [])


def write_fixture(
    root: Path,
    fixture_id: str = FIXTURE_ID,
    files: dict[str, bytes] | None = None,
    erc: bytes | None = None,
    drc: bytes | None = None,
    origin: str = "synthetic",
) -> Fixture:
    """`root/fixtures/<id>/` with tree/, baseline/ and a manifest whose summary matches."""
    d = root / "fixtures" / fixture_id
    tree = d / "tree"
    for rel, data in (files or tree_files()).items():
        p = tree / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
        if rel.endswith(".sh"):
            p.chmod(0o755)
    erc = erc if erc is not None else erc_report()
    drc = drc if drc is not None else drc_report()
    (d / "baseline").mkdir(parents=True, exist_ok=True)
    (d / "baseline" / "erc.json").write_bytes(erc)
    (d / "baseline" / "drc.json").write_bytes(drc)
    manifest = {
        "id": fixture_id,
        "origin": origin,
        "sha256": hash_directory(tree),
        "complexity": "simple",
        "upstream": None
        if origin == "synthetic"
        else {
            "name": "Demo",
            "url": "https://example.com/demo",
            "commit": "0" * 40,
            "retrieved": "2026-01-01",
            "license": "Apache-2.0",
            "licenseFile": "LICENSE",
            "copyright": "Copyright (c) Demo",
            "modifications": "None.",
        },
        "kicad": {"authoredVersion": "9.0", "fileFormatVersion": "20250114", "verifiedWithKicadCli": "9.0.8"},
        "artifacts": {"schematic": SCHEMATIC, "board": BOARD, "project": PROJECT},
        "scale": {"schematicLines": 100, "boardLines": 30, "symbols": 2, "sheets": 1},
        "baseline": {
            "erc": summary.summarize(summary.load_report(erc, "erc.json"), "baseline/erc.json"),
            "drc": summary.summarize(summary.load_report(drc, "drc.json"), "baseline/drc.json"),
        },
    }
    (d / "fixture.json").write_text(json.dumps(manifest, indent=2) + "\n")
    (d / "README.md").write_text(f"# {fixture_id}\n\nA test board: two parts between VCC and GND.\n")
    return load_fixture(d)


def assertion(ident: str, kind: str, args: dict | None = None, weight: float = 1, required: bool = True) -> dict:
    return {"id": ident, "type": kind, "args": args or {}, "weight": weight, "required": required}


def task_manifest(task_id: str, fixture: Fixture, **overrides: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "id": task_id,
        "tier": "simple",
        "mode": "do",
        "fixture": {"path": f"fixtures/{fixture.id}", "sha256": fixture.manifest.sha256},
        "request": {"prompt": "rename net SIG to SENSE"},
        "expectedOutcome": "edit",
        "config": {"budgets": {"divider_current_ua": 200}, "maxTurns": 10},
        "caps": {"turns": 10, "wallClockSec": 600},
        "tags": ["test"],
    }
    doc.update(overrides)
    return doc


def write_task(root: Path, task_id: str, fixture: Fixture, assertions: list[dict], **overrides: Any) -> Task:
    d = root / "tasks" / task_id
    d.mkdir(parents=True, exist_ok=True)
    (d / "task.json").write_text(json.dumps(task_manifest(task_id, fixture, **overrides), indent=2) + "\n")
    (d / "assertions.json").write_text(json.dumps(assertions, indent=2) + "\n")
    (d / "README.md").write_text(f"# {task_id}\n")
    return load_task(d)


# --------------------------------------------------------------------------- sandboxes


@dataclass
class Box:
    """A live sandbox: the repository, its working tree and the baseline commit."""

    repo: pygit2.Repository
    path: Path
    baseline: str
    task: Task
    fixture: Fixture

    def write(self, rel: str, data: bytes | str) -> None:
        p = self.path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data.encode() if isinstance(data, str) else data)

    def read(self, rel: str) -> str:
        return (self.path / rel).read_text()

    def delete(self, rel: str) -> None:
        (self.path / rel).unlink()

    def chmod(self, rel: str, mode: int) -> None:
        os.chmod(self.path / rel, mode)

    def commit(self, message: str = "copperhead: edit\n", when: int = 1_800_000_000, include_runs: bool = False) -> str:
        """Commits every change outside .copperhead/runs/ (ignored files stay out), as copperhead does."""
        index = self.repo.index
        index.read()
        status = self.repo.status()
        for path, flags in sorted(status.items()):
            if (path.startswith(".copperhead/runs/") and not include_runs) or flags & pygit2.enums.FileStatus.IGNORED:
                continue
            if (self.path / path).exists():
                index.add(path)
            else:
                index.remove(path)
        index.write()
        tree = index.write_tree()
        sig = pygit2.Signature("copperhead", "copperhead@example.invalid", when, 0)
        return str(self.repo.create_commit("HEAD", sig, sig, message, tree, [self.repo.head.target]))

    def transcript(self, events: list[dict], stamp: str = STAMP, raw_tail: str = "") -> str:
        rel = f".copperhead/runs/{stamp}/transcript.jsonl"
        lines = [json.dumps(ev, ensure_ascii=False) for ev in events]
        self.write(rel, "\n".join(lines) + "\n" + raw_tail)
        return rel

    def reports(self, erc: bytes | None = None, drc: bytes | None = None, check: bytes | None = None) -> None:
        live = Path(self.repo.path) / LIVE_REPORTS_DIR
        live.mkdir(parents=True, exist_ok=True)
        for name, data in (("erc", erc), ("drc", drc), ("check", check)):
            if data is not None:
                (live / f"{name}.json").write_bytes(data)

    def verify(self) -> None:
        """kicad-cli ERC and DRC of the working tree, where the runner puts them."""
        live = Path(self.repo.path) / LIVE_REPORTS_DIR
        art = self.fixture.manifest.artifacts
        oracle.verify_tree(self.path, art.schematic, art.board, live)

    def grade(self, runner_exit: str | None = None) -> Grade:
        return grade(self.task, self.fixture, from_sandbox(self.path, None, runner_exit))

    def outcome(self, ident: str, runner_exit: str | None = None):
        g = self.grade(runner_exit)
        return next(o for o in g.outcomes if o.id == ident)


def make_box(tmp_path: Path, task: Task, fixture: Fixture, name: str = "sandbox") -> Box:
    path = tmp_path / name
    repo, seed, _config = sandbox_mod.create(path, task, fixture, Ablations())
    baseline = sandbox_mod.commit_setup(repo, seed, "setup\n")
    return Box(repo, path, baseline, task, fixture)


def one_assertion_box(
    tmp_path: Path, kind: str, args: dict | None = None, *, fixture: Fixture | None = None, **task: Any
) -> Box:
    """A sandbox graded by a single required assertion with id `a`."""
    fixture = fixture or write_fixture(tmp_path / "project")
    t = write_task(tmp_path / "project", f"t-{kind.replace('_', '-')}", fixture, [assertion("a", kind, args)], **task)
    return make_box(tmp_path, t, fixture)


def check(box: Box, runner_exit: str | None = None) -> tuple[str, str]:
    o = box.outcome("a", runner_exit)
    return o.status, o.detail


# --------------------------------------------------------------------------- transcripts


def ev(kind: str, data: dict | None = None, ts: str = "2026-07-22T18:47:19.000Z") -> dict:
    return {"ts": ts, "type": kind, "data": data or {}}


def run_start(prompt: str = "rename net SIG to SENSE", budgets: dict | None = None) -> dict:
    return ev(
        "run-start",
        {
            "request": prompt,
            "model": "compat:test-model",
            "provider": "compat",
            "modelSource": "flag",
            "runId": STAMP,
            "startedAt": "2026-07-22T18:47:18.987Z",
            "command": "do",
            "interactive": False,
            "stage": None,
            "brief": None,
            "versions": {"copperhead": "0.9.0", "installPath": "cli", "kicadCli": "9.0.8", "node": "v20.0.0", "platform": "linux"},
            "config": {
                "schematic": SCHEMATIC,
                "board": BOARD,
                "docs": "docs",
                "maxTurns": 10,
                "maxRepairCycles": 3,
                "budgets": budgets if budgets is not None else {"divider_current_ua": 200},
            },
            "git": {"commit": "0" * 40, "branch": "main", "dirty": False, "uncommittedFiles": [], "preCommitHookInstalled": False},
            "openConstraints": [],
            "priorRuns": [],
        },
    )


def assistant(text: str | None = None, calls: list[tuple[str, dict]] | None = None) -> dict:
    return ev(
        "assistant",
        {"text": text, "toolCalls": [{"id": f"c{i}", "name": n, "args": a} for i, (n, a) in enumerate(calls or [], 1)]},
    )


def tool(name: str, args: dict, result: str) -> dict:
    return ev("tool", {"name": name, "args": args, "result": result})


def run_end(exit_path: str, turns: int = 3) -> dict:
    return ev(
        "run-end",
        {
            "exitPath": exit_path,
            "turnsUsed": turns,
            "maxTurns": 10,
            "repairCyclesUsed": 0,
            "maxRepairCycles": 3,
            "tokensIn": 100,
            "tokensOut": 50,
            "perTurn": [{"turn": i, "in": 10, "out": 5} for i in range(1, turns + 1)],
            "durationMs": 1234,
        },
    )


def refusal(summary_text: str) -> list[dict]:
    return [
        run_start(),
        assistant("I cannot.", [("finish", {"outcome": "refuse", "summary": summary_text})]),
        tool("finish", {"outcome": "refuse", "summary": summary_text}, "run will end: refused"),
        ev("run-refused", {"summary": summary_text}),
        run_end("refused"),
    ]


def done(commit: str = "0" * 40, files: list[str] | None = None) -> list[dict]:
    return [
        run_start(),
        assistant(None, [("edit_file", {"path": SCHEMATIC})]),
        tool("edit_file", {"path": SCHEMATIC}, f"edited {SCHEMATIC}"),
        assistant("Done.", [("finish", {"outcome": "done", "summary": "renamed"})]),
        tool("finish", {"outcome": "done", "summary": "renamed"}, "ok"),
        ev("run-committed", {"commit": commit, "files": files or [SCHEMATIC]}),
        run_end("done"),
    ]


def copy_into(src: Path, dest: Path) -> None:
    """Copies a directory's files (read-only sources made writable)."""
    shutil.copytree(src, dest, dirs_exist_ok=True)
    for dirpath, _dirs, files in os.walk(dest):
        os.chmod(dirpath, 0o755)
        for name in files:
            os.chmod(Path(dirpath) / name, 0o644)


Mutator = Callable[[Box], None]


def real_fixture(root: Path, shared_real: Path, repo_root: Path, fixture_id: str) -> Fixture:
    """A real board under `root/fixtures/`: the shipped manifest, the tree and baseline
    materialized from the shared data (in the test's temporary directory, never the repo)."""
    from cbledger.tasks.fixtures.materialize import from_directory

    d = root / "fixtures" / fixture_id
    d.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(repo_root / "fixtures" / fixture_id / "fixture.json", d / "fixture.json")
    result = from_directory(d, shared_real / "fixtures" / fixture_id)
    assert not result.baseline_problems and not result.baseline_missing
    return load_fixture(d)


# --------------------------------------------------------------------------- the kit's own tests


def test_a_fresh_sandbox_is_its_baseline(tmp_path):
    box = one_assertion_box(tmp_path, "rollback_byte_identical")
    assert box.grade().verdict == "pass"
    assert box.repo.references["refs/cbledger/baseline"].target == box.repo.head.target


def test_the_demo_board_is_clean_under_kicad_cli(tmp_path, kicad_cli):
    box = one_assertion_box(tmp_path, "erc_clean")
    box.verify()
    assert check(box) == ("pass", "ERC report has no violations")
    box2 = one_assertion_box(tmp_path / "drc", "drc_clean")
    box2.verify()
    assert check(box2) == ("pass", "DRC report has no violations")
