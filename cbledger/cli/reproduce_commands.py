"""`cbledger replay --verify`: the reproduction claim, checked."""

from __future__ import annotations

import json
import sys
from typing import Annotated

import typer

from cbledger.cli.common import JsonFlag, LedgerOption, RootOption, fail, ledger_path
from cbledger.ledger.verify import verify_chain

EXIT_OK = 0
EXIT_CHAIN = 1


def replay(
    verify: Annotated[bool, typer.Option("--verify", help="Verify the ledger.")] = False,
    chain_only: Annotated[
        bool, typer.Option("--chain-only", help="Only the hash chain, no re-grading.")
    ] = False,
    ledger: LedgerOption = None,
    root: RootOption = None,
    as_json: JsonFlag = False,
) -> None:
    """Verify the ledger: exit 0 only when everything holds.

    Exit codes: 0 verified; 1 the chain is broken (the first bad seq is named); 2 bad usage or
    missing ledger.
    """
    if not verify:
        fail("nothing to do: pass --verify")
    path = ledger_path(ledger, root)
    report = verify_chain(path, progress=_progress() if not as_json else None)
    if as_json:
        typer.echo(json.dumps({"chain": report.to_dict()}, sort_keys=True))
    elif report.ok:
        typer.echo(
            f"chain ok: {report.events} events, {report.bytes} bytes; "
            f"head seq {report.head.seq} {report.head.hash}"
        )
    else:
        typer.echo(f"chain BROKEN: {report.problem}", err=True)
        typer.echo(
            f"last good: seq {report.head.seq} {report.head.hash}", err=True
        )
    raise typer.Exit(EXIT_OK if report.ok else EXIT_CHAIN)


def _progress():
    if not sys.stderr.isatty():
        return None
    from rich.progress import BarColumn, DownloadColumn, Progress, TimeRemainingColumn

    bar = Progress("verifying chain", BarColumn(), DownloadColumn(), TimeRemainingColumn(), transient=True)
    task = None

    def update(done: int, total: int) -> None:
        nonlocal task
        if task is None:
            bar.start()
            task = bar.add_task("chain", total=total)
        bar.update(task, completed=done)
        if done >= total:
            bar.stop()

    return update


def register(app: typer.Typer) -> None:
    app.command()(replay)
