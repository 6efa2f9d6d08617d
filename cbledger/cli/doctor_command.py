"""`cbledger doctor`: whether this machine can make a real run, on one screen, before it costs
anything — kicad-cli, the copperhead CLI, the agent sandbox, the model route's key and the price
table. Each line says ok or what is wrong; the exit is 1 when any of them would stop a run."""

from __future__ import annotations

import json
import os
from typing import Annotated

import typer

from cbledger import invocation
from cbledger.cli.common import JsonFlag, LedgerOption, RootOption, workspace
from cbledger.cli.exits import CHECK_FAILED
from cbledger.errors import UserError
from cbledger.kicad.oracle import kicad_cli, kicad_cli_version
from cbledger.ledger.store import LedgerStore
from cbledger.runner import isolation, ledger_view, preflight_credentials, pricing
from cbledger.runner.agents.copperhead import locate
from cbledger.runner.execute import cost_segment


def _copperhead(cli: str | None, root) -> tuple[bool, str]:
    try:
        found = locate(cli, root)
    except UserError as exc:
        return False, str(exc)
    if found is None:
        return False, "not found: run scripts/install-copperhead, or pass --copperhead-cli PATH/cli.js"
    return True, f"{found.version() or 'unknown version'} at {found.script} (node {found.node})"


def _credential(model: str | None, key_check: bool) -> tuple[bool, str]:
    if model is None:
        return True, "no --model given: not checked"
    cred = preflight_credentials.credential(model, os.environ)
    why = preflight_credentials.problem(cred, os.environ)
    if why is None and key_check:
        why = preflight_credentials.probe(cred, os.environ)
    if why is not None:
        return False, why
    checked = " (accepted by the provider)" if key_check and cred.variable else ""
    return True, cred.describe + checked


def _prices(view: ledger_view.LedgerView, model: str | None, segment: str | None) -> tuple[bool, str]:
    """A model the table does not price stops a run only without `--segment`, as `run` decides."""
    table = view.pricing
    named = f"; --segment {segment}: {model}'s runs cost null" if segment else ""
    if table is None:
        later = [t for t in view.price_tables if t.effective_date > pricing.today()]
        why = f"none in effect yet (the next from {min(t.effective_date for t in later)})" if later else "no pricing.published in the ledger"
        return model is None or bool(segment), why + f": runs cost null unless `{invocation.command('pricing', 'publish', 'FILE')}` records one" + named
    line = f"{table.table_version} (effective {table.effective_date}), {len(table.models)} model(s)"
    if model is None:
        return True, line
    found = pricing.route(model, table)
    if found is None:
        return bool(segment), line + f"; no entry for {model}" + (named or " (a run needs --segment and costs null)")
    if found.price is None:
        return True, line + f"; {model} is a null-cost route ({found.segment})"
    return True, line + f"; {model}: ${found.price.input} in, ${found.price.output} out per 1M tokens"


def doctor(
    model: Annotated[str | None, typer.Option(help="The model whose route's key and price to check.", show_default=False)] = None,
    copperhead_cli: Annotated[str | None, typer.Option("--copperhead-cli", envvar="COPPERHEAD_CLI", help="Path to copperhead's cli.js.")] = None,
    key_check: Annotated[bool, typer.Option(help="Check the key with one request to its provider (its model list, no tokens).")] = True,
    segment: Annotated[str | None, typer.Option(help="The cost segment the run will name for a model the price table does not list.", show_default=False)] = None,
    ledger: LedgerOption = None,
    root: RootOption = None,
    as_json: JsonFlag = False,
) -> None:
    """Check kicad-cli, copperhead, bubblewrap, the model's key and the price table, in one screen."""
    where = workspace(ledger, root)
    cost_segment(segment)
    kicad = kicad_cli()
    bwrap = isolation.find_bwrap()
    sandbox_problem = isolation.problem(bwrap)
    view = ledger_view.read(where.ledger) if LedgerStore(where.ledger).exists() else ledger_view.LedgerView()
    checks = {
        "kicad-cli": (kicad is not None, f"{kicad_cli_version(kicad) or 'unknown version'} at {kicad}" if kicad
                      else "not found on PATH or $CBLEDGER_KICAD_CLI"),
        "copperhead": _copperhead(copperhead_cli, where.root),
        "bubblewrap": (sandbox_problem is None, f"{bwrap}: agents run sandboxed" if sandbox_problem is None
                       else f"{sandbox_problem} (runs need --unsandboxed)"),
        "credential": _credential(model, key_check),
        "price table": _prices(view, model, segment),
    }
    ok = all(good for good, _ in checks.values())
    if as_json:
        typer.echo(json.dumps({"ok": ok, "checks": {k: {"ok": g, "detail": d} for k, (g, d) in checks.items()}}, sort_keys=True))
    else:
        for name, (good, detail) in checks.items():
            typer.echo(f"{'ok  ' if good else 'FAIL'}  {name:<12} {detail}")
    if not ok:
        raise typer.Exit(CHECK_FAILED)


def register(app: typer.Typer) -> None:
    app.command()(doctor)
