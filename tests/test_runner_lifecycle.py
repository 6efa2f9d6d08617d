"""The sandbox lifecycle one run and one attempt of feedback passes share: what each returns or
raises when a step fails, and that the sandbox and the runner's kept baseline are gone on every
way out. The steps themselves are stand-ins (no git, kicad-cli or copperhead): what is under test
is the order and the clean-up around them."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from cbledger.grading import hints as hints_mod
from cbledger.runner import execute as steps
from cbledger.runner import passes

FAIL, PASS = "fail", "pass"


class Boom(Exception):
    pass


class Script:
    """Stand-ins for steps 2–9, each pass's agent and finish taken in turn from the script: a
    verdict, or Boom to raise."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, agents: list, finishes: list, setup: object = None) -> None:
        self.agents, self.finishes, self.calls = list(agents), list(finishes), []
        self.workdirs: list = []
        self.kept_dirs: list = []

        def plant_seed(settings, start, task, fixture):
            start.workdir.mkdir(parents=True)
            self.workdirs.append(start.workdir)
            return steps.Seed(None, "seed", b"")  # type: ignore[arg-type]

        def set_up(settings, planned, start, seed):
            if setup is Boom:
                raise Boom("setup")
            return steps.Baseline("baseline", [])

        def keep_baseline(repo, sha, into):
            into.mkdir()
            self.kept_dirs.append(into)
            return "kept"

        def run_agent(settings, planned, fixture, start, baseline, options=None):
            self.calls.append(("agent", start.run_id))
            if self.agents.pop(0) is Boom:
                raise Boom("agent")
            return steps.AgentRun(None, 0)  # type: ignore[arg-type]

        def finish_graded(settings, planned, fixture, start, seed, baseline, agent_run, pass_ref=None):
            self.calls.append(("finish", start.run_id))
            verdict = self.finishes.pop(0)
            if verdict is Boom:
                raise Boom("finish")
            return _output(start.run_id, verdict), "graded"

        def record_unpreserved(settings, planned, fixture, start, seed, baseline, agent_run, kept, exc, pass_ref=None):
            assert kept == "kept" and isinstance(exc, Boom)
            self.calls.append(("unpreserved", start.run_id))
            return _output(start.run_id, FAIL, unpreserved=True)

        for name, fn in [("plant_seed", plant_seed), ("set_up", set_up), ("run_agent", run_agent),
                         ("finish_graded", finish_graded), ("record_unpreserved", record_unpreserved)]:
            monkeypatch.setattr(steps, name, fn)
        monkeypatch.setattr(steps.sandbox_mod, "keep_baseline", keep_baseline)
        monkeypatch.setattr(passes, "carry_over", lambda workdir, index: False)
        monkeypatch.setattr(passes, "observed", lambda graded: None)
        monkeypatch.setattr(hints_mod, "hints", lambda assertions, graded, observed: [SimpleNamespace(text="hint")])
        monkeypatch.setattr(hints_mod, "message", lambda prompt, found, carried: "again")

    def assert_cleaned_up(self) -> None:
        assert self.workdirs and not any(p.exists() for p in self.workdirs + self.kept_dirs)


def _output(run_id: str, verdict: str, unpreserved: bool = False) -> SimpleNamespace:
    return SimpleNamespace(run=SimpleNamespace(run_id=run_id), grade=SimpleNamespace(verdict=verdict, assertions=[]),
                           unpreserved=unpreserved)


@pytest.fixture
def settings(tmp_path):
    catalog = SimpleNamespace(fixture_for=lambda task: "fixture")
    return SimpleNamespace(catalog=catalog, sandbox_root=tmp_path / "sandboxes", keep_sandboxes=False)


PLANNED = SimpleNamespace(
    task=SimpleNamespace(id="t", assertions=[], manifest=SimpleNamespace(request=SimpleNamespace(prompt="do it"))),
    model_id="compat:m", repeat=1, campaign=None,
)


def test_a_run_that_fails_after_its_agent_is_recorded_unpreserved(settings, monkeypatch):
    script = Script(monkeypatch, agents=[None], finishes=[Boom])
    out = steps.execute(settings, PLANNED)  # type: ignore[arg-type]
    assert out.unpreserved and [c[0] for c in script.calls] == ["agent", "finish", "unpreserved"]
    script.assert_cleaned_up()


@pytest.mark.parametrize("where", ["agent", "setup"])
def test_a_run_whose_agent_or_setup_fails_raises_and_leaves_nothing(settings, monkeypatch, where):
    script = Script(monkeypatch, agents=[Boom if where == "agent" else None], finishes=[], setup=Boom if where == "setup" else None)
    with pytest.raises(Boom, match=where):
        steps.execute(settings, PLANNED)  # type: ignore[arg-type]
    script.assert_cleaned_up()


def test_passes_go_on_while_they_fail_and_stop_at_the_first_pass(settings, monkeypatch):
    script = Script(monkeypatch, agents=[None, None, None], finishes=[FAIL, PASS, FAIL])
    outs = passes.execute_passes(settings, PLANNED, 3)  # type: ignore[arg-type]
    assert [o.grade.verdict for o in outs] == [FAIL, PASS]
    first, second = (o.run.run_id for o in outs)
    assert second.startswith(first + "-p2-") and len(script.workdirs) == 1  # one sandbox for the attempt
    script.assert_cleaned_up()


def test_a_later_pass_whose_agent_fails_leaves_the_passes_before_it(settings, monkeypatch):
    script = Script(monkeypatch, agents=[None, Boom, None], finishes=[FAIL, FAIL])
    outs = passes.execute_passes(settings, PLANNED, 3)  # type: ignore[arg-type]
    assert len(outs) == 1 and [c[0] for c in script.calls] == ["agent", "finish", "agent"]
    script.assert_cleaned_up()


def test_a_first_pass_whose_agent_fails_raises(settings, monkeypatch):
    script = Script(monkeypatch, agents=[Boom], finishes=[])
    with pytest.raises(Boom, match="agent"):
        passes.execute_passes(settings, PLANNED, 3)  # type: ignore[arg-type]
    script.assert_cleaned_up()


def test_a_pass_that_cannot_be_preserved_is_recorded_and_ends_the_attempt(settings, monkeypatch):
    script = Script(monkeypatch, agents=[None, None, None], finishes=[FAIL, Boom, FAIL])
    outs = passes.execute_passes(settings, PLANNED, 3)  # type: ignore[arg-type]
    assert [o.unpreserved for o in outs] == [False, True]
    assert [c[0] for c in script.calls] == ["agent", "finish", "agent", "finish", "unpreserved"]
    script.assert_cleaned_up()
