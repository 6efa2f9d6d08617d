"""The library-to-sheet transform, against kicad-cli and against its own algebra."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from cbledger.kicad import compute_nets, load_schematic
from cbledger.kicad.geometry import (
    near_segment,
    on_segment,
    pin_position,
    strictly_inside,
    transform,
)

DATA = Path(__file__).parent / "data" / "kicad"
points = st.tuples(st.integers(-10**7, 10**7), st.integers(-10**7, 10**7))
rotations = st.sampled_from([0, 90, 180, 270])
mirrors = st.sampled_from(["", "x", "y"])


def test_every_orientation_lands_each_pin_on_its_label() -> None:
    """orientation.kicad_sch puts a label where kicad-cli has each pin; kicad-cli agrees
    (tests/test_kicad_connectivity.py), and here each label must hold exactly its pin."""
    nets = compute_nets(load_schematic(DATA / "orientation" / "orientation.kicad_sch"))
    numbers = {"B": "1", "C": "2", "E": "3"}
    for n in range(1, 13):
        for name, number in numbers.items():
            net = nets.net_by_name(f"Q{n}_{name}")
            assert net is not None and net.pins == {(f"Q{n}", number)}, (n, name)


def test_known_directions() -> None:
    up = (0, 10)  # library Y up
    assert transform(up, 0, "") == (0, -10)  # sheet Y down
    assert transform(up, 90, "") == (-10, 0)  # counter-clockwise: up turns left
    assert transform(up, 180, "") == (0, 10)
    assert transform(up, 270, "") == (10, 0)
    assert transform((10, 0), 90, "") == (0, -10)
    assert transform((10, 0), 0, "y") == (-10, 0)
    assert transform((0, 10), 0, "x") == (0, 10)
    assert transform((0, 10), 90, "x") == (-10, 0)  # rotation first, then the mirror
    assert transform((10, 0), 90, "x") == (0, 10)
    assert pin_position((1000, 2000), (0, 38100), 0, "") == (1000, 2000 - 38100)


@given(points, rotations, mirrors)
def test_transform_keeps_distances_and_mirror_x_is_mirror_y_turned_half(point, rotation, mirror) -> None:
    x, y = transform(point, rotation, mirror)
    assert x * x + y * y == point[0] ** 2 + point[1] ** 2
    assert transform(point, rotation, "x") == transform(point, (rotation + 180) % 360, "y")


@given(points, rotations)
def test_four_quarter_turns_compose_to_the_identity(point, rotation) -> None:
    once = transform(point, rotation, "")
    back = transform((once[0], -once[1]), (360 - rotation) % 360, "")
    assert (back[0], -back[1]) == point


@given(points, points, st.integers(0, 10))
def test_segment_predicates(a, b, k) -> None:
    mid = (a[0] + (b[0] - a[0]) * k // 10, a[1] + (b[1] - a[1]) * k // 10)
    if (b[0] - a[0]) * (mid[1] - a[1]) == (b[1] - a[1]) * (mid[0] - a[0]):
        assert on_segment(a, b, mid)
        assert near_segment(a, b, mid)
    assert on_segment(a, b, a) and on_segment(a, b, b)
    assert not strictly_inside(a, b, a) and not strictly_inside(a, b, b)


def test_near_segment_tolerance_is_one_unit() -> None:
    assert near_segment((0, 0), (100, 0), (50, 1))
    assert not near_segment((0, 0), (100, 0), (50, 2))
    assert not near_segment((0, 0), (100, 0), (102, 0))
    assert near_segment((0, 0), (0, 0), (0, 1))
