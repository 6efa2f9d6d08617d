"""A guard for tests that promise "no agent, no sandbox, no kicad-cli, no network": every entry
point that would do one of those raises instead, so a silent fallback to running something
fails the test rather than passing slowly."""

from __future__ import annotations

import socket

import pytest

from cbledger.kicad import oracle
from cbledger.runner import confined_verify, isolation
from cbledger.runner import execute as execute_mod
from cbledger.runner import sandbox as sandbox_mod
from cbledger.runner.agents import copperhead, replay, scripted


class Forbidden(BaseException):
    """Not an Exception: the runner reports any Exception of one run and goes on to the next, and
    a guard it caught that way would fail nothing."""


def forbid(*_args, **_kwargs):
    raise Forbidden("this must not make a sandbox, run an agent or kicad-cli, or open a socket")


def forbid_running(monkeypatch: pytest.MonkeyPatch) -> None:
    for target, name in (
        (sandbox_mod, "create"),
        (execute_mod.sandbox_mod, "create"),
        (scripted.GoldAgent, "run"),
        (scripted.NoopAgent, "run"),
        (copperhead.CopperheadAgent, "run"),
        (replay.ReplayAgent, "run"),
        (copperhead, "run_capped"),
        (isolation, "run"),
        (oracle, "verify_tree"),
        (confined_verify, "verify"),
        (oracle, "_run"),
        (socket, "socket"),
        (socket, "create_connection"),
    ):
        monkeypatch.setattr(target, name, forbid)
