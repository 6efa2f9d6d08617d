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
no credential in its environment. It reads `.copperhead/config.json` as the run left it. With
the report cache set (`runner/report_cache.py`) a check of a tree already checked by the same
install is taken from there.
"""

from __future__ import annotations

import json
from pathlib import Path

from blake3 import blake3

from cbledger.kicad.oracle import kicad_cli
from cbledger.runner import isolation, report_cache
from cbledger.runner.agents.copperhead import CopperheadCli, basic_environment
from cbledger.runner.environment import binary_identity
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


def build_identity(cli: CopperheadCli, kicad: str | None) -> list[str]:
    """What a check runs with, as the report cache keys it: node and kicad-cli as the version
    probe knows a binary, copperhead's package file by file (a patched copy differs in a file's
    size or time), and npm's record of the dependencies installed beside it."""
    parts = [*map(str, binary_identity(cli.node)), *(map(str, binary_identity(kicad)) if kicad else ("",))]
    package = cli.package_root or cli.script.parent
    for path in sorted(p for p in package.rglob("*") if p.is_file() or p.is_symlink()):
        stat = path.lstat()
        parts.append(f"{path.relative_to(package).as_posix()}:{stat.st_size}:{stat.st_mtime_ns}")
    lock = package.parent / ".package-lock.json"
    parts.append(blake3(lock.read_bytes()).hexdigest() if package.parent.name == "node_modules" and lock.is_file() else "")
    return parts


def capture(cli: CopperheadCli | None, workdir: Path, out_dir: Path, confinement: isolation.Confinement) -> Path:
    """Runs the check over `workdir` and writes `out_dir/check.json`. Without a CLI the file
    still says so (exitCode null, `skipped`), so the grade names the reason instead of guessing."""
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "check.json"
    cache, digest = report_cache.directory(), None
    if cli is not None and cache is not None and confinement.bwrap is not None:
        digest = report_cache.check_key(workdir, build_identity(cli, kicad_cli()))
        kept = report_cache.lookup_check(cache, digest)
        if kept is not None:
            path.write_bytes(kept)
            return path
    if cli is None:
        doc = result(None, b"", b"", skipped="copperhead CLI not available (set --copperhead-cli or $COPPERHEAD_CLI)")
    else:
        job = cli.job(["--repo", str(workdir), *COMMAND], workdir, basic_environment(), CAP_SEC, confinement)
        outcome = isolation.run(job, confinement)
        code = None if outcome.killed else outcome.exit_code
        doc = result(code, outcome.stdout, outcome.stderr, killed=outcome.killed)
    path.write_text(json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")
    if cache is not None and digest is not None and doc["exitCode"] is not None:
        report_cache.keep_check(cache, digest, path)
    return path
