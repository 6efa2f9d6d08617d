"""`cbledger validate`: every fixture, task and suite under a project root, checked as data.

Loading (`catalog.py`) stops at the first problem, which is right for a run and wrong for an
author: validation reports every problem, each with its file and field, and exits non-zero on any
error. Warnings are things that may be intended (a doc a task expects the run to create); notes
are states, not problems (a real board's tree that nobody has materialized here).

The rules, in the order they are checked for a task:

* `task.json` and `assertions.json` decode (per field, so every schema problem is listed);
* `id` equals the directory name;
* `mode` and `request` agree: `do`/`sync` need `request.prompt` and no `briefPath`; `create` needs
  `request.briefPath`, a file that exists in the fixture tree; `check` needs neither;
* `config.llmCache` is refused (the runner forces it off), `setup.commands` hold only `init`;
* `variantOf` names an existing task that is not itself a variant; `rubric` is a file in the
  task directory;
* the fixture exists, and `fixture.sha256` equals the fixture manifest's `sha256`;
* assertion ids are unique, at least one assertion is required, every type is in the closed
  vocabulary (the message lists it), every argument object fits its type's schema;
* warnings: a doc named by `doc_contains`/`doc_row_matches`, or a path named by
  `file_unchanged`/`diff_ratio_max`, that is not in the fixture tree; a `net_absent` naming no
  net of the fixture's baseline netlist (it would pass whatever a run does).

Fixtures are checked by `cbledger.tasks.fixtures.check` (hash, id, baseline summary); suites
must name existing tasks, and every named suite, like the catalog as a whole, must hold tasks of
all three outcome classes (edit, refusal, flag): the standard's guard against a degenerate
strategy, since a suite without refusal tasks cannot catch a model that never refuses.
`ensure_runnable` is the same check narrowed to one task, as a refusal.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, get_args

import msgspec

from cbledger import inputs
from cbledger.errors import UserError
from cbledger.kicad.hierarchy import load_schematic
from cbledger.kicad.kicad_net import read_kicad_netlist
from cbledger.kicad.netlist import Netlist
from cbledger.kicad.symbols import list_symbols
from cbledger.ledger.types import Outcome
from cbledger.tasks import gold as gold_mod
from cbledger.tasks import passes
from cbledger.tasks import rubric as rubric_mod
from cbledger.tasks.catalog import Catalog, Fixture, Task, load_fixture
from cbledger.tasks.definitions import incomplete
from cbledger.tasks.explain import explain
from cbledger.tasks.fixtures.check import FixtureCheck, check_fixture
from cbledger.tasks.fixtures.problems import (
    Problem,
    error,
    errors_of,
    note,
    read_json,
    readme_problems,
    schema_problems,
    warning,
)
from cbledger.tasks.model import CONFIG_PATH, Suite, TaskManifest
from cbledger.tasks.vocabulary import SPEC_CLASSES, VOCABULARY

PROMPT_MODES = ("do", "sync")
DOC_TYPES = ("doc_contains", "doc_row_matches")
PATH_TYPES = ("file_unchanged", "diff_ratio_max")
OUTCOME_CLASSES: tuple[Outcome, ...] = get_args(Outcome)


@dataclass
class ValidationReport:
    problems: list[Problem] = field(default_factory=list)
    tasks: int = 0
    fixtures: int = 0
    suites: int = 0

    @property
    def errors(self) -> list[Problem]:
        return errors_of(self.problems)

    @property
    def warnings(self) -> list[Problem]:
        return [p for p in self.problems if p.severity == "warning"]

    @property
    def notes(self) -> list[Problem]:
        return [p for p in self.problems if p.severity == "note"]

    @property
    def ok(self) -> bool:
        return not self.errors

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "checked": {"tasks": self.tasks, "fixtures": self.fixtures, "suites": self.suites},
            "errors": len(self.errors),
            "warnings": len(self.warnings),
            "notes": len(self.notes),
            "problems": [
                {"severity": p.severity, "file": p.file, "field": p.field, "message": p.message}
                for p in self.problems
            ],
        }


class _Context:
    """Per-validation memo: a fixture is hashed once however many tasks use it."""

    def __init__(self, root: Path, require_trees: bool) -> None:
        self.root = root
        self.require_trees = require_trees
        self.fixtures: dict[str, FixtureCheck] = {}

    def fixture(self, fixture_id: str) -> FixtureCheck | None:
        d = self.root / "fixtures" / fixture_id
        if not (d / "fixture.json").is_file():
            return None
        if fixture_id not in self.fixtures:
            self.fixtures[fixture_id] = check_fixture(d, self.root, require_tree=self.require_trees)
        return self.fixtures[fixture_id]

    def rel(self, path: Path) -> str:
        try:
            return path.relative_to(self.root).as_posix()
        except ValueError:
            return path.as_posix()


#: A task or suite file larger than this is refused: they are small, hand-written JSON.
MAX_DEFINITION_BYTES = 4 * inputs.MiB


def _inside(path: str) -> bool:
    pure = PurePosixPath(path)
    return not pure.is_absolute() and ".." not in pure.parts and "\\" not in path


def path_arg_outside(kind: object, args: object) -> tuple[str, str] | None:
    """(argument, why) when an assertion names a file outside the board's tree. The grader reads
    the end state's git tree, where no such path is, so the assertion would hold (or fail)
    whatever a run does. `task new` refuses such an `--assert` with the same words."""
    key = "doc" if kind in DOC_TYPES else "path" if kind in PATH_TYPES else None
    named = args.get(key) if key is not None and isinstance(args, dict) else None
    if key is None or not isinstance(named, str) or _inside(named):
        return None
    return key, f"{named!r} is not a path inside the board's tree (relative, with no '..' and no '\\')"


def _tree_has_doc(tree: Path, doc: str) -> bool:
    """The lookup `doc_contains`/`doc_row_matches` use: a bare name at the root, then docs/."""
    if (tree / doc).is_file():
        return True
    return "/" not in doc and (tree / "docs" / doc).is_file()


# --------------------------------------------------------------------------- task.json


def _task_rules(doc: dict[str, Any], task_dir: Path, file: str, ctx: _Context) -> tuple[dict[str, Any], list[Problem]]:
    """The rules that read task.json's fields directly; returns the document with the refused
    fields removed, so the schema check that follows reports only what is left."""
    problems: list[Problem] = []
    clean = dict(doc)
    if doc.get("id") != task_dir.name and isinstance(doc.get("id"), str):
        problems.append(error(file, "id", f"{doc['id']!r} differs from its directory name {task_dir.name!r}"))

    config = doc.get("config")
    if isinstance(config, dict) and "llmCache" in config:
        problems.append(
            error(file, "config.llmCache", "not settable: the runner forces llmCache false on every run (a cached turn manufactures determinism)")
        )
        clean["config"] = {k: v for k, v in config.items() if k != "llmCache"}

    setup = doc.get("setup")
    if isinstance(setup, dict) and isinstance(setup.get("commands"), list):
        kept = []
        for i, cmd in enumerate(setup["commands"]):
            if cmd == "init":
                kept.append(cmd)
            else:
                problems.append(
                    error(file, f"setup.commands[{i}]", f"{cmd!r} is not allowed: only `init` (LLM-free, network-free) may run before the baseline")
                )
        clean["setup"] = {**setup, "commands": kept}

    problems += _request_rules(doc, file)
    problems += _variant_rules(doc, task_dir, file, ctx)
    problems += _rubric_rules(doc, task_dir, file, ctx)
    return clean, problems


def _request_rules(doc: dict[str, Any], file: str) -> list[Problem]:
    """Each mode's request: a prompt, a brief in the fixture tree, or (for `check`) nothing."""
    problems: list[Problem] = []
    mode = doc.get("mode")
    given_request = doc.get("request")
    request = given_request if isinstance(given_request, dict) else {}
    has_prompt = "prompt" in request
    has_brief = "briefPath" in request
    if mode in PROMPT_MODES:
        if not has_prompt:
            problems.append(error(file, "request.prompt", f"mode {mode!r} needs request.prompt"))
        if has_brief:
            problems.append(error(file, "request.briefPath", f"mode {mode!r} takes a prompt, not a briefPath"))
    elif mode == "create":
        if not has_brief:
            problems.append(error(file, "request.briefPath", "mode 'create' needs request.briefPath (a brief in the fixture tree)"))
        if has_prompt:
            problems.append(error(file, "request.prompt", "mode 'create' takes a briefPath, not a prompt"))
    elif mode == "check":
        for key in ("prompt", "briefPath"):
            if key in request:
                problems.append(error(file, f"request.{key}", "mode 'check' takes no request"))
        # the standard allows one; nothing here can give it a gold or a run (docs/RUNNER.md section 13)
        problems.append(warning(file, "mode", "no runner runs a check-mode task (it calls no model, so measures none): "
                                "it cannot be drafted, given a gold or bumped; grade copperhead's check with "
                                "check_clean in a do task instead"))
    if mode == "sync" and doc.get("expectedOutcome") == "flag":
        # a warning: the standard allows it, and a later harness may let a model flag in sync
        problems.append(warning(file, "expectedOutcome", "a flag in sync mode measures no model: copperhead 0.9.0 exits 2 on "
                                "a requirement violation before its first model call, writing no transcript, so every "
                                "run is recorded harness-exit (docs/GRADING.md, \"Modes\"); plant a resolvable item "
                                "and make the task an edit"))
    return problems


def _variant_rules(doc: dict[str, Any], task_dir: Path, file: str, ctx: _Context) -> list[Problem]:
    """`variantOf` names another task on disk, and that task is an original, not a variant."""
    variant = doc.get("variantOf")
    if not isinstance(variant, str):
        return []
    target = ctx.root / "tasks" / variant / "task.json"
    if variant == task_dir.name:
        return [error(file, "variantOf", "a task cannot be a variant of itself")]
    if not target.is_file():
        return [error(file, "variantOf", f"names {variant!r}, but tasks/{variant}/task.json does not exist")]
    try:
        original = inputs.loads(inputs.read_regular(target, MAX_DEFINITION_BYTES), str(target))
    except (inputs.InputError, ValueError):
        original = None  # its own errors are listed where it is validated
    if isinstance(original, dict) and original.get("variantOf") is not None:
        return [
            error(file, "variantOf", f"names {variant!r}, which is itself a variant (of {original.get('variantOf')!r}); name the original")
        ]
    return []


def _rubric_rules(doc: dict[str, Any], task_dir: Path, file: str, ctx: _Context) -> list[Problem]:
    """A rubric is a file inside the task directory: the one `rubric` names, else `rubric.md`
    there when it exists (which `judge` reads just the same)."""
    rubric = doc.get("rubric")
    if rubric is None and (task_dir / rubric_mod.DEFAULT_FILE).is_file():
        rubric = rubric_mod.DEFAULT_FILE
    if not (isinstance(rubric, str) and rubric):
        return []
    if not _inside(rubric):
        return [error(file, "rubric", f"{rubric!r} must be a relative path inside the task directory")]
    if not (task_dir / rubric).is_file():
        return [error(file, "rubric", f"{rubric!r} does not exist in {ctx.rel(task_dir)}/")]
    # the criteria as `judge` reads them: a malformed one found here, before a bump records it
    named = Path(ctx.rel(task_dir / rubric))
    try:
        rubric_mod.parse(rubric_mod.text_of(task_dir / rubric, named), named)
    except rubric_mod.RubricError as exc:
        return [error(str(named), f"line {exc.line}" if exc.line is not None else "", exc.why)]
    except UserError as exc:  # not a file `judge` reads at all (too large, say)
        return [error(str(named), "", str(exc))]
    return []


def _fixture_rules(manifest: TaskManifest, file: str, ctx: _Context) -> tuple[FixtureCheck | None, list[Problem]]:
    problems: list[Problem] = []
    fixture_id = manifest.fixture.id
    check = ctx.fixture(fixture_id)
    if check is None:
        return None, [error(file, "fixture.path", f"{manifest.fixture.path}/fixture.json does not exist")]
    if check.manifest is None:
        problems.append(error(file, "fixture.path", f"{manifest.fixture.path}/fixture.json does not load (see its own errors)"))
        return check, problems
    if manifest.fixture.sha256 != check.manifest.sha256:
        problems.append(
            error(file, "fixture.sha256", f"{manifest.fixture.sha256} differs from {manifest.fixture.path}/fixture.json sha256 {check.manifest.sha256}")
        )
    brief = manifest.request.brief_path
    if manifest.mode == "create" and brief:
        tree = ctx.root / manifest.fixture.path / "tree"
        if not _inside(brief):
            problems.append(error(file, "request.briefPath", f"{brief!r} must be a relative path inside the fixture tree"))
        elif check.materialized and not (tree / brief).is_file():
            problems.append(error(file, "request.briefPath", f"{brief!r} does not exist in {manifest.fixture.path}/tree/"))
        elif not check.materialized:
            problems.append(note(file, "request.briefPath", f"not checked: {manifest.fixture.path}/tree is not materialized"))
    return check, problems


# --------------------------------------------------------------------------- assertions.json


def baseline_netlist(fixture_dir: Path) -> Netlist | None:
    """The baseline netlist a fixture directory keeps, if readable (`task new` reads it too)."""
    return _baseline_nets(fixture_dir / "baseline" / "netlist.kicad_net")


def _baseline_nets(path: Path) -> Netlist | None:
    """The fixture's baseline netlist (kicad-cli's, as `fixture baseline` wrote it), if readable."""
    try:
        return read_kicad_netlist(path)
    except (OSError, UserError, ValueError):
        return None


def _near_net(baseline: Netlist, name: str) -> str | None:
    """A baseline net `name` does not name but is one slip away from: the same letters in
    another case, or (from four characters) one letter replaced or two neighbours swapped.
    A longer or shorter name (`AGND` beside `GND`), a sibling numbered or lettered apart
    (`LED2` beside `LED1`, `EN_C` beside `EN_A`) and KiCad's own `Net-(…)` names are new nets
    as often as typos: not named."""
    if baseline.nets_by_name(name) or name.lstrip("/").startswith("Net-("):
        return None
    for net in baseline.nets:
        # as `name_matches` reads a name: with a slash, the whole name; without, the root's too
        other = net.name if "/" in name else net.name.lstrip("/")
        if other.casefold() == name.casefold():
            return net.name
        if len(other) != len(name) or len(name) < 4:
            continue
        diff = [i for i, (a, b) in enumerate(zip(other, name, strict=True)) if a != b]
        if len(diff) == 1 and _sibling(other, name, diff[0]):
            continue
        if len(diff) == 1 or (len(diff) == 2 and diff[1] == diff[0] + 1
                              and other[diff[0]] == name[diff[1]] and other[diff[1]] == name[diff[0]]):
            return net.name
    return None


_RAIL = re.compile(r"[+-]?[0-9]+V[0-9]*", re.IGNORECASE)


def _sibling(a: str, b: str, i: int) -> bool:
    """Whether names differing at `i` alone are numbered or lettered siblings: digits of a number
    that ends the name (`LED1`, `LED2`; not `I2C` beside `I3C`, nor a rail, `+3V3` beside
    `+3V4`), or a letter that ends it after a separator (`EN_A`, `EN_C`)."""
    if a[i].isdigit() and b[i].isdigit():
        return a[i:].isdigit() and b[i:].isdigit() and not _RAIL.fullmatch(a.lstrip("/").rsplit("/", 1)[-1])
    return i == len(a) - 1 and i > 0 and not a[i - 1].isalnum() and a[i].isalpha() and b[i].isalpha()


def _schematic_references(check: FixtureCheck | None, tree: Path) -> set[str] | None:
    """Every reference the fixture's schematic places (pinless parts too: a mounting hole, a
    logo), read as the grader's `symbol_absent` reads them; None when it cannot be read here."""
    schematic = check.manifest.artifacts.schematic if check is not None and check.manifest is not None else None
    if not isinstance(schematic, str):
        return None
    try:
        return {r.reference for r in list_symbols(load_schematic(tree / schematic))}
    except (OSError, UserError, ValueError):
        return None


def _against_the_board(
    kind: str, args: dict[str, Any], file: str, where: str, tree: Path, gold_files: Path, fixture_path: str,
    check: FixtureCheck | None, ctx: _Context, expected: str | None,
) -> list[Problem]:
    """The warnings an assertion earns against the materialized fixture it is graded on: a name
    the board does not hold, where that name is more likely a typo than what a run makes."""
    found: list[Problem] = []
    if kind in DOC_TYPES:
        doc_name = args.get("doc")
        if isinstance(doc_name, str) and not _tree_has_doc(tree, doc_name) and not _tree_has_doc(gold_files, doc_name):
            found.append(warning(file, f"{where}.args.doc", f"{doc_name!r} is not in {fixture_path}/tree (nor under docs/) "
                                 "and the task's gold does not write it; fine if a run creates it, otherwise a typo"))
    elif kind in PATH_TYPES:
        path = args.get("path")
        if isinstance(path, str) and path != CONFIG_PATH and not (tree / path).is_file() and not (gold_files / path).is_file():
            found.append(warning(file, f"{where}.args.path", f"{path!r} is not in {fixture_path}/tree "
                                 "and the task's gold does not write it; fine if a run creates it, otherwise a typo"))
    elif kind == "net_absent" and isinstance(args.get("net"), str):
        baseline = baseline_netlist(ctx.root / fixture_path)
        if baseline is not None and not baseline.nets_by_name(args["net"]):
            # absent before the run, it is absent after any run that does not add it: a typo
            # here turns a trap (a half-done rename) into a point every run scores
            found.append(warning(file, f"{where}.args.net", f"no net {args['net']!r} in {fixture_path}'s baseline netlist: "
                                 "the assertion passes unless a run makes that net (a typo?)"))
    elif kind in ("net_present", "pin_net_equals") and isinstance(args.get("net"), str):
        baseline = baseline_netlist(ctx.root / fixture_path)
        near = _near_net(baseline, args["net"]) if baseline is not None else None
        if near is not None:
            # a net a run is meant to make is fine; one a letter away from a net the board
            # has is more likely that net misspelled, which no run then satisfies
            found.append(warning(file, f"{where}.args.net", f"no net {args['net']!r} in {fixture_path}'s baseline "
                                 f"netlist, but {near!r} is: fine if a run makes that net, otherwise a typo"))
    elif kind == "symbol_absent" and isinstance(args.get("refdes"), str) and expected == "edit":
        # the same trap as net_absent's: a part the board never had is absent after any run
        # (a refusal or flag task names one on purpose: the part the refused change would add)
        references = _schematic_references(check, tree)
        if references is not None and args["refdes"] not in references:
            found.append(warning(file, f"{where}.args.refdes", f"no symbol {args['refdes']!r} in {fixture_path}'s "
                                 "schematic: the assertion passes unless a run adds it (a typo?)"))
    return found


def _assertion_rules(
    doc: Any, file: str, check: FixtureCheck | None, ctx: _Context, fixture_path: str | None, gold_files: Path,
    expected: str | None = None,
) -> list[Problem]:
    """`gold_files` (the task's `gold/files/`) holds what the gold writes: a document or path found
    there is one a run can make, so only a name neither the seed nor the gold holds is a warning.
    `expected`: the task's expected outcome (a refusal's `symbol_absent` guards a part not added)."""
    if not isinstance(doc, list):
        return [error(file, "", "expected a JSON array of assertions")]
    problems: list[Problem] = []
    seen: dict[str, int] = {}
    required = 0
    tree = ctx.root / fixture_path / "tree" if fixture_path else None
    materialized = check is not None and check.materialized and tree is not None
    for i, item in enumerate(doc):
        where = f"[{i}]"
        if not isinstance(item, dict):
            problems.append(error(file, where, "expected an assertion object"))
            continue
        kind = item.get("type")
        ident = item.get("id")
        if isinstance(ident, str):
            if ident in seen:
                problems.append(error(file, f"{where}.id", f"duplicate assertion id {ident!r} (first at [{seen[ident]}])"))
            else:
                seen[ident] = i
        if item.get("required") is True:
            required += 1
        if kind not in VOCABULARY:
            shown = "missing" if kind is None else repr(kind)
            problems.append(
                error(file, f"{where}.type", f"unknown assertion type {shown}; the standard's vocabulary is closed: {', '.join(VOCABULARY)}")
            )
            continue
        item_problems = [explain(p, kind) for p in schema_problems(item, SPEC_CLASSES[kind], file, where)]
        problems.extend(item_problems)
        args = item.get("args")
        outside = path_arg_outside(kind, args)
        if outside is not None:
            problems.append(error(file, f"{where}.args.{outside[0]}", outside[1]))
            continue
        if item_problems or not isinstance(args, dict) or not materialized:
            continue
        assert tree is not None and fixture_path is not None
        problems.extend(_against_the_board(kind, args, file, where, tree, gold_files, fixture_path, check, ctx, expected))
    if not required and doc:
        problems.append(error(file, "", "no assertion is required: a run would pass whatever it did"))
    if not doc:
        problems.append(error(file, "", "no assertions: a task must be graded by at least one required assertion"))
    return problems


# --------------------------------------------------------------------------- one task


def validate_task(task_dir: Path, ctx: _Context) -> list[Problem]:
    task_file = ctx.rel(task_dir / "task.json")
    assertions_file = ctx.rel(task_dir / "assertions.json")
    problems: list[Problem] = []
    doc, read = read_json(task_dir / "task.json", task_file)
    problems.extend(read)
    manifest: TaskManifest | None = None
    if isinstance(doc, dict):
        clean, rule_problems = _task_rules(doc, task_dir, task_file, ctx)
        problems.extend(rule_problems)
        schema = [explain(p) for p in schema_problems(clean, TaskManifest, task_file)]
        problems.extend(schema)
        if not schema:
            manifest = msgspec.convert(clean, TaskManifest)
    elif doc is not None:
        problems.append(error(task_file, "", "expected a JSON object"))

    check: FixtureCheck | None = None
    if manifest is not None:
        check, fixture_problems = _fixture_rules(manifest, task_file, ctx)
        problems.extend(fixture_problems)

    assertions, read = read_json(task_dir / "assertions.json", assertions_file)
    problems.extend(read)
    if assertions is not None:
        fixture_path = manifest.fixture.path if manifest is not None else None
        expected = manifest.expected_outcome if manifest is not None else None
        problems.extend(_assertion_rules(assertions, assertions_file, check, ctx, fixture_path, task_dir / "gold" / gold_mod.FILES,
                                         expected))

    for p in gold_mod.problems(task_dir / "gold"):
        problems.append(error(ctx.rel(task_dir / "gold") + "/" + p.file, "", p.message))

    readme = task_dir / "README.md"
    problems.extend(readme_problems(readme, ctx.rel(readme), "say what the task tests and the trap it sets"))
    return problems


# --------------------------------------------------------------------------- suites


def validate_suite(path: Path, ctx: _Context, outcome_rules: bool = True) -> list[Problem]:
    file = ctx.rel(path)
    doc, problems = read_json(path, file)
    if doc is None:
        return problems
    problems = schema_problems(doc, Suite, file)
    if not isinstance(doc, dict):
        return problems
    if isinstance(doc.get("name"), str) and doc["name"] != path.stem:
        problems.append(error(file, "name", f"{doc['name']!r} differs from the file name {path.stem!r}"))
    tasks = doc.get("tasks")
    if isinstance(tasks, list):
        seen: set[str] = set()
        for i, task_id in enumerate(tasks):
            if not isinstance(task_id, str):
                continue
            if task_id in seen:
                problems.append(warning(file, f"tasks[{i}]", f"{task_id!r} is listed twice"))
            seen.add(task_id)
            if not (ctx.root / "tasks" / task_id / "task.json").is_file():
                problems.append(error(file, f"tasks[{i}]", f"no task {task_id!r} (tasks/{task_id}/task.json)"))
        if outcome_rules:
            named = [t for t in tasks if isinstance(t, str)]
            problems.extend(_outcome_rules(file, "tasks", f"suite {path.stem!r}", named, ctx))
    return problems


@dataclass
class BumpCheck:
    """What `suite bump` reads before it tries anything, in one pass (fixtures hashed once)."""

    #: every task's errors and a named suite's (one listing a task there is none of was once
    #: recorded as it stood): refused
    errors: list[Problem] = field(default_factory=list)
    #: task id -> validate's warnings on it: repeated for the tasks the bump records
    warnings: dict[str, list[Problem]] = field(default_factory=dict)


def bump_check(root: Path) -> BumpCheck:
    """The catalog's and suites' outcome-class rules stay `validate`'s: a bump records a project
    as it is being built."""
    root = Path(root).resolve()
    ctx = _Context(root, False)
    catalog = Catalog(root)
    out = BumpCheck()
    for task_id in catalog.task_ids():
        found = validate_task(catalog.tasks_dir / task_id, ctx)
        out.errors.extend(errors_of(found))
        out.warnings[task_id] = [p for p in found if p.severity == "warning"]
    for path in sorted(catalog.suites_dir.glob("*.json")) if catalog.suites_dir.is_dir() else ():
        out.errors.extend(errors_of(validate_suite(path, ctx, outcome_rules=False)))
    return out


def listed(problems: list[Problem]) -> str:
    """Problems on one line, each naming its file and field (a refusal's form)."""
    return "; ".join(f"{p.file}: {p.field}: {p.message}" if p.field else f"{p.file}: {p.message}" for p in problems)


def _declared_outcome(root: Path, task_id: str) -> str | None:
    """A task's `expectedOutcome` as written, or None when the task does not load (its own errors
    say why, so the outcome rule does not pile a second message on them)."""
    path = root / "tasks" / task_id / "task.json"
    try:
        doc = inputs.loads(inputs.read_regular(path, MAX_DEFINITION_BYTES), str(path))
    except (OSError, ValueError, inputs.InputError):
        return None
    outcome = doc.get("expectedOutcome") if isinstance(doc, dict) else None
    return outcome if outcome in OUTCOME_CLASSES else None


def _outcome_rules(file: str, field_name: str, what: str, task_ids: list[str], ctx: _Context) -> list[Problem]:
    """Every outcome class present among `task_ids`: a suite missing one cannot tell a model that
    refuses everything (or never refuses) from a good one."""
    outcomes = {_declared_outcome(ctx.root, t) for t in task_ids}
    missing = [c for c in OUTCOME_CLASSES if c not in outcomes]
    if not missing or not task_ids or None in outcomes:
        return []
    return [
        error(file, field_name, f"{what} holds no {' and no '.join(missing)} task: every suite needs all three outcome classes (edit, refusal, flag)")
    ]


# --------------------------------------------------------------------------- the project


def validate_project(root: Path, require_trees: bool = False) -> ValidationReport:
    """Every fixture, task and suite under `root`."""
    root = Path(root).resolve()
    ctx = _Context(root, require_trees)
    catalog = Catalog(root)
    report = ValidationReport()
    fixtures_dir = catalog.fixtures_dir
    if fixtures_dir.is_dir():
        for d in sorted(p for p in fixtures_dir.iterdir() if p.is_dir() and not p.name.startswith(".") and not incomplete(p)):
            if not (d / "fixture.json").is_file():
                report.problems.append(warning(ctx.rel(d), "", "a directory under fixtures/ without fixture.json"))
                continue
            report.fixtures += 1
            check = ctx.fixture(d.name)
            assert check is not None
            report.problems.extend(check.problems)
    tasks_dir = catalog.tasks_dir
    if tasks_dir.is_dir():
        for d in sorted(p for p in tasks_dir.iterdir() if p.is_dir() and not p.name.startswith(".") and not incomplete(p)):
            if not (d / "task.json").is_file() and not (d / "assertions.json").is_file():
                report.problems.extend(_taskless(d, ctx))
                continue
            report.tasks += 1
            report.problems.extend(validate_task(d, ctx))
        report.problems.extend(_outcome_rules("tasks", "", "the catalog", catalog.task_ids(), ctx))
        listed = ctx.rel(passes.path(tasks_dir))
        try:
            _, wrong = passes.read(tasks_dir, set(catalog.task_ids()), passes.modes(catalog))
            report.problems += [error(listed, field, why) for field, why in wrong]
        except UserError as exc:  # not such a document at all: its own message names the file
            report.problems.append(error(listed, "", str(exc).removeprefix(f"{passes.path(tasks_dir)}: ")))
    if catalog.suites_dir.is_dir():
        for path in sorted(catalog.suites_dir.glob("*.json")):
            report.suites += 1
            report.problems.extend(validate_suite(path, ctx))
    return report


def _taskless(d: Path, ctx: _Context) -> list[Problem]:
    """A directory under tasks/ no task is read from. Empty or unrelated, a warning; holding a
    task or its assertions in another spelling (`task.yaml`, `Task.JSON`), an error naming the
    file: the author wrote a task that no suite, run or bump would ever see, and exit 0 hid it."""
    spelt = sorted(p for p in d.iterdir() if p.is_file() and p.stem.lower() in ("task", "assertions"))
    if not spelt:
        return [warning(ctx.rel(d), "", "a directory under tasks/ without task.json")]
    return [error(ctx.rel(p), "", f"not read: a task is read from {p.stem.lower()}.json (JSON) alone, "
                                  f"so tasks/{d.name} holds no task") for p in spelt]


def ensure_gradable(root: Path, task: Task) -> None:
    """The refusal a grade by hand starts with: the task validates, as a run's would (duplicate
    assertion ids, a fixture that is not there, a pin to another tree: each named by file and
    field), but a real board's tree need not be materialized, since a grade reads the sandbox."""
    problems = errors_of(validate_task(task.dir, _Context(Path(root).resolve(), require_trees=False)))
    if problems:
        raise UserError(f"task {task.id} cannot be graded: {listed(problems)}")


def ensure_runnable(root: Path, task: Task) -> Fixture:
    """The refusal a run starts with: the task validates, its fixture tree is materialized and
    hashes to the manifest, and the task pins that same hash. Raises one UserError listing every
    error; returns the loaded fixture otherwise."""
    root = Path(root).resolve()
    ctx = _Context(root, require_trees=True)
    problems = errors_of(validate_task(task.dir, ctx))
    fixture_check = ctx.fixture(task.manifest.fixture.id)
    if fixture_check is not None:
        problems.extend(p for p in errors_of(fixture_check.problems) if p not in problems)
    if problems:
        raise UserError(f"task {task.id} cannot run: {listed(problems)}")
    return load_fixture(root / task.manifest.fixture.path)

