"""The suite runs in parallel (scripts/test: `pytest -n auto --dist loadgroup`): the scheduler in
tests/conftest.py must keep a module's shared fixture on one worker, the slow modules must start
first, and a run that wrote into the repository tree must fail under CI=true."""

from __future__ import annotations

import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests import conftest


def _split(nodeid: str) -> str:
    scheduler = object.__new__(conftest.ModuleFixtureScheduling)  # only the scope rule, no workers
    return scheduler._split_scope(nodeid)


def test_a_module_that_builds_a_module_fixture_is_one_unit_of_work():
    assert conftest._shares_a_module_fixture("tests/test_runner_e2e.py")
    first = _split("tests/test_runner_e2e.py::test_gold_passes_every_task_and_noop_fails_each_for_the_right_reason")
    second = _split("tests/test_runner_e2e.py::test_shas_stats_and_digests_match_the_preserved_run")
    assert first == second == "tests/test_runner_e2e.py"


def test_other_tests_are_scheduled_one_by_one_and_explicit_groups_still_hold():
    assert not conftest._shares_a_module_fixture("tests/test_kicad_geometry.py")
    assert not conftest._shares_a_module_fixture("tests/no_such_module.py")
    a, b = "tests/test_kicad_geometry.py::test_a", "tests/test_kicad_geometry.py::test_b"
    assert (_split(a), _split(b)) == (a, b)
    assert _split("tests/test_kicad_geometry.py::test_a@postgres") == _split("tests/test_x.py::test_b@postgres") == "postgres"


def test_modules_with_a_slow_test_come_first_in_collection_order():
    def item(path: str, slow: bool) -> SimpleNamespace:
        return SimpleNamespace(path=Path(path), get_closest_marker=lambda name, slow=slow: object() if slow and name == "slow" else None,
                               name=f"{path}:{slow}")

    items = [item("a.py", False), item("b.py", False), item("b.py", True), item("c.py", False), item("d.py", True)]
    conftest.pytest_collection_modifyitems(None, items)  # type: ignore[arg-type]
    assert [i.name for i in items] == ["b.py:False", "b.py:True", "d.py:True", "a.py:False", "c.py:False"]


def test_the_tree_guard_sees_a_file_a_test_left_behind(tmp_path, monkeypatch):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / ".gitignore").write_text("__pycache__/\n")
    monkeypatch.setattr(conftest, "REPO", tmp_path)
    before = conftest._tree_status()
    assert before is not None
    (tmp_path / "__pycache__").mkdir()
    (tmp_path / "__pycache__" / "x.pyc").write_bytes(b"")
    assert conftest._tree_status() == before  # the ignored caches are not the tests' doing
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "leftover.json").write_text("{}")
    after = conftest._tree_status()
    assert after != before and "results/leftover.json" in after


def test_outside_git_the_guard_stands_aside(tmp_path, monkeypatch):
    monkeypatch.setattr(conftest, "REPO", tmp_path)
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))
    assert conftest._tree_status() is None


@pytest.mark.parametrize("dist", ["load", "loadfile", "worksteal", "no"])
def test_another_distribution_keeps_xdists_own_scheduler(dist):
    config = SimpleNamespace(getvalue=lambda name: dist)
    assert conftest.pytest_xdist_make_scheduler(config, None) is None  # type: ignore[arg-type]
