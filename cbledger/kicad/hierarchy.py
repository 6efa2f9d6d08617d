"""The sheet hierarchy: which files make up a design, and every place each one is used.

KiCad resolves a sheet's file relative to the directory of the file that holds the sheet symbol,
and a file used by two sheet symbols is one file with two instances, each with its own references
(taken from the symbol's `instances` block, matched by the full uuid path from the root).
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from cbledger.errors import UserError
from cbledger.kicad.model import Schematic, SheetFile, SheetInstance, Symbol
from cbledger.kicad.reader import read_sheet_file, sheet_file_from_bytes


class _Sheets(Protocol):
    """Where a design's files come from: a directory, or a git tree read without a checkout."""

    def locate(self, parent: str, relative: str) -> str | None:
        """The key of the file a sheet in `parent` names, or None when there is no such file."""

    def load(self, key: str) -> SheetFile: ...

    def where(self, key: str) -> str:
        """How a message names the file."""


class _Directory:
    def __init__(self, root: Path) -> None:
        self.base = root.parent
        self.paths = {root.name: root}

    def locate(self, parent: str, relative: str) -> str | None:
        child_path = self.paths[parent].parent / relative
        if not child_path.is_file() and (self.base / relative).is_file():
            child_path = self.base / relative
        if not child_path.is_file():
            return None
        try:
            key = child_path.resolve().relative_to(self.base.resolve()).as_posix()
        except ValueError:
            key = child_path.resolve().as_posix()
        self.paths.setdefault(key, child_path)
        return key

    def load(self, key: str) -> SheetFile:
        return read_sheet_file(self.paths[key])

    def where(self, key: str) -> str:
        return str(self.paths[key])


class _Tree:
    """Files by '/'-separated path; keys are paths relative to the root file's directory, as
    `_Directory` makes them, so both give the same `Schematic` for the same bytes."""

    def __init__(self, read: Callable[[str], bytes | None], root: str) -> None:
        self.read = read
        self.base = posixpath.dirname(root)
        self.paths = {posixpath.basename(root): root}

    def _exists(self, path: str) -> bool:
        return not path.startswith(("/", "../")) and path != ".." and self.read(path) is not None

    def locate(self, parent: str, relative: str) -> str | None:
        path = posixpath.normpath(posixpath.join(posixpath.dirname(self.paths[parent]), relative))
        if not self._exists(path):
            path = posixpath.normpath(posixpath.join(self.base, relative))
            if not self._exists(path):
                return None
        key = posixpath.relpath(path, self.base or ".")
        self.paths.setdefault(key, path)
        return key

    def load(self, key: str) -> SheetFile:
        path = self.paths[key]
        data = self.read(path)
        if data is None:
            raise UserError(f"{path}: file not found")
        return sheet_file_from_bytes(data, path)

    def where(self, key: str) -> str:
        return self.paths[key]


def load_schematic(path: str | Path) -> Schematic:
    """Loads a root schematic and every sheet file below it."""
    return _load(_Directory(Path(path)), Path(path).name)


def load_schematic_tree(read: Callable[[str], bytes | None], root: str) -> Schematic:
    """The same as `load_schematic`, from files named by '/'-separated paths (`read` gives a
    file's bytes or None), without writing them anywhere first."""
    return _load(_Tree(read, root), posixpath.basename(root))


def _load(source: _Sheets, root_key: str) -> Schematic:
    root_file = source.load(root_key)
    files: dict[str, SheetFile] = {root_key: root_file}
    instances: list[SheetInstance] = []

    def walk(key: str, uuid_path: tuple[str, ...], names: tuple[str, ...], page: str, ancestors: tuple[str, ...]) -> None:
        instances.append(SheetInstance(uuid_path=uuid_path, names=names, file=key, page=page))
        sheet_file = files[key]
        for sheet in sheet_file.sheets:
            if not sheet.file:
                raise UserError(f"{source.where(key)}: sheet {sheet.name!r} (uuid {sheet.uuid}) names no Sheetfile")
            child_key = source.locate(key, sheet.file.replace("\\", "/"))
            if child_key is None:
                raise UserError(f"{source.where(key)}: sheet {sheet.name!r} refers to {sheet.file!r}, which does not exist")
            if child_key in ancestors:
                raise UserError(f"{source.where(key)}: sheet {sheet.name!r} includes {sheet.file!r}, one of its own ancestors")
            if child_key not in files:
                files[child_key] = source.load(child_key)
            child_uuid_path = (*uuid_path, sheet.uuid)
            walk(child_key, child_uuid_path, (*names, sheet.name), _page(sheet, root_file.uuid, uuid_path), (*ancestors, child_key))

    walk(root_key, (), (), "1", (root_key,))
    return Schematic(root=root_key, root_uuid=root_file.uuid, files=files, instances=tuple(instances))


def _page(sheet, root_uuid: str, parent_path: tuple[str, ...]) -> str:
    wanted = "/" + "/".join((root_uuid, *parent_path))
    for ref in sheet.instances:
        if ref.path.rstrip("/") == wanted:
            return ref.page
    return sheet.instances[0].page if sheet.instances else ""


def symbol_reference(schematic: Schematic, instance: SheetInstance, symbol: Symbol) -> tuple[str, int]:
    """The reference and unit a symbol carries on one sheet instance.

    KiCad 7+ keeps them per instance in the symbol's `instances` block, keyed by the uuid path
    from the root; KiCad 6 kept them in the root file's `symbol_instances`. A design copied under a
    new root keeps its sub-sheet paths, so a match on everything below the root is accepted next.
    """
    full = schematic.instance_key(instance)
    for inst in symbol.instances:
        if inst.path.rstrip("/") == full:
            return inst.reference, inst.unit
    legacy = schematic.files[schematic.root].legacy_symbol_instances
    if legacy:
        legacy_key = "/" + "/".join((*instance.uuid_path, symbol.uuid))
        for inst in legacy:
            if inst.path == legacy_key:
                return inst.reference, inst.unit
    below_root = instance.uuid_path
    for inst in symbol.instances:
        parts = [p for p in inst.path.split("/") if p]
        if tuple(parts[1:]) == below_root:
            return inst.reference, inst.unit
    return symbol.reference, symbol.unit


def find_root_schematics(directory: str | Path) -> list[Path]:
    """The root schematic(s) of a project tree: a `.kicad_pro`'s same-named `.kicad_sch`, else
    every schematic no other schematic pulls in as a sheet."""
    base = Path(directory)
    schematics = sorted(p for p in base.rglob("*.kicad_sch") if p.is_file())
    by_project = [p.with_suffix(".kicad_sch") for p in sorted(base.rglob("*.kicad_pro"))]
    roots = [p for p in by_project if p.is_file()]
    if roots:
        return roots
    referenced: set[Path] = set()
    for path in schematics:
        for sheet in read_sheet_file(path).sheets:
            if sheet.file:
                referenced.add((path.parent / sheet.file.replace("\\", "/")).resolve())
    return [p for p in schematics if p.resolve() not in referenced]
