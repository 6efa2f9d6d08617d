"""Nets as KiCad computes them, from the schematic files alone.

The steps follow KiCad's connection graph (eeschema `CONNECTION_GRAPH`), and every rule below
was checked against `kicad-cli sch export netlist` (tests/test_kicad_connectivity.py):

1. On each sheet file, a junction (or a bus entry end) lying strictly inside a wire cuts the wire
   there and kicad-cli keeps only the part from the wire's start to the cut: the rest drops out
   of connectivity. A file saved by the editor never has such wires; a hand-edited one may.
2. Items touch where their connection points coincide exactly: wire and bus ends, pins,
   junctions, no-connect flags, labels, sheet pins, bus entry ends. A pin or a wire end landing in
   the middle of a wire does not connect; a label or a sheet pin there does, to every wire under
   it (unless a pin, label or flag sits exactly on it). Pins of type `no_connect` connect to
   nothing. Wires and buses meet only through labels on the bus side, never directly. (Steps 1
   and 2 live in `sheet_graph`.)
3. Each connected group, on each sheet instance, is a subgraph. Its name comes from its best
   driver: global label > power pin > local label > hierarchical label > sheet pin > symbol pin;
   ties go to a power symbol's pin, to an output sheet pin, to a name without `-Pad`, then to the
   lowest name. Local labels, hierarchical labels and sheet pins get the sheet path in front
   (`/` on the root, `/sub/` below).
4. Weakly driven subgraphs (no label or power pin) that collide on a name are renamed `_1`, `_2`;
   a sheet pin that does not collide counts as a strong driver.
5. Strong subgraphs on the same sheet instance sharing a label or power name merge; a global
   label or power pin also renames every other globally driven subgraph carrying a second global
   name of the same subgraph, unless a hierarchical chain named that subgraph first (KiCad
   interleaves the two in subgraph order).
6. Subgraphs joined through sheet pins and the matching hierarchical labels take one name: a
   global beats everything, a strong driver beats a weak one, higher priority, then a shorter
   sheet path, then the lower name.
7. A weakly driven subgraph whose only driver is one pin is `unconnected-(...)`.
8. Subgraphs with the same final name are one net. Pins of symbols excluded from the board and
   of `#` references (power symbols, flags) are not nodes.

Buses (`buses.py`) carry no current: a net whose label names a member of a bus on its sheet is
that member's neighbour, buses joined through sheet pins take one name, and each member's
neighbours become one net named after the chosen bus's member (or after a global or power name
among them). Not modelled: bus aliases, text variables inside label names.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

import msgspec

from cbledger.kicad.buses import MemberKey
from cbledger.kicad.buses import members as bus_members
from cbledger.kicad.hierarchy import symbol_reference
from cbledger.kicad.model import LibPin, LibSymbol, Schematic, SheetFile, SheetInstance, Symbol
from cbledger.kicad.naming import default_net_name, escape_net_name, pin_shown_name, pin_type
from cbledger.kicad.netlist import Net, Netlist, Node, sort_nets
from cbledger.kicad.sheet_graph import Group, PinRef, SheetGraph

# KiCad's CONNECTION_SUBGRAPH::PRIORITY, in its order.
NONE, PIN, SHEET_PIN, HIER_LABEL, LOCAL_LABEL, LOCAL_POWER_PIN, GLOBAL_POWER_PIN, GLOBAL = range(8)

@dataclass(slots=True)
class _Driver:
    priority: int
    name: str  # bare name, as KiCad's GetNameForDriver gives it
    kind: str  # "label:local", "label:global", "label:hierarchical", "sheet_pin", "pin"
    power_symbol: bool = False
    output_pin: bool = False
    pin: PinRef | None = None


@dataclass(slots=True)
class _Subgraph:
    order: int
    instance: int
    group: Group
    drivers: list[_Driver]
    driver_count: int  # KiCad's m_drivers size before weak drivers are dropped
    no_connect: bool
    sheet_pin_names: set[tuple[str, str]] = field(default_factory=set)  # (sheet uuid, bare name)
    hier_label_names: set[str] = field(default_factory=set)
    members: list[_Subgraph] = field(default_factory=list)
    driver: _Driver | None = None
    strong: bool = False
    multiple: bool = False
    name: str = ""
    absorbed_by: _Subgraph | None = None
    single_pin_name: str = ""  # the unconnected-(...) name, when one pin is the only driver


def _is_global_power(pin: LibPin, lib: LibSymbol, alternate: str | None) -> bool:
    return pin_type(pin, alternate) == "power_in" and (pin.hidden or lib.power)


_LABEL_PRIORITY = {"global": GLOBAL, "local": LOCAL_LABEL, "hierarchical": HIER_LABEL}


def _add_label_and_sheet_pin_drivers(sg: _Subgraph, sheet: SheetFile, group: Group) -> None:
    """The drivers a net and a bus name themselves by alike: their labels and sheet pins."""
    for label_index in group.labels:
        label = sheet.labels[label_index]
        name = escape_net_name(label.text)
        sg.drivers.append(_Driver(_LABEL_PRIORITY[label.kind], name, "label:" + label.kind))
        if label.kind == "hierarchical":
            sg.hier_label_names.add(name)
    for s, k in group.sheet_pins:
        sheet_symbol = sheet.sheets[s]
        pin = sheet_symbol.pins[k]
        name = escape_net_name(pin.name)
        sg.drivers.append(_Driver(SHEET_PIN, name, "sheet_pin", output_pin=pin.shape == "output"))
        sg.sheet_pin_names.add((sheet_symbol.uuid, name))


class _Builder:
    def __init__(self, schematic: Schematic) -> None:
        self.schematic = schematic
        self.screens: dict[tuple[str, tuple[int, ...]], SheetGraph] = {}
        self.refs: list[list[tuple[str, int]]] = []
        self.instance_index = {inst.uuid_path: i for i, inst in enumerate(schematic.instances)}
        self.buses: list[_Subgraph] = []

    def screen(self, instance: SheetInstance, units: tuple[int, ...]) -> SheetGraph:
        key = (instance.file, units)
        found = self.screens.get(key)
        if found is None:
            found = self.screens[key] = SheetGraph(self.schematic.file_of(instance), units)
        return found

    def build(self) -> Netlist:
        subgraphs: list[_Subgraph] = []
        for index, instance in enumerate(self.schematic.instances):
            sheet = self.schematic.file_of(instance)
            refs = [symbol_reference(self.schematic, instance, s) for s in sheet.symbols]
            self.refs.append(refs)
            screen = self.screen(instance, tuple(unit for _, unit in refs))
            for group in screen.groups:
                if group.bus:
                    bus = self._bus_subgraph(len(subgraphs) + len(self.buses), index, sheet, group)
                    if bus is not None:
                        self.buses.append(bus)
                    continue
                sg = self._subgraph(len(subgraphs) + len(self.buses), index, instance, sheet, refs, group)
                if sg is not None:
                    subgraphs.append(sg)
        self._resolve(subgraphs)
        netlist = self._nets()
        return msgspec.structs.replace(netlist, notes=tuple(_notes(self.schematic)))

    # -- subgraph construction -------------------------------------------------------------

    def _subgraph(self, order: int, index: int, instance: SheetInstance, sheet: SheetFile, refs: list[tuple[str, int]], group: Group) -> _Subgraph | None:
        no_connect = group.no_connect_flag or any(p.nc_type for p in group.pins)
        drivers: list[_Driver] = []
        sg = _Subgraph(order=order, instance=index, group=group, drivers=drivers, driver_count=0, no_connect=no_connect)
        _add_label_and_sheet_pin_drivers(sg, sheet, group)
        for ref in group.pins:
            symbol = sheet.symbols[ref.symbol]
            lib = sheet.lib_symbols[symbol.lib_symbol_key]
            reference, unit = refs[ref.symbol]
            alternate = symbol.pin_alternates.get(ref.pin.number)
            global_power = _is_global_power(ref.pin, lib, alternate)
            if not (global_power or not reference.endswith("?")):
                continue
            if global_power:
                name = escape_net_name(symbol.value if lib.power else ref.pin.name)
                drivers.append(_Driver(GLOBAL_POWER_PIN, name, "pin", power_symbol=lib.power))
                continue
            priority = NONE if reference.startswith("#") or not symbol.on_board else PIN
            name = self._pin_name(sheet, symbol, lib, ref.pin, reference, unit, no_connect)
            drivers.append(_Driver(priority, name, "pin", power_symbol=lib.power, pin=ref))
        if not drivers:
            return None
        sg.driver_count = len(drivers)
        sg.members = [sg]
        only = drivers[0]
        if len(drivers) == 1 and only.pin is not None:
            symbol = sheet.symbols[only.pin.symbol]
            reference, unit = refs[only.pin.symbol]
            lib = sheet.lib_symbols[symbol.lib_symbol_key]
            sg.single_pin_name = self._pin_name(sheet, symbol, lib, only.pin.pin, reference, unit, True)
        return sg

    def _bus_subgraph(self, order: int, index: int, sheet: SheetFile, group: Group) -> _Subgraph | None:
        """A bus, named like a net by its labels and sheet pins; it holds no pins of its own."""
        drivers: list[_Driver] = []
        sg = _Subgraph(order=order, instance=index, group=group, drivers=drivers, driver_count=0, no_connect=False)
        _add_label_and_sheet_pin_drivers(sg, sheet, group)
        if not drivers:
            return None
        sg.members = [sg]
        self._resolve_drivers(sg)
        return sg

    @staticmethod
    def _pin_name(sheet: SheetFile, symbol: Symbol, lib: LibSymbol, pin: LibPin, reference: str, unit: int, force_nc: bool) -> str:
        return default_net_name(
            pin,
            lib.pins_for(unit, symbol.body_style),
            symbol.pin_alternates,
            reference,
            unit,
            lib.unit_count,
            symbol.uuid,
            force_nc,
        )

    # -- naming ------------------------------------------------------------------------------

    def _full_name(self, sg: _Subgraph, driver: _Driver, bare: str | None = None) -> str:
        name = driver.name if bare is None else bare
        if driver.kind in ("label:local", "label:hierarchical", "sheet_pin"):
            return self.schematic.instances[sg.instance].human_path + name
        return name

    @staticmethod
    def _choose(drivers: list[_Driver]) -> tuple[_Driver, int, int]:
        highest = max(d.priority for d in drivers)
        candidates = [d for d in drivers if d.priority == highest]
        strong_count = sum(1 for d in drivers if d.priority >= HIER_LABEL)

        def key(d: _Driver) -> tuple:
            return (
                0 if (d.kind == "pin" and d.power_symbol) else 1,
                0 if (d.kind == "sheet_pin" and d.output_pin) else 1,
                1 if "-Pad" in d.name else 0,
                d.name,
            )

        return min(candidates, key=key), highest, strong_count

    def _resolve_drivers(self, sg: _Subgraph) -> None:
        drivers = [d for member in sg.members for d in member.drivers]
        best, highest, strong_count = self._choose(drivers)
        sg.driver = best
        sg.strong = sg.strong or highest >= HIER_LABEL
        sg.multiple = sg.multiple or strong_count > 1
        sg.name = self._full_name(sg, best)

    def _resolve(self, subgraphs: list[_Subgraph]) -> None:
        for sg in subgraphs:
            self._resolve_drivers(sg)
        self._rename_weak_collisions(subgraphs)  # 4
        live = self._merge_same_sheet(subgraphs)  # 5
        self._propagate(live)  # 6: global renames and the hierarchy, interleaved in KiCad's order
        self._bus_members(live)  # 6b: nets that meet through a bus, on one sheet or across sheets
        for sg in live:  # 7: a lone pin is unconnected
            if not sg.strong and sg.driver_count == 1 and sg.single_pin_name:
                sg.name = sg.single_pin_name
        self.live = live

    # -- 4. weakly driven name collisions ----------------------------------------------------

    @staticmethod
    def _vector_prefix(sg: _Subgraph) -> str | None:
        """`/D[]` for a vector bus `/D[0..7]`: KiCad also counts vector buses of one prefix as
        a collision, whatever their ranges."""
        if sg.driver is not None and "[" in sg.name:
            found = bus_members(sg.driver.name)
            if found and found[0][0][0] == "index":
                return sg.name.split("[", 1)[0] + "[]"
        return None

    def _rename_weak_collisions(self, subgraphs: list[_Subgraph]) -> None:
        """Weakly driven subgraphs sharing a name are renamed apart (`_1`, `_2`); a sheet pin
        that collides with nothing on its sheet becomes a strong driver. Buses take part: two
        root buses driven only by same-named sheet pins are renamed apart and never join their
        members."""
        everything = sorted([*subgraphs, *self.buses], key=lambda g: g.order)
        prefixes = {id(bus): self._vector_prefix(bus) for bus in self.buses}
        by_name: dict[str, list[_Subgraph]] = defaultdict(list)
        for sg in everything:
            by_name[sg.name].append(sg)
            prefix = prefixes.get(id(sg))
            if prefix is not None:
                by_name[prefix].append(sg)
        for sg in everything:
            if sg.strong:
                continue
            same = by_name[sg.name]
            prefix = prefixes.get(id(sg))
            if len(same) <= 1 and prefix is not None:
                same = by_name[prefix]
            if len(same) > 1:
                _rename_apart(sg, same, by_name)
            elif sg.driver is not None and sg.driver.kind == "sheet_pin":
                sg.strong = not any(other.instance == sg.instance for other in by_name.get(sg.driver.name, ()))

    # -- 5. same-sheet merging ---------------------------------------------------------------

    def _merge_same_sheet(self, subgraphs: list[_Subgraph]) -> list[_Subgraph]:
        """Strong subgraphs on one sheet instance sharing a label or power name become one; the
        first absorbs the others. Returns the subgraphs left."""
        index = self._name_index(subgraphs)
        for sg in subgraphs:
            if sg.strong and sg.absorbed_by is None and self._absorb_same_names(sg, index):
                self._resolve_drivers(sg)
        return [sg for sg in subgraphs if sg.absorbed_by is None]

    def _name_index(self, subgraphs: list[_Subgraph]) -> dict[tuple[int, str], list[_Subgraph]]:
        """Strong subgraphs by (sheet instance, each name they carry other than a sheet pin's)."""
        index: dict[tuple[int, str], list[_Subgraph]] = defaultdict(list)
        for sg in subgraphs:
            if not sg.strong:
                continue
            assert sg.driver is not None
            names = {sg.driver.name}
            if sg.multiple:
                names.update(d.name for d in self._non_main(sg) if d.kind != "sheet_pin")
            for name in names:
                index[(sg.instance, name)].append(sg)
        return index

    def _absorb_same_names(self, sg: _Subgraph, index: dict[tuple[int, str], list[_Subgraph]]) -> bool:
        """Absorbs every subgraph reachable from `sg` through shared names, the names of the
        absorbed ones included; True if it absorbed any."""
        assert sg.driver is not None
        checks = [sg.driver.name] + self._secondary_names(sg)
        seen_checks: set[str] = set()
        absorbed = False
        for test in checks:  # grows while it runs
            if test in seen_checks:
                continue
            seen_checks.add(test)
            for cand in index.get((sg.instance, test), ()):
                if cand is sg or cand.absorbed_by is not None:
                    continue
                assert cand.driver is not None  # the index holds driven subgraphs only
                checks.extend([cand.driver.name, *self._secondary_names(cand)])
                sg.members.extend(cand.members)
                sg.multiple = sg.multiple or cand.multiple
                cand.absorbed_by = sg
                absorbed = True
        return absorbed

    @staticmethod
    def _strong_drivers(sg: _Subgraph) -> list[_Driver]:
        return [d for member in sg.members for d in member.drivers if d.priority >= HIER_LABEL]

    def _non_main(self, sg: _Subgraph) -> list[_Driver]:
        return [d for d in self._strong_drivers(sg) if d is not sg.driver]

    def _secondary_names(self, sg: _Subgraph) -> list[str]:
        assert sg.driver is not None
        main = sg.driver.name
        return [d.name for d in self._non_main(sg) if d.kind != "sheet_pin" and d.name != main]

    # -- 6. global renames and the hierarchy ---------------------------------------------------

    def _hierarchy_links(self, items: list[_Subgraph]) -> dict[int, list[_Subgraph]]:
        """Which of `items` meet through a sheet pin and the matching hierarchical label on the
        sheet it pulls in (both ways, by id); only strongly driven labels count."""
        instances = self.schematic.instances
        by_instance: dict[int, list[_Subgraph]] = defaultdict(list)
        for sg in items:
            by_instance[sg.instance].append(sg)
        ports = {id(sg): _hier_label_names(sg) for sg in items}
        links: dict[int, list[_Subgraph]] = defaultdict(list)
        for sg in items:
            for sheet_uuid, name in _sheet_pin_names(sg):
                child_index = self.instance_index.get((*instances[sg.instance].uuid_path, sheet_uuid))
                if child_index is None:
                    continue
                for cand in by_instance[child_index]:
                    if cand.strong and name in ports[id(cand)]:
                        links[id(sg)].append(cand)
                        links[id(cand)].append(sg)
        return links

    def _propagate(self, live: list[_Subgraph]) -> None:
        """KiCad's post-processing loop, in its order, because the order decides names.

        Each still-dirty subgraph, in turn: if a global drives it and it carries a second global
        (or same-sheet label) name, every globally driven subgraph carrying that name takes its
        name (and is settled); then its hierarchical chain, if any, is named by the chain's best
        driver and every member is settled. A subgraph that a chain settled is not revisited, so
        its own second names rename nothing. Subgraphs with sheet pins and hierarchical labels
        both wait for a chain to reach them, and are forced last.
        """
        chains = _Chains(self.schematic.instances, self._hierarchy_links(live), live)
        global_sgs = [sg for sg in live if sg.driver is not None and sg.driver.priority >= GLOBAL_POWER_PIN]
        for sg in live:
            if id(sg) not in chains.dirty:
                continue
            assert sg.driver is not None
            if sg.driver.priority >= GLOBAL_POWER_PIN and sg.multiple:
                self._rename_second_globals(sg, global_sgs, chains)
            chains.settle(sg, False)
        for sg in live:
            if id(sg) in chains.dirty:
                chains.settle(sg, True)

    def _rename_second_globals(self, sg: _Subgraph, global_sgs: list[_Subgraph], chains: _Chains) -> None:
        """Every globally driven subgraph carrying one of `sg`'s second names (a global one
        anywhere, a label only on `sg`'s sheet) takes `sg`'s name, and its chain is settled."""
        for d in self._strong_drivers(sg):
            if d is sg.driver or d.name == sg.name:
                continue
            secondary_is_global = d.priority >= GLOBAL_POWER_PIN
            for cand in global_sgs:
                if cand is sg or (not secondary_is_global and cand.instance != sg.instance):
                    continue
                if any(cd.name == d.name for cd in self._strong_drivers(cand)):
                    cand.name = sg.name
                    chains.dirty.discard(id(cand))
                    chains.settle(cand, False)

    # -- 6b. bus members -----------------------------------------------------------------------

    def _bus_members(self, live: list[_Subgraph]) -> None:
        """Names the nets that are members of one bus, on its sheet and across the hierarchy.

        A strongly named net on a bus's sheet whose name is one of the bus's members is that
        member's neighbour. Buses joined through sheet pins and hierarchical labels take one bus
        name (chosen as for nets); the neighbours of each member then take that member's name,
        `/X0` for a local `X[0..7]` on the root, unless one of them is driven by a global label or
        power pin: globally named neighbours keep their names, and the others take the first of
        them.
        """
        if not self.buses:
            return
        neighbours = self._bus_neighbours(live)
        links = self._hierarchy_links(self.buses)
        # Two buses with the same name on one sheet are one bus (KiCad absorbs one into the
        # other); if either is global, so are the members.
        global_buses = {
            (bus.instance, bus.driver.name)
            for bus in self.buses
            if bus.strong and bus.driver is not None and bus.driver.priority >= GLOBAL_POWER_PIN
        }
        done: set[int] = set()
        for bus in self.buses:
            if id(bus) in done:
                continue
            chain = _component(bus, links)
            done.update(id(b) for b in chain)
            self._name_members(sorted(chain, key=lambda b: b.order), neighbours, global_buses, live)

    def _bus_neighbours(self, live: list[_Subgraph]) -> dict[int, dict[MemberKey, list[_Subgraph]]]:
        """For each bus (by id), the strongly named nets on its sheet that carry the name of one
        of its members, by member."""
        nets_by_instance: dict[int, list[_Subgraph]] = defaultdict(list)
        for sg in live:
            if sg.strong and sg.driver is not None:
                nets_by_instance[sg.instance].append(sg)
        neighbours: dict[int, dict[MemberKey, list[_Subgraph]]] = {}
        for bus in self.buses:
            found: dict[MemberKey, list[_Subgraph]] = defaultdict(list)
            neighbours[id(bus)] = found
            for key, local in _named_members(bus) if bus.strong else ():
                for sg in nets_by_instance[bus.instance]:
                    if local in self._net_names(sg) and sg not in found[key]:
                        found[key].append(sg)
        return neighbours

    def _net_names(self, sg: _Subgraph) -> set[str]:
        assert sg.driver is not None
        return {sg.driver.name} | ({d.name for d in self._non_main(sg)} if sg.multiple else set())

    def _name_members(
        self,
        chain: list[_Subgraph],
        neighbours: dict[int, dict[MemberKey, list[_Subgraph]]],
        global_buses: set[tuple[int, str]],
        live: list[_Subgraph],
    ) -> None:
        """Names the neighbours of each member of one chain of joined buses after the member of
        the chain's best bus."""
        start = next((b for b in chain if not (b.sheet_pin_names and b.hier_label_names)), chain[0])
        best = _best_in_chain(start, chain, self.schematic.instances)
        assert best.driver is not None
        prefix = best.name[: len(best.name) - len(best.driver.name)]
        is_global = (best.instance, best.driver.name) in global_buses
        for key, local in bus_members(best.driver.name) or ():
            members = [sg for b in chain for sg in neighbours[id(b)].get(key, ())]
            if members:
                _join_member(live, members, local if is_global else prefix + local)

    # -- output --------------------------------------------------------------------------------

    def _nets(self) -> Netlist:
        """Groups subgraphs by final name into nets of (reference, pin) nodes.

        KiCad marks a node `+no_connect` only on a net holding a no-connect flag whose pins are a
        single pin (or one stack of pins at one spot); power-symbol pins count towards that even
        though they are not listed as nodes.
        """
        records: dict[str, tuple[dict[tuple[str, str], tuple[Node | None, tuple]], list[bool]]] = {}
        for sg in self.live:
            nodes, flagged = records.setdefault(sg.name, ({}, [False]))
            # An absorbed subgraph's flag is lost, as in KiCad: only the absorber's own counts.
            flagged[0] = flagged[0] or sg.group.no_connect_flag
            self._add_nodes(sg, nodes)
        nets = [_net(name, nodes, flagged[0]) for name, (nodes, flagged) in records.items()]
        return Netlist(sort_nets([net for net in nets if net is not None]))

    def _add_nodes(self, sg: _Subgraph, nodes: dict[tuple[str, str], tuple[Node | None, tuple]]) -> None:
        """Adds the pins of `sg` not yet in `nodes`, keyed by (reference, pin number), each with
        where it sits; a `#` reference (power symbol, flag) is kept without a node."""
        sheet = self.schematic.file_of(self.schematic.instances[sg.instance])
        refs = self.refs[sg.instance]
        for ref in (ref for member in sg.members for ref in member.group.pins):
            symbol = sheet.symbols[ref.symbol]
            reference, _ = refs[ref.symbol]
            key = (reference, ref.pin.number)
            if not symbol.on_board or key in nodes:
                continue
            where = (sg.instance, ref.symbol, ref.position)
            if reference.startswith("#"):
                nodes[key] = (None, where)
                continue
            alternate = symbol.pin_alternates.get(ref.pin.number)
            nodes[key] = (Node(reference, ref.pin.number, pin_shown_name(ref.pin, alternate), pin_type(ref.pin, alternate)), where)


class _Chains:
    """Step 6's chains: subgraphs joined through sheet pins and hierarchical labels, and which
    subgraphs (by id) are still waiting for a name."""

    def __init__(self, instances: Sequence[SheetInstance], links: dict[int, list[_Subgraph]], live: list[_Subgraph]) -> None:
        self.instances = instances
        self.links = links
        self.dirty = {id(sg) for sg in live}

    def settle(self, sg: _Subgraph, force: bool) -> None:
        """Names `sg`'s chain after its best subgraph and settles every member. A subgraph with
        both sheet pins and hierarchical labels waits unless forced; one with neither is
        settled as it is."""
        has_pins, has_ports = bool(_sheet_pin_names(sg)), bool(_hier_label_names(sg))
        if not force and has_pins and has_ports:
            return
        if not has_pins and not has_ports:
            self.dirty.discard(id(sg))
            return
        chain = _component(sg, self.links)
        name = _best_in_chain(sg, sorted(chain, key=lambda s: s.order), self.instances).name
        for member in chain:
            member.name = name
            self.dirty.discard(id(member))


def _best_in_chain(start: _Subgraph, chain: list[_Subgraph], instances: Sequence[SheetInstance]) -> _Subgraph:
    """The subgraph whose name a chain joined through the hierarchy takes: a global beats
    everything, a strong driver a weak one, then higher priority, a shallower sheet, and the
    lower name."""
    assert start.driver is not None
    if start.driver.priority >= GLOBAL_POWER_PIN:
        return start
    best = start
    for cand in chain:
        if cand is not start and _beats(cand, best, instances):
            best = cand
    return best


def _beats(cand: _Subgraph, best: _Subgraph, instances: Sequence[SheetInstance]) -> bool:
    assert cand.driver is not None and best.driver is not None
    priority, highest = cand.driver.priority, best.driver.priority
    cand_strong, best_strong = priority >= HIER_LABEL, highest >= HIER_LABEL
    depth, best_depth = instances[cand.instance].depth, instances[best.instance].depth
    return (
        priority >= GLOBAL_POWER_PIN
        or (not best_strong and cand_strong)
        or (priority > highest and cand_strong)
        or (priority == highest and cand_strong and depth < best_depth)
        or (best_strong == cand_strong and depth <= best_depth and priority == highest and cand.name < best.name)
    )


def _sheet_pin_names(sg: _Subgraph) -> set[tuple[str, str]]:
    return {p for m in sg.members for p in m.sheet_pin_names}


def _hier_label_names(sg: _Subgraph) -> set[str]:
    return {n for m in sg.members for n in m.hier_label_names}


def _component(start: _Subgraph, links: dict[int, list[_Subgraph]]) -> list[_Subgraph]:
    """`start` and everything linked to it, directly or not, in breadth-first order."""
    chain = [start]
    seen = {id(start)}
    for current in chain:
        for other in links[id(current)]:
            if id(other) not in seen:
                seen.add(id(other))
                chain.append(other)
    return chain


def _rename_apart(sg: _Subgraph, same: list[_Subgraph], by_name: dict[str, list[_Subgraph]]) -> None:
    """Gives `sg` the first free `_N` suffix of its name."""
    suffix = 1
    while f"{sg.name}_{suffix}" in by_name:
        suffix += 1
    same.remove(sg)
    sg.name = f"{sg.name}_{suffix}"
    by_name[sg.name].append(sg)


def _named_members(bus: _Subgraph) -> list[tuple[MemberKey, str]]:
    """The members a bus names: its own name's and its other labels' (never its other sheet
    pins')."""
    named_by = [d for d in bus.drivers if d is bus.driver or d.kind != "sheet_pin"]
    return [member for driver in named_by for member in bus_members(driver.name) or ()]


def _join_member(live: list[_Subgraph], neighbours: list[_Subgraph], member_name: str) -> None:
    """The neighbours of one bus member become one net. A globally named neighbour keeps its
    name and lends it to the member; the others take the member's name."""
    globals_ = [sg for sg in neighbours if sg.driver is not None and sg.driver.priority >= GLOBAL_POWER_PIN]
    target = globals_[0].name if globals_ else member_name
    old_names = {sg.name for sg in neighbours if sg not in globals_} - {target}
    for sg in live:
        if sg.name in old_names:
            sg.name = target


def _net(name: str, nodes: dict[tuple[str, str], tuple[Node | None, tuple]], flagged: bool) -> Net | None:
    """The net of one name, or None when it lists no node; its nodes are `+no_connect` when a
    flag sits on it and all its pins sit at one spot."""
    listed = [(node, where) for node, where in nodes.values() if node is not None]
    if not listed:
        return None
    if flagged and len({where for _, where in nodes.values()}) == 1:
        listed = [(msgspec.structs.replace(node, pin_type=node.pin_type + "+no_connect"), where) for node, where in listed]
    return Net(name, tuple(node for node, _ in listed))


def _notes(schematic: Schematic) -> list[str]:
    notes: list[str] = []
    for key, sheet in sorted(schematic.files.items()):
        for symbol in sheet.symbols:
            if symbol.lib_symbol_key not in sheet.lib_symbols:
                notes.append(f"{key}: {symbol.reference or symbol.uuid} uses {symbol.lib_symbol_key!r}, absent from lib_symbols; it has no pins here")
        if sheet.bus_aliases:
            names = ", ".join(name for name, _ in sheet.bus_aliases)
            notes.append(f"{key}: bus aliases ({names}) are not expanded; nets reached only through them are not joined")
        if any("${" in label.text for label in sheet.labels):
            notes.append(f"{key}: a label uses a text variable (${{...}}), which is not expanded")
    return notes


def compute_nets(schematic: Schematic) -> Netlist:
    """Every net of the design with its KiCad name and its (reference, pin) nodes."""
    return _Builder(schematic).build()
