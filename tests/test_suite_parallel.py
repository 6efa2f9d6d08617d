"""The suite runs in parallel (scripts/test: `pytest -n auto --dist loadgroup`): the scheduler in
tests/conftest.py must keep a module's shared fixture on one worker, the longest units of work
must start first, and a run that wrote into the repository tree must fail under CI=true."""

from __future__ import annotations

import subprocess
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


def _item(nodeid: str, slow: bool = False) -> SimpleNamespace:
    return SimpleNamespace(nodeid=nodeid, get_closest_marker=lambda name: object() if slow and name == "slow" else None)


def test_the_longest_units_of_work_come_first_and_a_units_tests_stay_together(monkeypatch):
    listed = {"tests/test_b.py::test_long": 30.0, "tests/test_runner_e2e.py::test_one": 3.0, "tests/test_runner_e2e.py::test_two": 4.0}
    monkeypatch.setattr(conftest, "known_durations", lambda: listed)
    ids = ["tests/test_a.py::test_quick", "tests/test_runner_e2e.py::test_one", "tests/test_a.py::test_new_and_slow",
           "tests/test_b.py::test_long", "tests/test_c.py::test_quick", "tests/test_runner_e2e.py::test_two"]
    items = [_item(i, slow=i.endswith("slow")) for i in ids]
    conftest.pytest_collection_modifyitems(None, items)  # type: ignore[arg-type]
    assert [i.nodeid for i in items] == [
        "tests/test_b.py::test_long",  # 30 s, listed
        "tests/test_a.py::test_new_and_slow",  # not listed yet, but marked slow
        "tests/test_runner_e2e.py::test_one", "tests/test_runner_e2e.py::test_two",  # one unit: 7 s together
        "tests/test_a.py::test_quick", "tests/test_c.py::test_quick",  # the rest, in collection order
    ]


class _Worker:
    """What the scheduler sees of an xdist worker: the tests it is sent."""

    shutting_down = False

    def __init__(self) -> None:
        self.sent: list[int] = []

    def send_runtest_some(self, indices: list[int]) -> None:
        self.sent += indices

    def shutdown(self) -> None:
        self.shutting_down = True


def test_the_scheduler_hands_out_units_in_collection_order_not_by_their_number_of_tests():
    """xdist's default hands out the units with most tests first: every grouped module, however
    quick, ahead of a minute-long single test."""
    config = SimpleNamespace(getvalue=lambda name: ["popen"] if name == "tx" else None,
                             option=SimpleNamespace(loadscopereorder=True))
    scheduler = conftest.ModuleFixtureScheduling(config)  # type: ignore[arg-type]
    assert config.option.loadscopereorder is False
    collection = ["tests/test_b.py::test_long", "tests/test_runner_e2e.py::test_one", "tests/test_runner_e2e.py::test_two",
                  "tests/test_a.py::test_quick"]
    worker = _Worker()
    scheduler.add_node(worker)  # type: ignore[arg-type]
    scheduler.add_node_collection(worker, collection)  # type: ignore[arg-type]
    scheduler.schedule()
    assert worker.sent[0] == 0 and worker.sent[1:3] == [1, 2]  # the long single test first, then the unit


def test_stored_durations_are_read_back_as_the_order_uses_them(tmp_path):
    path = tmp_path / "durations.txt"
    recorder = conftest._DurationRecorder(path)
    for nodeid, when, seconds in [("tests/test_x.py::test_p[a b]", "setup", 0.5), ("tests/test_x.py::test_p[a b]", "call", 2.04),
                                  ("tests/test_x.py::test_quick", "call", 0.2), ("tests/test_y.py::test_long", "call", 12.0)]:
        recorder.pytest_runtest_logreport(SimpleNamespace(nodeid=nodeid, when=when, duration=seconds))  # type: ignore[arg-type]
    recorder.pytest_sessionfinish(None, 0)  # type: ignore[arg-type]
    assert path.read_text() == "12.0 tests/test_y.py::test_long\n2.5 tests/test_x.py::test_p[a b]\n"
    assert conftest.known_durations.__wrapped__(path) == {"tests/test_y.py::test_long": 12.0, "tests/test_x.py::test_p[a b]": 2.5}


def test_the_committed_durations_name_tests_that_exist():
    """A renamed or removed test left in the list would only cost its place; the list is kept
    honest by this check instead (refresh: `pytest --store-durations`)."""
    listed = conftest.known_durations()
    assert len(listed) > 20 and all(seconds >= conftest.LISTED_FROM_SEC for seconds in listed.values())
    def exists(nodeid: str) -> bool:
        module = conftest.REPO / nodeid.split("::", 1)[0]
        return module.is_file() and f"def {nodeid.split('::')[-1].split('[')[0]}(" in module.read_text()

    assert [n for n in listed if not exists(n)] == []


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
