"""kicad-cli on an agent's end state, confined like the agent.

The end state is the agent's work, and kicad-cli follows what it says: a library table the agent
wrote can point at any path of the host, and kicad-cli would read it into a report that is then
preserved and published. So the runner verifies a copy of the end state (its files, `.git` left
out) in a directory of its own, under the same bubblewrap confinement as the agent: the copy the
one writable place, the system's KiCad libraries readable, no project, no ledger, no other
sandbox, no network. The reports are read back from the copy; nothing of it is kept. Without
bubblewrap (`--unsandboxed`, recorded on the run) kicad-cli runs as the operator, as before.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from cbledger.errors import UserError
from cbledger.kicad import oracle
from cbledger.runner import isolation, report_cache
from cbledger.runner.harness_failure import outside_signal

#: where the reports are written inside the copy; the agent's tree cannot hold a `.git` there
REPORTS = ".git/reports"


def verify(workdir: Path, schematic: str, board: str | None, out_dir: Path, how: isolation.Confinement) -> oracle.Reports:
    """The ERC (and DRC) reports of the end state at `workdir`, written as `erc.json` /
    `drc.json` in `out_dir`, as `oracle.verify_tree` writes them; taken from the report cache
    when one is configured and holds them (`runner/report_cache.py`)."""
    cli = oracle.require_kicad_cli()
    cache = report_cache.directory()
    if cache is None or how.bwrap is None:
        return _verify(workdir, schematic, board, out_dir, how, cli)
    digest = report_cache.key(workdir, schematic, board, cli)
    kept = report_cache.lookup(cache, digest, out_dir)
    if kept is not None:
        return kept
    made = _verify(workdir, schematic, board, out_dir, how, cli)
    report_cache.keep(cache, digest, made)
    return made


def _verify(workdir: Path, schematic: str, board: str | None, out_dir: Path, how: isolation.Confinement,
            cli: str) -> oracle.Reports:
    if how.bwrap is None:
        return oracle.verify_tree(workdir, schematic, board, out_dir)
    with tempfile.TemporaryDirectory(prefix=isolation.scratch_prefix("verify", workdir)) as scratch:
        copy = Path(scratch) / "tree"
        shutil.copytree(workdir, copy, symlinks=True, ignore=report_cache.unseen(workdir))
        (copy / REPORTS).mkdir(parents=True)
        out_dir.mkdir(parents=True, exist_ok=True)
        made: dict[str, Path | None] = {"erc": None, "drc": None}
        for kind, rel, argv in (("erc", schematic, oracle.erc_argv), ("drc", board, oracle.drc_argv)):
            if not rel or not (copy / rel).is_file() or (copy / rel).is_symlink():
                continue
            inside = copy / REPORTS / f"{kind}.json"
            job = isolation.Job(argv(cli, copy / rel, inside), copy, {"KICAD_CONFIG_HOME": isolation.HOME},
                                oracle.TIMEOUT_SEC, tools=(cli,))
            done = isolation.run(job, how)
            sig = outside_signal(done.exit_code, done.killed is not None)
            if sig is not None:  # not the agent's output that kicad-cli failed on (harness_failure.detect)
                raise UserError(f"kicad-cli {kind.upper()} on {Path(rel).name} was ended by {sig}, which the runner did not send")
            oracle.check_exit(done.exit_code, done.stdout.decode("utf-8", "replace"),
                              done.stderr.decode("utf-8", "replace"), f"{kind.upper()} on {Path(rel).name} (confined)")
            if not inside.is_file() or inside.is_symlink():
                raise UserError(f"kicad-cli {kind.upper()} wrote no report for {rel}")
            made[kind] = shutil.copyfile(inside, out_dir / f"{kind}.json")
        return oracle.Reports(made["erc"], made["drc"])
