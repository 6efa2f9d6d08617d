"""Net names the way KiCad spells them.

A net with no label is named after one of its pins: `Net-(R1-Pad2)` when the pin has no name (or
its name is its number), `Net-(U1-PA0)` when it has one, with the unit letter on multi-unit parts
(`Net-(U1A-PA0)`) and `-PadN` appended when the name alone is ambiguous within the part.
`unconnected-(...)` replaces `Net-(` for a pin that is alone on its net or behind a no-connect
flag, and then always carries `-PadN`. These rules were read off kicad-cli 9 exports.
"""

from __future__ import annotations

from collections.abc import Sequence

from cbledger.kicad.model import LibPin


def escape_net_name(text: str) -> str:
    """KiCad's CTX_NETNAME escaping: `/` would read as a sheet path, line breaks are dropped."""
    if "/" not in text and "\n" not in text and "\r" not in text:
        return text
    return text.replace("/", "{slash}").replace("\n", "").replace("\r", "")


def unit_letter(unit: int) -> str:
    """A, B, ... Z, AA, AB: the suffix KiCad puts on references of multi-unit symbols."""
    letters = ""
    while unit > 0:
        rest = (unit - 1) % 26
        letters = chr(ord("A") + rest) + letters
        unit = (unit - rest) // 26
    return letters


def pin_type(pin: LibPin, alternate: str | None) -> str:
    if alternate:
        for name, etype in pin.alternates:
            if name == alternate:
                return etype
    return pin.electrical_type


def pin_shown_name(pin: LibPin, alternate: str | None) -> str:
    if alternate and any(name == alternate for name, _ in pin.alternates):
        return "" if alternate == "~" else alternate
    return pin.shown_name


def default_net_name(
    pin: LibPin,
    unit_pins: Sequence[LibPin],
    alternates: dict[str, str],
    reference: str,
    unit: int,
    unit_count: int,
    symbol_uuid: str,
    force_no_connect: bool,
) -> str:
    """The name a pin gives the net it drives when nothing stronger names it."""
    own_type = pin_type(pin, alternates.get(pin.number))
    unconnected = force_no_connect or own_type == "no_connect"
    prefix = "unconnected-(" if unconnected else "Net-("
    if reference.endswith("?"):
        return f"{prefix}{symbol_uuid}-Pad{pin.number})"
    own_shown = pin_shown_name(pin, alternates.get(pin.number))
    has_multiple = any(
        pin_shown_name(other, alternates.get(other.number)) == own_shown
        and other.number != pin.number
        and unconnected == (pin_type(other, alternates.get(other.number)) == "no_connect")
        for other in unit_pins
    )
    lib_name = pin.shown_name
    if lib_name and lib_name != pin.number:
        ref = reference + (unit_letter(unit) if unit_count > 1 else "")
        pad = f"-Pad{escape_net_name(pin.number)}" if unconnected or has_multiple else ""
        return f"{prefix}{ref}-{escape_net_name(lib_name)}{pad})"
    return f"{prefix}{reference}-Pad{escape_net_name(pin.number)})"
