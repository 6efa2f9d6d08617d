"""`cbledger show` and `cbledger restore`: looking at one recorded run.

`show KEY` takes a run id (the run, its grades and cost; `--transcript`, `--diff`) or, as before,
a seq or event id (the event exactly as stored).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from cbledger.cli import ledger_commands
from cbledger.cli.common import JsonFlag, LedgerOption, RootOption, workspace
from cbledger.inputs import printable
from cbledger.projections import packed as packed_mod
from cbledger.projections.writers import load_state
from cbledger.reproduce import inspect
from cbledger.workspace import Workspace

TranscriptFlag = Annotated[bool, typer.Option("--transcript", help="Also print the run's conversation (from its bundle).")]
DiffFlag = Annotated[bool, typer.Option("--diff", help="Also print the end state's diff against the baseline (from its bundle).")]


def _assertions(grade: dict[str, Any]) -> list[str]:
    out = []
    for a in grade["assertions"]:
        req = "required" if a["required"] else "optional"
        out.append(f"    {a['status'].upper():<4} {a['id']} ({a['type']}, {req}, {a['evidenceSource']}): {printable(a['detail'])}")
    return out


def _price_line(table: dict[str, Any]) -> str:
    rates = (f"${table['inputPerMTok']} in, ${table['outputPerMTok']} out per 1M tokens"
             if table["inputPerMTok"] is not None else "no rate for this model")
    return f"price table {table['version']} (effective {table['effectiveDate']}): {rates}"


def _text(doc: dict[str, Any], where: Workspace) -> list[str]:
    """The run as a reader reads it: its bundle and records named where they are (under
    `--results DIR`, DIR's own files; the JSON keeps the names the ledger records)."""
    lines = [
        f"run {doc['runId']} (seq {doc['seq']})",
        f"  task       {doc['task']['id']} (tier {doc['task']['tier']}, {doc['task']['mode']}, expected {doc['task']['expectedOutcome']})",
        f"  model      {printable(doc['model']['id'])} ({doc['model']['segment']}), {doc['runMode']}",
        f"  verdict    {doc['verdict']}" + (f" ({doc['failureCategory']})" if doc["failureCategory"] else ""),
        f"  cost       {doc['cost']}; tokens {doc['tokensIn']} in, {doc['tokensOut']} out; {doc['turnsUsed']} turn(s), exit {doc['exitPath'] or '—'}",
        f"  started    {doc['startedAt']}, suite {doc['suiteVersion']}",
        f"  bundle     {where.shown(doc['bundle'])} (baseline {doc['baselineSha']}, head {doc['headSha']})",
    ]
    if doc["priceTable"]:
        lines.insert(5, f"  priced by  {_price_line(doc['priceTable'])}")
    failure = doc["harnessFailure"]
    if failure:
        at = f" at model call {failure['turn']}" if failure.get("turn") else ""
        lines.append(f"  not the model's: {failure['kind']}{at}: {printable(failure['detail'])}")
    if doc["costCap"]:
        lines.append(f"  stopped    by a money limit: {printable(doc['runnerNote'] or 'see costCap')}")
    for path in doc["records"]:
        lines.append(f"  record     {packed_mod.record_shown(where, path)}")
    if doc["retracted"]:
        lines.append(f"  retracted  at seq {doc['retracted']['seq']}: {printable(doc['retracted']['reason'])}")
    shown: dict[str, str] = {}  # assertion lines already printed -> the suite they were printed under
    for g in doc["grades"]:
        lines.append(f"  suite {g['suiteVersion']} (seq {g['seq']}): {g['verdict']}, partial credit {float(g['partialCredit']):.3f}")
        # a run re-graded unchanged under later suite versions would repeat the same list each time
        rows = _assertions(g)
        key = "\n".join(rows)
        if key in shown:
            lines.append(f"    (assertions as under suite {shown[key]})")
        else:
            shown[key] = g["suiteVersion"]
            lines += rows
    return lines


def _transcript(turns: list[dict[str, Any]]) -> list[str]:
    lines = ["", "transcript:"]
    for t in turns:
        if t["kind"] == "tool":
            # its arguments were printed with the assistant's call (`-> name args`) just above
            lines.append(f"  [tool {t['title']}{' — ' + t['error'] if t['error'] else ''}]")
            lines += [f"    {line}" for line in t["text"].splitlines()]
        elif t["kind"] == "event":
            lines.append(f"  [{t['title']}] {' '.join(t['text'].split())}")
        else:
            lines.append(f"  {t['title']}: {t['text']}")
            lines += [f"    -> {c['name']} {' '.join(c['args'].split())}" for c in t["calls"]]
    return lines


def show(
    key: Annotated[str, typer.Argument(help="A run id, or a seq number or event id.")],
    transcript: TranscriptFlag = False,
    diff: DiffFlag = False,
    ledger: LedgerOption = None,
    root: RootOption = None,
    as_json: JsonFlag = False,
) -> None:
    """Print one run (summary, assertions, category, cost) or one event exactly as stored."""
    where = workspace(ledger, root)
    state = load_state(where.ledger)
    if key not in state.runs and key not in state.later_passes:
        if transcript or diff:
            inspect.entry(state, key)  # names the missing run
        ledger_commands.show(key, ledger, root, as_json)
        return
    doc = inspect.summary(state, key)
    ev = inspect.evidence(where, state, key) if transcript or diff else None
    if ev is not None:
        if transcript:
            doc["transcript"] = ev["turns"]
        if diff:
            doc["diff"] = ev["diff"]
    if as_json:
        typer.echo(json.dumps(doc, sort_keys=True))
        return
    lines = _text(doc, where)
    if transcript:
        lines += _transcript(doc["transcript"])
    typer.echo("\n".join(lines))
    if diff:
        typer.echo("")
        # the diff leaves the harness's own run directory out (`show --transcript` reads it)
        typer.echo(doc["diff"] or "diff: no change outside .copperhead/runs/ (the harness's own records: "
                                  "`--transcript` shows them)\n", nl=False)


def restore(
    run_id: Annotated[str, typer.Argument(help="The run id (or its event id, run:<id>).")],
    directory: Annotated[Path, typer.Argument(help="A new (or empty) directory to lay the run out in.")],
    ledger: LedgerOption = None,
    root: RootOption = None,
    as_json: JsonFlag = False,
) -> None:
    """Lay a preserved run out as a git working copy: its end state checked out on branch `run`,
    the commit it started from on branch `baseline` (`git diff baseline` shows what it changed)."""
    where = workspace(ledger, root)
    state = load_state(where.ledger)
    done = inspect.restore(where, state, inspect.run_key(state, run_id), directory.resolve())
    if as_json:
        typer.echo(json.dumps(done, sort_keys=True))
        return
    typer.echo(f"restored {run_id} into {done['directory']}: branch {done['branch']} at {done['headSha']}, "
               f"baseline at {done['baselineSha']}; `git -C {done['directory']} diff {done['baselineBranch']}` shows the change")


def register(app: typer.Typer) -> None:
    app.command()(show)
    app.command()(restore)
