"""The `replay` agent: re-materializes a preserved run in a fresh sandbox.

Useful when the environment changes under a finished run (a new kicad-cli, a new grader): the
end state the model produced is put back exactly — HEAD at the run's last commit, the working
tree at its captured end state — and then verified and graded anew as its own run, recorded with
run mode `replay` and the original run's id in its note. No model is called.
"""

from __future__ import annotations

import pygit2
from blake3 import blake3

from cbledger.errors import UserError
from cbledger.ledger.events import condition_key
from cbledger.runner import ledger_view
from cbledger.runner.agents.base import AgentInput, AgentResult
from cbledger.runner.bundle_read import BundleError, unbundle
from cbledger.runner.sandbox import BRANCH
from cbledger.workspace import Workspace


class ReplayAgent:
    kind = "replay"

    def __init__(self, workspace: Workspace):
        self.workspace = workspace
        self.view = ledger_view.read(workspace.ledger)

    def source_run(self, inp: AgentInput):
        """The run to put back: the model's own, under the same condition (a replay is graded in
        its condition's rows), that reached the model (a run the harness or its provider ended
        holds nothing of the model to grade again); the latest of them."""
        condition = condition_key(inp.ablations)
        runs = [
            r
            for r in self.view.runs.values()
            if r.task.id == inp.task.id
            and r.model.id == inp.model_id
            and r.run_mode != "replay"
            and r.run_id not in self.view.retracted
            and r.harness_failure is None
            and condition_key(r.ablations) == condition
        ]
        if not runs:
            raise UserError(
                f"no preserved run of {inp.task.id} by {inp.model_id} under condition {condition!r} to replay "
                "(replays, retracted runs and runs the harness or its environment ended are not replayed)"
            )
        # the latest: a campaign's repeats are numbered above every earlier one, so a replay's
        # own repeat never names the run it replays
        return runs[-1]

    def run(self, inp: AgentInput) -> AgentResult:
        src = self.source_run(inp)
        if src.sandbox.baseline_sha != inp.baseline_sha:
            raise UserError(
                f"run {src.run_id} started from baseline {src.sandbox.baseline_sha}, this sandbox from "
                f"{inp.baseline_sha}: the fixture or task config changed, so it cannot be replayed here"
            )
        bundle = self.workspace.stored(src.sandbox.store)
        if bundle is None or not bundle.is_file():
            raise UserError(f"{bundle or src.sandbox.store}: preserved run {src.run_id} missing")
        data = bundle.read_bytes()
        if blake3(data).hexdigest() != src.sandbox.store_blake3:
            raise UserError(f"{bundle}: digest differs from the one recorded for run {src.run_id}")
        repo = pygit2.Repository(str(inp.sandbox))
        try:
            unbundle(repo, data, refs_to=None)  # the objects alone: only the branch below names them
        except BundleError as exc:
            raise UserError(f"{bundle}: could not be read: {exc}") from None
        repo.references.create(f"refs/heads/{BRANCH}", pygit2.Oid(hex=src.sandbox.head_sha), force=True)
        repo.checkout_tree(repo[src.sandbox.capture_sha].peel(pygit2.Tree), strategy=pygit2.enums.CheckoutStrategy.FORCE | pygit2.enums.CheckoutStrategy.REMOVE_UNTRACKED)
        repo.set_head(f"refs/heads/{BRANCH}")
        return AgentResult(runner_exit=src.runner_exit, note=f"replay of run {src.run_id}", provider=src.model.provider, model=src.model, cost=src.cost, replay_of=src.run_id)

