"""`cbledger init | append | log | show | repair | schema`: the ledger itself."""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Annotated, Any, cast

import typer

from cbledger import invocation
from cbledger.cli.common import (
    JsonFlag,
    LedgerOption,
    RootOption,
    chosen_results,
    fail,
    into_existing_directory,
    ledger_path,
    no_project_found,
    project_root,
)
from cbledger.inputs import printable, printable_path, read_regular
from cbledger.ledger import durable, semantics
from cbledger.ledger.encoding import Canonical
from cbledger.ledger.events import EVENT_TYPES, Actor, PricingPublishedEvent, event_type
from cbledger.ledger.intake import MAX_INPUT_BYTES, parse_drafts
from cbledger.ledger.store import Appended, LedgerStore
from cbledger.ledger.verify import verify_chain
from cbledger.login import login_name


def init(
    ledger: LedgerOption = None,
    root: RootOption = None,
    name: Annotated[str, typer.Option(help="A name for this ledger.")] = "copperbench",
    description: Annotated[str, typer.Option(help="What this ledger records.")] = "",
    as_json: JsonFlag = False,
) -> None:
    """Create a ledger and record `ledger.created` as seq 1."""
    store = LedgerStore(ledger_path(ledger, root))
    appended = store.init(name, Actor(kind="maintainer", name=login_name("maintainer")), description)
    if as_json:
        typer.echo(json.dumps({"ledger": str(store.location), "seq": appended.seq, "hash": appended.hash}, sort_keys=True))
        return
    typer.echo(f"initialised {store.location}: seq {appended.seq} {appended.hash}")
    bare = no_project_found()
    if bare is not None and ledger is None and chosen_results() is None:
        # a stranger told "no ledger here" in the wrong directory may init one there: say what
        # it made, since every command at or below that directory now finds this ledger
        typer.echo(f"note: {bare} holds no tasks/ and fixtures/: it is now a ledger-only workspace, and every "
                   "command run at or below it uses this ledger (a project's own is under its results/)", err=True)


def append(
    source: Annotated[
        str, typer.Argument(help="A JSON or JSON Lines file of events, or - for stdin.")
    ] = "-",
    ledger: LedgerOption = None,
    root: RootOption = None,
    as_json: JsonFlag = False,
) -> None:
    """Validate every event of the input, then append them as one durable batch.

    Nothing is written unless every event is valid, free of credentials and free of id
    conflicts, every run a retraction, grade or rubric score names was recorded, and no event is
    stamped more than five minutes ahead of the clock. Re-appending an identical event is a no-op
    that reports the existing seq.
    """
    if source == "-":
        data, name = sys.stdin.buffer.read(MAX_INPUT_BYTES + 1), "<stdin>"
    else:
        p = Path(source)
        if not os.path.lexists(p):
            fail(f"{printable_path(source)}: no such file")
        data, name = read_regular(p, MAX_INPUT_BYTES), source
    events = parse_drafts(data, name)
    _refuse_repricing(events, ledger_path(ledger, root))
    store = LedgerStore(ledger_path(ledger, root))
    results = store.append(events, check=semantics.check_batch)
    # The batch is in the ledger: a Ctrl-C while it is listed ended the command with exit 130 and
    # no word, which a calling script reads as nothing written; the listing runs to its end. The
    # handler is put back after (an ignored SIGINT is inherited by every process started later,
    # and a command run in-process would leave it so).
    held = signal.signal(signal.SIGINT, signal.SIG_IGN) if threading.current_thread() is threading.main_thread() else None
    try:
        _report_appended(results, as_json)
    finally:
        if held is not None:
            signal.signal(signal.SIGINT, held)


def _refuse_repricing(events: list[Canonical], path: Path | str) -> None:
    """A price table appended by hand is held to what `pricing publish` holds it to; the ledger
    is read for it only when the batch holds one."""
    from cbledger.runner import ledger_view, pricing  # only then: append's start-up stays lean

    tables = [(c.where, c.event.body) for c in events if isinstance(c.event, PricingPublishedEvent)]
    if not tables or (isinstance(path, Path) and not path.exists()):
        return
    view = ledger_view.read(path)
    published = list(view.price_tables)
    recorded = [r for r in view.runs.values() if r.run_id not in view.retracted]
    for label, table in tables:
        pricing.refuse_publishing(table, published, recorded, label or "<input>", rules=False)
        published.append(table)


def _report_appended(results: list[Appended], as_json: bool) -> None:
    if as_json:
        typer.echo(
            json.dumps(
                [
                    {"seq": r.seq, "id": r.id, "type": r.type, "hash": r.hash, "created": r.created}
                    for r in results
                ]
            )
        )
        return
    for r in results:
        if r.repeat_in_batch:
            note = "  (repeated in this input; appended once)"
        else:
            note = "" if r.created else "  (already recorded; no-op)"
        typer.echo(f"seq {r.seq}  {r.hash}  {r.type}  {printable(r.id)}{note}")
    if any(r.created for r in results):
        # `replay --verify` compares the outputs with the ledger: until regenerated they differ
        typer.echo(f"the outputs (records, LEADERBOARD.md, the read model, the site) are behind the ledger now: "
                   f"`{invocation.command('project', 'all')}` or a running `cbledger watch` brings them up to date",
                   err=True)


#: the events about one run; `spend.unrecorded` names a run no `run.recorded` holds (killed with
#: its driver), and carries its own model
RUN_EVENTS = {"run.recorded", "grade.recorded", "run.retracted", "rubric.scored", "cassette.attached", "spend.unrecorded"}


def log(
    ledger: LedgerOption = None,
    root: RootOption = None,
    type_: Annotated[
        list[str] | None, typer.Option("--type", help="Only these event types (repeatable).")
    ] = None,
    since: Annotated[int, typer.Option(min=0, help="Only events with seq greater than this.")] = 0,
    until: Annotated[int | None, typer.Option(min=1, help="Only events with seq up to this.")] = None,
    task: Annotated[list[str] | None, typer.Option("--task", help="Only events about runs of this task (repeatable).")] = None,
    model: Annotated[list[str] | None, typer.Option("--model", help="Only events about runs of this model id (repeatable).")] = None,
    run: Annotated[list[str] | None, typer.Option("--run", metavar="ID", help="Only events about this run (repeatable).")] = None,
    verdict: Annotated[
        str | None, typer.Option("--verdict", help="Only grades with this verdict: pass or fail.", show_default=False)
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """List events, filtered by type, seq range, and the task, model, run or verdict of the run
    they are about (a filter on runs leaves out every event about no run)."""
    if verdict not in (None, "pass", "fail"):
        fail(f"--verdict {printable(verdict)!r}: give pass or fail")
    types = set(type_) if type_ else None
    unknown = sorted((types or set()) - set(EVENT_TYPES))
    if unknown:
        fail(f"--type {printable(unknown[0])!r}: not an event type (one of {', '.join(sorted(EVENT_TYPES))})")
    if verdict is not None and types is not None and "grade.recorded" not in types:
        # a verdict is a grade's: with no grade type asked for, nothing could ever be listed
        fail(f"--verdict {verdict}: only grade.recorded events have a verdict; add --type grade.recorded or drop --verdict")
    about_runs = bool(task or model or run or verdict)
    runs: dict[str, tuple[str, str]] = {}  # run id -> (task id, model id), as each run lands
    store = LedgerStore(ledger_path(ledger, root))
    # A filter on runs reads every run event from the start: a grade names its run, not its task.
    reading = store.read(types=RUN_EVENTS) if about_runs else store.read(since=since, until=until, types=types)
    for stored in reading:
        ev = stored.event
        kind = event_type(ev)
        if about_runs:
            body = cast(Any, ev).body  # every run event has one
            if kind == "run.recorded":
                runs[body.run_id] = (body.task.id, body.model.id)
            elif kind == "spend.unrecorded":
                runs.setdefault(body.run_id, ("", body.model))
            task_id, model_id = runs.get(body.run_id, ("", ""))
            if (
                stored.seq <= since or (until is not None and stored.seq > until)
                or (types is not None and kind not in types)
                or (task and task_id not in task) or (model and model_id not in model) or (run and body.run_id not in run)
                or (verdict is not None and (kind != "grade.recorded" or body.verdict != verdict))
            ):
                continue
        if as_json:
            typer.echo(
                json.dumps(
                    {"seq": stored.seq, "hash": stored.hash, "event": json.loads(stored.raw)},
                    sort_keys=True,
                )
            )
        else:
            typer.echo(
                f"{stored.seq:>7}  {ev.at.isoformat().replace('+00:00', 'Z')}  "
                f"{event_type(ev):<18} {ev.id}  [{ev.actor.kind}:{printable(ev.actor.name)}]"
            )
    # a filter naming no recorded run would print nothing, which reads as "no such events yet"
    unmatched = [f"--task {t}" for t in task or () if t not in {v[0] for v in runs.values()}]
    unmatched += [f"--model {m}" for m in model or () if m not in {v[1] for v in runs.values()}]
    unmatched += [f"--run {r}" for r in run or () if r not in runs]
    if unmatched:
        fail(f"{printable(unmatched[0])}: no run recorded in {store.location} has it (`{invocation.command('log', '--type', 'run.recorded')}` lists them)")


def show(
    key: Annotated[str, typer.Argument(help="A seq number or an event id.")],
    ledger: LedgerOption = None,
    root: RootOption = None,
    as_json: JsonFlag = False,
) -> None:
    """Print one event exactly as stored, with its chain links."""
    store = LedgerStore(ledger_path(ledger, root))
    stored = store.find(key)
    if stored is None:  # `cbledger show` tried it as a run id first
        fail(f"no run, seq or event id {printable(repr(key))} in {store.location} (`{invocation.command('log')}` lists them)")
    stored.event  # noqa: B018 (decoding is the check: a damaged record is named by its seq, not shown as if sound)
    doc = {"seq": stored.seq, "hash": stored.hash, "prev": stored.prev, "event": json.loads(stored.raw)}
    typer.echo(json.dumps(doc, sort_keys=True) if as_json else json.dumps(doc, indent=2, sort_keys=True))


def repair(
    truncate_torn_tail: Annotated[
        bool,
        typer.Option(
            "--truncate-torn-tail",
            help="Remove the incomplete final line, or the interrupted batch, left by a crash mid-append (and nothing else).",
        ),
    ] = False,
    ledger: LedgerOption = None,
    root: RootOption = None,
    as_json: JsonFlag = False,
) -> None:
    """Repair a ledger after a crash. The only repair there is: removing a torn tail — an
    incomplete final line, or what a batch interrupted part-way wrote. A complete, linked final
    event whose newline was lost is never removed: its newline is restored. A file that is not a
    ledger is refused, unchanged."""
    if not truncate_torn_tail:
        fail("say what to repair: --truncate-torn-tail")
    store = LedgerStore(ledger_path(ledger, root))
    path = store.location
    done = store.repair_tail()
    if as_json:
        typer.echo(json.dumps({"ledger": str(path), "action": done.action, "bytesRemoved": len(done.data) if done.action == "removed" else 0}, sort_keys=True))
        return
    if done.action == "none":
        typer.echo(f"{path}: no torn tail; nothing removed")
        broken = verify_chain(store).problem
        if broken is not None and broken.kind == "unreadable":
            # a newer build's event: restoring a copy would drop it
            typer.echo(f"note: this build cannot read the ledger, which no repair changes: {broken}", err=True)
        elif broken is not None:
            # a whole line that is not an event, an edit, a gap: nothing a repair may delete
            typer.echo(f"note: the ledger has another problem, which no repair removes: {broken}; "
                       "restore it from a copy you trust", err=True)
        return
    preview = printable(done.data[:120].decode("utf-8", errors="replace"))
    if done.action == "terminated":
        typer.echo(f"{path}: the final event was complete and only its newline was lost; newline restored, nothing removed")
        return
    lines = done.data.count(b"\n")
    if lines:
        typer.echo(f"{path}: removed an interrupted append of {len(done.data)} bytes ({lines} complete line(s), "
                   f"never acknowledged): {preview}")
        return
    typer.echo(f"{path}: removed an incomplete final line of {len(done.data)} bytes: {preview}")


def _extends(new: Path, old: Path) -> bool:
    """Does `new` begin with every byte of `old` (or is there no `old`)?"""
    if not old.exists():
        return True
    with open(old, "rb") as a, open(new, "rb") as b:
        while chunk := a.read(1 << 20):
            if b.read(len(chunk)) != chunk:
                return False
    return True


def export(
    jsonl: Annotated[bool, typer.Option("--jsonl", help="As the JSON Lines file (the only format there is).")] = False,
    out: Annotated[
        Path | None, typer.Option("--out", "-o", callback=into_existing_directory, help="Write here (replaced atomically) instead of stdout.")
    ] = None,
    ledger: LedgerOption = None,
    root: RootOption = None,
    as_json: JsonFlag = False,
) -> None:
    """Write the ledger, whichever store holds it, as the JSON Lines file, byte for byte: it
    verifies with `replay --verify --chain-only --ledger FILE` (in full, placed at
    `DIR/ledger/events.jsonl` beside the rest of the results) and imports back unchanged
    (`import --jsonl`)."""
    from cbledger.ledger.transfer import export_jsonl

    if not jsonl:
        fail("say the format: --jsonl", 2)
    store = LedgerStore(ledger_path(ledger, root))
    if not store.exists():
        fail(f"{store.location}: no ledger here", 2)
    if out is None:
        head = export_jsonl(store, sys.stdout.buffer)
        sys.stdout.buffer.flush()
        if not as_json:  # stdout is the ledger itself, JSON Lines already
            typer.echo(f"exported {store.location}: {head.seq} event(s), head {head.hash}", err=True)
        return
    # Replacing is for a file: a rename over a directory fails half done, and over a device, a
    # FIFO or a symlink (-o /dev/stdout) it would swap that node for a regular file.
    durable.refuse_non_file(out, symlink=False)
    durable.remove_dead_temps(out.parent)
    tmp = Path(durable.temp_name(out))
    try:
        with durable.naming(out), open(tmp, "wb") as f:  # a full disk names the file, not a descriptor
            head = export_jsonl(store, f)
            f.flush()
            os.fsync(f.fileno())
        if not _extends(tmp, out):
            # `-o results/ledger/events.jsonl` over a file ledger that went its own way would drop
            # its events without a word: append-only means never replacing what the export lacks
            fail(f"{out}: holds events the export of {store.location} does not (the file is not a prefix of it); "
                 "nothing replaced: export to another file and compare them", 2)
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
    if as_json:
        typer.echo(json.dumps({"exported": store.location, "to": str(out), "events": head.seq, "head": head.hash}, sort_keys=True))
    else:
        typer.echo(f"exported {store.location} to {out}: {head.seq} event(s), head {head.hash}")


def schema(
    root: RootOption = None,
    check: Annotated[
        bool, typer.Option("--check", help="Exit non-zero if committed schemas differ.")
    ] = False,
    as_json: JsonFlag = False,
) -> None:
    """Write schema/*.json from the msgspec types (or check the committed ones)."""
    from cbledger import schemas

    out = project_root(root) / "schema"
    if check:
        stale = schemas.stale(out)
        if stale:
            fail(f"schemas differ from the types (run `{invocation.command('schema')}`): " + ", ".join(stale), 1)
        typer.echo(json.dumps({"schemas": str(out), "match": True}) if as_json else f"{out}: schemas match the types")
        return
    written = [str(p) for p in schemas.write(out)]
    if as_json:
        typer.echo(json.dumps({"wrote": written}))
        return
    for path in written:
        typer.echo(f"wrote {path}")


def register(app: typer.Typer) -> None:
    app.command()(init)
    app.command()(append)
    app.command()(log)
    # `show` is registered by cli/inspect_commands.py, which hands it every key that is not a run id
    app.command()(repair)
    app.command()(schema)
    app.command()(export)

