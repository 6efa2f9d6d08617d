"""A self-contained copperbench project for the runner tests, built in a temporary directory.

The runner reads everything from a project root (`fixtures/`, `tasks/`, `suites/`, the ledger
under `results/`), so the tests build one around the real microphone board instead of leaning
on whatever suite the repository bundles at the time. The board comes from the shared real data
(`tests/conftest.py::shared_real`) and is copied, never committed.

The two reference tasks (rename a net, refuse a pullup the current budget forbids) are kept with
their assertions as published, but without the `init` setup command: `init` needs the
copperhead CLI, which a test machine does not have. What `init` would have provided is put in
the fixture tree instead — `docs/PINOUT.md` for the doc assertions and
`.copperhead/constraints.json` for `constraint_registered` — so the assertions grade exactly
what they were written to grade. Gold solutions are real edits that truly pass.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

from cbledger.tasks.fixtures.hashing import hash_directory

REPO = Path(__file__).resolve().parent.parent
STANDIN_CLI = REPO / "tests" / "data" / "copperhead-standin" / "cli.js"

MIC_BOARD = "antmicro-microphone-board"
DMX_BOARD = "openlighting-dmxsun-baseboard"
MIC_FIXTURE = "microphone-board"
MIC_SCH = "hardware/microphone-board.kicad_sch"
MIC_PCB = "hardware/microphone-board.kicad_pcb"

RENAME_TASK = "rename-data-net"
REFUSAL_TASK = "refuse-select-pullup"

PINOUT = """# Pinout

Signals on the FFC connector J1.

| Net | Direction | Notes |
| --- | --- | --- |
| CLK | in | PDM clock from the host |
| DATA | out | PDM bitstream from MK1 |
| SELECT | in | Channel select, strapped |
"""

CONSTRAINTS = {
    "standby_current_ua": {
        "max": 20,
        "source": "docs/SPEC.md, Budgets: standby current of the whole board",
        "affects": ["R1", "R2", "R3"],
    },
    "vdd_volts": {"value": 1.8, "source": "docs/SPEC.md, Budgets: VDD rail", "affects": ["MK1"]},
}

REFUSAL_SUMMARY = (
    "Refused: a 10k pullup from SELECT to VDD draws 1.8 V / 10 kohm = 180 uA whenever SELECT is "
    "low, nine times the recorded standby_current_ua budget of 20 uA. Staying inside it would need "
    "more than 90 kohm, too weak to hold the line. Nothing was changed."
)


def standin_keys() -> dict[str, str]:
    """Keys of the native routes' shapes for a stand-in harness, which reads none: assembled at
    run time, so no file holds a credential-shaped string."""
    return {"OPENAI_API_KEY": "sk-" + "standinkey" * 3, "ANTHROPIC_API_KEY": "sk-ant-" + "standinkey" * 3}


def real_board(shared_real: Path, board: str) -> Path:
    return shared_real / "fixtures" / board


def _write_json(path: Path, value) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value, indent=2) + "\n")


def _summary(report: Path, rel: str) -> dict:
    """The manifest's baseline entry for a kicad-cli report, counted as `fixture baseline` does."""
    from cbledger.tasks.fixtures.summary import load_report, summarize

    return summarize(load_report(report.read_bytes(), str(report)), rel)


def add_board_fixture(
    root: Path,
    shared_real: Path,
    board: str,
    fixture_id: str,
    *,
    schematic: str,
    board_file: str | None,
    extra_files: dict[str, str | bytes] | None = None,
) -> str:
    """Copies a real board into `fixtures/<fixture_id>/` (plus `extra_files` in its tree) and
    writes a manifest whose sha256 is the tree as copied. Returns the tree hash."""
    src = real_board(shared_real, board)
    dest = root / "fixtures" / fixture_id
    shutil.copytree(src / "tree", dest / "tree")
    shutil.copytree(src / "baseline", dest / "baseline")
    for rel, content in (extra_files or {}).items():
        p = dest / "tree" / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(content.encode() if isinstance(content, str) else content)
    sha = hash_directory(dest / "tree")
    baseline: dict = {
        "erc": _summary(dest / "baseline" / "erc.json", "baseline/erc.json"),
        "note": "kicad-cli 9.0.8 reports of the unmodified upstream tree; the added docs do not change them.",
    }
    if board_file and (dest / "baseline" / "drc.json").is_file():
        baseline["drc"] = _summary(dest / "baseline" / "drc.json", "baseline/drc.json")
    sch_lines = (dest / "tree" / schematic).read_text(errors="replace").count("\n")
    _write_json(
        dest / "fixture.json",
        {
            "id": fixture_id,
            "origin": "upstream",
            "sha256": sha,
            "complexity": "simple",
            "upstream": {
                "name": board,
                "url": "https://example.invalid/upstream",
                "commit": "0" * 40,
                "retrieved": "2026-01-01",
                "license": "Apache-2.0",
                "licenseFile": "LICENSE",
                "copyright": "the upstream authors",
                "modifications": "test copy: docs and constraints added beside the design files",
            },
            "kicad": {"authoredVersion": "8.x", "fileFormatVersion": "20231120", "verifiedWithKicadCli": "9.0.8"},
            "artifacts": {"schematic": schematic, "board": board_file},
            "scale": {"schematicLines": max(sch_lines, 1), "symbols": 1, "sheets": 1},
            "baseline": baseline,
        },
    )
    (dest / "README.md").write_text(f"# {fixture_id}\n\nA test copy of {board}, with docs and constraints beside its design files.\n")
    return sha


def _jsonl(events: list[dict]) -> str:
    return "".join(json.dumps(ev) + "\n" for ev in events)


def run_end(exit_path: str, turns: int, *, tokens_in: int = 0, tokens_out: int = 0, max_turns: int = 40) -> dict:
    return {
        "type": "run-end",
        "data": {
            "exitPath": exit_path,
            "turnsUsed": turns,
            "maxTurns": max_turns,
            "repairCyclesUsed": 0,
            "maxRepairCycles": 5,
            "tokensIn": tokens_in,
            "tokensOut": tokens_out,
            "perTurn": [{"turn": t, "in": tokens_in // turns, "out": tokens_out // turns} for t in range(1, turns + 1)],
            "durationMs": 4200,
        },
    }


def rename_transcript(old: str, new: str, schematic: str) -> list[dict]:
    """A do-run that renames a net and commits, in copperhead's event shape (the gold agent fills
    in run-start, timestamps and the commit)."""
    return [
        {"type": "run-start", "data": {}},
        {
            "type": "assistant",
            "data": {
                "text": f"Renaming the {old} labels.",
                "toolCalls": [{"id": "t1", "name": "search", "args": {"pattern": f'(label "{old}"'}}],
            },
        },
        {"type": "tool", "data": {"name": "search", "args": {"pattern": f'(label "{old}"'}, "result": f"{schematic}: 2 matches"}},
        {
            "type": "assistant",
            "data": {
                "text": "Both labels renamed; the pinout table follows.",
                "toolCalls": [{"id": "t2", "name": "edit_file", "args": {"path": schematic}}],
            },
        },
        {"type": "tool", "data": {"name": "edit_file", "args": {"path": schematic}, "result": "ok"}},
        {"type": "run-committed", "data": {}},
        run_end("done", 3, tokens_in=12000, tokens_out=900),
    ]


def refusal_transcript(summary: str) -> list[dict]:
    return [
        {"type": "run-start", "data": {}},
        {
            "type": "assistant",
            "data": {
                "text": "The request cannot fit the recorded budget; refusing with the arithmetic.",
                "toolCalls": [{"id": "t1", "name": "finish", "args": {"outcome": "refuse", "summary": summary}}],
            },
        },
        {
            "type": "tool",
            "data": {"name": "finish", "args": {"outcome": "refuse", "summary": summary}, "result": "refusal recorded; the working tree will be rolled back"},
        },
        {"type": "run-refused", "data": {"summary": summary}},
        run_end("refused", 2, tokens_in=8000, tokens_out=400),
    ]


def add_task(
    root: Path,
    task_id: str,
    *,
    fixture_id: str,
    prompt: str,
    expected: str,
    assertions: list[dict],
    budgets: dict | None = None,
    gold_files: dict[str, str | bytes] | None = None,
    gold_transcript: list[dict] | None = None,
    repeats: int = 1,
    wall_clock_sec: int = 600,
    tier: str = "simple",
    setup: list[str] | None = None,
) -> None:
    fixture_sha = json.loads((root / "fixtures" / fixture_id / "fixture.json").read_text())["sha256"]
    d = root / "tasks" / task_id
    config: dict = {"maxTurns": 40, "maxRepairCycles": 5}
    if budgets:
        config = {"budgets": budgets, **config}
    _write_json(
        d / "task.json",
        {
            "id": task_id,
            "tier": tier,
            "mode": "do",
            "fixture": {"path": f"fixtures/{fixture_id}", "sha256": fixture_sha},
            "request": {"prompt": prompt},
            "expectedOutcome": expected,
            "config": config,
            **({"setup": {"commands": setup}} if setup else {}),
            "caps": {"turns": 40, "wallClockSec": wall_clock_sec},
            "repeats": repeats,
            "tags": ["runner-test"],
        },
    )
    _write_json(d / "assertions.json", assertions)
    (d / "README.md").write_text(f"# {task_id}\n\nA runner-test task: {prompt!r}, expected outcome {expected}.\n")
    for rel, content in (gold_files or {}).items():
        p = d / "gold" / "files" / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(content.encode() if isinstance(content, str) else content)
    if gold_transcript is not None:
        (d / "gold").mkdir(parents=True, exist_ok=True)
        (d / "gold" / "transcript.jsonl").write_text(_jsonl(gold_transcript))


def reference_assertions(shared_real: Path, task: str) -> list[dict]:
    return json.loads((shared_real / "reference-records" / "tasks" / task / "assertions.b4bbda3d.json").read_text())


def reference_prompt(shared_real: Path, task: str) -> str:
    return json.loads((shared_real / "reference-records" / "tasks" / task / "task.b4bbda3d.json").read_text())["request"]["prompt"]


def reference_budgets(shared_real: Path, task: str) -> dict:
    return json.loads((shared_real / "reference-records" / "tasks" / task / "task.b4bbda3d.json").read_text())["config"].get("budgets", {})


def renamed_schematic(shared_real: Path, old: str = "DATA", new: str = "PDM_DATA") -> bytes:
    """The microphone schematic with both net labels renamed (the MK1 pin name, also `DATA`,
    is left alone: renaming it would corrupt the symbol)."""
    text = (real_board(shared_real, MIC_BOARD) / "tree" / MIC_SCH).read_bytes()
    before = f'(label "{old}"'.encode()
    assert text.count(before) == 2, "the microphone schematic no longer has two DATA labels"
    return text.replace(before, f'(label "{new}"'.encode())


@dataclass
class Project:
    root: Path
    shared_real: Path
    sandboxes: Path
    fixture_sha: str
    tasks: list[str] = field(default_factory=list)

    @property
    def ledger(self) -> Path:
        return self.root / "results" / "ledger" / "events.jsonl"

    @property
    def runs_dir(self) -> Path:
        return self.root / "results" / "runs"

    def cli(self, *args, env: dict[str, str] | None = None):
        """`cbledger ARGS --root <project>` in-process (see tests/factories.py::run_cli)."""
        from tests.factories import run_cli

        return run_cli([*args, "--root", self.root], env=env)

    def run(self, *args, env: dict[str, str] | None = None):
        """`cbledger run ARGS`, the sandboxes kept: a sandboxed stand-in records its calls in its
        own sandbox (see `read_record`). A stand-in's run on a keyed route gets a key of the
        route's shape that no provider is asked about (the preflight requires one)."""
        keep = () if "--keep-sandboxes" in args or "--dry-run" in args else ("--keep-sandboxes",)
        keyed = () if "--session" in args or "copperhead" not in args else ("--no-key-check",)
        env = {**standin_keys(), **(env or {})} if keyed else env
        return self.cli("run", *args, *keep, *keyed, "--sandbox-root", self.sandboxes, env=env)

    def bump(self, reason: str = "initial suite"):
        result = self.cli("suite", "bump", "--reason", reason, "--skip-trial")
        assert result.exit_code == 0, result.output
        return result

    def ledger_bytes(self) -> bytes:
        return self.ledger.read_bytes()

    def bundles(self) -> list[Path]:
        return sorted(self.runs_dir.glob("*.bundle")) if self.runs_dir.is_dir() else []

    def staged(self) -> list[Path]:
        return sorted(self.runs_dir.glob(".*.tmp")) if self.runs_dir.is_dir() else []

    def events(self, type_: str | None = None) -> list:
        from cbledger.ledger.store import LedgerStore

        return [s.event for s in LedgerStore(self.ledger).read(types={type_} if type_ else None)]

    def runs(self) -> list:
        return [e.body for e in self.events("run.recorded")]

    def grades(self) -> list:
        return [e.body for e in self.events("grade.recorded")]

    def write_suite(self, name: str, tasks: list[str]) -> None:
        _write_json(self.root / "suites" / f"{name}.json", {"name": name, "tasks": tasks})

    def add_standin_task(
        self, task_id: str, *, prompt: str, wall_clock_sec: int = 120, expected: str = "edit", setup: list[str] | None = None
    ) -> None:
        """A task the copperhead stand-in acts on (see tests/data/copperhead-standin/cli.js):
        the rename task's assertions, a prompt that selects the stand-in's behaviour."""
        add_task(
            self.root,
            task_id,
            fixture_id=MIC_FIXTURE,
            prompt=prompt,
            expected=expected,
            assertions=reference_assertions(self.shared_real, "do-rename-net"),
            budgets=reference_budgets(self.shared_real, "do-budget-refusal-pullup"),
            wall_clock_sec=wall_clock_sec,
            setup=setup,
        )
        self.tasks.append(task_id)


def build_project(
    tmp_path: Path,
    shared_real: Path,
    *,
    extra: list[str] | None = None,
    bump: bool = True,
    suites: dict[str, list[str]] | None = None,
) -> Project:
    """The microphone board, the two reference tasks with gold solutions, `suites/smoke.json`, an
    initialised ledger and (by default) the initial suite bump. `extra` tasks are added before
    the bump with `Project.add_standin_task`-style manifests, as (id, prompt, wall-clock cap) or
    (id, prompt, wall-clock cap, setup commands)."""
    root = tmp_path / "project"
    root.mkdir()
    sha = add_board_fixture(
        root,
        shared_real,
        MIC_BOARD,
        MIC_FIXTURE,
        schematic=MIC_SCH,
        board_file=MIC_PCB,
        extra_files={"docs/PINOUT.md": PINOUT, ".copperhead/constraints.json": json.dumps(CONSTRAINTS, indent=2) + "\n"},
    )
    add_task(
        root,
        RENAME_TASK,
        fixture_id=MIC_FIXTURE,
        prompt=reference_prompt(shared_real, "do-rename-net"),
        expected="edit",
        assertions=reference_assertions(shared_real, "do-rename-net"),
        gold_files={MIC_SCH: renamed_schematic(shared_real), "docs/PINOUT.md": PINOUT.replace("| DATA |", "| PDM_DATA |")},
        gold_transcript=rename_transcript("DATA", "PDM_DATA", MIC_SCH),
    )
    add_task(
        root,
        REFUSAL_TASK,
        fixture_id=MIC_FIXTURE,
        prompt=reference_prompt(shared_real, "do-budget-refusal-pullup"),
        expected="refusal",
        assertions=reference_assertions(shared_real, "do-budget-refusal-pullup"),
        budgets=reference_budgets(shared_real, "do-budget-refusal-pullup"),
        gold_transcript=refusal_transcript(REFUSAL_SUMMARY),
        tier="medium",
    )
    project = Project(root, shared_real, tmp_path / "sandboxes", sha, [RENAME_TASK, REFUSAL_TASK])
    for task_id, prompt, cap, *setup in extra or []:
        project.add_standin_task(task_id, prompt=prompt, wall_clock_sec=cap, setup=setup[0] if setup else None)
    project.write_suite("smoke", [RENAME_TASK, REFUSAL_TASK])
    for name, tasks in (suites or {}).items():
        project.write_suite(name, tasks)
    result = project.cli("init")
    assert result.exit_code == 0, result.output
    if bump:
        project.bump()
    return project


def standin(tmp_path: Path, **config) -> tuple[Path, Path]:
    """A private copy of the copperhead stand-in CLI with its `standin.json` beside it.
    Returns (cli.js, the file it records its invocations in)."""
    d = tmp_path / "copperhead-standin"
    d.mkdir(exist_ok=True)
    cli = d / "cli.js"
    shutil.copyfile(STANDIN_CLI, cli)
    record = tmp_path / "standin-calls.jsonl"
    _write_json(d / "standin.json", {"record": str(record), **config})
    # copperhead's own package.json beside the CLI, as an install or checkout has it: the
    # runner stamps the package's version from it
    _write_json(d / "package.json", {"name": "copperhead", "version": config.get("version", "0.9.0-standin")})
    return cli, record


def read_record(record: Path) -> list[dict]:
    """The stand-in's invocations in the order they happened: from `record` (unsandboxed runs)
    and from the kept sandboxes beside it (`--keep-sandboxes`: a sandboxed stand-in can write
    only inside its own sandbox)."""
    files = [record, *sorted((record.parent / "sandboxes").glob("*/.git/standin-calls.jsonl"))]
    calls = [json.loads(line) for f in files if f.is_file() for line in f.read_text().splitlines() if line.strip()]
    return sorted(calls, key=lambda c: c.get("at", 0))


def lingering(marker: str, within: float = 10.0) -> list[int]:
    """`processes_with(marker)` once it is empty, or after `within` seconds. A sandbox killed with
    its driver takes its processes down as the kernel tears its pid namespace down, after the
    driver has waited for the sandbox itself: on a loaded machine a check made at once found them
    still going."""
    deadline = time.monotonic() + within
    while (found := processes_with(marker)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return found


def processes_with(marker: str) -> list[int]:
    """Host pids of live processes whose command line holds `marker` as one argument."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            args = cmdline.read_bytes().split(b"\0")
        except OSError:
            continue
        if marker.encode() in args and not process_gone(int(cmdline.parent.name)):
            found.append(int(cmdline.parent.name))
    return found


def process_gone(pid: int) -> bool:
    """True when `pid` no longer runs (a zombie awaiting its reaper counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    stat = Path(f"/proc/{pid}/stat")
    try:
        return stat.read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True
