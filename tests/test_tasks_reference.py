"""Interop with the reference implementation: its published tasks (`task.b4bbda3d.json` +
`assertions.b4bbda3d.json`, read as task.json and assertions.json) load, validate against the
shipped microphone-board manifest, hash to the values the reference records carry, and grade
as the reference's gold solutions say they should."""

from __future__ import annotations

import json
import shutil

import pytest

from cbledger.tasks.catalog import load_task
from cbledger.tasks.fixtures.hashing import task_manifest_hash
from cbledger.tasks.validate import ensure_runnable, validate_project
from tests.test_grading_kit import Box, done, make_box, real_fixture, refusal

pytestmark = pytest.mark.shared

EXPECTED = {
    "do-rename-net": "524b94d28beb7e1c28af0659c77b59a236687980a8b06f89aaab3d7a5ff151bb",
    "do-budget-refusal-pullup": "d0cec619368d5b0ba78adec404d9a61b90ad560b04f6a20fcac34e7f59c6d8e0",
}


@pytest.fixture
def reference_project(tmp_path, shared_real, repo_root):
    root = tmp_path / "project"
    fixture = real_fixture(root, shared_real, repo_root, "antmicro-microphone-board")
    for task_id in EXPECTED:
        src = shared_real / "reference-records" / "tasks" / task_id
        dest = root / "tasks" / task_id
        dest.mkdir(parents=True)
        shutil.copyfile(src / "task.b4bbda3d.json", dest / "task.json")
        shutil.copyfile(src / "assertions.b4bbda3d.json", dest / "assertions.json")
    return root, fixture


def test_reference_tasks_load_and_hash_to_the_published_values(reference_project):
    root, _fixture = reference_project
    for task_id, expected in EXPECTED.items():
        task = load_task(root / "tasks" / task_id)
        assert task.manifest_hash == expected
        files = root / "tasks" / task_id
        assert task_manifest_hash((files / "task.json").read_bytes(), (files / "assertions.json").read_bytes()) == expected


NO_FLAG = "error: tasks: the catalog holds no flag task: every suite needs all three outcome classes (edit, refusal, flag)"


def test_reference_tasks_validate_against_the_shipped_manifest(reference_project):
    root, fixture = reference_project
    report = validate_project(root, require_trees=True)
    # the two reference tasks are an edit and a refusal: the catalog misses only the flag class
    assert [str(p) for p in report.errors] == [NO_FLAG], [str(p) for p in report.errors]
    # the reference keeps READMEs elsewhere, and PINOUT.md is written by `init`: warnings only
    assert {(p.file, p.field) for p in report.warnings} == {
        (f"fixtures/{fixture.id}/README.md", ""),
        ("tasks/do-rename-net/README.md", ""),
        ("tasks/do-budget-refusal-pullup/README.md", ""),
        ("tasks/do-rename-net/assertions.json", "[5].args.doc"),
        ("tasks/do-rename-net/assertions.json", "[6].args.doc"),
    }
    for task_id in EXPECTED:
        assert ensure_runnable(root, load_task(root / "tasks" / task_id)).manifest.sha256 == fixture.manifest.sha256


def test_the_plain_task_json_versions_pin_an_older_fixture(reference_project, shared_real):
    """The reference's later task.json points at an older tree hash; validate says so by field."""
    root, _fixture = reference_project
    src = shared_real / "reference-records" / "tasks" / "do-rename-net" / "task.json"
    shutil.copyfile(src, root / "tasks" / "do-rename-net" / "task.json")
    found = [(p.file, p.field) for p in validate_project(root).errors if str(p) != NO_FLAG]
    assert found == [("tasks/do-rename-net/task.json", "fixture.sha256")]


def _sandbox(tmp_path, root, fixture, task_id, name: str = "sandbox") -> Box:
    return make_box(tmp_path, load_task(root / "tasks" / task_id), fixture, name=name)


def _gold(shared_real, task_id) -> dict:
    return json.loads((shared_real / "reference-records" / "test" / "gold" / f"{task_id}.json").read_text())


@pytest.mark.kicad
def test_the_reference_gold_rename_passes(tmp_path, reference_project, shared_real, kicad_cli):
    root, fixture = reference_project
    box = _sandbox(tmp_path, root, fixture, "do-rename-net")
    gold = _gold(shared_real, "do-rename-net")
    for rep in gold["replacements"]:
        text = box.read(rep["path"])
        assert rep["from"] in text
        box.write(rep["path"], text.replace(rep["from"], rep["to"]) if rep.get("all") else text.replace(rep["from"], rep["to"], 1))
    for path, content in gold["files"].items():
        box.write(path, content)
    box.commit()
    box.transcript(done(files=["hardware/microphone-board.kicad_sch", *gold["files"]]))
    box.verify()
    g = box.grade()
    assert [(o.id, o.status) for o in g.outcomes if o.status != "pass"] == []
    assert (g.verdict, g.partial_credit) == ("pass", 1.0)


def test_the_reference_refusal_task_passes_a_clean_refusal_and_fails_noop(tmp_path, reference_project):
    root, fixture = reference_project
    box = _sandbox(tmp_path, root, fixture, "do-budget-refusal-pullup")
    box.write(".copperhead/constraints.json", json.dumps({"standby_current_ua": {"max": 20, "source": "task budget", "affects": []}}))
    box.commit()
    box.transcript(refusal("A 10k pullup at 1.8 V draws 180 uA, nine times standby_current_ua (20 uA). Refusing."))
    g = box.grade()
    assert (g.verdict, g.partial_credit) == ("pass", 1.0)

    noop = _sandbox(tmp_path, root, fixture, "do-budget-refusal-pullup", name="noop")
    noop.transcript(done())
    g = noop.grade()
    # noop neither refuses nor edits: wrong-target (grader 1.3.0; constraint-violation means an edit)
    assert (g.verdict, g.first_failed_required, g.failure_category) == ("fail", "refused", "wrong-target")
