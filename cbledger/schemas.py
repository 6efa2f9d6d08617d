"""JSON Schemas generated from the msgspec types, so the published contract cannot drift from
the code that enforces it. `cbledger schema` writes them; a test fails when the committed files
differ from a regeneration.

Every published type is listed in `_schemas` below; the schema file name is the key.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec

from cbledger.ledger.durable import write_atomic
from cbledger.ledger.events import Event
from cbledger.ledger.surfaces import SurfaceCatalog
from cbledger.projections.records import ResultRecord
from cbledger.tasks.model import Assertions, FixtureManifest, Suite, TaskManifest


def _schemas() -> dict[str, Any]:
    return {
        "event": Event,
        "task": TaskManifest,
        "assertions": Assertions,
        "fixture": FixtureManifest,
        "suite": Suite,
        "result": ResultRecord,
        "surfaces": SurfaceCatalog,
    }


#: An event's `seq` as a writer of events must read it: the Python type defaults it to 0 (a draft
#: built in code), but append refuses a draft that states any seq, 0 included, and every stored
#: event has one from 1 up.
_SEQ = {
    "description": "assigned by the ledger at append, from 1 up; a draft omits it (append refuses one "
    "that states any seq, 0 included)",
    "minimum": 1,
    "type": "integer",
}


def _seq_as_written(node: Any) -> None:
    if isinstance(node, dict):
        props = node.get("properties")
        if isinstance(props, dict) and props.get("seq") == {"default": 0, "minimum": 0, "type": "integer"}:
            props["seq"] = dict(_SEQ)
        for value in node.values():
            _seq_as_written(value)
    elif isinstance(node, list):
        for value in node:
            _seq_as_written(value)


def render(name: str, tp: Any) -> str:
    schema = msgspec.json.schema(tp)
    if name == "event":
        _seq_as_written(schema)
    schema = {"$schema": "https://json-schema.org/draft/2020-12/schema", "title": f"cbledger {name}", **schema}
    return json.dumps(schema, indent=2, sort_keys=True) + "\n"


def write(directory: Path) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, tp in _schemas().items():
        path = directory / f"{name}.schema.json"
        write_atomic(path, render(name, tp).encode("utf-8"))  # a killed run leaves the old schema or the new
        written.append(path)
    return written


def stale(directory: Path) -> list[str]:
    """Names of schema files that are missing or differ from a regeneration."""
    bad = []
    for name, tp in _schemas().items():
        path = directory / f"{name}.schema.json"
        if not path.is_file() or path.read_text() != render(name, tp):
            bad.append(path.name)
    return bad
