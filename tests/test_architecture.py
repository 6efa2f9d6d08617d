"""The dependency rules of docs/ARCHITECTURE.md, enforced on every import statement in the package.

Function-level imports count as much as top-level ones: a lazy import that runs back up the layers
is still a dependency, only a hidden one.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "cbledger"

# Shared, domain-free utilities every domain may use.
UTILITIES = {"errors", "credentials"}

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
    "schemas": {"tasks", "ledger", "projections"},
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
