"""Projections of a ledger the real runner wrote: gold, noop and replay runs on the real
microphone board, projected with `cbledger project all`."""

from __future__ import annotations

import json

import pytest

from cbledger.projections import readmodel
from tests.runner_project import REFUSAL_TASK, RENAME_TASK, build_project
from tests.test_projections_cli import cli
from tests.test_projections_records import validate

pytestmark = [pytest.mark.slow, pytest.mark.kicad, pytest.mark.shared]


@pytest.fixture(scope="module")
def project(tmp_path_factory, shared_real, kicad_cli):
    p = build_project(tmp_path_factory.mktemp("projections"), shared_real)
    for args in (("--agent", "gold"), ("--agent", "noop"), ("--agent", "replay", "--model", "harness:gold")):
        result = p.run("--suite", "smoke", *args)
        assert result.exit_code == 0, result.output
    return p


def test_records_leaderboard_and_read_model_of_a_runner_ledger(project, shared_real):
    code, out, _ = cli("project", "all", "--root", project.root)
    assert code == 0, out
    schema = json.loads((shared_real / "reference-records" / "schema" / "result.schema.json").read_text())
    paths = sorted((project.root / "results").glob("20*/*/*/run-*.json"))
    assert len(paths) == 6
    modes = {}
    for p in paths:
        doc = json.loads(p.read_text())
        validate(schema, p.read_bytes())
        modes.setdefault(doc["run"]["runMode"], []).append((doc["task"]["id"], doc["verdict"]))
    assert sorted(modes["gold"]) == sorted([(RENAME_TASK, "pass"), (REFUSAL_TASK, "pass")] * 2)  # runs + replays
    assert sorted(modes["noop"]) == sorted([(RENAME_TASK, "fail"), (REFUSAL_TASK, "fail")])

    board = (project.root / "LEADERBOARD.md").read_text()
    check = board.split("### Harness discrimination check", 1)[1].split("###", 1)[0]
    assert f"| {RENAME_TASK} | edit | 1/1 | 0/1 | ok |" in check
    assert f"| {REFUSAL_TASK} | refusal | 1/1 | 0/1 | ok |" in check
    assert "### Replayed sessions (not a model sample)" in board
    assert cli("project", "all", "--check", "--root", project.root)[0] == 0

    dump = readmodel.canonical_dump(project.root / "results" / "cbledger.db")
    assert dump.count('"harness"') >= 4 and "table leaderboard_rows" in dump
