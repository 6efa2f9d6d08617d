"""Bus names and their members, the way KiCad expands them.

A bus never carries current itself: nets meet through it by name. On one sheet a net whose label
names a member of a bus is that member's neighbour; across sheets, a bus sheet pin and the bus
hierarchical label of the same name join the two buses, member by member, and the neighbours of
a member on either side become one net. Vector buses (`D[0..7]`) pair members by index, so
`DATA[0..7]` above and `D[0..7]` below join `DATA3` with `D3`; group buses (`{SDA SCL}`,
`I2C{SDA SCL}`) pair them by name.
"""

from __future__ import annotations

import re

_VECTOR = re.compile(r"^(?P<prefix>[^\[\]{}]*)\[(?P<start>\d+)\.\.(?P<end>\d+)\](?P<suffix>[^\[\]{}]*)$")
_GROUP = re.compile(r"^(?P<prefix>[^\[\]{} ]*)\{(?P<body>[^{}]*)\}$")

MemberKey = tuple[str, object]  # ("index", n) for vector members, ("name", local name) otherwise


def members(name: str) -> list[tuple[MemberKey, str]] | None:
    """A bus name's members as (matching key, local net name); None if it is not a bus name."""
    vector = _VECTOR.match(name)
    if vector:
        start, end = int(vector["start"]), int(vector["end"])
        if abs(end - start) > 1024:
            return None
        step = 1 if end >= start else -1
        return [
            (("index", n), f"{vector['prefix']}{n}{vector['suffix']}")
            for n in range(start, end + step, step)
        ]
    group = _GROUP.match(name)
    if group:
        prefix = group["prefix"]
        found: list[tuple[MemberKey, str]] = []
        for item in re.split(r"[\s,]+", group["body"].strip()):
            if not item:
                continue
            inner = members(item)
            names = [local for _, local in inner] if inner else [item]
            for local in names:
                full = f"{prefix}.{local}" if prefix else local
                found.append((("name", full), full))
        return found or None
    return None


def is_bus_name(name: str) -> bool:
    return members(name) is not None
