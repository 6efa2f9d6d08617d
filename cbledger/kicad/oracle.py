"""The verification step: kicad-cli ERC and DRC on a run's end state, written into its evidence.

Reports are produced once, when the run ends, and preserved with it; grading only reads them.
That keeps grading free of tools (the standard's rule one) while kicad-cli stays the oracle.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from cbledger.errors import UserError

INSTALL_HINT = (
    "install it with `scripts/install-system` (Debian 12: add bookworm-backports, then "
    "`apt-get install -t bookworm-backports --no-install-recommends kicad`)"
)
TIMEOUT_SEC = 600


KICAD_CLI_ENV = "CBLEDGER_KICAD_CLI"


def kicad_cli() -> str | None:
    """The kicad-cli to use: `$CBLEDGER_KICAD_CLI` when set (None if it names nothing
    runnable, so preflight refuses instead of a run crashing later), else `kicad-cli` on PATH."""
    configured = os.environ.get(KICAD_CLI_ENV)
    if configured:
        return shutil.which(configured)
    return shutil.which("kicad-cli")


def require_kicad_cli() -> str:
    path = kicad_cli()
    if path is None:
        configured = os.environ.get(KICAD_CLI_ENV)
        if configured:
            raise UserError(f"${KICAD_CLI_ENV} names {configured}, which is not an executable kicad-cli; {INSTALL_HINT}")
        raise UserError(f"kicad-cli is required to verify runs but was not found on PATH; {INSTALL_HINT}")
    return path


def kicad_cli_version(path: str | None = None) -> str | None:
    path = path or kicad_cli()
    if path is None:
        return None
    out = subprocess.run([path, "version"], capture_output=True, text=True, timeout=60)
    m = re.search(r"\d+\.\d+(\.\d+)?", out.stdout)
    return m.group(0) if m else out.stdout.strip() or None


@dataclass(frozen=True)
class Reports:
    erc: Path | None
    drc: Path | None


def erc_argv(cli: str, schematic: Path, out: Path) -> list[str]:
    return [cli, "sch", "erc", "--format", "json", "--severity-all", "-o", str(out), str(schematic)]


def drc_argv(cli: str, board: Path, out: Path) -> list[str]:
    return [cli, "pcb", "drc", "--format", "json", "--severity-all", "--schematic-parity", "-o", str(out), str(board)]


def check_exit(returncode: int | None, stdout: str, stderr: str, what: str) -> None:
    """ERC/DRC exit non-zero when violations exist; only a missing report is a failure."""
    if returncode not in (0, 5) and "Saved" not in stdout + stderr:
        tail = (stderr or stdout).strip().splitlines()[-3:]
        raise UserError(f"kicad-cli {what} failed (exit {returncode}): {' | '.join(tail)}")


def _run(args: list[str], what: str) -> None:
    env = dict(os.environ)
    home = tempfile.mkdtemp(prefix="cbledger-kicad-home-")
    env.setdefault("KICAD_CONFIG_HOME", home)
    try:
        proc = subprocess.run(args, capture_output=True, text=True, timeout=TIMEOUT_SEC, env=env, stdin=subprocess.DEVNULL)
    finally:
        shutil.rmtree(home, ignore_errors=True)
    check_exit(proc.returncode, proc.stdout, proc.stderr, what)


def run_erc(schematic: Path, out: Path, cli: str | None = None) -> Path:
    cli = cli or require_kicad_cli()
    out.parent.mkdir(parents=True, exist_ok=True)
    _run(erc_argv(cli, schematic, out), f"ERC on {schematic.name}")
    if not out.is_file():
        raise UserError(f"kicad-cli ERC wrote no report for {schematic}")
    return out


def run_drc(board: Path, out: Path, cli: str | None = None) -> Path:
    cli = cli or require_kicad_cli()
    out.parent.mkdir(parents=True, exist_ok=True)
    _run(drc_argv(cli, board, out), f"DRC on {board.name}")
    if not out.is_file():
        raise UserError(f"kicad-cli DRC wrote no report for {board}")
    return out


def export_netlist(schematic: Path, out: Path, cli: str | None = None) -> Path:
    cli = cli or require_kicad_cli()
    out.parent.mkdir(parents=True, exist_ok=True)
    _run([cli, "sch", "export", "netlist", "--format", "kicadsexpr", "-o", str(out), str(schematic)], "netlist export")
    return out


def verify_tree(workdir: Path, schematic: str, board: str | None, out_dir: Path) -> Reports:
    """ERC (and DRC with schematic parity when there is a board) of the files in `workdir`,
    written as `erc.json` / `drc.json` in `out_dir`. A missing schematic or board in the end
    state produces no report, which the verification assertions then fail on with that reason."""
    cli = require_kicad_cli()
    erc = drc = None
    sch = workdir / schematic
    if sch.is_file():
        erc = run_erc(sch, out_dir / "erc.json", cli)
    if board:
        pcb = workdir / board
        if pcb.is_file():
            drc = run_drc(pcb, out_dir / "drc.json", cli)
    return Reports(erc, drc)
