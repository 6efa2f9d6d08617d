"""How far our nets agree with KiCad's, net by net.

Two questions, kept apart because they fail for different reasons: does every pin sit with the
same other pins (the partition: geometry, hierarchy), and does each such group carry the same
name (the naming rules). A net agrees when both hold.
"""

from __future__ import annotations

import msgspec

from cbledger.kicad.netlist import Net, Netlist


class NetDifference(msgspec.Struct, frozen=True):
    kind: str  # "missing", "extra", "renamed", "node-detail"
    kicad: str
    ours: str
    detail: str


class Comparison(msgspec.Struct, frozen=True):
    kicad_nets: int
    our_nets: int
    agreeing: int  # same pins and same name
    same_pins: int  # same pins, whatever the name
    differences: tuple[NetDifference, ...]

    @property
    def partition_equal(self) -> bool:
        return self.same_pins == self.kicad_nets == self.our_nets

    @property
    def names_equal(self) -> bool:
        return self.partition_equal and self.agreeing == self.kicad_nets

    @property
    def agreement(self) -> float:
        total = max(self.kicad_nets, self.our_nets)
        return 1.0 if total == 0 else self.agreeing / total

    def summary(self) -> str:
        return (
            f"{self.agreeing}/{max(self.kicad_nets, self.our_nets)} nets agree "
            f"({self.agreement:.1%}); partition {'equal' if self.partition_equal else 'differs'}, "
            f"names {'equal' if self.names_equal else 'differ'}"
        )


def compare_netlists(ours: Netlist, kicad: Netlist, check_node_details: bool = True) -> Comparison:
    """Compares the pin partition, the names and (optionally) each node's pin function and type.

    A shared pin of a multi-unit part can sit on two nets, so nets are paired by (pins, name)
    first and only the leftovers by pins alone.
    """
    remaining = list(ours.nets)
    pairs: list[tuple[Net, Net | None]] = []
    unpaired: list[Net] = []
    for net in kicad.nets:
        mine = next((m for m in remaining if m.name == net.name and m.pins == net.pins), None)
        if mine is None:
            unpaired.append(net)
        else:
            remaining.remove(mine)
            pairs.append((net, mine))
    for net in unpaired:
        mine = next((m for m in remaining if m.pins == net.pins), None)
        if mine is not None:
            remaining.remove(mine)
        pairs.append((net, mine))

    differences: list[NetDifference] = []
    agreeing = same_pins = 0
    for net, mine in pairs:
        if mine is None:
            differences.append(NetDifference("missing", net.name, "", _pins(net.pins)))
            continue
        same_pins += 1
        if mine.name != net.name:
            differences.append(NetDifference("renamed", net.name, mine.name, _pins(net.pins)))
            continue
        if check_node_details:
            theirs = {(n.reference, n.pin): n for n in net.nodes}
            odd = [
                f"{n.reference}.{n.pin}: ours {n.pin_name!r}/{n.pin_type!r}, "
                f"KiCad {theirs[(n.reference, n.pin)].pin_name!r}/{theirs[(n.reference, n.pin)].pin_type!r}"
                for n in mine.nodes
                if (n.pin_name, n.pin_type) != (theirs[(n.reference, n.pin)].pin_name, theirs[(n.reference, n.pin)].pin_type)
            ]
            if odd:
                differences.append(NetDifference("node-detail", net.name, mine.name, "; ".join(odd)))
                continue
        agreeing += 1
    for net in remaining:
        differences.append(NetDifference("extra", "", net.name, _pins(net.pins)))
    return Comparison(
        kicad_nets=len(kicad.nets),
        our_nets=len(ours.nets),
        agreeing=agreeing,
        same_pins=same_pins,
        differences=tuple(differences),
    )


def _pins(pins: frozenset[tuple[str, str]]) -> str:
    return " ".join(f"{ref}.{pin}" for ref, pin in sorted(pins))
