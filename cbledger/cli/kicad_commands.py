"""`cbledger kicad`: look at a schematic the way the grader does, without KiCad installed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import msgspec
import typer

from cbledger.kicad import compute_nets, load_schematic
from cbledger.kicad.compare import compare_netlists
from cbledger.kicad.kicad_net import read_kicad_netlist
from cbledger.kicad.symbols import list_symbols

SchematicArg = Annotated[Path, typer.Argument(help="Root .kicad_sch file; sheet files are followed from it.")]
JsonFlag = Annotated[bool, typer.Option("--json", help="Machine-readable output.")]

kicad_app = typer.Typer(
    name="kicad",
    help="Read KiCad schematics as the grader does: nets with KiCad's names, symbols, each sheet's contents, and a check against kicad-cli.",
    no_args_is_help=True,
)


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(word[:1].upper() + word[1:] for word in rest)


def _camel_keys(data: Any) -> Any:
    """The JSON with every key in the records' camelCase: here every key is a field name, never
    data (a net or reference name is a value)."""
    if isinstance(data, dict):
        return {_camel(k): _camel_keys(v) for k, v in data.items()}
    if isinstance(data, list | tuple):
        return [_camel_keys(v) for v in data]
    return data


def _print_json(data: object) -> None:
    typer.echo(json.dumps(_camel_keys(data), indent=2, ensure_ascii=False))


@kicad_app.command("nets")
def nets(schematic: SchematicArg, as_json: JsonFlag = False) -> None:
    """Every net with its KiCad name and its (reference, pin) nodes."""
    netlist = compute_nets(load_schematic(schematic))
    for note in netlist.notes:
        typer.echo(f"note: {note}", err=True)
    if as_json:
        _print_json(netlist.to_builtins())
        return
    for net in netlist.nets:
        typer.echo(f"{net.name}: " + " ".join(f"{n.reference}.{n.pin}" for n in net.nodes))
    if not netlist.nets:  # said apart from stdout, which stays the (empty) list
        typer.echo(f"note: {schematic}: no nets (no symbol pin is placed, or none is connected)", err=True)


@kicad_app.command("symbols")
def symbols(schematic: SchematicArg, as_json: JsonFlag = False) -> None:
    """Every placed symbol: reference, value, footprint, lib_id, unit and its BOM/board/DNP flags."""
    records = list_symbols(load_schematic(schematic))
    if as_json:
        _print_json([msgspec.to_builtins(r) for r in records])
        return
    if not records:
        typer.echo(f"note: {schematic}: no placed symbol", err=True)
    for r in records:
        flags = ",".join(
            flag for flag, on in (("dnp", r.dnp), ("no-bom", not r.in_bom), ("no-board", not r.on_board)) if on
        )
        typer.echo(f"{r.reference}\t{r.value}\t{r.footprint or '-'}\t{r.lib_id}\tunit {r.unit}" + (f"\t{flags}" if flags else ""))


@kicad_app.command("summary")
def summary(schematic: SchematicArg, as_json: JsonFlag = False) -> None:
    """What each sheet instance holds: symbols, wires, buses, bus entries, junctions, flags, labels, sheets."""
    design = load_schematic(schematic)
    rows: list[dict[str, Any]] = []
    for instance in design.instances:
        sheet = design.file_of(instance)
        rows.append(
            {
                "sheet": instance.human_path,
                "file": instance.file,
                "symbols": len(sheet.symbols),
                "wires": len(sheet.wires),
                "buses": len(sheet.buses),
                "bus_entries": len(sheet.bus_entries),
                "junctions": len(sheet.junctions),
                "no_connects": len(sheet.no_connects),
                "labels": {kind: sum(1 for label in sheet.labels if label.kind == kind) for kind in ("local", "global", "hierarchical")},
                "sheets": len(sheet.sheets),
            }
        )
    notes = list(compute_nets(design).notes)
    if as_json:
        _print_json({"instances": rows, "notes": notes})
        return
    for row in rows:
        labels = row["labels"]
        typer.echo(
            f"{row['sheet']} ({row['file']}): {row['symbols']} symbols, {row['wires']} wires, {row['buses']} buses, "
            f"{row['bus_entries']} bus entries, {row['junctions']} junctions, {row['no_connects']} no-connects, "
            f"labels {labels['local']} local/{labels['global']} global/{labels['hierarchical']} hierarchical, {row['sheets']} sheets"
        )
    for note in notes:
        typer.echo(f"note: {note}")


@kicad_app.command("compare")
def compare(
    schematic: SchematicArg,
    netlist: Annotated[Path, typer.Argument(help="kicad-cli export: sch export netlist --format kicadsexpr")],
    as_json: JsonFlag = False,
) -> None:
    """Compares our nets with a kicad-cli netlist of the same schematic; exits 1 on any difference."""
    result = compare_netlists(compute_nets(load_schematic(schematic)), read_kicad_netlist(netlist))
    if as_json:
        data = msgspec.to_builtins(result)
        data["agreement"] = result.agreement
        _print_json(data)
    else:
        typer.echo(result.summary())
        for d in result.differences:
            typer.echo(f"  {d.kind}: KiCad {d.kicad or '-'} / ours {d.ours or '-'}: {d.detail}")
    if result.differences:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    """Adds this module's commands to the root app."""
    app.add_typer(kicad_app, name="kicad")
