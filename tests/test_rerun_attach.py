"""Attaching a cassette to a run the committed ledger recorded before cassettes: the run is
re-executed strictly from its kept session through copperhead 0.9.0 behind the recording proxy,
and only an identical re-execution gets what the proxy saw, as `cassette.attached`. Every test
works on a copy of the committed results (the project's tasks, sessions and boards read in
place); a refusal writes nothing.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import msgspec
import pytest

from cbledger.ledger.store import LedgerStore
from cbledger.reproduce import attach as attach_mod
from cbledger.reproduce import rerun as rerun_mod
from cbledger.runner import cassette as cassette_mod
from cbledger.runner import ledger_view
from cbledger.workspace import Workspace
from tests.factories import run_cli
from tests.test_real_harness import BUILD_COMMIT, REPO
from tests.test_rerun_real import _patched_copy, _with_cassette, edited_request

pytestmark = [pytest.mark.slow, pytest.mark.kicad, pytest.mark.shared, pytest.mark.copperhead]

SOLVE = "20261201T205440Z-compat-scripted-solve-led-resistor-swap-r1-0edfec"
IDLE = "20261201T205541Z-compat-scripted-idle-led-resistor-swap-r1-e672a9"
RETRACTED = "20261201T205509Z-compat-scripted-solve-led-resistor-swap-variant-r1-54396b"


def _copy(tmp: Path) -> Path:
    """The committed results as they were before cassettes were attached: the ledger cut before
    its first `cassette.attached` (a prefix of a ledger is a ledger), without the checkpoints
    signed after the cut or the cassettes only those attachments named."""
    results = tmp / "results"
    shutil.copytree(REPO / "results", results, ignore=shutil.ignore_patterns("site"))
    shutil.copy(REPO / "LEADERBOARD.md", results / "LEADERBOARD.md")
    ledger = results / "ledger" / "events.jsonl"
    lines = ledger.read_bytes().splitlines(keepends=True)
    cut = next((i for i, line in enumerate(lines) if b'"type":"cassette.attached"' in line), len(lines))
    ledger.write_bytes(b"".join(lines[:cut]))
    for checkpoint in (results / "checkpoints").glob("*.txt"):
        if int(checkpoint.stem) >= cut:
            checkpoint.unlink()
    named = {json.loads(line)["event"]["body"].get("cassette", {}).get("path") for line in lines[:cut]}
    for tape in (results / "cassettes").glob("*.json"):
        if f"results/cassettes/{tape.name}" not in named:
            tape.unlink()
    assert not list(LedgerStore(ledger).read(types={"cassette.attached"}))
    return ledger


def cli(ledger: Path, *args: object, env: dict[str, str] | None = None):
    return run_cli([*args, "--root", REPO, "--ledger", ledger], env=env)


@pytest.fixture(scope="module")
def attached(tmp_path_factory, shared_real, kicad_cli, copperhead_cli):
    """A copy of the committed results with a cassette attached to SOLVE."""
    ledger = _copy(tmp_path_factory.mktemp("attach"))
    result = cli(ledger, "rerun", SOLVE, "--from-session", "--attach", "--copperhead-cli", copperhead_cli, "--json")
    assert result.exit_code == 0, result.output
    return ledger, json.loads(result.stdout)


def test_an_identical_rerun_from_the_kept_session_attaches_what_the_proxy_recorded(attached, copperhead_cli):
    ledger, (report,) = attached
    assert report["status"] == "identical" and report["differences"] == []
    stored = list(LedgerStore(ledger).read(types={"cassette.attached"}))
    assert [s.event.id for s in stored] == [f"cassette.attached:{SOLVE}"] and report["attached"]["seq"] == stored[0].seq
    body = stored[0].event.body
    assert (body.run_id, body.origin, body.copperhead_version, body.copperhead_commit) == (SOLVE, "session-rerun", "0.9.0", BUILD_COMMIT)
    # the script it came from, by the SHA-256 its suite version's kept definitions list it under
    assert (body.session.path, body.session.suite_version) == ("tasks/led-resistor-swap/sessions/solve.json", "1.1.0")
    kept = REPO / "results" / "suites" / "objects" / body.session.sha256[:2] / body.session.sha256
    assert hashlib.sha256(kept.read_bytes()).hexdigest() == body.session.sha256
    ws = Workspace.at(REPO, ledger=ledger)
    path = ws.stored(body.cassette.path)
    assert path is not None and path.parent == ledger.parent.parent / "cassettes"
    data = path.read_bytes()
    assert (cassette_mod.digest(data), len(data)) == (body.cassette.blake3, body.cassette.bytes)
    tape = cassette_mod.load(path)
    # the requests the harness sent at the re-execution, every one of them, none of them empty
    assert body.cassette.exchanges == len(tape.exchanges) == 7
    assert all(ex.request and ex.request["messages"] and ex.status == 200 for ex in tape.exchanges)
    view = ledger_view.read(ledger)
    assert view.cassette(view.runs[SOLVE]) == body.cassette and view.runs[SOLVE].cassette is msgspec.UNSET


def test_rerun_then_serves_the_attached_cassette_strictly_and_compares_its_requests(attached, copperhead_cli, monkeypatch):
    ledger, _ = attached
    plain = cli(ledger, "rerun", SOLVE, "--copperhead-cli", copperhead_cli, "--strict")  # no --from-session now
    assert plain.exit_code == 0, plain.output
    assert f"{SOLVE}  identical  (strict; outcome unchanged: pass/done -> pass/done)" in plain.output
    _with_cassette(monkeypatch, lambda tape: edited_request(tape, 1))
    ws = Workspace.at(REPO, ledger=ledger)
    result = rerun_mod.rerun(ws, SOLVE, copperhead_cli=str(copperhead_cli), strict=True)
    assert result.status == "diverged" and result.first_request == "request 2 at $.messages[0].content"


def test_a_patched_harness_build_is_caught_by_the_lenient_rerun_of_an_attached_cassette(attached, copperhead_cli, tmp_path):
    ledger, _ = attached
    patched = _patched_copy(tmp_path, Path(copperhead_cli), "Edit s-expressions surgically", "Edit s-expressions boldly")
    result = cli(ledger, "rerun", SOLVE, "--copperhead-cli", patched)
    assert result.exit_code == 1, result.output
    assert f"{SOLVE}  diverged  (lenient;" in result.output
    assert "first differing request: request 1 at $.messages[0].content" in result.output


def test_attaching_twice_to_a_retracted_or_a_gold_run_is_refused_and_writes_nothing(attached, copperhead_cli):
    ledger, _ = attached
    gold = next(r.run_id for r in ledger_view.read(ledger).runs.values() if r.run_mode == "gold")
    cassettes = ledger.parent.parent / "cassettes"
    before, files = ledger.read_bytes(), sorted(cassettes.iterdir())
    for run_id, why in (
        (SOLVE, "already has a cassette: it was given one"),
        (RETRACTED, "is retracted"),
        (gold, "is a gold run"),
    ):
        result = cli(ledger, "rerun", IDLE, run_id, "--from-session", "--attach", "--copperhead-cli", copperhead_cli)
        assert result.exit_code == 2 and f"nothing attached: run {run_id} {why}" in result.output, result.output
    assert cli(ledger, "rerun", SOLVE, "--attach").exit_code == 2  # only with --from-session
    assert ledger.read_bytes() == before and sorted(cassettes.iterdir()) == files
    assert SOLVE not in attach_mod.candidates(ledger_view.read(ledger)) and IDLE in attach_mod.candidates(ledger_view.read(ledger))


def test_one_rerun_that_diverges_attaches_nothing_at_all(tmp_path, shared_real, kicad_cli, copperhead_cli, monkeypatch):
    ledger = _copy(tmp_path)
    cassettes = ledger.parent.parent / "cassettes"
    before = ledger.read_bytes()
    kept = sorted(cassettes.iterdir()) if cassettes.exists() else []  # runs that kept their own
    real = cassette_mod.from_session

    def short_solve(session, model_id):
        tape = real(session, model_id)
        return msgspec.structs.replace(tape, exchanges=tape.exchanges[:-1]) if model_id.endswith("solve") else tape

    monkeypatch.setattr(rerun_mod.cassette_mod, "from_session", short_solve)
    outcome = attach_mod.attach(Workspace.at(REPO, ledger=ledger), [IDLE, SOLVE], copperhead_cli=str(copperhead_cli))
    assert [(r.run_id, r.status) for r in outcome.results] == [(IDLE, "identical"), (SOLVE, "exhausted")]
    assert outcome.attached == [] and outcome.exit_code == 3
    assert ledger.read_bytes() == before
    assert (sorted(cassettes.iterdir()) if cassettes.exists() else []) == kept


def test_replay_verify_checks_an_attached_cassettes_presence_and_digest(tmp_path):
    """On a copy of the whole committed results, SOLVE's committed attachment. (A copy cut before
    the first attachment, as `attached` makes, records an older suite version than the working
    tree's, and so cannot verify clean against it.)"""
    results = tmp_path / "results"
    shutil.copytree(REPO / "results", results, ignore=shutil.ignore_patterns("site"))
    ledger = results / "ledger" / "events.jsonl"
    stored = next(s for s in LedgerStore(ledger).read(types={"cassette.attached"}) if s.event.body.run_id == SOLVE)
    path = results / "cassettes" / f"{stored.event.body.cassette.blake3}.json"
    assert stored.event.body.cassette.path == f"results/cassettes/{path.name}"
    seq = stored.seq
    kept = path.read_bytes()
    try:
        ok = cli(ledger, "replay", "--verify", "--run", SOLVE, "--no-projections")
        assert ok.exit_code == 0, ok.output
        path.write_bytes(kept.replace(b"scripted-solve", b"scripted-other", 1))
        altered = cli(ledger, "replay", "--verify", "--run", SOLVE, "--no-projections")
        assert altered.exit_code == 3 and "cassette-digest" in altered.output
        assert f"the cassette attached at seq {seq} does not have the BLAKE3 or size recorded for it" in altered.output
        # a run --since (--since-checkpoint) does not re-grade: its cassette is held to its digest all the same
        head = LedgerStore(ledger).head().seq
        narrowed = cli(ledger, "replay", "--verify", "--since", str(head), "--no-projections")
        assert narrowed.exit_code == 3 and "cassette-digest" in narrowed.output, narrowed.output
        path.unlink()
        missing = cli(ledger, "replay", "--verify", "--run", SOLVE, "--no-projections")
        assert missing.exit_code == 3 and "cassette-missing" in missing.output
        assert f"the cassette attached at seq {seq} is missing" in missing.output
    finally:
        path.write_bytes(kept)


@pytest.mark.parametrize("durable", [True, False], ids=["after-the-batch-landed", "before-it"])
def test_an_interrupted_attachment_keeps_its_cassette_exactly_when_its_event_landed(tmp_path, monkeypatch, durable):
    """`_keep` as an identical re-execution reaches it (what the committed attachment of SOLVE
    recorded), interrupted during its append: after the batch was made durable the event names
    the cassette, which must stay; before that, the cassette it wrote must go."""
    ledger = _copy(tmp_path)
    committed = next(
        s.event for s in LedgerStore(REPO / "results" / "ledger" / "events.jsonl").read(types={"cassette.attached"})
        if s.event.body.run_id == SOLVE
    )
    body = committed.body
    tape = msgspec.json.decode((REPO / body.cassette.path).read_bytes(), type=cassette_mod.Cassette)
    result = rerun_mod.RerunResult(
        run_id=SOLVE, mode="strict", status="identical", recorded=tape, session=body.session,
        build=(body.copperhead_version, body.copperhead_commit),
    )
    workspace = Workspace.at(REPO, ledger)
    target = workspace.stored(body.cassette.path)
    assert target is not None and not target.exists() and target.is_relative_to(tmp_path)
    real_append = LedgerStore.append

    def interrupted(self, events, **kw):
        if durable:
            real_append(self, events, **kw)
        raise KeyboardInterrupt

    monkeypatch.setattr(LedgerStore, "append", interrupted)
    with pytest.raises(KeyboardInterrupt):
        attach_mod._keep(workspace, [result])
    landed = [s.event for s in LedgerStore(ledger).read(types={"cassette.attached"})]
    if durable:
        assert [e.body.run_id for e in landed] == [SOLVE]
        assert target.is_file(), "the cassette the landed event names was removed"
    else:
        assert landed == [] and not target.exists()
