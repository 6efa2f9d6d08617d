"""Bus names expanded to their members, as KiCad pairs them across sheets."""

from __future__ import annotations

from cbledger.kicad.buses import is_bus_name, members


def test_vector_buses_pair_by_index() -> None:
    assert members("D[0..2]") == [(("index", 0), "D0"), (("index", 1), "D1"), (("index", 2), "D2")]
    assert members("A[3..1]") == [(("index", 3), "A3"), (("index", 2), "A2"), (("index", 1), "A1")]
    assert members("DATA[0..1]_N") == [(("index", 0), "DATA0_N"), (("index", 1), "DATA1_N")]


def test_group_buses_pair_by_name() -> None:
    assert members("{SDA SCL}") == [(("name", "SDA"), "SDA"), (("name", "SCL"), "SCL")]
    assert members("I2C{SDA SCL}") == [(("name", "I2C.SDA"), "I2C.SDA"), (("name", "I2C.SCL"), "I2C.SCL")]
    assert [local for _, local in members("MEM{A[0..1] WE}")] == ["MEM.A0", "MEM.A1", "MEM.WE"]


def test_plain_names_are_not_buses() -> None:
    for name in ("DATA", "D0", "D[0]", "D[a..b]", "{}", "VCC{", "[0..1"):
        assert not is_bus_name(name), name
    assert is_bus_name("D[0..7]") and is_bus_name("{A B}")
