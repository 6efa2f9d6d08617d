"""kicad-cli's own netlist export (`--format kicadsexpr`), read into the same `Netlist` shape.

This is the oracle's answer; connectivity tests and `cbledger kicad compare` hold our computed
nets against it. Only the `(nets ...)` section matters here: components and libraries are KiCad's
restatement of the schematic, which the schematic model already reads first-hand.
"""

from __future__ import annotations

from pathlib import Path

from cbledger.errors import UserError
from cbledger.kicad.netlist import Net, Netlist, Node, sort_nets
from cbledger.kicad.sexpr import child, child_text, children, decode, parse_text, read_text


def read_kicad_netlist(path: str | Path) -> Netlist:
    source = Path(path)
    return parse_kicad_netlist(decode(read_text(source), str(source)), str(source))


def parse_kicad_netlist(text: str, source: str = "<netlist>") -> Netlist:
    tree = parse_text(text, source, expect="export")
    section = child(tree, "nets")
    if section is None:
        raise UserError(f"{source}: no (nets ...) section; was it exported with --format kicadsexpr?")
    nets: list[Net] = []
    for number, net in enumerate(children(section, "net"), 1):
        name = child_text(net, "name")
        if not name:
            raise UserError(f"{source}: net #{number} has no name")
        nodes = tuple(
            Node(
                reference=child_text(node, "ref"),
                pin=child_text(node, "pin"),
                pin_name=child_text(node, "pinfunction"),
                pin_type=child_text(node, "pintype"),
            )
            for node in children(net, "node")
        )
        nets.append(Net(name, nodes))
    return Netlist(sort_nets(nets))
