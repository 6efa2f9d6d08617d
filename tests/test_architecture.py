"""The dependency rules of docs/ARCHITECTURE.md, enforced on every import statement in the package.

Function-level imports count as much as top-level ones: a lazy import that runs back up the layers
is still a dependency, only a hidden one.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "cbledger"

# Shared, domain-free utilities every domain may use.
UTILITIES = {"errors", "credentials", "workspace", "login", "inputs", "scratch", "invocation"}

# What each domain may import besides itself and the utilities. Anything not listed is forbidden.
ALLOWED: dict[str, set[str]] = {
    "ledger": set(),
    "kicad": set(),
    "tasks": {"kicad", "ledger"},
    "grading": {"tasks", "kicad", "ledger"},
    "runner": {"grading", "tasks", "kicad", "ledger"},
    "projections": {"ledger"},
    "reproduce": {"runner", "grading", "tasks", "kicad", "ledger", "projections"},
    "cli": {"reproduce", "runner", "grading", "tasks", "kicad", "ledger", "projections", "schemas"},
    # Top-level modules.
    "errors": set(),
    "credentials": set(),
    "workspace": set(),
    "login": set(),
    "scratch": set(),
    "invocation": set(),
    "inputs": {"errors"},
    "schemas": {"tasks", "ledger", "projections"},
    "__main__": {"cli"},  # `python -m cbledger`: the entry point, nothing more
}


def imported_domains(source: str, module: str) -> set[str]:
    """The cbledger domains a module's source imports (the first segment after `cbledger.`)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                raise AssertionError(f"{module}: relative import; the rules are checked on absolute ones")
            base = node.module or ""
            if base == "cbledger":
                names = [f"cbledger.{alias.name}" for alias in node.names]
            else:
                names = [base]
        else:
            continue
        for name in names:
            parts = name.split(".")
            if parts[0] == "cbledger" and len(parts) > 1:
                found.add(parts[1])
    return found


def domain_of(path: Path) -> str:
    rel = path.relative_to(PACKAGE)
    return rel.parts[0].removesuffix(".py")


def violations() -> list[str]:
    problems = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "__init__.py" and path.parent == PACKAGE:
            continue
        domain = domain_of(path)
        assert domain in ALLOWED, f"{path}: domain {domain!r} has no rule in ALLOWED; add one"
        allowed = ALLOWED[domain] | UTILITIES | {domain}
        for used in sorted(imported_domains(path.read_text(encoding="utf-8"), str(path)) - allowed):
            problems.append(f"{path.relative_to(PACKAGE.parent)}: {domain} imports {used}")
    return problems


def test_every_import_follows_the_dependency_rules():
    assert violations() == []


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("from cbledger.runner.execute import execute\n", {"runner"}),
        ("import cbledger.projections.fold as f\n", {"projections"}),
        ("from cbledger import grading, errors\n", {"grading", "errors"}),
        ("def f():\n    from cbledger.cli.app import main\n", {"cli"}),
        ("import os\nfrom pathlib import Path\n", set()),
    ],
)
def test_import_scanner_sees_every_form(source, expected):
    assert imported_domains(source, "<test>") == expected


def test_a_backward_import_is_reported(tmp_path, monkeypatch):
    fake = tmp_path / "cbledger"
    (fake / "grading").mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    (fake / "grading" / "bad.py").write_text("def f():\n    from cbledger.runner import sandbox\n")
    monkeypatch.setattr(__import__(__name__, fromlist=["PACKAGE"]), "PACKAGE", fake)
    assert violations() == ["cbledger/grading/bad.py: grading imports runner"]


def test_each_rule_in_the_issue_holds_as_stated():
    assert ALLOWED["ledger"] == set()
    assert ALLOWED["kicad"] == set()
    assert "runner" not in ALLOWED["grading"]
    assert not {"runner", "grading"} & ALLOWED["projections"]


# --------------------------------------------------------------------------- layout and drawing

# A path under results/ (or a file name only the layout may choose), spelled out in code.
LAYOUT_LITERAL = re.compile(r"^results/|^LEADERBOARD\.md$|cbledger\.db|events\.jsonl")


def _docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def layout_literals(source: str) -> list[str]:
    """Output paths a module spells itself instead of asking `cbledger.workspace`."""
    tree = ast.parse(source)
    docs = _docstrings(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            if LAYOUT_LITERAL.search(node.value):
                found.append(node.value)
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            if any(isinstance(side, ast.Constant) and side.value == "results" for side in (node.left, node.right)):
                found.append('… / "results"')
        elif isinstance(node, ast.Call) and any(
            isinstance(arg, ast.Constant) and arg.value == "results" for arg in node.args
        ):
            found.append('Path("results")')
    return found


def test_only_the_workspace_spells_an_output_path():
    spelled = {
        str(path.relative_to(PACKAGE)): found
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.name != "workspace.py" and (found := layout_literals(path.read_text(encoding="utf-8")))
    }
    assert spelled == {}


@pytest.mark.parametrize(
    "source",
    ['p = root / "results" / "runs"\n', 'RUNS = Path("results") / "runs"\n', 'DB = "results/cbledger.db"\n',
     'name = "LEADERBOARD.md"\n',
     'def f():\n    return "x"\n\nLEDGER = "ledger/events.jsonl"\n'],
)
def test_the_layout_scanner_sees_a_spelled_path(source):
    assert layout_literals(source)


def test_the_layout_scanner_ignores_docstrings_and_other_words():
    source = '"""Writes results/cbledger.db."""\ndef f():\n    """LEADERBOARD.md"""\n    return {"results": 1}\n'
    assert layout_literals(source) == []


def test_only_the_command_line_draws_progress():
    drawing = set()
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            if any(n.split(".")[0] == "rich" for n in names):
                drawing.add(domain_of(path))
    assert drawing == {"cli"}
