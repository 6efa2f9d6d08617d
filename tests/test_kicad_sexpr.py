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
