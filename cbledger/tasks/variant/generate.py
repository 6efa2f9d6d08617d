"""`cbledger task variant TASK --seed N`: a memorization variant of a synthetic task, written as
data beside the original (`tasks/<id>-v<N>/` and `fixtures/variant-<id>-v<N>/`).

The same mapping (`mapping.py`) is applied to every file of the fixture tree, the prompt, the
budgets, the assertions and the gold solution, so the transformed gold is the original solution
in the variant's names and numbers. Whether it still solves the task is not assumed: the command
line measures the new fixture's baseline with kicad-cli and runs gold and noop on the variant
(`runner/trial.py`) before it keeps anything. Real boards are third-party data, and a variant of
one would be derived third-party data, so only synthetic fixtures are accepted.
"""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

from cbledger.errors import UserError
from cbledger.ledger.durable import naming
from cbledger.tasks.catalog import Catalog, Fixture, Task
from cbledger.tasks.definitions import INCOMPLETE, incomplete
from cbledger.tasks.fixtures import summary
from cbledger.tasks.fixtures.hashing import hash_directory, tree_files
from cbledger.tasks.fixtures.manifest_file import placeholder, read_document, write_document
from cbledger.tasks.variant import kicad_files, quantities
from cbledger.tasks.variant.mapping import REFDES, VariantMap, build, read_design

KICAD_SUFFIXES = (".kicad_sch", ".kicad_pcb")
TEXT_SUFFIXES = (".md", ".txt")
CONSTRAINTS = ".copperhead/constraints.json"
VARIANT_TAG = "memorization-variant"


@dataclass(frozen=True)
class Generated:
    task_id: str
    fixture_id: str
    task_dir: Path
    fixture_dir: Path
    mapping: VariantMap


#: The largest seed: a variant's id carries it, and `random.Random` takes any integer, so an
#: unbounded one only makes ids no one can type.
MAX_SEED = 2**32 - 1


def variant_ids(task_id: str, seed: int) -> tuple[str, str]:
    variant = f"{task_id}-v{seed}"
    return variant, f"variant-{variant}"


def _number(value: Decimal) -> int | float:
    return int(value) if value == value.to_integral_value() else float(value)


def _scaled(number: Any, family: quantities.Family | None, k: Decimal) -> Any:
    if family is None or isinstance(number, bool) or not isinstance(number, (int, float)):
        return number
    return _number(quantities.scale_number(repr(number) if isinstance(number, float) else str(number), quantities.factor_for(family, k)))


def transform_file(rel: str, data: bytes, vm: VariantMap) -> bytes:
    """One file of a tree (the fixture's, or the gold's), by what it is."""
    if rel.endswith(KICAD_SUFFIXES):
        return kicad_files.transform(data.decode("utf-8"), rel, vm).encode("utf-8")
    if rel.endswith(TEXT_SUFFIXES):
        return vm.text(data.decode("utf-8")).encode("utf-8")
    if rel == CONSTRAINTS:
        return _render(_constraints(json.loads(data), vm))
    return data


def _render(doc: Any) -> bytes:
    return (json.dumps(doc, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def _constraints(doc: dict[str, Any], vm: VariantMap) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, entry in doc.items():
        if not isinstance(entry, dict):
            out[key] = entry
            continue
        family = quantities.key_family(key)
        fixed = dict(entry)
        for bound in ("min", "max", "value"):
            if bound in fixed:
                fixed[bound] = _scaled(fixed[bound], family, vm.k)
        if isinstance(fixed.get("source"), str):
            fixed["source"] = vm.text(fixed["source"])
        if isinstance(fixed.get("affects"), list):
            fixed["affects"] = [vm.rename(a) if isinstance(a, str) else a for a in fixed["affects"]]
        out[key] = fixed
    return out


_ESCAPE = re.compile(r"(\\.)")
#: a number in a regex: not inside a name, but it may follow an escape such as `\b`; its decimal
#: point may be escaped (`1\.2k`), and a unit may follow it at once (`1k`, `4\.7kohm`)
_REGEX_NUMBER = re.compile(r"(?:(?<=\\b)|(?<![\w.\\]))(?P<num>\d+(?:\\?\.\d+)?)(?!\d|\\?\.\d)")
#: what may stand between a number and its unit in a regex: nothing, a space, an optional space
#: (` ?`, ` *`) or whitespace (`\s`, `\s?`, `\s*`)
_REGEX_UNIT = re.compile(r"(?:\\s[?*]?| [?*]?|)(?P<unit>[a-zA-ZµΩ]+)")


def _pattern(pattern: str, vm: VariantMap, where: str, stated: dict[str, set[quantities.Family]]) -> str:
    """A regex argument in the variant's names and numbers. A number with its unit is scaled by
    the unit's family; a bare number by the one family the task's own texts give it (a refusal
    summary's `= 450 mA` makes `\\b450\\b` a current); a number after an escaped dot is a pin
    (`C4\\.1`). A bare number the texts never state with one unit is refused, not guessed."""
    inner = pattern.removeprefix("^").removesuffix("$")
    if inner in vm.values:
        return pattern.replace(inner, re.escape(vm.values[inner]), 1)
    scaled: list[tuple[int, int, str]] = []
    for m in _REGEX_NUMBER.finditer(pattern):
        escaped = "\\." in m.group("num")
        num = m.group("num").replace("\\.", ".")
        if pattern[max(0, m.start() - 2) : m.start()] == "\\." or pattern[m.start() - 1 : m.start()] in ("{", ","):
            continue
        unit = _REGEX_UNIT.match(pattern, m.end())
        if unit and unit.group("unit") in quantities.UNITS:
            new = quantities.scale_quantity(num, unit.group("unit"), vm.k)
            scaled.append((m.start(), m.end(), new.replace(".", "\\.") if escaped else new))
            continue
        if re.match(r"\w", pattern[m.end() : m.end() + 1]):
            continue  # a number that runs into a word (`2x`, `3rd`): part of a name, not a quantity
        families = stated.get(num, set())
        if len(families) != 1:
            raise UserError(
                f"{where}: pattern {pattern!r} holds the bare number {num}, which the task never writes with one unit; "
                "a variant cannot tell whether to scale it (write it with its unit)"
            )
        (family,) = families
        new = quantities.render(quantities.scale_number(num, quantities.factor_for(family, vm.k)))
        scaled.append((m.start(), m.end(), new.replace(".", "\\.") if escaped else new))
    out: list[str] = []
    cursor = 0
    for start, end, new in sorted(scaled):
        out.append(pattern[cursor:start])
        out.append(new)
        cursor = end
    out.append(pattern[cursor:])
    parts = _ESCAPE.split("".join(out))
    return "".join(part if part.startswith("\\") else vm.rename(part) for part in parts)


def _assertions(items: list[dict[str, Any]], vm: VariantMap, file: str, stated: dict[str, set[quantities.Family]]) -> list[dict[str, Any]]:
    out = []
    for i, item in enumerate(items):
        where = f"{file}: [{i}] ({item.get('id')})"
        fixed = dict(item)
        args = dict(item.get("args") or {})
        refdes = args.get("refdes")
        if isinstance(refdes, str):
            args["refdes"] = vm.refdes.get(refdes, refdes)
            if isinstance(args.get("value"), str):
                args["value"] = vm.value(args["value"], refdes) or args["value"]
        if isinstance(args.get("net"), str):
            args["net"] = vm.net(args["net"])
        if isinstance(args.get("key"), str) and item.get("type") == "doc_row_matches":
            args["key"] = vm.rename(args["key"])
        if isinstance(args.get("pattern"), str):
            args["pattern"] = _pattern(args["pattern"], vm, where, stated)
        if isinstance(args.get("affects"), list):
            args["affects"] = [vm.rename(a) for a in args["affects"]]
        if isinstance(args.get("matches"), dict):
            args["matches"] = {k: _pattern(v, vm, where, stated) for k, v in args["matches"].items()}
        fixed["args"] = args
        if isinstance(item.get("note"), str):
            fixed["note"] = vm.text(item["note"])
        out.append(fixed)
    return out


def _task_document(task: Task, vm: VariantMap, variant_id: str, fixture_id: str, fixture_sha: str) -> dict[str, Any]:
    doc = json.loads(task.task_bytes)
    doc["id"] = variant_id
    doc["fixture"] = {"path": f"fixtures/{fixture_id}", "sha256": fixture_sha}
    request = doc.get("request") or {}
    if isinstance(request.get("prompt"), str):
        request["prompt"] = vm.text(request["prompt"])
    config = doc.get("config") or {}
    if isinstance(config.get("budgets"), dict):
        config["budgets"] = {k: _scaled(v, quantities.key_family(k), vm.k) for k, v in config["budgets"].items()}
    tags = [t for t in doc.get("tags", []) if t != VARIANT_TAG]
    doc["tags"] = [*tags, VARIANT_TAG]
    doc["variantOf"] = task.id
    return doc


def _deep(value: Any, vm: VariantMap) -> Any:
    """Every string of a JSON value as prose: what a transcript or a session says, and the file
    text its tool calls quote, in the variant's names and numbers."""
    if isinstance(value, str):
        return vm.text(value)
    if isinstance(value, list):
        return [_deep(v, vm) for v in value]
    if isinstance(value, dict):
        return {k: _deep(v, vm) for k, v in value.items()}
    return value


def _transcript(data: bytes, vm: VariantMap) -> bytes:
    lines = []
    for line in data.decode("utf-8").splitlines():
        if line.strip():
            lines.append(json.dumps(_deep(json.loads(line), vm), ensure_ascii=False, separators=(",", ":")))
    return ("\n".join(lines) + "\n").encode("utf-8")


def _session(data: bytes, vm: VariantMap, original: str, variant: str) -> bytes:
    """A session script (scripted model turns for the real harness) for the variant: its turns'
    text and tool arguments transformed like everything else, so an `edit_file` quotes the
    variant's file as it is; it names the variant as its task."""
    doc = _deep(json.loads(data), vm)
    if doc.get("task") == original:
        doc["task"] = variant
    if isinstance(doc.get("name"), str):
        doc["name"] = doc["name"].replace(original, variant)
    return _render(doc)


def _readme(task: Task, vm: VariantMap, variant_id: str, fixture_id: str) -> str:
    rows = "\n".join(f"| {a} | {b} |" for a, b in sorted(vm.names.items(), key=lambda kv: (_sort_key(kv[0]))))
    values = "\n".join(f"| {a} | {b} |" for a, b in sorted(vm.values.items())) or "| (none) | |"
    return f"""# {variant_id}

A memorization variant of [`{task.id}`](../{task.id}/README.md), generated by
`cbledger task variant {task.id} --seed {vm.seed}`: the same task in other names and numbers, so
that a model which recalls the original's answer gains nothing here. What it tests and the traps
it sets are the original's; the fixture is `fixtures/{fixture_id}`.

The transform (docs/VARIANTS.md): reference designators renumbered, signal nets renamed, and every
current, capacitance and power multiplied by {vm.k} and every resistance divided by it (voltages,
times and frequencies unchanged), in the schematic, the board, the docs, the prompt, the budgets,
the assertions and the gold solution alike. Gold passes and noop fails it, checked when it was
generated.

| original | variant |
| --- | --- |
{rows}

| Value | scaled |
| --- | --- |
{values}
"""


def _sort_key(name: str) -> tuple[str, int, str]:
    m = REFDES.match(name)
    return (m.group("prefix"), int(m.group("number")), "") if m else ("~", 0, name)


def _write_fixture_manifest(fixture: Fixture, fixture_dir: Path, sha: str, vm: VariantMap, variant_id: str, task_id: str) -> None:
    """The original's manifest under the variant's id and hash, its net lists renamed, its baseline
    a placeholder until `fixture baseline` measures the new tree."""
    fixture_id, seed = fixture_dir.name, vm.seed
    manifest = read_document(fixture.dir / "fixture.json")
    manifest["id"] = fixture_id
    manifest["sha256"] = sha
    # a generated tree, no freeze of the original's commit makes: without its recipe `fixture
    # freeze` refuses to freeze over it, and `fixture materialize` has nothing to fetch
    manifest.pop("freeze", None)
    scale = manifest.get("scale")
    if isinstance(scale, dict):
        for key in ("signalNets", "powerNets"):
            if isinstance(scale.get(key), list):
                scale[key] = sorted(vm.net(n) for n in scale[key])
    old_baseline = manifest.get("baseline")
    fresh: dict[str, Any] = {"erc": placeholder(f"run `cbledger fixture baseline {fixture_id}`")}
    if isinstance(old_baseline, dict) and "note" in old_baseline:
        fresh["note"] = old_baseline["note"]
    manifest["baseline"] = fresh
    write_document(fixture_dir / "fixture.json", manifest)
    readme = fixture.dir / "README.md"
    if readme.is_file():
        _put(fixture_dir / "README.md", (
            f"# {fixture_id}\n\nThe board of `{fixture.id}` as the memorization variant `{variant_id}` sees it, generated by "
            f"`cbledger task variant {task_id} --seed {seed}` (see tasks/{variant_id}/README.md for the mapping).\n"
        ).encode())



def generate(root: Path, task_id: str, seed: int, *, replace: bool = False) -> Generated:
    """Writes the variant task and its fixture tree and manifest (with a placeholder baseline,
    which `fixture baseline` measures). Refuses a real board, a create task, a variant of a
    variant, and overwriting an existing variant unless `replace`."""
    catalog = Catalog(root)
    if incomplete(catalog.tasks_dir / task_id):
        raise UserError(f"{catalog.tasks_dir / task_id}: an unfinished variant (a killed `task variant` left it), not a task; "
                        "make variants of the original: the next one of its seed replaces this")
    task = catalog.task(task_id)
    if task.manifest.variant_of is not None:
        raise UserError(f"task {task_id} is itself a variant of {task.manifest.variant_of}; make variants of the original")
    if task.manifest.mode == "create":
        raise UserError(
            f"task {task_id} is a create task: its gold holds a fabrication package (gerbers, drill, STEP) the harness "
            "exported from the fixture's board, which a text transform cannot turn into what it would export from the "
            "variant's; variants are made of do and sync tasks only"
        )
    fixture = catalog.fixture_for(task)
    if fixture.manifest.origin == "upstream":
        raise UserError(
            f"task {task_id} is on {fixture.id}, a real board: its files are third-party data and a variant of them "
            "would be derived third-party data; variants are made of synthetic and local fixtures only"
        )
    if not 0 <= seed <= MAX_SEED:
        raise UserError(f"--seed {str(seed)[:40]}: a seed is an integer from 0 to {MAX_SEED}")
    variant_id, fixture_id = variant_ids(task_id, seed)
    task_dir, fixture_dir = catalog.tasks_dir / variant_id, catalog.fixtures_dir / fixture_id
    for d in (task_dir, fixture_dir):
        if d.exists() and not replace and not incomplete(d):  # a killed run's leftover is replaced
            raise UserError(f"{d}: exists already (pass --replace to write it anew)")

    gold_files = task.gold_dir / "files"
    schematics = [fixture.tree / rel for rel in tree_files(fixture.tree) if rel.endswith(".kicad_sch")]
    if gold_files.is_dir():
        schematics += [gold_files / rel for rel in tree_files(gold_files) if rel.endswith(".kicad_sch")]
    budget_keys = set(task.manifest.config.budgets)
    constraints_path = fixture.tree / CONSTRAINTS
    if constraints_path.is_file():
        budget_keys |= set(json.loads(constraints_path.read_bytes()))
    vm = build(seed, read_design(schematics), budget_keys)

    # everything is computed before anything is written
    tree_out = {rel: transform_file(rel, (fixture.tree / rel).read_bytes(), vm) for rel in tree_files(fixture.tree)}
    gold_out = {rel: transform_file(rel, (gold_files / rel).read_bytes(), vm) for rel in tree_files(gold_files)} if gold_files.is_dir() else {}
    transcript = task.gold_dir / "transcript.jsonl"
    texts = [task.manifest.request.prompt or ""] + [
        (fixture.tree / rel).read_text(encoding="utf-8") for rel in tree_files(fixture.tree) if rel.endswith(TEXT_SUFFIXES)
    ]
    if transcript.is_file():
        texts.append(transcript.read_text(encoding="utf-8"))
    stated = quantities.stated_families(texts)
    assertions = _render(_assertions(json.loads(task.assertions_bytes), vm, f"{task.dir.name}/assertions.json", stated))
    gold_transcript = _transcript(transcript.read_bytes(), vm) if transcript.is_file() else None
    sessions_dir = task.dir / "sessions"
    sessions = {p.name: _session(p.read_bytes(), vm, task.id, variant_id) for p in sorted(sessions_dir.glob("*.json"))} if sessions_dir.is_dir() else {}

    made = Generated(variant_id, fixture_id, task_dir, fixture_dir, vm)
    # the reports a variant made again was measured with: put back beside the new tree, the
    # measurement keeps them where only kicad-cli's time stamp differs, so the same seed gives
    # the same bytes (and asks for no suite bump) when the tree is the same
    measured = {rel: (fixture_dir / rel).read_bytes() for rel in (*summary.REPORT_FILES.values(), summary.NETLIST_FILE)
                if (fixture_dir / rel).is_file()}
    try:
        for d in (task_dir, fixture_dir):
            if d.exists():
                shutil.rmtree(d)
            d.mkdir(parents=True)
            (d / INCOMPLETE).touch()  # until `finish`: no reader takes it for a task or fixture
        for rel, data in tree_out.items():
            _put(fixture_dir / "tree" / rel, data)
        sha = hash_directory(fixture_dir / "tree")
        _write_fixture_manifest(fixture, fixture_dir, sha, vm, variant_id, task_id)
        for rel, data in measured.items():
            _put(fixture_dir / rel, data)
        _put(task_dir / "task.json", _render(_task_document(task, vm, variant_id, fixture_id, sha)))
        _put(task_dir / "assertions.json", assertions)
        _put(task_dir / "README.md", _readme(task, vm, variant_id, fixture_id).encode("utf-8"))
        for rel, data in gold_out.items():
            _put(task_dir / "gold" / "files" / rel, data)
        (task_dir / "gold").mkdir(exist_ok=True)
        if gold_transcript is not None:
            _put(task_dir / "gold" / "transcript.jsonl", gold_transcript)
        deletions = task.gold_dir / "delete.txt"
        if deletions.is_file():
            _put(task_dir / "gold" / "delete.txt", deletions.read_bytes())
        for name, data in sessions.items():
            _put(task_dir / "sessions" / name, data)
    except BaseException:
        remove(made)
        raise
    return made


def _put(path: Path, data: bytes) -> None:
    """One file of the variant; a failing disk's error names it (the caller removes the rest)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with naming(path):
        path.write_bytes(data)


def finish(generated: Generated) -> None:
    """Makes the variant a task and a fixture like any other, once its trial passed."""
    for d in (generated.task_dir, generated.fixture_dir):
        (d / INCOMPLETE).unlink(missing_ok=True)


def remove(generated: Generated) -> None:
    """Takes a variant back out, as when its trial fails."""
    for d in (generated.task_dir, generated.fixture_dir):
        shutil.rmtree(d, ignore_errors=True)
