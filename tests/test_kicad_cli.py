"""`cbledger kicad ...`: thin commands over the library, one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import typer
from typer.testing import CliRunner

from cbledger.cli import kicad_commands
from cbledger.errors import UserError

DATA = Path(__file__).parent / "data" / "kicad"
runner = CliRunner()


def _app() -> typer.Typer:
    app = typer.Typer()

    @app.callback()
    def root() -> None:
        """Test root."""

    kicad_commands.register(app)
    return app


def test_nets_text_and_json() -> None:
    schematic = str(DATA / "hierarchy" / "hierarchy.kicad_sch")
    text = runner.invoke(_app(), ["kicad", "nets", schematic])
    assert text.exit_code == 0, text.output
    assert "/Amp1/IN: R1.1 R2.1" in text.output.splitlines()
    data = json.loads(runner.invoke(_app(), ["kicad", "nets", schematic, "--json"]).output)
    gnd = next(net for net in data if net["name"] == "GND")
    assert {(n["reference"], n["pin"]) for n in gnd["nodes"]} == {("R5", "2"), ("R6", "2"), ("R11", "2"), ("R12", "2"), ("R102", "2")}


def test_an_empty_schematic_is_said_on_stderr_and_lists_nothing(tmp_path: Path) -> None:
    empty = tmp_path / "empty.kicad_sch"
    empty.write_text('(kicad_sch (version 20250114) (generator "eeschema") (uuid "00000000-0000-0000-0000-000000000001") (paper "A4"))\n')
    for command, said in (("nets", "no nets"), ("symbols", "no placed symbol")):
        r = runner.invoke(_app(), ["kicad", command, str(empty)])
        assert r.exit_code == 0 and r.stdout == "" and f"note: {empty}: {said}" in r.stderr, r.output


def test_symbols_text_and_json() -> None:
    schematic = str(DATA / "wiring" / "wiring.kicad_sch")
    text = runner.invoke(_app(), ["kicad", "symbols", schematic])
    assert text.exit_code == 0, text.output
    lines = text.output.splitlines()
    assert any(line.startswith("R22\t") and line.endswith("no-board") for line in lines)
    assert any(line.startswith("R23\t") and line.endswith("dnp") for line in lines)
    data = json.loads(runner.invoke(_app(), ["kicad", "symbols", schematic, "--json"]).output)
    q1 = next(r for r in data if r["reference"] == "Q1")
    assert (q1["libId"], q1["unit"], q1["inBom"], q1["onBoard"], q1["dnp"]) == ("Test:Q_NPN", 1, True, True, False)


def test_compare_exit_codes(tmp_path: Path) -> None:
    schematic = str(DATA / "power" / "power.kicad_sch")
    nets = json.loads((DATA / "power" / "expected-nets.json").read_text())
    good = tmp_path / "good.net"
    good.write_text(_as_kicad_net(nets))
    ok = runner.invoke(_app(), ["kicad", "compare", schematic, str(good)])
    assert ok.exit_code == 0 and "100.0%" in ok.output
    nets[0]["name"] = "SOMETHING_ELSE"
    bad = tmp_path / "bad.net"
    bad.write_text(_as_kicad_net(nets))
    result = runner.invoke(_app(), ["kicad", "compare", schematic, str(bad), "--json"])
    assert result.exit_code == 1
    assert json.loads(result.output)["differences"][0]["kind"] == "renamed"


def test_errors_surface_as_user_errors(tmp_path: Path) -> None:
    result = runner.invoke(_app(), ["kicad", "nets", str(tmp_path / "missing.kicad_sch")])
    assert result.exit_code != 0
    assert isinstance(result.exception, UserError) and "missing.kicad_sch: no such file" in str(result.exception)


def test_main_prints_one_line_and_exits_non_zero(tmp_path: Path) -> None:
    broken = tmp_path / "broken.kicad_sch"
    broken.write_text("(kicad_sch (version 20250114)\n  (wire (pts (xy 0 0) (xy 1 1))\n")
    done = subprocess.run(
        [sys.executable, "-c", "from cbledger.cli.app import main; main()", "kicad", "nets", str(broken)],
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parent.parent,
    )
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0
    assert done.stderr.startswith("error: ") and "broken.kicad_sch" in done.stderr and "Traceback" not in done.stderr


def _as_kicad_net(nets: list[dict]) -> str:
    def q(text: str) -> str:
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'

    body = []
    for code, net in enumerate(nets, 1):
        nodes = " ".join(
            f"(node (ref {q(n['reference'])}) (pin {q(n['pin'])})"
            + (f" (pinfunction {q(n['pin_name'])})" if n["pin_name"] else "")
            + f" (pintype {q(n['pin_type'])}))"
            for n in net["nodes"]
        )
        body.append(f"(net (code {q(str(code))}) (name {q(net['name'])}) (class \"Default\") {nodes})")
    return '(export (version "E") (nets ' + " ".join(body) + "))\n"


def test_summary_reports_buses_and_notes(tmp_path: Path) -> None:
    result = runner.invoke(_app(), ["kicad", "summary", str(DATA / "bus" / "bus.kicad_sch"), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["instances"][0]["buses"] == 1 and data["instances"][0]["busEntries"] == 5
    assert data["notes"] == []
    text = runner.invoke(_app(), ["kicad", "summary", str(DATA / "hierarchy" / "hierarchy.kicad_sch")])
    assert "/Amp2/Leaf/ (leaf.kicad_sch): 1 symbols" in text.output
