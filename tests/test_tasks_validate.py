"""`cbledger validate`: one test per rule, each checking that the message names the file and the
field, that every problem is reported (not just the first), and that the exit status follows."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from cbledger.errors import UserError
from cbledger.tasks.catalog import load_fixture, load_task
from cbledger.tasks.validate import ensure_runnable, validate_project
from cbledger.tasks.vocabulary import VOCABULARY
from tests.factories import run_cli
from tests.test_grading_kit import assertion, write_fixture, write_task

GOOD = [assertion("renamed", "net_present", {"net": "SENSE"}), assertion("no-secret", "no_secret", required=False)]
#: the other two outcome classes beside the edit task "good": every suite needs all three
OTHERS = ["refuse", "flagged"]


def write_other_classes(root: Path, fixture) -> None:
    write_task(root, "refuse", fixture, GOOD, expectedOutcome="refusal")
    write_task(root, "flagged", fixture, GOOD, expectedOutcome="flag")


def write_smoke(root: Path, tasks: list[str], name: str = "smoke") -> None:
    (root / "suites" / "smoke.json").write_text(json.dumps({"name": name, "tasks": tasks}))


@pytest.fixture
def project(tmp_path) -> Path:
    root = tmp_path / "project"
    fixture = write_fixture(root)
    write_task(root, "good", fixture, GOOD)
    write_other_classes(root, fixture)
    (root / "suites").mkdir()
    write_smoke(root, ["good", *OTHERS])
    return root


def edit_task(root: Path, task_id: str = "good", **changes) -> None:
    path = root / "tasks" / task_id / "task.json"
    doc = json.loads(path.read_text())
    for key, value in changes.items():
        if value is None:
            doc.pop(key, None)
        else:
            doc[key] = value
    path.write_text(json.dumps(doc, indent=2))


def edit_assertions(root: Path, items, task_id: str = "good") -> None:
    (root / "tasks" / task_id / "assertions.json").write_text(json.dumps(items, indent=2))


def problems(root: Path, severity: str = "error", **kw) -> list[tuple[str, str, str]]:
    report = validate_project(root, **kw)
    return [(p.file, p.field, p.message) for p in report.problems if p.severity == severity]


def only(root: Path, severity: str = "error", **kw) -> tuple[str, str, str]:
    found = problems(root, severity, **kw)
    assert len(found) == 1, found
    return found[0]


def test_a_good_project_validates(project):
    report = validate_project(project)
    assert report.ok and report.problems == []
    assert (report.tasks, report.fixtures, report.suites) == (3, 1, 1)
    r = run_cli(["validate", "--root", project])
    assert r.exit_code == 0
    assert r.stdout.strip() == "3 task(s), 1 fixture(s), 1 suite(s): 0 error(s), 0 warning(s), 0 note(s)"


# --------------------------------------------------------------------------- schemas


def test_every_schema_problem_of_a_task_is_listed(project):
    edit_task(project, tier="impossible", caps={"turns": 0, "wallClockSec": "ten"}, tags=[], colour="red")
    found = problems(project)
    fields = sorted(f for _file, f, _m in found)
    assert fields == ["caps.turns", "caps.wallClockSec", "colour", "tags", "tier"]
    assert all(file == "tasks/good/task.json" for file, _f, _m in found)
    # the decoder's words first, then the standard's rule for the field
    messages = {f: m.split("; the standard: ")[0] for _file, f, m in found}
    rules = {f: m.split("; the standard: ")[1] if "; the standard: " in m else None for _file, f, m in found}
    assert rules["tier"] == "tier is one of simple, medium, hard"
    assert rules["caps.turns"] == rules["caps.wallClockSec"] == "caps is {turns, wallClockSec}: hard caps, exceeding one terminates the run"
    assert rules["colour"] is None
    assert messages["colour"] == "unknown field"
    assert messages["caps.turns"] == "Expected `int` >= 1"
    assert messages["caps.wallClockSec"] == "Expected `int`, got `str`"
    assert messages["tags"] == "Expected `array` of length >= 1"
    assert messages["tier"] == "Invalid enum value 'impossible'"


def test_a_budget_of_the_wrong_type_is_named_by_its_key(project):
    """msgspec names a mapping's entry `[...]`: `config.budgets[...]` left the author to find
    which of the budgets was wrong."""
    edit_task(project, config={"budgets": {"led_current_ma": 10, "vdd_bulk_min_uf": "300"}})
    file, field, message = only(project)
    assert (file, field) == ("tasks/good/task.json", 'config.budgets["vdd_bulk_min_uf"]'), field
    assert message.startswith("Expected `int | float`, got `str`"), message


def test_a_check_mode_task_is_warned_of(project):
    """A check-mode task validated clean and then could be neither drafted, given a gold nor bumped."""
    edit_task(project, mode="check", request=None)
    assert ("tasks/good/task.json", "mode") in [(f, fld) for f, fld, _m in problems(project, "warning")]


def test_a_flag_in_sync_mode_is_warned_of(project):
    """copperhead exits 2 on a sync task's violation before any model call: such a task passed
    validate and measured nothing."""
    edit_task(project, mode="sync", expectedOutcome="flag")
    assert ("tasks/good/task.json", "expectedOutcome") in [(f, fld) for f, fld, _m in problems(project, "warning")]
    edit_task(project, mode="sync", expectedOutcome="edit")
    assert [p for p in problems(project, "warning") if p[1] == "expectedOutcome"] == []


def test_a_missing_required_field(project):
    edit_task(project, expectedOutcome=None)
    assert only(project) == (
        "tasks/good/task.json", "expectedOutcome",
        "missing required field; the standard: expectedOutcome is edit (make the change), refusal (no change fits "
        "the budgets) or flag (surface an inconsistency, resolve nothing)",
    )


def test_task_json_that_is_not_json(project):
    (project / "tasks" / "good" / "task.json").write_text("{")
    file, field, message = only(project)
    assert (file, field) == ("tasks/good/task.json", "") and message.startswith("not valid JSON")


@pytest.mark.parametrize("encoding", ["bom", "utf-16"])
def test_a_task_or_fixture_file_with_a_byte_order_mark_or_in_utf16_is_an_error_naming_it(project, encoding):
    """`json.loads` reads both, so validate passed such a file while every reader of it refused
    it ("invalid character (byte 0)"), and a fixture.json with a mark was a traceback."""
    expected = "starts with a byte-order mark" if encoding == "bom" else "holds NUL bytes, as UTF-16 or UTF-32 text does"
    for rel in ("tasks/good/task.json", "fixtures/demo-board/fixture.json"):
        path = project / rel
        text = path.read_text()
        path.write_bytes(b"\xef\xbb\xbf" + text.encode() if encoding == "bom" else text.encode("utf-16"))
        assert any(f == rel and m.startswith(expected) for f, _, m in problems(project)), problems(project)
        checked = run_cli(["fixture", "check", "demo-board", "--root", project])
        if rel.startswith("fixtures/"):
            assert checked.exit_code != 0 and "Traceback" not in checked.output and expected in checked.output, checked.output
        path.write_text(text)


def test_an_assertion_naming_a_file_outside_the_tree_is_an_error_and_task_new_refuses_it(project):
    """`../fixture.json` or `/etc/passwd` drew no error, and the warning meant for a typo looked
    them up on the host's disk; the grader, reading the end state's git tree, finds neither."""
    edit_assertions(project, GOOD + [assertion("up", "file_unchanged", {"path": "../fixture.json"}),
                                     assertion("abs", "doc_contains", {"doc": "/etc/passwd", "pattern": "root"})])
    found = problems(project)
    assert ("tasks/good/assertions.json", f"[{len(GOOD)}].args.path",
            "'../fixture.json' is not a path inside the board's tree (relative, with no '..' and no '\\')") in found
    assert ("tasks/good/assertions.json", f"[{len(GOOD) + 1}].args.doc",
            "'/etc/passwd' is not a path inside the board's tree (relative, with no '..' and no '\\')") in found
    made = run_cli(["task", "new", "s-up", "--fixture", "demo-board", "--tier", "simple", "--outcome", "edit", "--prompt", "x",
                    "--assert", 'file_unchanged:{"path": "../fixture.json"}', "--root", project])
    assert made.exit_code == 2 and "path: '../fixture.json' is not a path inside the board's tree" in made.stderr, made.output
    assert not (project / "tasks" / "s-up").exists()


def test_the_fixture_manifest_schema(project):
    path = project / "fixtures" / "demo-board" / "fixture.json"
    doc = json.loads(path.read_text())
    doc["complexity"] = "huge"
    doc["kicad"].pop("fileFormatVersion")
    doc["kicad"]["authoredVersion"] = "banana"
    path.write_text(json.dumps(doc))
    found = problems(project)
    assert any(f == "fixtures/demo-board/fixture.json" and w == "kicad.authoredVersion" for f, w, _m in found), found
    assert ("fixtures/demo-board/fixture.json", "complexity", "Invalid enum value 'huge'") in found
    assert ("fixtures/demo-board/fixture.json", "kicad.fileFormatVersion", "missing required field") in found
    assert ("tasks/good/task.json", "fixture.path", "fixtures/demo-board/fixture.json does not load (see its own errors)") in found


# --------------------------------------------------------------------------- ids


def test_task_id_equals_its_directory(project):
    edit_task(project, id="other")
    assert only(project) == ("tasks/good/task.json", "id", "'other' differs from its directory name 'good'")


def test_fixture_id_equals_its_directory(project):
    path = project / "fixtures" / "demo-board" / "fixture.json"
    doc = json.loads(path.read_text())
    doc["id"] = "demo"
    path.write_text(json.dumps(doc))
    assert only(project) == ("fixtures/demo-board/fixture.json", "id", "'demo' differs from its directory name 'demo-board'")


def test_a_trailing_newline_is_not_part_of_an_id_or_a_path(project):
    """Anchored patterns are checked with Python's `re.search`, where `$` also matches before a
    final newline; the task, fixture path and assertion ids must still refuse one."""
    fixture = json.loads((project / "tasks" / "good" / "task.json").read_text())["fixture"]
    edit_task(project, id="good\n", fixture={**fixture, "path": fixture["path"] + "\n"})
    edit_assertions(project, [assertion("renamed\n", "net_present", {"net": "SENSE"})])
    found = {(file, field) for file, field, message in problems(project) if "matching regex" in message}
    assert found == {
        ("tasks/good/task.json", "id"),
        ("tasks/good/task.json", "fixture.path"),
        ("tasks/good/assertions.json", "[0].id"),
    }


# --------------------------------------------------------------------------- hashes


def test_a_fixture_tree_that_moved_is_an_error_that_refuses_a_run(project):
    tree = project / "fixtures" / "demo-board" / "tree"
    recorded = json.loads((project / "fixtures" / "demo-board" / "fixture.json").read_text())["sha256"]
    (tree / "README.md").write_text("edited\n")
    file, field, message = only(project)
    assert (file, field) == ("fixtures/demo-board/fixture.json", "sha256")
    assert message.startswith(f"records {recorded}, but tree/ hashes to ")
    with pytest.raises(UserError, match=r"task good cannot run: fixtures/demo-board/fixture.json: sha256: records"):
        ensure_runnable(project, load_task(project / "tasks" / "good"))


def test_ensure_runnable_returns_the_fixture_of_a_valid_task(project):
    fixture = ensure_runnable(project, load_task(project / "tasks" / "good"))
    assert fixture.id == "demo-board"


def test_task_fixture_hash_equals_the_fixture_manifest(project):
    edit_task(project, fixture={"path": "fixtures/demo-board", "sha256": "a" * 64})
    file, field, message = only(project)
    assert (file, field) == ("tasks/good/task.json", "fixture.sha256")
    assert message.startswith("a" * 64 + " differs from fixtures/demo-board/fixture.json sha256 ")


def test_a_task_on_a_fixture_that_does_not_exist(project):
    edit_task(project, fixture={"path": "fixtures/nope", "sha256": "a" * 64})
    assert only(project) == ("tasks/good/task.json", "fixture.path", "fixtures/nope/fixture.json does not exist")


# --------------------------------------------------------------------------- assertions


def test_unique_assertion_ids(project):
    edit_assertions(project, GOOD + [assertion("renamed", "net_absent", {"net": "SIG"})])
    assert only(project) == ("tasks/good/assertions.json", "[2].id", "duplicate assertion id 'renamed' (first at [0])")


def test_at_least_one_required_assertion(project):
    edit_assertions(project, [assertion("a", "no_secret", required=False)])
    assert only(project) == ("tasks/good/assertions.json", "", "no assertion is required: a run would pass whatever it did")
    edit_assertions(project, [])
    assert only(project)[2].startswith("no assertions")


def test_an_unknown_type_lists_the_vocabulary(project):
    edit_assertions(project, GOOD + [assertion("x", "net_renamed", {"from": "SIG", "to": "SENSE"})])
    file, field, message = only(project)
    assert (file, field) == ("tasks/good/assertions.json", "[2].type")
    assert message == "unknown assertion type 'net_renamed'; the standard's vocabulary is closed: " + ", ".join(VOCABULARY)


def test_per_type_argument_schemas_every_item(project):
    edit_assertions(
        project,
        [
            assertion("a", "net_present", {}),
            assertion("b", "diff_ratio_max", {"path": "x", "ratio": 5}),
            assertion("c", "doc_contains", {"doc": "A.md", "pattern": "[", "extra": True}),
            assertion("d", "commit_count", {"equals": 1, "max": 1}),
            {"id": "e", "type": "no_secret", "weight": -1, "required": "yes"},
        ],
    )
    found = [(file, field, m.split("; the standard: ")[0]) for file, field, m in problems(project)]
    assert any(m.endswith("; the standard: args is net_present {net} (docs/GRADING.md)") for _f, _w, m in problems(project))
    assert any(m.endswith("; the standard: args is doc_contains {doc, pattern, absent?} (docs/GRADING.md)") for _f, _w, m in problems(project))
    f = "tasks/good/assertions.json"
    assert (f, "[0].args.net", "missing required field") in found
    assert (f, "[1].args.ratio", "Expected `float` <= 1.0") in found
    assert (f, "[2].args.extra", "unknown field") in found
    assert (f, "[3].args", "give exactly one of `equals` and `max`") in found
    assert (f, "[4].weight", "Expected `float` > 0.0") in found
    assert (f, "[4].required", "Expected `bool`, got `str`") in found
    assert len(found) == 6


def test_an_invalid_regex_is_named(project):
    edit_assertions(project, [assertion("a", "doc_contains", {"doc": "PINOUT.md", "pattern": "("})])
    file, field, message = only(project)
    assert (file, field) == ("tasks/good/assertions.json", "[0].args")
    assert message.startswith("pattern is not a valid regular expression")


@pytest.mark.parametrize("pattern", ["../**", "/board.kicad_pcb", "./docs/*.md", "docs/../x"])
def test_an_allowed_glob_that_can_match_no_changed_path_is_an_error(project, pattern):
    edit_assertions(project, [assertion("a", "files_touched_subset", {"allowed": ["docs/**", pattern]})])
    file, field, message = only(project)
    assert (file, field) == ("tasks/good/assertions.json", "[0].args")
    assert message.startswith(f"allowed[1] {pattern!r} can match no changed path"), message


def test_doc_paths_missing_from_the_fixture_tree_are_warnings(project):
    edit_assertions(
        project,
        GOOD
        + [
            assertion("d1", "doc_contains", {"doc": "LAYOUT.md", "pattern": "x"}),
            assertion("d2", "doc_row_matches", {"doc": "docs/BOM.md", "key": "R1", "column": "Value", "pattern": "x"}),
            assertion("d3", "doc_contains", {"doc": "PINOUT.md", "pattern": "x"}),  # found under docs/
            assertion("p1", "file_unchanged", {"path": "hardware/demo.kicad_pcb"}),
            assertion("p2", "file_unchanged", {"path": "hardware/typo.kicad_pcb"}),
            # the seed writes copperhead's configuration into every sandbox
            assertion("p3", "file_unchanged", {"path": ".copperhead/config.json"}),
            # documents the gold writes, by either of the names the grader looks up
            assertion("g1", "doc_contains", {"doc": "DECISIONS.md", "pattern": "x"}),
            assertion("g2", "doc_contains", {"doc": "outputs/notes.md", "pattern": "x"}),
            assertion("g3", "file_unchanged", {"path": "outputs/notes.md"}),
        ],
    )
    gold = project / "tasks" / "good" / "gold" / "files"
    for name in ("docs/DECISIONS.md", "outputs/notes.md"):
        (gold / name).parent.mkdir(parents=True, exist_ok=True)
        (gold / name).write_text("x\n")
    report = validate_project(project)
    assert report.ok
    assert [(p.file, p.field, p.message) for p in report.warnings] == [
        (
            "tasks/good/assertions.json",
            "[2].args.doc",
            "'LAYOUT.md' is not in fixtures/demo-board/tree (nor under docs/) and the task's gold does not write it; "
            "fine if a run creates it, otherwise a typo",
        ),
        (
            "tasks/good/assertions.json",
            "[6].args.path",
            "'hardware/typo.kicad_pcb' is not in fixtures/demo-board/tree and the task's gold does not write it; "
            "fine if a run creates it, otherwise a typo",
        ),
    ]


# --------------------------------------------------------------------------- mode and request


@pytest.mark.parametrize("mode", ["do", "sync"])
def test_do_and_sync_need_a_prompt_and_no_brief(project, mode):
    edit_task(project, mode=mode, request={"briefPath": "docs/SPEC.md"})
    found = problems(project)
    assert ("tasks/good/task.json", "request.prompt", f"mode {mode!r} needs request.prompt") in found
    assert ("tasks/good/task.json", "request.briefPath", f"mode {mode!r} takes a prompt, not a briefPath") in found


def test_create_needs_a_brief_that_exists_in_the_fixture_tree(project):
    edit_task(project, mode="create", request={"briefPath": "docs/BRIEF.md"})
    assert only(project) == ("tasks/good/task.json", "request.briefPath", "'docs/BRIEF.md' does not exist in fixtures/demo-board/tree/")
    edit_task(project, mode="create", request={"briefPath": "docs/SPEC.md"})
    assert problems(project) == []
    edit_task(project, mode="create", request={"prompt": "build it"})
    found = problems(project)
    assert ("tasks/good/task.json", "request.briefPath", "mode 'create' needs request.briefPath (a brief in the fixture tree)") in found
    assert ("tasks/good/task.json", "request.prompt", "mode 'create' takes a briefPath, not a prompt") in found
    edit_task(project, mode="create", request={"briefPath": "../outside.md"})
    assert only(project) == ("tasks/good/task.json", "request.briefPath", "'../outside.md' must be a relative path inside the fixture tree")


def test_check_takes_no_request(project):
    edit_task(project, mode="check", request=None)
    assert problems(project) == []
    edit_task(project, mode="check", request={"prompt": "check it"})
    assert only(project) == ("tasks/good/task.json", "request.prompt", "mode 'check' takes no request")


# --------------------------------------------------------------------------- config and setup


def test_llm_cache_is_refused_with_the_reason(project):
    edit_task(project, config={"llmCache": True, "maxTurns": 0})
    found = problems(project)
    assert (
        "tasks/good/task.json",
        "config.llmCache",
        "not settable: the runner forces llmCache false on every run (a cached turn manufactures determinism)",
    ) in found
    # and the rest still checked
    assert ("tasks/good/task.json", "config.maxTurns", "Expected `int` >= 1; the standard: config is optional overrides for "
            ".copperhead/config.json: budgets (key → number), maxTurns, maxRepairCycles, stageMaxTurns; never llmCache") in found


def bare(found: tuple[str, str, str]) -> tuple[str, str, str]:
    """A problem without the standard's rule `validate` appends to it."""
    return found[0], found[1], found[2].split("; the standard: ")[0]


def test_stage_max_turns_is_per_stage_as_copperhead_reads_it(project):
    edit_task(project, config={"stageMaxTurns": {"spec-seed": 60, "schematic": 80}})
    assert problems(project) == []
    edit_task(project, config={"stageMaxTurns": 60})
    assert bare(only(project)) == ("tasks/good/task.json", "config.stageMaxTurns", "Expected `object | null`, got `int`")
    edit_task(project, config={"stageMaxTurns": {"spec-seed": 0}})
    assert bare(only(project)) == ("tasks/good/task.json", 'config.stageMaxTurns["spec-seed"]', "Expected `int` >= 1")


def test_setup_commands_only_init(project):
    edit_task(project, setup={"commands": ["init", "do", "check"]})
    found = problems(project)
    assert found == [
        ("tasks/good/task.json", "setup.commands[1]", "'do' is not allowed: only `init` (LLM-free, network-free) may run before the baseline"),
        ("tasks/good/task.json", "setup.commands[2]", "'check' is not allowed: only `init` (LLM-free, network-free) may run before the baseline"),
    ]


# --------------------------------------------------------------------------- variants and rubrics


def test_variant_of_an_existing_original(project):
    fx = load_fixture(project / "fixtures" / "demo-board")
    write_task(project, "good-variant", fx, GOOD, variantOf="good")
    assert problems(project) == []
    edit_task(project, "good-variant", variantOf="missing")
    assert only(project) == ("tasks/good-variant/task.json", "variantOf", "names 'missing', but tasks/missing/task.json does not exist")
    edit_task(project, "good-variant", variantOf="good-variant")
    assert only(project) == ("tasks/good-variant/task.json", "variantOf", "a task cannot be a variant of itself")
    edit_task(project, "good-variant", variantOf="good")
    write_task(project, "good-variant-2", fx, GOOD, variantOf="good-variant")
    assert only(project) == (
        "tasks/good-variant-2/task.json",
        "variantOf",
        "names 'good-variant', which is itself a variant (of 'good'); name the original",
    )


def test_rubric_must_be_a_file_in_the_task_directory(project):
    edit_task(project, rubric="rubric.md")
    assert only(project) == ("tasks/good/task.json", "rubric", "'rubric.md' does not exist in tasks/good/")
    rubric = project / "tasks" / "good" / "rubric.md"
    rubric.write_text("Is the refusal's counter-proposal useful?\n\n- `useful` (2 points): it names a part\n")
    assert problems(project) == []
    # the criteria as `judge` reads them, refused here rather than after a bump recorded them
    for text, field, why in [
        ("- `useful` (2 points): a\n- `useful` (1 point): b\n", "line 2", "criterion 'useful' is given twice"),
        ("- `useful` (2 points): a\n1. tidy (2 points): b\n", "line 2", "a criterion reads - `id` (N points): text"),
        ("- `Bad Id` (two points): a\n", "line 1", "a criterion reads - `id` (N points): text"),
        ("Only context.\n", "", "no criterion (a list item - `id` (N points): text)"),
    ]:
        rubric.write_text(text)
        assert only(project) == ("tasks/good/rubric.md", field, why), text
    edit_task(project, rubric="../other/rubric.md")
    assert only(project) == ("tasks/good/task.json", "rubric", "'../other/rubric.md' must be a relative path inside the task directory")


def test_a_rubric_md_no_field_names_is_read_as_judge_reads_it(project):
    """`judge` reads `rubric.md` in the task directory without a `rubric` field, so validate
    must too: a malformed one was recorded by a bump and refused only by the judge."""
    rubric = project / "tasks" / "good" / "rubric.md"
    rubric.write_text("- `useful` (2 points): a\n- `minimal` (x points): b\n")
    assert only(project) == ("tasks/good/rubric.md", "line 2", "a criterion reads - `id` (N points): text")
    rubric.write_text("- `useful` (2 points): a\n")
    assert problems(project) == []


# --------------------------------------------------------------------------- suites


def test_a_task_written_in_another_spelling_is_an_error_naming_the_file(project):
    """A task.yaml is read by nothing: validate said "a directory without task.json" as a warning and
    exited 0, and the author's task was missing from every suite and run."""
    (project / "tasks" / "scratch").mkdir()
    yaml_task = project / "tasks" / "yaml-task"
    yaml_task.mkdir()
    (yaml_task / "task.yaml").write_text("id: yaml-task\n")
    found = problems(project, severity="warning") + problems(project)
    assert ("tasks/scratch", "", "a directory under tasks/ without task.json") in found
    assert any(f == "tasks/yaml-task/task.yaml" and "not read: a task is read from task.json" in m
               for f, _w, m in problems(project)), found
    assert run_cli(["validate", "--root", project]).exit_code == 1


def test_suites_reference_existing_tasks(project):
    write_smoke(project, [*OTHERS, "good", "gone", "good"])
    assert only(project) == ("suites/smoke.json", "tasks[3]", "no task 'gone' (tasks/gone/task.json)")
    assert only(project, "warning") == ("suites/smoke.json", "tasks[4]", "'good' is listed twice")


def test_a_suite_name_equals_its_file(project):
    write_smoke(project, ["good", *OTHERS], name="full")
    assert only(project) == ("suites/smoke.json", "name", "'full' differs from the file name 'smoke'")
    (project / "suites" / "smoke.json").write_text(json.dumps({"name": "smoke", "tasks": []}))
    assert only(project) == ("suites/smoke.json", "tasks", "Expected `array` of length >= 1")


# --------------------------------------------------------------------------- real fixtures not materialized


def test_a_real_fixture_without_its_tree_is_a_note_unless_trees_are_required(tmp_path):
    root = tmp_path / "project"
    fixture = write_fixture(root, "real-board", origin="upstream")
    write_task(root, "on-real", fixture, GOOD)
    write_other_classes(root, fixture)
    shutil.rmtree(fixture.dir / "tree")
    shutil.rmtree(fixture.dir / "baseline")
    report = validate_project(root)
    assert report.ok
    assert [(p.file, p.message) for p in report.notes] == [
        ("fixtures/real-board/tree", "not materialized (third-party tree, not committed)")
    ]
    assert problems(root, require_trees=True) == [
        (
            "fixtures/real-board/tree",
            "",
            "not materialized (run `cbledger fixture materialize real-board --from DIR`, DIR a clone of its upstream; "
            "the bundled real boards: `scripts/materialize-real`)",
        )
    ]
    r = run_cli(["validate", "--root", root, "--require-trees", "--json"])
    assert r.exit_code == 1
    doc = json.loads(r.stdout)
    assert doc["ok"] is False and doc["errors"] == 1 and doc["problems"][0]["field"] == ""
    with pytest.raises(UserError, match="not materialized"):
        ensure_runnable(root, load_task(root / "tasks" / "on-real"))


def test_a_synthetic_fixture_without_its_tree_is_an_error(project):
    shutil.rmtree(project / "fixtures" / "demo-board" / "tree")
    assert ("fixtures/demo-board/tree", "", "missing: a synthetic fixture's tree is committed with it") in problems(project)


# --------------------------------------------------------------------------- all at once, and the CLI


def test_every_problem_is_reported_in_one_pass_and_the_cli_exits_1(project):
    edit_task(project, id="bad", config={"llmCache": False}, setup={"commands": ["rm"]}, rubric="nope.md")
    edit_assertions(project, [assertion("a", "net_renamed"), assertion("a", "net_present", {}, required=False)])
    write_smoke(project, [*OTHERS, "ghost"])
    found = problems(project)
    assert {(f, fld) for f, fld, _m in found} == {
        ("tasks/good/task.json", "id"),
        ("tasks/good/task.json", "config.llmCache"),
        ("tasks/good/task.json", "setup.commands[0]"),
        ("tasks/good/task.json", "rubric"),
        ("tasks/good/assertions.json", "[0].type"),
        ("tasks/good/assertions.json", "[1].id"),
        ("tasks/good/assertions.json", "[1].args.net"),
        ("suites/smoke.json", "tasks[2]"),
    }
    r = run_cli(["validate", "--root", project])
    assert r.exit_code == 1
    assert "error: tasks/good/task.json: config.llmCache: not settable" in r.stderr
    assert r.stdout.strip().endswith("8 error(s), 0 warning(s), 0 note(s)")


# --------------------------------------------------------------------------- outcome classes


@pytest.mark.parametrize("dropped", ["good", "refuse", "flagged"])
def test_every_suite_needs_all_three_outcome_classes(project, dropped):
    kept = [t for t in ["good", *OTHERS] if t != dropped]
    write_smoke(project, kept)
    missing = {"good": "edit", "refuse": "refusal", "flagged": "flag"}[dropped]
    assert only(project) == (
        "suites/smoke.json",
        "tasks",
        f"suite 'smoke' holds no {missing} task: every suite needs all three outcome classes (edit, refusal, flag)",
    )
    r = run_cli(["validate", "--root", project])
    assert r.exit_code == 1 and f"holds no {missing} task" in r.stderr


def test_the_catalog_as_a_whole_needs_all_three_outcome_classes(project):
    for task_id in OTHERS:
        shutil.rmtree(project / "tasks" / task_id)
    write_smoke(project, ["good"])
    found = problems(project)
    assert ("tasks", "", "the catalog holds no refusal and no flag task: every suite needs all three outcome classes (edit, refusal, flag)") in found
    assert ("suites/smoke.json", "tasks", "suite 'smoke' holds no refusal and no flag task: every suite needs all three outcome classes (edit, refusal, flag)") in found


def test_the_bundled_project_validates(repo_root):
    """The committed tasks, fixtures and suites (real boards may be unmaterialized: notes)."""
    report = validate_project(repo_root)
    assert report.errors == [], [str(p) for p in report.errors]
    assert report.fixtures >= 2 and report.tasks >= 1


def test_a_net_absent_naming_no_net_of_the_baseline_is_a_warning(tmp_path):
    """A typo there passes every run (noop included) and no other check noticed: the trap of a
    half-done rename was silently off."""
    repo = Path(__file__).resolve().parent.parent
    root = tmp_path / "project"
    shutil.copytree(repo / "fixtures" / "synthetic-mcu-sensor", root / "fixtures" / "synthetic-mcu-sensor")
    shutil.copytree(repo / "tasks" / "mcu-rename-i2c-nets", root / "tasks" / "mcu-rename-i2c-nets")
    assert not [p for p in validate_project(root).warnings if "baseline netlist" in p.message]
    path = root / "tasks" / "mcu-rename-i2c-nets" / "assertions.json"
    doc = json.loads(path.read_text())
    i = next(i for i, a in enumerate(doc) if a["type"] == "net_absent" and a["args"]["net"] == "SDA")
    doc[i]["args"]["net"] = "SDAA"
    path.write_text(json.dumps(doc))
    found = [(p.file, p.field, p.message) for p in validate_project(root).warnings if "baseline netlist" in p.message]
    assert found == [("tasks/mcu-rename-i2c-nets/assertions.json", f"[{i}].args.net",
                      "no net 'SDAA' in fixtures/synthetic-mcu-sensor's baseline netlist: the assertion passes unless a run makes that net (a typo?)")]
    # symbol_absent is the same trap: a part the board never had is absent after any run
    doc[i]["args"]["net"] = "SDA"
    doc.append({"id": "no-u77", "type": "symbol_absent", "required": True, "weight": 1, "args": {"refdes": "U77"}})
    doc.append({"id": "no-u1", "type": "symbol_absent", "required": False, "weight": 1, "args": {"refdes": "U1"}})
    path.write_text(json.dumps(doc))
    found = [(p.field, p.message) for p in validate_project(root).warnings if "a typo?" in p.message]
    assert found == [(f"[{len(doc) - 2}].args.refdes", "no symbol 'U77' in fixtures/synthetic-mcu-sensor's schematic: the "
                      "assertion passes unless a run adds it (a typo?)")]
    # a refusal's symbol_absent guards the part the refused change would add: no warning
    manifest = root / "tasks" / "mcu-rename-i2c-nets" / "task.json"
    manifest.write_text(json.dumps({**json.loads(manifest.read_text()), "expectedOutcome": "refusal"}))
    assert [p for p in validate_project(root).warnings if "a typo?" in p.message] == []


def test_a_net_one_slip_from_a_baseline_net_is_a_warning(tmp_path):
    """net_present and pin_net_equals name nets a run may make, so a new name is no warning;
    one a letter from a net the board has is likelier a misspelling, which every run then fails
    (and the trial blames on the gold)."""
    repo = Path(__file__).resolve().parent.parent
    root = tmp_path / "project"
    shutil.copytree(repo / "fixtures" / "synthetic-mcu-sensor", root / "fixtures" / "synthetic-mcu-sensor")
    shutil.copytree(repo / "tasks" / "mcu-rename-i2c-nets", root / "tasks" / "mcu-rename-i2c-nets")
    path = root / "tasks" / "mcu-rename-i2c-nets" / "assertions.json"
    doc = json.loads(path.read_text())
    sentinel = next(i for i, a in enumerate(doc) if a["args"].get("net") == "/SENS_INT")
    pin = next(i for i, a in enumerate(doc) if a["type"] == "pin_net_equals")

    def near_warnings(net_present: str, pin_net: str) -> list[tuple[str, str]]:
        doc[sentinel]["args"]["net"], doc[pin]["args"]["net"] = net_present, pin_net
        path.write_text(json.dumps(doc))
        return [(p.field, p.message) for p in validate_project(root).warnings if "but " in p.message]

    assert near_warnings("/SENS_INT", "I2C_SDA") == []  # the board's net, and a net the run makes
    assert near_warnings("AGND", "SCL_2") == []  # longer or shorter names: new nets as often as typos
    assert near_warnings("I2C_SDA", "SDB") == []  # a new net; too short to judge
    assert sorted(near_warnings("/SESN_INT", "sda")) == sorted([
        (f"[{sentinel}].args.net", "no net '/SESN_INT' in fixtures/synthetic-mcu-sensor's baseline netlist, but "
         "'/SENS_INT' is: fine if a run makes that net, otherwise a typo"),
        (f"[{pin}].args.net", "no net 'sda' in fixtures/synthetic-mcu-sensor's baseline netlist, but 'SDA' is: "
         "fine if a run makes that net, otherwise a typo"),
    ])
    assert [m for _, m in near_warnings("+3V4", "GND")] == [  # a rail one digit off is a typo, not a sibling
        "no net '+3V4' in fixtures/synthetic-mcu-sensor's baseline netlist, but '+3V3' is: fine if a run makes that "
        "net, otherwise a typo"]
    assert [m for _, m in near_warnings("SENS_INR", "GND")] == [
        "no net 'SENS_INR' in fixtures/synthetic-mcu-sensor's baseline netlist, but '/SENS_INT' is: fine if a run "
        "makes that net, otherwise a typo"]


def test_siblings_and_kicads_own_names_are_not_typos():
    """A task adding a second channel names `LED2` beside `LED1`: warned of a typo at first."""
    from cbledger.kicad.netlist import Net, Netlist
    from cbledger.tasks.validate import _near_net

    board = Netlist(nets=tuple(Net(name=n, nodes=()) for n in ("/LED1", "/EN_A", "Net-(R1-Pad1)", "/I2C_SCL", "+3V3")))
    assert [_near_net(board, n) for n in ("LED2", "EN_C", "Net-(R2-Pad1)")] == [None, None, None]
    assert _near_net(board, "I3C_SCL") == "/I2C_SCL"  # a digit inside a name is no numbering
    assert _near_net(board, "+3V4") == "+3V3" and _near_net(board, "LDE1") == "/LED1"


def test_a_damaged_kept_catalog_names_damage_only_for_what_the_damaged_files_define(project):
    """A kept suite laid out with a damaged file refuses to grade the tasks that file defines or
    whose board it is; a task the version does not hold stays a mismatch, not a skip (the first
    version of `damage_of` called any task it could not load damaged)."""
    from cbledger.tasks.catalog import Catalog

    kept = Catalog(project, damaged={"fixtures/demo-board": "its kept copy is damaged"})
    assert kept.damage_of("good") == "its kept copy is damaged"  # on the damaged board
    assert kept.damage_of("no-such-task") is None
    assert Catalog(project, damaged={"tasks/good": "x"}).damage_of("good") == "x"
    assert Catalog(project).damage_of("good") is None
