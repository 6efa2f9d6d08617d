"""The sheet hierarchy: which files make up a design, and every place each one is used.

KiCad resolves a sheet's file relative to the directory of the file that holds the sheet symbol,
and a file used by two sheet symbols is one file with two instances, each with its own references
(taken from the symbol's `instances` block, matched by the full uuid path from the root).
"""

from __future__ import annotations

from pathlib import Path

from cbledger.errors import UserError
from cbledger.kicad.model import Schematic, SheetFile, SheetInstance, Symbol
from cbledger.kicad.reader import read_sheet_file


def load_schematic(path: str | Path) -> Schematic:
    """Loads a root schematic and every sheet file below it."""
    root_path = Path(path)
    root_file = read_sheet_file(root_path)
    base = root_path.parent
    root_key = root_path.name
    files: dict[str, SheetFile] = {root_key: root_file}
    instances: list[SheetInstance] = []

    def key_for(file_path: Path) -> str:
        try:
            return file_path.resolve().relative_to(base.resolve()).as_posix()
        except ValueError:
            return file_path.resolve().as_posix()

    def walk(key: str, file_path: Path, uuid_path: tuple[str, ...], names: tuple[str, ...], page: str, ancestors: tuple[str, ...]) -> None:
        instances.append(SheetInstance(uuid_path=uuid_path, names=names, file=key, page=page))
        sheet_file = files[key]
        for sheet in sheet_file.sheets:
            if not sheet.file:
                raise UserError(f"{file_path}: sheet {sheet.name!r} (uuid {sheet.uuid}) names no Sheetfile")
            relative = sheet.file.replace("\\", "/")
            child_path = file_path.parent / relative
            if not child_path.is_file() and (base / relative).is_file():
                child_path = base / relative
            if not child_path.is_file():
                raise UserError(f"{file_path}: sheet {sheet.name!r} refers to {sheet.file!r}, which does not exist")
            child_key = key_for(child_path)
            if child_key in ancestors:
                raise UserError(f"{file_path}: sheet {sheet.name!r} includes {sheet.file!r}, one of its own ancestors")
            if child_key not in files:
                files[child_key] = read_sheet_file(child_path)
            child_uuid_path = (*uuid_path, sheet.uuid)
            walk(child_key, child_path, child_uuid_path, (*names, sheet.name), _page(sheet, root_file.uuid, uuid_path), (*ancestors, child_key))

    walk(root_key, root_path, (), (), "1", (root_key,))
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
