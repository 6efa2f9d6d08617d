"""`cbledger replay --verify`: the reproduction claim, checked. The work is in
`cbledger.reproduce.verify`; this parses, calls and prints."""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path
from typing import Annotated

import typer

import cbledger
from cbledger import invocation
from cbledger.cli.common import JsonFlag, LedgerOption, RootOption, fail, workspace
from cbledger.cli.progress import VerifyProgress, chain_progress
from cbledger.cli.rerun_command import print_result
from cbledger.inputs import printable, printable_path
from cbledger.projections.fold import semver_key
from cbledger.reproduce import rerun as rerun_mod
from cbledger.reproduce import verify as verify_mod
from cbledger.tasks.definitions import CHECK_CODE
from cbledger.workspace import READ_MODEL

NOTES_SHOWN = 20


def replay(
    verify: Annotated[bool, typer.Option("--verify", help="Verify the ledger (the only action there is).")] = False,
    chain_only: Annotated[
        bool, typer.Option("--chain-only", help="Only the hash chain: no re-grading, no projections.")
    ] = False,
    since: Annotated[
        int | None,
        typer.Option("--since", metavar="SEQ", min=0, help="Re-grade only runs recorded after SEQ (the chain is always fully checked)."),
    ] = None,
    since_checkpoint: Annotated[
        bool,
        typer.Option("--since-checkpoint", help="Re-grade only runs recorded (or re-graded) after the newest signed checkpoint the ledger extends (the chain is always fully checked; the fold resumes from the latest snapshot)."),
    ] = False,
    run: Annotated[
        list[str] | None, typer.Option("--run", metavar="ID", help="Re-grade only this run (repeatable).")
    ] = None,
    no_projections: Annotated[
        bool, typer.Option("--no-projections", help="Do not compare records, LEADERBOARD.md and the read model.")
    ] = False,
    jobs: Annotated[int, typer.Option("--jobs", min=1, help="Runs re-graded in parallel (processes), and with --rerun re-executed in parallel.")] = 1,
    checkpoint: Annotated[
        list[Path] | None,
        typer.Option("--checkpoint", metavar="FILE", help="A signed checkpoint the ledger must extend (repeatable)."),
    ] = None,
    key: Annotated[
        list[Path] | None,
        typer.Option("--key", metavar="VKEY", help="A trusted public key (repeatable). Default: every keys/*.vkey under the root."),
    ] = None,
    allow_skipped: Annotated[
        bool,
        typer.Option("--allow-skipped", help="Accept recorded runs or grades that could not be reproduced (each is still named)."),
    ] = False,
    rerun: Annotated[
        bool,
        typer.Option("--rerun", help="Also re-execute every run with a cassette, and every scripted run from its kept session, through the real harness (slow; `cbledger rerun`)."),
    ] = False,
    ledger: LedgerOption = None,
    root: RootOption = None,
    as_json: JsonFlag = False,
) -> None:
    """Verify the ledger end to end, offline: the hash chain; every preserved run restored (seed
    rebuilt from its fixture, bundle and evidence digests) and every recorded grade re-graded
    under its own suite version's kept definitions; every record, LEADERBOARD.md and the read
    model regenerated and compared.

    Exit codes (several failing: the first of 1 (or 9), 5, 7, 3, 4, 6; every finding is printed):

    0 verified.

    1 the chain is broken (the first bad seq is named; nothing else is checked).

    2 bad usage or no ledger (or a --checkpoint no trusted key signed).

    5 the ledger is not an extension of a signed checkpoint (a --checkpoint FILE, or one the ledger
    records): an event it covers was rewritten, or events were removed. Nothing else is checked.

    7 a suite version's kept definitions (results/suites/) are missing or differ from what the
    ledger recorded, or the working tree differs from the current suite without a bump.

    3 a run does not reproduce (bundle, fixture, seed, commit or evidence digest, or re-grade;
    a bundle, commit or transcript reused by a second run; a grade without its run).

    4 a projection (record, LEADERBOARD.md, read model, site page) differs from its regeneration.

    6 a recorded run or grade was not reproduced (each is named with the reason) and
    --allow-skipped was not given.

    8 (with --rerun, everything else verified) a run with a cassette did not re-execute
    identically, or could not be re-executed here (each is named).

    9 an event this build cannot read, as a newer cbledger's would fail (a type, version or
    field it does not know): chain NOT READ; upgrade and verify again (the lines after it are
    held to their links only, a break there being exit 1; runs and outputs are not checked).

    130 interrupted (Ctrl-C): nothing written, nothing verified.
    """
    if not verify:
        fail("nothing to do: pass --verify", 2)
    options = verify_mod.Options(
        chain_only=chain_only, since=since, run_ids=tuple(run or ()), projections=not no_projections, jobs=jobs,
        checkpoints=tuple(checkpoint or ()), keys=tuple(key or ()), allow_skipped=allow_skipped,
        since_checkpoint=since_checkpoint,
    )
    progress = VerifyProgress(quiet=as_json and not sys.stderr.isatty())
    try:
        report = verify_mod.verify(
            workspace(ledger, root), options,
            chain_progress=None if as_json else chain_progress(),
            run_progress=progress, on_runs_planned=progress.start,
        )
    finally:
        progress.close()
    quiet = as_json and not sys.stderr.isatty()

    def rerun_step(k: int, n: int, run_id: str, x: rerun_mod.RerunResult | str) -> None:
        if not quiet:
            typer.echo(f"[rerun {k}/{n}] {run_id} {x.status if isinstance(x, rerun_mod.RerunResult) else 'not re-executed'}", err=True)

    reruns = (rerun_mod.rerun_all(workspace(ledger, root), tuple(run or ()), on_done=rerun_step, jobs=jobs)
              if rerun and report.exit_code == 0 else [])
    failed = [r for r in reruns if not isinstance(r[1], rerun_mod.RerunResult) or r[1].status != "identical"]
    if as_json:
        out = report.to_dict()
        if rerun:
            out["reruns"] = [x.to_dict() if isinstance(x, rerun_mod.RerunResult) else {"runId": rid, "error": x} for rid, x in reruns]
        typer.echo(json.dumps(out, sort_keys=True))
    else:
        rerunning = rerun and report.exit_code == 0
        _print(report, verdict=not rerunning)  # with --rerun the verdict waits for the re-executions
        for rid, x in reruns:
            if isinstance(x, rerun_mod.RerunResult):
                print_result(x)
            else:
                typer.echo(f"{rid}  not re-executed: {printable(x, limit=1000)}")
        if rerunning:
            done = sum(isinstance(x, rerun_mod.RerunResult) for _, x in reruns)
            typer.echo(f"re-executed {len(reruns)} run(s): {len(reruns) - len(failed)} identical" if done == len(reruns) else
                       f"re-executed {done} of {len(reruns)} run(s): {len(reruns) - len(failed)} identical, "
                       f"{len(reruns) - done} not re-executed")
            if failed:
                typer.echo(f"NOT VERIFIED: {len(failed)} of {len(reruns)} run(s) not identical, or not "
                           f"re-executed (listed above) (exit {rerun_mod.RERUN_FAILED_EXIT})", err=True)
            else:
                _verdict(report)
    raise typer.Exit(report.exit_code or (rerun_mod.RERUN_FAILED_EXIT if failed else 0))


def _print_notes(report: verify_mod.VerifyReport) -> None:
    """Notes are printed with --chain-only too: a recorded checkpoint no trusted key signed is one."""
    notes = report.all_notes
    for n in notes[:NOTES_SHOWN]:
        typer.echo(f"note: {n}")
    if len(notes) > NOTES_SHOWN:
        typer.echo(f"note: … and {len(notes) - NOTES_SHOWN} more (--json lists every one)")


def _print(report: verify_mod.VerifyReport, verdict: bool = True) -> None:
    chain = report.chain
    if chain.ok:
        typer.echo(f"chain ok: {chain.events} events, {chain.bytes} bytes; head seq {chain.head.seq} {chain.head.hash}")
        # a checkpoint past the head is a failure named below, and covers nothing of it
        newest = max((c.size for _, c in report.checkpoints.given if c.size <= chain.head.seq), default=0)
        if not report.options.checkpoints and newest:
            # The checkpoints kept beside the ledger were held against it; a cut after the
            # newest of them (or one that removed them too) only a head published elsewhere shows.
            typer.echo(
                f"head: seq {chain.head.seq} {chain.head.hash}; the checkpoints kept beside the ledger cover it "
                f"to seq {newest}: events removed after that, or these files removed with them, only a checkpoint "
                "published elsewhere shows (--checkpoint FILE)"
            )
        elif not report.options.checkpoints:
            # A ledger cut short at its end (its last runs dropped with their bundles and
            # records) is still a valid chain; only a head published elsewhere can tell.
            typer.echo(
                f"head: compare seq {chain.head.seq} {chain.head.hash} with the head the project published "
                "(a signed checkpoint: pass it with --checkpoint FILE); without one, events removed from the end "
                "cannot be detected"
            )
    else:
        state = "NOT READ" if chain.problem is not None and chain.problem.kind == "unreadable" else "BROKEN"
        typer.echo(f"chain {state}: {report.ledger}: {chain.problem}", err=True)
        typer.echo(f"last good: seq {chain.head.seq} {chain.head.hash}", err=True)
    anchored = report.checkpoints
    for f in anchored.failures:
        typer.echo(f"CHECKPOINT {f}", err=True)
    bad = {f.file for f in anchored.failures}
    for path, given in anchored.given:
        if path not in bad and chain.ok:
            typer.echo(f"checkpoint ok: {path} (size {given.size}, {given.checkpoint.origin}): the ledger extends it")
    if anchored.recorded and chain.ok and not any(f.kind != "not-an-extension" for f in anchored.failures):
        typer.echo(f"recorded checkpoints: {anchored.recorded}, each the ledger's root at its size")
    if report.options.chain_only:
        _print_notes(report)
        if report.exit_code == verify_mod.EXIT_CHECKPOINT:
            typer.echo(f"NOT VERIFIED: {_checkpoint_reason(report)} (exit {report.exit_code})", err=True)
        return
    for f in report.suite_failures:
        typer.echo(f"DEFINITIONS {f}", err=True)
    after = report.since_checkpoint
    if after is not None:
        typer.echo(f"since checkpoint: {after.path} (size {after.size}): runs recorded at seq {after.size} or before "
                   "are held to their events by the chain and the checkpoint, not re-graded (unless re-graded after it); "
                   "their pages are compared where their preserved runs restore")
    if report.runs_checked:
        c = report.counts()
        typer.echo(
            f"runs: {c['selected'] - c['retracted']} checked: {c['reproduced']} reproduced, "
            f"{c['skipped']} not fully reproduced (skipped), {c['failed']} failed; "
            f"{c['retracted']} retracted; {c['notSelected']} not selected"
        )
        typer.echo(_grades_line(report))
    out = report.outputs
    if out is not None:
        typer.echo(
            f"projections: {out.records_matching}/{out.records_expected} records match; "
            f"{out.leaderboard_path} {'matches' if out.leaderboard_matches else 'DIFFERS'}; "
            f"{out.readmodel_path} {'matches' if out.readmodel_matches else 'DIFFERS'}; "
            f"{out.site_matching}/{out.site_pages} site pages match"
            + (f" ({out.site_not_compared} run page(s) not compared: their runs' evidence could not be read)"
               if out.site_not_compared else "")
        )
    _print_notes(report)
    for f in report.skips:  # every one: a skip is a claim not checked, never left to --json
        typer.echo(f"SKIPPED {f}", err=True)
    for f in report.failures:
        if f.check not in ("chain", "suite", "checkpoint"):  # each printed under its own heading above
            typer.echo(f"MISMATCH {f}", err=True)
    if out is not None and out.leaderboard_diff:
        typer.echo(out.leaderboard_diff, err=True, nl=False)
    if verdict:
        _verdict(report)


def _grades_line(report: verify_mod.VerifyReport) -> str:
    """Every recorded grade re-graded, by suite version, and by which code: a grade recorded under
    an earlier version is re-graded with this build's check code, which a bump may have changed
    (docs/REPRODUCE.md, "Check code"), so "identical" is the claim that the change changed no grade."""
    by_version: dict[str, Counter[str]] = {}
    for run in report.runs:
        for g in run.grades:
            by_version.setdefault(g.suite_version, Counter())[g.status] += 1
    total = sum(sum(c.values()) for c in by_version.values())
    same = sum(c["reproduced"] for c in by_version.values())
    differ = sum(c["mismatch"] for c in by_version.values())
    left = total - same - differ
    versions = ", ".join(f"{v} {sum(c.values())}" for v, c in sorted(by_version.items(), key=lambda kv: semver_key(kv[0])))
    code = Path(cbledger.__file__).resolve().parent
    return (f"grades: {total} checked against a re-grade with the check code at {code} ({', '.join(CHECK_CODE)}): "
            f"{same} identical" + (f", {differ} not (listed below)" if differ else "")
            + (f", {left} not re-graded (listed below)" if left else "") + f"; by suite version: {versions or 'none'}")


def _checkpoint_reason(report: verify_mod.VerifyReport) -> str:
    """Exit 5's reason, as the findings have it: a checkpoint whose own signature fails says
    nothing about the ledger, which the verdict once blamed for an edited checkpoint file."""
    if any(f.kind == "not-an-extension" for f in report.checkpoints.failures):
        return "the ledger is not an extension of a signed checkpoint"
    if all(f.kind == "no-trusted-checkpoint" for f in report.checkpoints.failures):
        return ("no checkpoint signed by a key given with --key (publish one: `cbledger checkpoint --key SKEY`, or hold "
                "the ledger to one they signed with --checkpoint FILE)")
    return "a checkpoint does not verify by itself (its signature, or its record in the ledger; listed above)"


def _definitions_reason(report: verify_mod.VerifyReport) -> str:
    """Exit 7's reason: run outside the project nothing was compared, which is no mismatch."""
    if all(f.kind == "no-working-tree" for f in report.suite_failures):
        return "no project here to compare the suite's definitions with (run from the project, or pass --root DIR)"
    return "a suite version's definitions do not match the ledger"


def _verdict(report: verify_mod.VerifyReport) -> None:
    """The last line: what was verified, or why not and the exit code."""
    code = report.exit_code
    if code == verify_mod.EXIT_OK and report.skips:
        typer.echo(f"verified with --allow-skipped: {len(report.skips)} recorded grade(s) or run(s) not reproduced (listed above)")
    elif code == verify_mod.EXIT_OK:
        typer.echo("verified: every check passed")
    else:
        imported = any(f.check == "import" for f in report.run_failures)
        runs = any(f.check != "import" for f in report.run_failures)
        reproduce = ("a run does not reproduce" + (", and an import does not match its event" if imported else "")
                     if runs or not imported else "an import does not match what its event states")
        reason = {1: "the chain is broken", 3: reproduce, 4: "projections differ",
                  5: _checkpoint_reason(report),
                  6: f"{len(report.skips)} recorded grade(s) or run(s) not reproduced (--allow-skipped accepts them)",
                  7: _definitions_reason(report),
                  9: "an event this build cannot read (a newer cbledger's?): upgrade and verify again"}[code]
        if code == 4:  # every differing output, whichever they are, is regenerated by one command
            reason += f"; `{invocation.command('project', 'all')}` regenerates every output from the ledger"
        if code == 5 and report.run_failures:  # checked beside a checkpoint with no named key's signature
            reason += f"; {len(report.run_failures)} run finding(s) as well (listed above)"
        typer.echo(f"NOT VERIFIED: {reason} (exit {code})", err=True)


def watch(
    debounce_ms: Annotated[
        int, typer.Option("--debounce-ms", min=1, help="Regenerate once the ledger has been quiet this long.")
    ] = 200,
    exec_cmd: Annotated[
        str | None,
        typer.Option("--exec", metavar="CMD", help="Run CMD (a shell command, in the root) after each regeneration; $CBLEDGER_HEAD_SEQ is the head."),
    ] = None,
    once: Annotated[bool, typer.Option("--once", help="Regenerate the outputs and exit.")] = False,
    no_read_model: Annotated[bool, typer.Option("--no-read-model", help=f"Leave {READ_MODEL} alone.")] = False,
    no_site: Annotated[bool, typer.Option("--no-site", help="Leave the HTML site under results/site/ alone.")] = False,
    ledger: LedgerOption = None,
    root: RootOption = None,
    as_json: JsonFlag = False,
) -> None:
    """Keep the records, LEADERBOARD.md and the read model current as events land in the ledger.
    With --json each line it prints is a JSON object `{"watch": "…"}`.

    Only new events are folded and only outputs that changed are rewritten. A torn or malformed
    append is reported and the outputs stay at the last good state until the ledger is repaired.

    Exit codes: 0 stopped by Ctrl-C or SIGTERM, or --once regenerated; 1 --once found a ledger it
    cannot fold to its end; 2 no ledger or bad usage.
    """
    from cbledger.reproduce.watch import Watcher, WatchOptions

    options = WatchOptions(debounce_ms=debounce_ms, exec_cmd=exec_cmd, once=once, read_model=not no_read_model,
                           site=not no_site)
    def echo(line: str) -> None:
        typer.echo(json.dumps({"watch": line.removeprefix("watch: ")}) if as_json else line)

    watcher = Watcher(workspace(ledger, root), options, echo=echo)
    raise typer.Exit(watcher.run())


def import_cmd(
    path: Annotated[
        Path | None, typer.Argument(help="A published result record, or a results/<date>/<model>/<task>/run-N.json tree.")
    ] = None,
    manual: Annotated[
        Path | None, typer.Option("--manual", metavar="FILE", help="A reviewer's manual import (the manual import contract: docs/REPRODUCE.md).")
    ] = None,
    source: Annotated[
        str | None,
        typer.Option("--source", metavar="NAME", help="Where the evidence comes from (default: PATH's name; manual-reviewer-import)."),
    ] = None,
    jsonl: Annotated[
        Path | None, typer.Option("--jsonl", metavar="FILE", help="Copy a whole JSON Lines ledger, byte for byte, into the --ledger store (empty, or holding a prefix of FILE).")
    ] = None,
    import_root: Annotated[
        Path | None,
        typer.Option("--import-root", metavar="DIR", help="With --manual: the only directory files are read from (default: the import file's)."),
    ] = None,
    ledger: LedgerOption = None,
    root: RootOption = None,
    as_json: JsonFlag = False,
) -> None:
    """Import outside evidence as `evidence.imported`: never a project-owned run, never re-graded,
    shown in its own leaderboard section. Importing the same bytes again is a no-op.

    Exit codes: 0 imported (or already there); 2 bad input (an unknown layout, or every missing or
    mistyped manual field named), nothing written; 4 a credential pattern matched, nothing written.
    """
    from cbledger.reproduce import imports

    if jsonl is not None:
        if path is not None or manual is not None:
            fail("--jsonl copies a ledger; give it alone, without PATH or --manual", 2)
        _import_ledger(jsonl, ledger, root, as_json)
        return
    where = workspace(ledger, root)
    if manual is not None and path is None:
        report = imports.import_manual(where, manual, source, import_root)
    elif path is not None and manual is None:
        report = imports.import_records(where, path, source)
    else:
        fail("give exactly one of PATH or --manual FILE", 2)
    if as_json:
        typer.echo(json.dumps(report.to_dict(), sort_keys=True))
        return
    for o in report.outcomes:
        at = f"seq {o.seq}" if o.seq is not None else "-"
        note = f"  ({printable(o.note)})" if o.note else ""
        typer.echo(f"{o.status:<9} {at:<10} {o.format:<34} {printable_path(o.original_path)}{note}")
    for kept in report.kept:  # as the event names it (`results/…`); shown where it is on disk
        typer.echo(f"kept      {printable_path(where.shown(kept))}")
    typer.echo(
        f"imports: {report.count('imported')} new, {report.count('unchanged')} already imported, "
        f"{report.count('duplicate')} duplicate content"
    )


def _import_ledger(file: Path, ledger: str | None, root: Path | None, as_json: bool) -> None:
    from cbledger.ledger.store import LedgerStore
    from cbledger.ledger.transfer import import_jsonl

    store = LedgerStore(workspace(ledger, root).ledger)
    done = import_jsonl(file, store)
    if as_json:
        typer.echo(json.dumps({
            "source": str(file), "ledger": store.location, "sourceEvents": done.source_events,
            "alreadyThere": done.already_there, "copied": done.copied,
            "head": {"seq": done.head.seq, "hash": done.head.hash},
        }, sort_keys=True))
        return
    typer.echo(
        f"imported {file} into {store.location}: {done.copied} event(s) copied"
        + (f" after the {done.already_there} already there" if done.already_there else "")
        + f"; head seq {done.head.seq} {done.head.hash}"
    )


def register(app: typer.Typer) -> None:
    app.command()(replay)
    app.command()(watch)
    app.command("import")(import_cmd)
