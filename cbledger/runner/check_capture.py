"""`copperhead check` on a run's end state, captured once as evidence (`check.json`).

The standard's `check_clean` passes when a full `copperhead check` over the sandbox exited 0, and
grading runs no tools: so the runner runs the check itself, right after the end state is
captured and beside kicad-cli's reports, and every later grade (the live one, `replay --verify`,
`rescore`) reads the same captured file. It runs only for a task that needs it (a `check_clean`
assertion, or a `check`-mode task): the check spends a kicad-cli ERC and DRC of its own, and a
`check.json` no assertion reads would be evidence of nothing.

The check is copperhead's own, LLM-free and network-free (`src/commands/check.ts`: ERC, DRC,
doc drift, `openspec validate` when `openspec/config.yaml` exists, forbidden-pin constraints),
run by the same CLI as the setup and the agent, confined like them with no network at all and
no credential in its environment. It reads `.copperhead/config.json` as the run left it.
"""

from __future__ import annotations

import json
from pathlib import Path

from cbledger.runner import isolation
from cbledger.runner.agents.copperhead import CopperheadCli, basic_environment
from cbledger.tasks.catalog import Task

#: what `check.json` names as the command, and what the CLI is given after `--repo <sandbox>`
COMMAND = ("--json", "check")
#: the check runs a kicad-cli ERC and DRC: the same cap as a setup command
CAP_SEC = 300
#: stdout and stderr kept in `check.json` beyond this are cut (the exit code is what grades)
OUTPUT_LIMIT = 256 * 1024


def needed(task: Task) -> bool:
    """Whether the run's end state must be checked: a `check`-mode task, or a `check_clean`."""
    return task.manifest.mode == "check" or any(a.type == "check_clean" for a in task.assertions)


def _text(data: bytes) -> tuple[str, bool]:
    cut = len(data) > OUTPUT_LIMIT
    return data[:OUTPUT_LIMIT].decode("utf-8", "replace"), cut


def result(exit_code: int | None, stdout: bytes, stderr: bytes, killed: str | None = None, skipped: str | None = None) -> dict:
    """`check.json` as `check_clean` reads it: `{command, exitCode, output?, stderr?, ...}`;
    `exitCode` is null when the check did not run to an end (killed, or no CLI to run it)."""
    out: dict = {"command": "copperhead " + " ".join(COMMAND), "exitCode": exit_code}
    for key, data in (("output", stdout), ("stderr", stderr)):
        if data:
            text, cut = _text(data)
            out[key] = text
            if cut:
                out[f"{key}Truncated"] = True
    if killed:
        out["killed"] = killed
    if skipped:
        out["skipped"] = skipped
    return out


def capture(cli: CopperheadCli | None, workdir: Path, out_dir: Path, confinement: isolation.Confinement) -> Path:
    """Runs the check over `workdir` and writes `out_dir/check.json`. Without a CLI the file
    still says so (exitCode null, `skipped`), so the grade names the reason instead of guessing."""
    out_dir.mkdir(parents=True, exist_ok=True)
    if cli is None:
        doc = result(None, b"", b"", skipped="copperhead CLI not available (set --copperhead-cli or $COPPERHEAD_CLI)")
    else:
        job = cli.job(["--repo", str(workdir), *COMMAND], workdir, basic_environment(), CAP_SEC, confinement)
        outcome = isolation.run(job, confinement)
        code = None if outcome.killed else outcome.exit_code
        doc = result(code, outcome.stdout, outcome.stderr, killed=outcome.killed)
    path = out_dir / "check.json"
    path.write_text(json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")
    return path
