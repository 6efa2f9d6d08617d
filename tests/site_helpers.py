"""The committed ledger's state and a run page with hostile evidence, shared by the site tests."""

from __future__ import annotations

from pathlib import Path

from cbledger.projections.fold import LedgerState
from cbledger.projections.site.evidence import ChainLink, ReportCounts, RunEvidence, ToolCall, Turn
from cbledger.projections.writers import load_state
from cbledger.workspace import Workspace

REPO = Path(__file__).resolve().parent.parent
HOSTILE = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">'


def committed_state() -> LedgerState:
    return load_state(Workspace.at(REPO).ledger)


def hostile_evidence() -> RunEvidence:
    """Every field an agent's run controls, carrying markup that would run if not escaped."""
    return RunEvidence(
        turns=[
            Turn(kind="request", title="request", text=f"please {HOSTILE}"),
            Turn(kind="assistant", title="assistant", text=f"sure {HOSTILE}",
                 calls=[ToolCall(name=f"edit{HOSTILE}", args=f'{{"path": "{HOSTILE}"}}')]),
            Turn(kind="tool", title=f"read_file{HOSTILE}", text=f"result {HOSTILE}", args="{}", error="rejected-call"),
            Turn(kind="event", title=f"odd{HOSTILE}", text=HOSTILE),
        ],
        diff=f"--- a/x\n+++ b/x\n@@ -1 +1 @@\n-old\n+{HOSTILE}\n",
        before={"erc": ReportCounts(errors=0, warnings=1, by_type=[(f"erc:{HOSTILE}", 1)])},
        after={"erc": ReportCounts(errors=2, warnings=0, by_type=[(f"erc:{HOSTILE}", 2)])},
        chain=[ChainLink(seq=1, type="run.recorded", hash="a" * 64, prev="0" * 64)],
    )


def crowd_stream():
    """A ledger that crowds the charts: five models sharing one point, long names, a model whose
    single run passed beside a repeated one that mostly did not, an uncosted route, a costed
    route with a run missing its cost, two cost segments, and two copperhead versions between
    which one model regresses (its `project compare` exits 1)."""
    from tests.factories import Stream

    s = Stream("site-crowd")
    tasks = ["rename-net", "move-label-near-the-connector-on-the-long-named-sheet", "route-power"]
    for t, tier in zip(tasks, ("simple", "medium", "hard"), strict=True):
        s.task(t, tier=tier)
    s.suite("1.0.0", reason="first suite")
    for version in ("0.9.0", "0.9.3"):
        for repeat in (1, 2):
            for t in tasks:
                for n in range(5):  # the same results at the same cost: one point, five labels
                    s.graded_run(t, f"vendor:twin-{n}-with-a-rather-long-provider-model-name", "pass" if t != "route-power" else "fail",
                                 repeat=repeat, usd_micros=100_000, copperhead_version=version)
                s.graded_run(t, "vendor:steady-six", "pass" if t == "rename-net" else "fail", repeat=repeat,
                             usd_micros=80_000, copperhead_version=version)
                s.graded_run(t, "cheap:small", "pass" if repeat == 1 else "fail", repeat=repeat, segment="api-cheap",
                             usd_micros=4_000, copperhead_version=version)
                s.graded_run(t, "claude-code", "pass", repeat=repeat, segment="saved-login", pinning="weak",
                             usd_micros=None, copperhead_version=version)
                s.graded_run(t, "vendor:half-costed", "pass", repeat=repeat,
                             usd_micros=None if repeat == 2 else 50_000, copperhead_version=version)
                # passes everything under the older harness and nothing under the newer: a regression
                s.graded_run(t, "vendor:regressed", "pass" if version == "0.9.0" else "fail", repeat=repeat,
                             usd_micros=60_000, copperhead_version=version)
    s.graded_run("rename-net", "vendor:lucky-once", "pass", usd_micros=20_000, copperhead_version="0.9.3")
    # two more simple tasks, so the regression is paired over three tasks of one tier and fires
    for t in ("swap-led", "label-net"):
        s.task(t, tier="simple")
        for version in ("0.9.0", "0.9.3"):
            for repeat in (1, 2):
                s.graded_run(t, "vendor:regressed", "pass" if version == "0.9.0" else "fail", repeat=repeat,
                             usd_micros=60_000, copperhead_version=version)
    return s


def crowd_state():
    """`crowd_stream` folded, through a ledger file as the CLI would read it."""
    import tempfile

    from cbledger.ledger.store import LedgerStore
    from tests.factories import MAINTAINER

    with tempfile.TemporaryDirectory() as tmp:
        ledger = Path(tmp) / "events.jsonl"
        LedgerStore(ledger).init("site-crowd", MAINTAINER)
        LedgerStore(ledger).append(crowd_stream().drafts()[1:])
        return load_state(ledger)
