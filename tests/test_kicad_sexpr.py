"""The s-expression reader's fast path (`sexpr._fast_loads`) gives exactly what sexpdata gives:
the same nesting, the same types (a keyword a `Symbol`, a quoted value a `str`, numbers `int` or
`float`), the same unescaped strings; and it declines (None) whatever it does not read itself, so
sexpdata parses that with its own errors."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cbledger.kicad import sexpr

REPO = Path(__file__).resolve().parent.parent


def _same(a, b) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)
    return str(a) == str(b) if isinstance(a, sexpr._Symbol) else a == b


def _stock(text: str):
    return sexpr._Parser(text, nil=None, true=None).parse()[0]


def _kicad_files(base: Path) -> list[Path]:
    return sorted(p for p in base.glob("*/tree/**/*") if p.suffix in {".kicad_sch", ".kicad_pcb", ".kicad_sym", ".kicad_mod"})


@pytest.mark.parametrize("path", _kicad_files(REPO / "fixtures"), ids=lambda p: str(p.relative_to(REPO)))
def test_every_bundled_kicad_file_parses_as_sexpdata_parses_it(path: Path):
    text = path.read_text(encoding="utf-8")
    fast = sexpr._fast_loads(text)
    assert fast is not None and _same(fast, _stock(text))


def test_every_real_board_parses_as_sexpdata_parses_it(shared_real: Path):
    files = _kicad_files(shared_real / "fixtures")
    assert len(files) >= 4
    for path in files:
        text = path.read_text(encoding="utf-8")
        fast = sexpr._fast_loads(text)
        assert fast is not None and _same(fast, _stock(text)), path


_ATOMS = st.sampled_from(["at", "wire", "yes", "-1.27", "0", "12", "+3", "1e3", ".5", "-", "inf", "nan", "a-b", "uuid-7f"])
_STRINGS = st.text(alphabet=st.sampled_from(list('ab "\\\n\tn()[];\'é')), max_size=8).map(
    lambda s: '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'
)


@st.composite
def _forms(draw, depth: int = 0):
    items = draw(st.lists(st.one_of(_ATOMS, _STRINGS, *([_forms(depth + 1)] if depth < 3 else [])), max_size=4))
    return "(" + draw(st.sampled_from([" ", "\n\t", "  "])).join(["k", *items]) + ")"


@settings(max_examples=300, deadline=None)
@given(_forms())
def test_generated_forms_parse_as_sexpdata_parses_them(text: str):
    fast = sexpr._fast_loads(text)
    assert fast is not None and _same(fast, _stock(text))


def test_nesting_past_the_limit_is_refused_without_recursing():
    from cbledger.errors import UserError

    deep = "(" * (sexpr.MAX_DEPTH + 1) + ")" * (sexpr.MAX_DEPTH + 1)
    assert sexpr._fast_loads(deep) is sexpr._TOO_DEEP
    with pytest.raises(UserError, match=f"nested {sexpr.MAX_DEPTH + 1} deep"):
        sexpr.parse_text(deep, "deep.kicad_sch")
    at_limit = "(" * sexpr.MAX_DEPTH + ")" * sexpr.MAX_DEPTH
    assert sexpr.parse_text(at_limit, "ok.kicad_sch") is not None


@pytest.mark.parametrize("text", [
    "(a [b])", "(a 'b)", "(a ; comment\n b)", "(a b\\ c)", "(a {b})", "(a) (b)", "(a", "a)", "(a))", "", "  ",
])  # fmt: skip
def test_what_kicad_never_writes_is_left_to_sexpdata(text: str):
    assert sexpr._fast_loads(text) is None


# --------------------------------------------------------------------------- piece by piece
# `_piecewise_loads` parses each top-level child once across files; whatever it is given, it must
# give what `_fast_loads` gives for the whole text (None and too-deep included), cache warm or cold.


def _same_or_both(a, b) -> bool:
    return a is b if a is None or a is sexpr._TOO_DEEP or b is None or b is sexpr._TOO_DEEP else _same(a, b)


def _edits(text: str) -> list[str]:
    """A file as runs leave it: a child's value changed, a child dropped, a child added, the last
    child changed (it holds the top form's closing bracket), and the file cut short."""
    lines = text.split("\n")
    starts = [i for i, line in enumerate(lines) if line.startswith(("\t(", "  (")) and not line.startswith("   ")]
    middle = starts[len(starts) // 2]
    dropped = lines[:middle] + lines[starts[len(starts) // 2 + 1]:]
    indent = lines[middle][: len(lines[middle]) - len(lines[middle].lstrip())]
    added = [*lines[:middle], indent + '(text "added by a run" (at 1 2 0))', *lines[middle:]]
    return [
        text.replace('(uuid "', '(uuid "0', 1),
        "\n".join(dropped),
        "\n".join(added),
        text.rstrip()[:-1] + ' (extra "tail"))\n',
        text[: len(text) * 2 // 3],
    ]


def test_every_real_board_parses_piece_by_piece_as_whole(shared_real: Path):
    files = [p for p in _kicad_files(shared_real / "fixtures") if len(p.read_bytes()) >= sexpr.PIECEWISE_FROM]
    assert len(files) >= 4
    for path in files:
        text = path.read_text(encoding="utf-8")
        sexpr.PIECES.clear()
        cold = sexpr._piecewise_loads(text)
        assert cold is not None and _same(cold, _stock(text)), path
        warm = sexpr._piecewise_loads(text)
        assert _same(warm, cold), path
        for edited in _edits(text):
            assert _same_or_both(sexpr._piecewise_loads(edited), sexpr._fast_loads(edited)), path


_CHILD = "\t(wire (pts (xy 1 2) (xy 3 4)) (uuid \"{i}\"))"


def _sheet(children: list[str], head: str = "(kicad_sch (version 20231120)", tail: str = "\n)\n") -> str:
    body = "\n".join(children)
    filler = [_CHILD.format(i=i) for i in range(sexpr.PIECEWISE_FROM // 40)]
    return head + "\n" + "\n".join(filler) + "\n" + body + tail


@pytest.mark.parametrize("text", [
    _sheet(['\t(text "a string holding a cut:\n\t(label \\"x\\")" (at 0 0 0))']),  # a cut inside a string
    _sheet(['\t(symbol (lib_id "R")\n\t(property "Reference" "R1"))']),  # a child's child at one indent
    _sheet(['\t(label "A")'], tail="\n)\n(extra)\n"),  # a second top-level form
    _sheet(['\t(label "A")'], tail="\n"),  # the top form never closed
    _sheet(['\t(label "A")'], tail="\n))\n"),  # one bracket too many
    _sheet(['\t(label "A")'], head="(kicad_sch (version"),  # the head's form left open
    _sheet(['\t(label "A")'], head="((kicad_sch"),
    _sheet(['\t(label "A" [bad])']),  # a piece the fast path declines
    _sheet(["\t" + "(" * (sexpr.MAX_DEPTH + 1) + ")" * (sexpr.MAX_DEPTH + 1)]),  # too deep
    _sheet(['  (label "B")', '\t(label "A")']),  # KiCad 6's two-space indent beside a tab
])  # fmt: skip
def test_a_cut_that_is_not_between_two_children_falls_back_to_the_whole_parse(text: str):
    expected = sexpr._fast_loads(text)
    for _ in range(2):  # cold, then with every piece already seen
        assert _same_or_both(sexpr._piecewise_loads(text), expected)


@settings(max_examples=200, deadline=None)
@given(st.lists(_forms(), min_size=1, max_size=6), st.lists(st.sampled_from(["\n\t", "\n  ", " ", "\n"]), min_size=6, max_size=6))
def test_generated_sheets_parse_piece_by_piece_as_whole(children: list[str], seps: list[str]):
    previous = sexpr.PIECEWISE_FROM
    sexpr.PIECEWISE_FROM = 0
    try:
        text = "(kicad_sch" + "".join(sep + child for sep, child in zip(seps, children, strict=False)) + "\n)"
        assert _same_or_both(sexpr._piecewise_loads(text), sexpr._fast_loads(text))
        assert _same_or_both(sexpr._piecewise_loads(text[:-2]), sexpr._fast_loads(text[:-2]))
    finally:
        sexpr.PIECEWISE_FROM = previous


@pytest.mark.parametrize(("text", "said"), [
    ("\ufeff(kicad_sch (version 1))\n", "f.kicad_sch:1: not a valid s-expression: it starts with a byte-order mark"),
    ("EESchema Schematic File Version 4\nLIBS:power\n$EndSCHEMATC\n", "f.kicad_sch:1: a KiCad 5 schematic (EESchema)"),
    ("(kicad_sch\n\t(version 1)\n)\n(kicad_sch (version 2))\n", "f.kicad_sch:4: not a valid s-expression: there is a ')' too many"),
    ("(kicad_sch\n\t(version 1)\n)\n\n\"a note\"\n", "f.kicad_sch:5: not a valid s-expression"),
])  # fmt: skip
def test_what_is_not_one_form_is_named_with_its_line(text: str, said: str):
    """A byte-order mark, a KiCad 5 body and a second top-level form all read "a ')' too many, or
    text after the last form", with no line to look at."""
    with pytest.raises(sexpr.UserError) as refused:
        sexpr.parse_text(text, "f.kicad_sch")
    assert str(refused.value).startswith(said), refused.value


def test_the_piece_cache_weighs_brackets_not_only_characters():
    """Text written to be nearly all brackets holds about 32 bytes per `(` once parsed: counted by
    its characters alone, the bound let such pieces hold about five times what KiCad's text does."""
    cache = sexpr._PieceCache(max_chars=1000)
    brackets, prose = "(" * 50 + ")" * 50, "(a " + "b" * 97 + ")"
    assert sexpr._weight(brackets) == 100 + 12 * 50 and sexpr._weight(prose) == 101 + 12
    cache.put(brackets, [])
    cache.put("(x" + brackets, [])
    assert cache.get(brackets) is None and cache.get("(x" + brackets) is not None  # 1,400 > 1,000: the first dropped
    for i in range(8):
        cache.put(f"{i}{prose}", [])
    assert cache.get("(x" + brackets) is None and all(cache.get(f"{i}{prose}") is not None for i in range(8))
