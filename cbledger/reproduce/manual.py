"""A reviewer-supplied run: the manual import contract (Bench v2, section 70.2).

Required fields: surface_id, benchmark, case_slug, variant, fixture_path, prompt_path,
transcript_path, run_timestamp, evaluator_notes, provenance. The rules behind them: a reviewer's
run is never relabelled as project-owned; the prompt and transcript are kept as files, not only
as summary text; the fixture path and benchmark version are recorded for replay; redactions are
explicit (the optional `redactions` list says what was removed).

Validation reports every problem at once — each missing, mistyped or unknown field and each
file that is not there — because a reviewer fixing one field per attempt gives up.

The import file is evidence from outside, so the paths in it are not trusted: the prompt and
transcript are read only as regular files under the declared import root (`--import-root`,
by default the import file's directory), never through an absolute path, a `..` or a symlink,
and every input has a size limit. A path that breaks a rule is a problem like any other,
named by field; nothing outside the root is ever opened.
"""

from __future__ import annotations

import datetime as _dt
import json
import re
from dataclasses import dataclass
from pathlib import Path

from cbledger import inputs
from cbledger.errors import UserError

REQUIRED = (
    "surface_id", "benchmark", "case_slug", "variant", "fixture_path",
    "prompt_path", "transcript_path", "run_timestamp", "evaluator_notes", "provenance",
)
OPTIONAL = ("redactions",)
FILES = (("prompt", "prompt_path"), ("transcript", "transcript_path"))
_SLUG = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
#: Size limits, in bytes: the import file, each file it names, and each string field.
MAX_IMPORT_BYTES = 1 * inputs.MiB
MAX_FILE_BYTES = {"prompt": 1 * inputs.MiB, "transcript": 32 * inputs.MiB}
MAX_FIELD_CHARS = {"evaluator_notes": 65536}
DEFAULT_FIELD_CHARS = 4096


class ManualImportInvalid(UserError):
    def __init__(self, path: Path, problems: list[str]) -> None:
        self.problems = problems
        # one line, as every refusal: the problems in order, each naming its field
        super().__init__(f"{path}: not a valid manual import ({len(problems)} problem(s)): {'; '.join(problems)}; nothing written")


@dataclass(frozen=True)
class ManualImport:
    path: Path
    data: bytes
    fields: dict
    run_at: _dt.datetime
    files: dict[str, Path]  # role -> the file on disk
    contents: dict[str, bytes]  # role -> its bytes, read once (as checked)


def _type_name(value: object) -> str:
    return {bool: "a boolean", int: "a number", float: "a number", str: "a string", list: "an array",
            dict: "an object", type(None): "null"}.get(type(value), type(value).__name__)


def _check_field(name: str, value: object, base: Path, files: dict[str, Path], problems: list[str]) -> _dt.datetime | None:
    limit = MAX_FIELD_CHARS.get(name, DEFAULT_FIELD_CHARS)
    if isinstance(value, str) and len(value) > limit:
        problems.append(f"{name}: {len(value)} characters, over the limit of {limit}")
        return None
    if name == "evaluator_notes":
        if not isinstance(value, str):
            problems.append(f"{name}: must be a string, got {_type_name(value)}")
        return None
    if name == "provenance":
        if isinstance(value, str) and value.strip():
            return None
        if isinstance(value, dict) and value:
            return None
        problems.append(f"{name}: must be a non-empty string or object, got {_type_name(value)}")
        return None
    if name == "redactions":
        if not (isinstance(value, list) and all(isinstance(v, str) and v.strip() for v in value)):
            problems.append(f"{name}: must be an array of non-empty strings")
        return None
    if not isinstance(value, str):
        problems.append(f"{name}: must be a string, got {_type_name(value)}")
        return None
    if not value.strip():
        problems.append(f"{name}: must not be empty")
        return None
    if name == "case_slug" and not _SLUG.match(value):
        problems.append(f"{name}: {inputs.printable(repr(value))} is not a kebab-case slug (a-z, 0-9, single hyphens)")
    elif name == "run_timestamp":
        shown = inputs.printable(repr(value))
        try:
            when = _dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            problems.append(f"{name}: {shown} is not an ISO 8601 date and time")
            return None
        if when.tzinfo is None:
            problems.append(f"{name}: {shown} has no timezone (add Z or an offset)")
            return None
        try:
            return when.astimezone(_dt.UTC)
        except OverflowError:
            problems.append(f"{name}: {shown} is outside the representable range in UTC")
            return None
    else:
        for role, key in FILES:
            if key == name:
                try:
                    files[role] = inputs.relative_under(base, value, name, "import")
                except inputs.InputError as exc:
                    problems.append(str(exc).removeprefix("import: "))
    return None


def load(path: Path, import_root: Path | None = None) -> ManualImport:
    """Validates the import file and reads the files it names, under `import_root` (default:
    the import file's directory), which the import file itself must be in."""
    data = inputs.read_regular(path, MAX_IMPORT_BYTES, "the manual import file")
    root = (import_root if import_root is not None else path.parent).resolve()
    if not path.resolve().is_relative_to(root):
        raise UserError(f"{path}: not under the import root {root}")
    problem = inputs.json_problem(data)
    if problem is not None:
        raise ManualImportInvalid(path, [problem])
    try:
        doc = json.loads(data)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ManualImportInvalid(path, [f"not JSON: {exc}"]) from None
    if not isinstance(doc, dict):
        raise ManualImportInvalid(path, [f"must be a JSON object, got {_type_name(doc)}"])
    problems: list[str] = []
    files: dict[str, Path] = {}
    run_at = None
    for name in REQUIRED:
        if name not in doc:
            problems.append(f"{name}: missing (required by the manual import contract)")
            continue
        when = _check_field(name, doc[name], root, files, problems)
        run_at = run_at or when
    for name in OPTIONAL:
        if name in doc:
            _check_field(name, doc[name], root, files, problems)
    for name in sorted(set(doc) - set(REQUIRED) - set(OPTIONAL)):
        problems.append(f"{inputs.printable(name)}: unknown field (allowed: {', '.join(REQUIRED + OPTIONAL)})")
    contents: dict[str, bytes] = {}
    for role, key in FILES:
        if role in files:
            try:
                contents[role] = inputs.read_regular(files[role], MAX_FILE_BYTES[role])
            except inputs.InputError as exc:
                problems.append(f"{key}: {exc}")
    if problems:
        raise ManualImportInvalid(path, problems)
    assert run_at is not None
    return ManualImport(path, data, doc, run_at, files, contents)
