"""`cbledger endpoint serve | check`: the loopback model endpoint as a user runs it by hand.

A maintainer checks a new copperhead build, or a new task, against scripted model turns without
spending money: serve a session script, point copperhead's `compat:` route at it, run.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from cbledger.cli.common import JsonFlag
from cbledger.runner.endpoint import script
from cbledger.runner.endpoint.server import LOOPBACK, Endpoint, problems

endpoint_app = typer.Typer(
    name="endpoint",
    help="The loopback OpenAI-compatible endpoint that serves session scripts (scripted model turns).",
    no_args_is_help=True,
)

SessionFile = Annotated[Path, typer.Argument(help="A session script (JSON, format cbledger-session/1).")]


@endpoint_app.command("serve")
def serve_cmd(
    session: SessionFile,
    port: Annotated[int, typer.Option(min=0, max=65535, help="Port on 127.0.0.1 (0: any free port).")] = 0,
    as_json: JsonFlag = False,
) -> None:
    """Serve one session script at http://127.0.0.1:PORT/v1 until interrupted.

    Then, in another shell: COPPERHEAD_BASE_URL=<the printed URL> copperhead --repo DIR do "…"
    --model compat:scripted. Each request is answered with the turn its message history asks for;
    a turn the script does not have is answered with HTTP 400 saying so."""
    loaded = script.load(session)
    endpoint = Endpoint(LOOPBACK, port)
    url = endpoint.serve("", loaded)
    n = script.length(loaded)
    model = f"compat:{loaded.model or 'scripted'}"
    if as_json:
        typer.echo(json.dumps({"session": loaded.name, "turns": n, "baseUrl": url, "model": model}, sort_keys=True))
    else:
        typer.echo(f"serving session {loaded.name!r} ({'unbounded' if n is None else f'{n} turn(s)'}) at {url}")
        typer.echo(f"  COPPERHEAD_BASE_URL={url} copperhead --repo DIR do \"…\" --model {model}")
    try:
        endpoint.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        served = endpoint.served("")
        endpoint.close()
    typer.echo(f"served {len(served)} request(s)")
    for line in problems(served):
        typer.echo(f"  {line}", err=True)


@endpoint_app.command("check")
def check_cmd(
    sessions: Annotated[list[Path], typer.Argument(help="Session files or directories of them.")],
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Validate session scripts: the format, every exchange, every expectation's regex."""
    loaded = script.load_all(sessions)
    if as_json:

        typer.echo(json.dumps([{"name": s.name, "turns": script.length(s), "task": s.task} for s in loaded], sort_keys=True))
        return
    for s in loaded:
        n = script.length(s)
        typer.echo(f"{s.name}: {'unbounded' if n is None else f'{n} turn(s)'}" + (f", task {s.task}" if s.task else ""))


def register(app: typer.Typer) -> None:
    app.add_typer(endpoint_app, name="endpoint")
