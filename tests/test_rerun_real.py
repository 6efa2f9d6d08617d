"""Re-executing runs through the real harness: copperhead 0.9.0, a scripted run recorded by the
proxy (through the sandbox's socket relay), then `cbledger rerun` serving its cassette offline.

One project and one recorded run serve every test here; each rerun works in a scratch directory
of its own and writes nothing to the ledger, so the tests do not disturb one another.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import msgspec
import pytest

from cbledger.reproduce import rerun as rerun_mod
from cbledger.runner import cassette as cassette_mod
from cbledger.workspace import Workspace
from tests.test_real_harness import KEYS, build

pytestmark = [pytest.mark.slow, pytest.mark.kicad, pytest.mark.shared, pytest.mark.copperhead]

TASK = "led-resistor-swap"


@pytest.fixture(scope="module")
def recorded(tmp_path_factory, shared_real, kicad_cli, copperhead_cli):
    """A project with one scripted run of TASK, its exchanges recorded."""
    with pytest.MonkeyPatch.context() as mp:
        for name in KEYS:
            mp.delenv(name, raising=False)
        project = build(tmp_path_factory.mktemp("rerun"), shared_real, copperhead_cli)
        result = project.run(TASK, "--session", "solve", "--repeats", "1")
        assert result.exit_code == 0, result.output
        (run,) = project.events("run.recorded")
        yield project, run


def _with_cassette(monkeypatch, change):
    """Serves the run's cassette as `change` alters it (the stored one stays as recorded)."""
    load = cassette_mod.load

    def altered(path, expect=None):
        return change(load(path, expect))

    monkeypatch.setattr(rerun_mod.cassette_mod, "load", altered)


def edited_request(tape, k: int):
    """`tape` with the first message of its (k+1)-th request changed: one the harness never sent."""
    calls = list(tape.exchanges)
    request = json.loads(json.dumps(calls[k].request))
    request["messages"][0]["content"] += " (a prompt this harness never sent)"
    calls[k] = msgspec.structs.replace(calls[k], request=request)
    return msgspec.structs.replace(tape, exchanges=calls)


def test_a_recorded_run_carries_its_cassette_and_reruns_identically(recorded, copperhead_cli):
    project, run = recorded
    ref = run.cassette
    assert ref is not msgspec.UNSET and ref.path == f"results/cassettes/{ref.blake3}.json"
    data = (project.root / ref.path).read_bytes()
    assert cassette_mod.digest(data) == ref.blake3 and len(data) == ref.bytes
    tape = cassette_mod.load(project.root / ref.path, expect=ref.blake3)
    # every model call of the run, in order, answered by the endpoint behind the proxy
    assert ref.exchanges == len(tape.exchanges) == run.stats.turns_used
    assert all(e.status == 200 and e.model == "scripted-solve" and e.request["messages"] for e in tape.exchanges)
    assert tape.workdir and tape.workdir.endswith(run.run_id) and tape.route == "openai-compat"

    result = project.cli("rerun", run.run_id, "--copperhead-cli", copperhead_cli, "--strict", "--json")
    assert result.exit_code == 0, result.output
    (report,) = json.loads(result.output)
    assert report["status"] == "identical" and report["mode"] == "strict" and report["differences"] == []
    assert report["original"] == report["rerun"] == {"verdict": "pass", "exitPath": "done"}
    assert report["firstDifferingRequest"] is None and not report["outcomeChanged"]
    # nothing was written: the ledger still holds the one run, and it verifies
    assert [r.run_id for r in project.events("run.recorded")] == [run.run_id]
    project.verify()


def test_replay_verify_rerun_re_executes_every_run_with_a_cassette(recorded, copperhead_cli):
    project, run = recorded
    result = project.cli("replay", "--verify", "--rerun", env={"COPPERHEAD_CLI": str(copperhead_cli)})
    assert result.exit_code == 0, result.output
    assert f"{run.run_id}  identical  (strict; outcome unchanged: pass/done -> pass/done)" in result.output
    assert "re-executed 1 run(s): 1 identical" in result.output


def test_a_request_that_differs_from_the_recorded_one_is_named_and_the_rerun_diverges(recorded, copperhead_cli, monkeypatch):
    project, run = recorded
    _with_cassette(monkeypatch, lambda tape: edited_request(tape, 2))
    result = rerun_mod.rerun(Workspace.at(project.root), run.run_id, copperhead_cli=str(copperhead_cli), strict=True)
    assert result.status == "diverged" and result.exit_code == 1
    assert result.first_request == "request 3 at $.messages[0].content"
    assert result.differences[0] == "request 3 at $.messages[0].content differs from the recorded request"
    assert result.rerun[0] == "fail" and result.outcome_changed  # the harness got an error, not an answer


def test_a_harness_that_asks_for_more_than_was_recorded_exhausts_the_cassette(recorded, copperhead_cli, monkeypatch):
    project, run = recorded
    _with_cassette(monkeypatch, lambda tape: msgspec.structs.replace(tape, exchanges=tape.exchanges[:-2]))
    result = rerun_mod.rerun(Workspace.at(project.root), run.run_id, copperhead_cli=str(copperhead_cli), strict=True)
    assert result.status == "exhausted" and result.exit_code == 3
    assert f"more requests than the cassette's {run.cassette.exchanges - 2}" in result.differences[0]


def _patched_copy(tmp_path: Path, copperhead_cli: Path, old: str, new: str, file: str = "dist/agent/prompts.js") -> Path:
    package = copperhead_cli.parent.parent  # node_modules/copperhead
    prefix = package.parent.parent
    copy = tmp_path / "patched"
    shutil.copytree(prefix, copy, symlinks=True)
    target = copy / "node_modules" / "copperhead" / file
    text = target.read_text()
    assert old in text
    target.write_text(text.replace(old, new, 1))
    return copy / "node_modules" / "copperhead" / "dist" / "cli.js"


def test_a_patched_harness_build_is_caught_by_the_lenient_rerun(recorded, copperhead_cli, tmp_path):
    project, run = recorded
    patched = _patched_copy(tmp_path, Path(copperhead_cli), "Edit s-expressions surgically", "Edit s-expressions boldly")
    result = project.cli("rerun", run.run_id, "--copperhead-cli", patched)
    assert result.exit_code == 1, result.output
    assert f"{run.run_id}  diverged  (lenient; outcome unchanged: pass/done -> pass/done)" in result.output
    assert "first differing request: request 1 at $.messages[0].content" in result.output
    # every request carries the system prompt, so every one of them is flagged
    assert result.output.count("also differs: request") == run.cassette.exchanges - 1


def test_a_strict_rerun_refuses_another_build_and_a_run_without_a_cassette(recorded, copperhead_cli, tmp_path):
    project, run = recorded
    other = _patched_copy(tmp_path, Path(copperhead_cli), '"version": "0.9.0"', '"version": "0.9.1"', file="package.json")
    result = project.cli("rerun", run.run_id, "--copperhead-cli", other, "--strict")
    assert result.exit_code == 2 and "a strict rerun needs the same build" in result.output
    assert "copperhead 0.9.0" in result.output and "this CLI is 0.9.1" in result.output
    gold = project.cli("run", TASK, "--agent", "gold", "--repeats", "1")
    assert gold.exit_code == 0, gold.output
    gold_run = next(r for r in project.events("run.recorded") if r.run_mode == "gold")
    refused = project.cli("rerun", gold_run.run_id)
    assert refused.exit_code == 2 and f"run {gold_run.run_id} has no cassette" in refused.output
    assert os.path.exists(project.root / run.cassette.path)


def test_an_altered_cassette_fails_verification_and_is_refused_by_rerun(recorded, copperhead_cli):
    project, run = recorded
    path = project.root / run.cassette.path
    kept = path.read_bytes()
    try:
        path.write_bytes(kept.replace(b"scripted-solve", b"scripted-other", 1))
        verified = project.cli("replay", "--verify")
        assert verified.exit_code == 3 and "cassette-digest" in verified.output, verified.output
        refused = project.cli("rerun", run.run_id, "--copperhead-cli", copperhead_cli, "--strict")
        assert refused.exit_code == 2 and "its BLAKE3 is not" in refused.output
        path.unlink()
        missing = project.cli("replay", "--verify")
        assert missing.exit_code == 3 and "cassette-missing" in missing.output
    finally:
        path.write_bytes(kept)
    project.verify()


def test_a_committed_scripted_run_re_executes_identically_from_its_kept_session(copperhead_cli, shared_real, kicad_cli):
    """A run the committed ledger recorded before cassettes, re-executed offline from the session
    script its suite version kept: the same end state, diff, transcript and grade."""
    from tests.test_real_harness import REPO

    workspace = Workspace.at(REPO)
    run_id = "20261201T205440Z-compat-scripted-solve-led-resistor-swap-r1-0edfec"
    result = rerun_mod.rerun(workspace, run_id, copperhead_cli=str(copperhead_cli), strict=True, from_session=True)
    assert (result.status, result.differences) == ("identical", []), result.differences
    assert result.original == result.rerun == ("pass", "done")
    # the cassette attached to it since (cassette.attached) is served as strictly, requests compared
    attached = rerun_mod.rerun(workspace, run_id, copperhead_cli=str(copperhead_cli), strict=True)
    assert (attached.status, attached.differences, attached.flagged) == ("identical", [], [])
