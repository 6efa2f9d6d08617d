"""kicad-cli on an end state runs confined like the agent: what the agent's files point at on the
host (a library table naming a host path) is out of its reach, and the reports are those the
unconfined oracle gives for the same tree."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from cbledger.kicad import oracle
from cbledger.kicad.reports import parse_report
from cbledger.runner import confined_verify, isolation

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def bwrap() -> isolation.Confinement:
    how = isolation.confinement(False, ())
    assert how.bwrap is not None
    return how


def test_the_verifying_process_cannot_read_the_host(tmp_path: Path, bwrap, kicad_cli, monkeypatch):
    secret = tmp_path / "host" / "secret.kicad_sym"
    secret.parent.mkdir()
    secret.write_text("SECRET-ON-THE-HOST\n")
    tree = tmp_path / "end"
    shutil.copytree(REPO / "fixtures" / "synthetic-led-resistor" / "tree", tree)
    (tree / "sym-lib-table").write_text(f'(sym_lib_table (lib (name "x")(type "KiCad")(uri "{secret}")))\n')
    # what runs in place of ERC: it reads the path the agent's table names, as kicad-cli would
    monkeypatch.setattr(oracle, "erc_argv", lambda cli, sch, out: [
        "/bin/sh", "-c", f'cat "{secret}" > "{out}" 2>/dev/null || printf "{{}}" > "{out}"'])
    out = tmp_path / "reports"
    made = confined_verify.verify(tree, "led-indicator.kicad_sch", None, out, bwrap)
    assert made.erc == out / "erc.json"
    assert "SECRET" not in made.erc.read_text()
    assert not (tree / ".git").exists()  # the agent's tree is read, never written


def test_a_verifier_killed_from_outside_is_said_so_not_blamed_on_the_file(tmp_path: Path, bwrap, kicad_cli, monkeypatch):
    """An OOM kill or an operator's SIGKILL of the runner's own kicad-cli read as kicad-cli failing on
    the agent's file; said as a signal, the run is recorded as not the model's (harness-signal)."""
    from cbledger.errors import UserError
    from cbledger.runner.harness_failure import detect

    tree = tmp_path / "end"
    shutil.copytree(REPO / "fixtures" / "synthetic-led-resistor" / "tree", tree)
    monkeypatch.setattr(oracle, "erc_argv", lambda cli, sch, out: ["/bin/sh", "-c", "kill -KILL $$"])
    with pytest.raises(UserError) as caught:
        confined_verify.verify(tree, "led-indicator.kicad_sch", None, tmp_path / "reports", bwrap)
    said = str(caught.value)
    assert said == "kicad-cli ERC on led-indicator.kicad_sch was ended by SIGKILL, which the runner did not send", said
    from cbledger.grading.evidence.transcript import Transcript

    assert detect(Transcript(path=None), "", 0, False, unpreserved=said).kind == "harness-signal"


def test_confined_reports_are_the_oracles_reports(tmp_path: Path, bwrap, kicad_cli):
    tree = REPO / "fixtures" / "synthetic-mcu-sensor" / "tree"
    from cbledger.tasks.catalog import load_fixture

    art = load_fixture(REPO / "fixtures" / "synthetic-mcu-sensor").manifest.artifacts
    confined = confined_verify.verify(tree, art.schematic, art.board, tmp_path / "in", bwrap)
    plain = oracle.verify_tree(tree, art.schematic, art.board, tmp_path / "out")
    for a, b in ((confined.erc, plain.erc), (confined.drc, plain.drc)):
        assert a is not None and b is not None
        va = sorted((v.source, v.type, v.severity) for v in parse_report(json.loads(a.read_text()), "a").violations)
        vb = sorted((v.source, v.type, v.severity) for v in parse_report(json.loads(b.read_text()), "b").violations)
        assert va == vb
