"""A variant's KiCad files: the strings that carry a name or a value, rewritten in place.

Which strings those are is decided by the form that holds them, never by their text alone, so a
pin called `EN` or a footprint called `R_0805_2012Metric` is never mistaken for a net or a
reference: `(property "Reference" …)` and `(reference …)` of a symbol or footprint, the text of a
local or global label, a net's name on the board (`(net 3 "/LED_A")`, `(net_name …)`), the `Value`
of a resistor, capacitor or fuse, and free text notes. Everything else, uuids, coordinates, library
ids, pins and pads, is kept byte for byte (`cbledger.kicad.rewrite`).
"""

from __future__ import annotations

from cbledger.kicad.rewrite import Located, check_rewrite, rewrite
from cbledger.kicad.sexpr import Node, head
from cbledger.tasks.variant.mapping import VariantMap


def _reference_of(owner: Node) -> str | None:
    for item in owner[1:]:
        if isinstance(item, list) and head(item) == "property" and len(item) > 2 and item[1] == "Reference":
            return str(item[2])
        if isinstance(item, list) and head(item) == "fp_text" and len(item) > 2 and str(item[1]) == "reference":
            return str(item[2])
    return None


def transform(text: str, source: str, vm: VariantMap) -> str:
    def choose(atom: Located, index: int, form: Node, parents: tuple[Node, ...]) -> str | None:
        kind = head(form)
        owner = parents[-1] if parents else None
        if kind == "property" and index == 2 and owner is not None and head(owner) in ("symbol", "footprint"):
            key = form[1]
            if key == "Reference":
                return vm.refdes.get(atom)
            if key == "Value":
                ref = _reference_of(owner)
                return vm.value(atom, ref) if ref else None
            return None
        if kind == "reference" and index == 1:
            return vm.refdes.get(atom)
        if kind == "fp_text" and index == 2 and str(form[1]) == "reference":
            return vm.refdes.get(atom)
        if kind in ("label", "global_label") and index == 1:
            return vm.nets.get(atom)
        if (kind == "net" and index == 2) or (kind == "net_name" and index == 1):
            return vm.net(atom)
        if kind == "text" and index == 1:
            return vm.text(atom)
        return None

    out = rewrite(text, source, choose)
    check_rewrite(text, out, source)
    return out
