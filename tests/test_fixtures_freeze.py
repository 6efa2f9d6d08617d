"""`cbledger fixture freeze`: a tree taken from git objects at one exact commit. The upstream here
is a small repository built with pygit2 (two commits, a tag, a dangling commit, a symlink), whose
working directory is deliberately dirty so a checkout would show."""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from pathlib import Path

import pygit2
import pytest

from cbledger.errors import UserError
from cbledger.tasks.fixtures.freeze import Recipe, freeze_files
from cbledger.tasks.fixtures.hashing import digest_files, hash_directory
from tests.conftest import REPO
from tests.factories import run_cli
from tests.test_grading_kit import BOARD_FILE, PROJECT_FILE, demo_schematic

SIG = pygit2.Signature("upstream", "upstream@example.invalid", 1_700_000_000, 0)

FIRST = {
    "hardware/demo.kicad_sch": demo_schematic().encode(),
    "hardware/demo.kicad_pro": PROJECT_FILE.encode(),
    "hardware/demo.kicad_pcb": BOARD_FILE.encode(),
    "hardware/lib/parts.kicad_sym": b"(kicad_symbol_lib)\n",
    "firmware/main.c": b"int main(void) { return 0; }\n",
    "LICENSE": b"Apache License 2.0 (abridged for a test)\n",
}


def _tree(repo: pygit2.Repository, files: dict[str, bytes], links: dict[str, str] | None = None) -> pygit2.Oid:
    index = pygit2.Index()
    for path, data in files.items():
        mode = pygit2.enums.FileMode.BLOB_EXECUTABLE if path.endswith(".sh") else pygit2.enums.FileMode.BLOB
        index.add(pygit2.IndexEntry(path, repo.create_blob(data), mode))
    for path, target in (links or {}).items():
        index.add(pygit2.IndexEntry(path, repo.create_blob(target.encode()), pygit2.enums.FileMode.LINK))
    return index.write_tree(repo)


class Upstream:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.repo = pygit2.init_repository(str(path), initial_head="main")
        first = _tree(self.repo, {**FIRST, "hardware/tools/gen.sh": b"#!/bin/sh\n"})
        self.first = str(self.repo.create_commit("refs/heads/main", SIG, SIG, "first\n", first, []))
        second_files = {**FIRST, "hardware/demo.kicad_sch": demo_schematic(sig="SENSE").encode(), "hardware/NOTES.md": b"n\n"}
        second = _tree(self.repo, second_files, links={"hardware/current.kicad_sch": "demo.kicad_sch"})
        self.second = str(self.repo.create_commit("refs/heads/main", SIG, SIG, "second\n", second, [pygit2.Oid(hex=self.first)]))
        self.repo.references.create("refs/tags/v1", pygit2.Oid(hex=self.first))
        dangling_tree = _tree(self.repo, {"x.txt": b"lost\n"})
        self.dangling = str(self.repo.create_commit(None, SIG, SIG, "dangling\n", dangling_tree, []))
        self.first_tree = str(self.repo[self.first].tree.id)
        # a dirty working directory: a checkout-based freeze would pick these up
        (path / "hardware").mkdir()
        (path / "hardware" / "demo.kicad_sch").write_text("not the committed schematic\n")
        (path / "hardware" / "scratch.kicad_sch").write_text("untracked\n")


@pytest.fixture
def upstream(tmp_path) -> Upstream:
    return Upstream(tmp_path / "upstream")


def expected_hash(prefix: str = "hardware/", into: str = "", strip: str = "") -> str:
    files = {p: d for p, d in FIRST.items() if p.startswith(prefix)}
    files["hardware/tools/gen.sh"] = b"#!/bin/sh\n"
    out = []
    for p, d in files.items():
        rel = p[len(strip) :] if strip else p
        out.append((into + rel, d))
    return digest_files(out)


# --------------------------------------------------------------------------- library


def test_freeze_reads_git_objects_at_the_commit_not_the_working_tree(upstream):
    frozen = freeze_files(upstream.path, upstream.first, Recipe(("hardware",)))
    assert frozen.commit == upstream.first
    assert [f.path for f in frozen.files] == sorted(p for p in [*FIRST, "hardware/tools/gen.sh"] if p.startswith("hardware/"))
    assert {f.path: f.data for f in frozen.files}["hardware/demo.kicad_sch"] == FIRST["hardware/demo.kicad_sch"]
    assert frozen.sha256 == expected_hash()
    assert next(f for f in frozen.files if f.path.endswith("gen.sh")).executable


def test_freeze_of_single_files_with_strip_and_into(upstream):
    recipe = Recipe(("hardware/demo.kicad_sch", "hardware/demo.kicad_pro", "LICENSE"), into="kicad")
    frozen = freeze_files(upstream.path, upstream.first, recipe)
    assert [f.path for f in frozen.files] == ["kicad/LICENSE", "kicad/hardware/demo.kicad_pro", "kicad/hardware/demo.kicad_sch"]
    stripped = freeze_files(upstream.path, upstream.first, Recipe(("hardware/lib",), strip="hardware"))
    assert [f.path for f in stripped.files] == ["lib/parts.kicad_sym"]
    with pytest.raises(UserError, match=r"LICENSE: not under --strip 'hardware'"):
        freeze_files(upstream.path, upstream.first, Recipe(("LICENSE",), strip="hardware"))


def test_an_uppercase_full_sha_is_accepted(upstream):
    assert freeze_files(upstream.path, upstream.first.upper(), Recipe(("LICENSE",))).commit == upstream.first


@pytest.mark.parametrize("rev", ["short", "newline", "main", "v1", "HEAD", "HEAD~1"])
def test_abbreviations_branches_and_tags_are_refused(upstream, rev):
    value = {"short": upstream.first[:12], "newline": upstream.first + "\n"}.get(rev, rev)
    with pytest.raises(UserError, match="give the full 40-hex commit SHA; abbreviations, tags and branch names are refused"):
        freeze_files(upstream.path, value, Recipe(("hardware",)))


def test_a_missing_commit_is_refused(upstream):
    missing = "0123456789abcdef0123456789abcdef01234567"
    with pytest.raises(UserError, match=f"commit {missing} is not in this repository \\(missing or not fetched\\); nothing frozen"):
        freeze_files(upstream.path, missing, Recipe(("hardware",)))


def test_an_unreachable_commit_is_refused(upstream):
    with pytest.raises(UserError, match=f"commit {upstream.dangling} is unreachable \\(no branch or tag of this clone contains it\\)"):
        freeze_files(upstream.path, upstream.dangling, Recipe(("x.txt",)))


def test_a_sha_that_is_not_a_commit_is_refused(upstream):
    with pytest.raises(UserError, match=f"{upstream.first_tree} is a tree object, not a commit"):
        freeze_files(upstream.path, upstream.first_tree, Recipe(("hardware",)))


def test_paths_that_do_not_exist_escape_or_are_links_are_refused(upstream):
    with pytest.raises(UserError, match=f"--path 'hardware/NOTES.md' does not exist at commit {upstream.first}"):
        freeze_files(upstream.path, upstream.first, Recipe(("hardware/NOTES.md",)))
    with pytest.raises(UserError, match="must be relative and stay inside the tree"):
        freeze_files(upstream.path, upstream.first, Recipe(("../etc",)))
    with pytest.raises(UserError, match=re.escape("hardware/current.kicad_sch: a symlink at")):
        freeze_files(upstream.path, upstream.second, Recipe(("hardware",)))


def test_a_directory_that_is_not_a_repository(tmp_path):
    (tmp_path / "plain").mkdir()
    with pytest.raises(UserError, match="not a git repository"):
        freeze_files(tmp_path / "plain", "0" * 40, Recipe(("x",)))


# --------------------------------------------------------------------------- the command


def freeze(root: Path, upstream: Upstream, commit: str, *extra: str):
    return run_cli(
        ["fixture", "freeze", "--from", upstream.path, "--commit", commit, "--path", "hardware", "--id", "demo-up", "--root", root, *extra]
    )


AUTHOR = [
    "--name", "Demo upstream",
    "--url", "https://example.com/demo",
    "--license", "Apache-2.0",
    "--license-file", "LICENSE",
    "--copyright", "Copyright (c) Demo",
    "--modifications", "hardware/ copied verbatim; nothing altered.",
    "--retrieved", "2026-01-02",
    "--complexity", "simple",
    "--authored-version", "9.0",
]  # fmt: skip


def test_freeze_refuses_an_authored_version_that_names_no_kicad_release(tmp_path, upstream):
    root = tmp_path / "project"
    r = freeze(root, upstream, upstream.first, "--authored-version", "banana")
    assert r.exit_code == 2 and "--authored-version 'banana'" in r.stderr and "nothing was written" in r.stderr
    assert not (root / "fixtures" / "demo-up").exists()
    assert freeze(root, upstream, upstream.first, "--authored-version", "8.x").exit_code == 0
    manifest = root / "fixtures" / "demo-up" / "fixture.json"
    doc = json.loads(manifest.read_text())
    assert doc["kicad"]["authoredVersion"] == "8.x"


def test_freeze_writes_the_tree_and_a_manifest_with_placeholders(tmp_path, upstream):
    root = tmp_path / "project"
    r = freeze(root, upstream, upstream.first)
    assert r.exit_code == 0, r.output
    fixture_dir = root / "fixtures" / "demo-up"
    assert hash_directory(fixture_dir / "tree") == expected_hash()
    assert os.stat(fixture_dir / "tree" / "hardware" / "tools" / "gen.sh").st_mode & 0o100
    doc = json.loads((fixture_dir / "fixture.json").read_text())
    # no remote of the repository holds the commit: a local fixture, named after its directory
    assert doc["sha256"] == expected_hash() and doc["origin"] == "local"
    assert doc["upstream"]["commit"] == upstream.first and doc["upstream"]["url"] == "local"
    assert doc["upstream"]["name"] == "upstream"
    assert doc["artifacts"] == {
        "schematic": "hardware/demo.kicad_sch",
        "board": "hardware/demo.kicad_pcb",
        "project": "hardware/demo.kicad_pro",
    }
    assert doc["kicad"]["fileFormatVersion"] == "20250114"
    assert doc["scale"]["symbols"] == 2 and doc["scale"]["signalNets"] == ["SIG"] and doc["scale"]["powerNets"] == ["GND", "VCC"]
    assert doc["freeze"] == {"paths": ["hardware"]}
    assert doc["baseline"]["erc"] == "TODO(author): run `cbledger fixture baseline demo-up`"
    assert "field(s) left for you" in r.stdout and "upstream.license" in r.stdout

    check = run_cli(["fixture", "check", "demo-up", "--root", root])
    assert check.exit_code == 1
    assert doc["upstream"]["licenseFile"] == "LICENSE"  # found, though its abridged text names no license
    for field in ("upstream.license", "upstream.copyright",
                  "upstream.modifications", "complexity", "kicad.authoredVersion", "kicad.verifiedWithKicadCli", "baseline.erc"):  # fmt: skip
        assert f"error: fixtures/demo-up/fixture.json: {field}: placeholder left for the author" in check.stderr, field
    validate = run_cli(["validate", "--root", root])
    assert validate.exit_code == 1 and "upstream.license: placeholder left for the author" in validate.stderr
    # a README with what freeze knows; what only the author knows waits for them, and validate says so
    readme = fixture_dir / "README.md"
    assert f"wrote {readme}" in r.stdout
    written = readme.read_text()
    assert f"Pinned commit: `{upstream.first}`" in written and f"`{expected_hash()}`" in written and "`hardware`" in written
    assert "warning: fixtures/demo-up/README.md: still holds the scaffold's TODO(author)" in validate.stdout
    readme.write_text("# demo-up\n\nA two-part demo board.\n")
    again = freeze(root, upstream, upstream.first)
    assert again.exit_code == 0 and "README.md" not in again.stdout
    assert readme.read_text() == "# demo-up\n\nA two-part demo board.\n"  # an author's README is never rewritten
    assert "demo-up/README.md" not in run_cli(["validate", "--root", root]).output
    readme.unlink()
    said = run_cli(["validate", "--root", root]).stdout
    assert "warning: fixtures/demo-up/README.md: missing: say what the board is" in said, said


APACHE = b"""
                                 Apache License
                           Version 2.0, January 2004
                        http://www.apache.org/licenses/
   Copyright 2024 Demo Hardware Ltd.
"""


def test_freeze_of_a_whole_clone_names_its_upstream_and_license(tmp_path, upstream):
    """`--path .` (or none) takes every file; a remote-tracking branch holding the commit gives the
    upstream URL (an scp-style remote read as https), the LICENSE file its license and copyright."""
    repo = upstream.repo
    tree = _tree(repo, {**FIRST, "LICENSE": APACHE})
    commit = repo.create_commit("refs/heads/main", SIG, SIG, "license\n", tree, [pygit2.Oid(hex=upstream.second)])
    repo.remotes.create("origin", "git@example.com:demo/board.git")
    repo.references.create("refs/remotes/origin/main", commit)
    root = tmp_path / "project"
    r = run_cli(["fixture", "freeze", "--from", upstream.path, "--id", "demo-up", "--root", root, "--json"])
    assert r.exit_code == 0, r.output
    doc = json.loads((root / "fixtures" / "demo-up" / "fixture.json").read_text())
    assert doc["origin"] == "upstream" and doc["freeze"] == {"paths": ["."]}
    up = doc["upstream"]
    assert (up["url"], up["name"], up["commit"]) == ("https://example.com/demo/board", "board", str(commit))
    assert (up["license"], up["licenseFile"], up["copyright"]) == ("Apache-2.0", "LICENSE", "Copyright 2024 Demo Hardware Ltd.")
    assert hash_directory(root / "fixtures" / "demo-up" / "tree") == digest_files(sorted({**FIRST, "LICENSE": APACHE}.items()))
    left = {p["field"] for p in json.loads(r.stdout)["left"]}
    assert not left & {"upstream.url", "upstream.name", "upstream.license", "upstream.licenseFile", "upstream.copyright"}


@pytest.mark.parametrize(("text", "spdx"), [
    ("MIT License\n\nPermission is hereby granted, free of charge, to any person", "MIT"),
    ("CERN Open Hardware Licence Version 2 - Permissive", "CERN-OHL-P-2.0"),
    ("GNU GENERAL PUBLIC LICENSE\n Version 3, 29 June 2007", "GPL-3.0"),
    ("Attribution 4.0 International", "CC-BY-4.0"),
    ("SPDX-License-Identifier: BSD-2-Clause", "BSD-2-Clause"),
    ("All rights reserved.", None),
])  # fmt: skip
def test_license_texts_are_matched_on_their_phrases_and_nothing_is_guessed(text, spdx):
    from cbledger.tasks.fixtures.provenance import detect_license

    assert detect_license(text) == spdx


@pytest.mark.kicad
def test_freeze_then_baseline_makes_a_fixture_that_checks(tmp_path, upstream, kicad_cli):
    root = tmp_path / "project"
    assert freeze(root, upstream, upstream.first, *AUTHOR).exit_code == 0
    r = run_cli(["fixture", "baseline", "demo-up", "--root", root])
    assert r.exit_code == 0, r.output
    assert "ERC: 0 error(s), 0 warning(s)" in r.stdout
    check = run_cli(["fixture", "check", "demo-up", "--root", root])
    assert check.exit_code == 0 and "README.md: still holds the scaffold's TODO(author)" in check.stdout, check.output
    (root / "fixtures" / "demo-up" / "README.md").write_text("# demo-up\n\nTwo parts between VCC and GND.\n")
    check = run_cli(["fixture", "check", "demo-up", "--root", root])
    assert check.exit_code == 0, check.output
    assert check.stdout.strip() == f"demo-up: ok (tree {expected_hash()})"
    # measured again a second later: the same bytes, not a changed suite (kicad-cli stamps the time)
    baseline = root / "fixtures" / "demo-up" / "baseline"
    before = {p.name: p.read_bytes() for p in baseline.iterdir()}
    assert any(b'"date": "' in data or b'(date "' in data for data in before.values())
    time.sleep(1.1)
    assert run_cli(["fixture", "baseline", "demo-up", "--root", root]).exit_code == 0
    assert {p.name: p.read_bytes() for p in baseline.iterdir()} == before


def test_refreezing_at_another_commit_resets_the_baseline(tmp_path, upstream):
    root = tmp_path / "project"
    assert freeze(root, upstream, upstream.first, *AUTHOR).exit_code == 0
    same = freeze(root, upstream, upstream.first)  # the commit the manifest names: nothing to warn of
    assert same.exit_code == 0 and "warning" not in same.stderr, same.output
    manifest = root / "fixtures" / "demo-up" / "fixture.json"
    doc = json.loads(manifest.read_text())
    doc["baseline"] = {"erc": {"report": "baseline/erc.json", "errors": 0, "warnings": 0}, "note": "kept"}
    doc["kicad"]["verifiedWithKicadCli"] = "9.0.8"
    manifest.write_text(json.dumps(doc))
    r = run_cli(
        ["fixture", "freeze", "--from", upstream.path, "--commit", upstream.second, "--path", "hardware/demo.kicad_sch",
         "--path", "hardware/demo.kicad_pro", "--id", "demo-up", "--root", root]
    )
    assert r.exit_code == 0, r.output
    # no remote of the repository holds the new commit, yet the manifest names the URL the author
    # gave: kept, and said (a local copy once rewrote a real board's provenance without a word)
    assert (f"warning: {manifest}: upstream.url names https://example.com/demo, but no remote of {upstream.path} with a "
            f"web URL holds commit {upstream.second}") in r.stderr, r.output
    after = json.loads(manifest.read_text())
    assert after["upstream"]["commit"] == upstream.second
    assert after["upstream"]["name"] == "Demo upstream"  # the author's words survive a re-freeze
    # the README freeze wrote, untouched since, follows the new tree (an author's is never rewritten)
    assert f"Pinned commit: `{upstream.second}`" in (manifest.parent / "README.md").read_text()
    assert after["upstream"]["retrieved"] != "2026-01-02"  # a new commit is a new retrieval
    assert after["baseline"] == {"erc": "TODO(author): run `cbledger fixture baseline demo-up`", "note": "kept"}
    assert after["kicad"]["verifiedWithKicadCli"].startswith("TODO(author):")
    assert sorted(p.name for p in (root / "fixtures" / "demo-up" / "tree" / "hardware").iterdir()) == [
        "demo.kicad_pro",
        "demo.kicad_sch",
    ]
    assert f"(was {expected_hash()})" in r.stdout


def test_a_refreeze_repins_the_tasks_that_pinned_the_tree_it_replaced(tmp_path, upstream):
    """A re-frozen fixture left every task on it pinning the old tree, each to edit by hand."""
    root = tmp_path / "project"
    assert freeze(root, upstream, upstream.first, *AUTHOR).exit_code == 0
    first = json.loads((root / "fixtures" / "demo-up" / "fixture.json").read_text())["sha256"]
    texts = {}
    for task_id, pin in (("on-the-tree", first), ("pinned-wrong", "0" * 64)):
        shutil.copytree(REPO / "tasks" / "led-resistor-swap", root / "tasks" / task_id)
        path = root / "tasks" / task_id / "task.json"
        doc = json.loads(path.read_text())
        doc["id"], doc["fixture"] = task_id, {"path": "fixtures/demo-up", "sha256": pin}
        path.write_text(json.dumps(doc, indent=2) + "\n")
        texts[task_id] = path.read_text()
    r = run_cli(
        ["fixture", "freeze", "--from", upstream.path, "--commit", upstream.second, "--path", "hardware/demo.kicad_sch",
         "--path", "hardware/demo.kicad_pro", "--id", "demo-up", "--root", root]
    )
    assert r.exit_code == 0, r.output
    now = json.loads((root / "fixtures" / "demo-up" / "fixture.json").read_text())["sha256"]
    assert now != first and f"re-pinned {root / 'tasks' / 'on-the-tree' / 'task.json'}" in r.stdout, r.stdout
    assert (root / "tasks" / "on-the-tree" / "task.json").read_text() == texts["on-the-tree"].replace(first, now)
    assert (root / "tasks" / "pinned-wrong" / "task.json").read_text() == texts["pinned-wrong"]  # for `fixture check`
    assert "pinned-wrong" not in r.stdout


def test_a_refused_freeze_writes_nothing(tmp_path, upstream):
    root = tmp_path / "project"
    r = freeze(root, upstream, "main")
    assert r.exit_code == 2
    assert "error: --commit 'main': give the full 40-hex commit SHA" in r.stderr
    assert not (root / "fixtures").exists()
    r = freeze(root, upstream, upstream.dangling)
    assert r.exit_code == 2 and "unreachable" in r.stderr
    assert not (root / "fixtures").exists()
    r = freeze(root, upstream, upstream.first, "--license-file", "COPYING")
    assert r.exit_code == 2 and f"--license-file COPYING: no such file in commit {upstream.first}" in r.stderr, r.output
    assert not (root / "fixtures").exists()
    for spelled in ("./LICENSE", "/LICENSE"):  # the root's LICENSE, kept as that
        r = freeze(root, upstream, upstream.first, "--license-file", spelled)
        assert r.exit_code == 0, r.output
        assert json.loads((root / "fixtures" / "demo-up" / "fixture.json").read_text())["upstream"]["licenseFile"] == "LICENSE"
        shutil.rmtree(root / "fixtures")
    r = run_cli(["fixture", "freeze", "--from", upstream.path, "--commit", upstream.first, "--path", "hardware", "--id", "Demo_Up", "--root", root])
    assert r.exit_code == 2 and "--id 'Demo_Up': must be kebab-case" in r.stderr
    r = run_cli(["fixture", "freeze", "--from", upstream.path, "--commit", upstream.first, "--path", "hardware", "--id", "demo-up\n", "--root", root])
    assert r.exit_code == 2 and "--id 'demo-up\\n': must be kebab-case" in r.stderr


def test_the_tree_walks_list_every_regular_file_and_refuse_a_link_or_special_file_by_path(tmp_path):
    """`tree_files` (fixture trees) and the definitions' `files` walk with directory entries, not
    paths; they list what `os.walk` finds and refuse what they refused before, naming the entry."""
    from cbledger.tasks.definitions import DirectorySource
    from cbledger.tasks.fixtures.hashing import tree_files

    root = tmp_path / "project"
    for rel in ("tasks/a/task.json", "tasks/a/files/x/y.kicad_sch", "tasks/b/task.json", "tasks/top.md"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(rel)
    (root / "tasks/empty").mkdir()
    walked = sorted(os.path.relpath(os.path.join(d, f), root).replace(os.sep, "/")
                    for d, _, names in os.walk(root / "tasks") for f in names)
    assert DirectorySource(root).files("tasks") == walked and len(walked) == 4
    assert sorted(tree_files(root / "tasks")) == [w.removeprefix("tasks/") for w in walked]
    assert DirectorySource(root).files("nothing") == []
    for bad, says_tree, says_definitions in (
        ("link-dir", "symlinks are not allowed in a fixture tree", "a symlink; suite definitions are regular files only"),
        ("link-file", "symlinks are not allowed in a fixture tree", "a symlink; suite definitions are regular files only"),
        ("fifo", "not a regular file; a fixture tree holds regular files only",
         "not a regular file; suite definitions are regular files only"),
    ):
        path = root / "tasks/a/files" / bad
        if bad == "link-dir":
            path.symlink_to(root / "tasks/b")
        elif bad == "link-file":
            path.symlink_to(root / "tasks/top.md")
        else:
            os.mkfifo(path)
        with pytest.raises(UserError) as caught:
            tree_files(root / "tasks")
        assert str(caught.value) == f"{path}: {says_tree}"
        with pytest.raises(UserError) as caught:
            DirectorySource(root).files("tasks")
        assert str(caught.value) == f"{path}: {says_definitions}"
        path.unlink()


def _snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_freezing_another_board_over_an_existing_fixture_is_refused_unless_asked(tmp_path, upstream):
    """A clashing or mistyped --id replaced an unrelated fixture's tree and provenance and
    re-pinned every task on it, with exit 0: a bundled fixture (no freeze recipe) or one frozen
    from another repository. Freezing again is for the same board's history."""
    root = tmp_path / "project"
    assert freeze(root, upstream, upstream.first, *AUTHOR).exit_code == 0
    other = pygit2.init_repository(str(tmp_path / "another-board"), initial_head="main")
    other.create_commit("refs/heads/main", SIG, SIG, "another board\n", _tree(other, {"hardware/x.kicad_sch": b"x\n"}), [])
    before = _snapshot(root)
    refused = run_cli(["fixture", "freeze", "--from", tmp_path / "another-board", "--path", "hardware", "--id", "demo-up",
                       "--root", root])
    assert refused.exit_code == 2, refused.output
    assert f"frozen at commit {upstream.first}, which {tmp_path / 'another-board'} does not hold" in refused.stderr
    assert "nothing was written" in refused.stderr and _snapshot(root) == before
    # the same board at a later commit is frozen again, as before
    again = run_cli(["fixture", "freeze", "--from", upstream.path, "--commit", upstream.second, "--path",
                     "hardware/demo.kicad_sch", "--id", "demo-up", "--root", root])
    assert again.exit_code == 0, again.output
    # a fixture no freeze made (a bundled synthetic one): refused, and kept byte for byte
    shutil.copytree(REPO / "fixtures" / "synthetic-led-resistor", root / "fixtures" / "synthetic-led-resistor")
    before = _snapshot(root)
    over = ["fixture", "freeze", "--from", upstream.path, "--commit", upstream.first, "--path", "hardware",
            "--id", "synthetic-led-resistor", "--root", root]
    refused = run_cli(over)
    assert refused.exit_code == 2 and "was not made by `fixture freeze`" in refused.stderr, refused.output
    assert _snapshot(root) == before
    forced = run_cli([*over, "--replace"])
    assert forced.exit_code == 0, forced.output
    assert (root / "fixtures" / "synthetic-led-resistor" / "tree" / "hardware" / "demo.kicad_sch").is_file()


def test_a_task_on_a_fixture_freeze_left_unfinished_is_refused_naming_what_is_left(tmp_path, upstream):
    """The schema's own complaint (`Expected object, got str - at $.baseline.erc`) did not say
    that the field is a placeholder a command fills in."""
    root = tmp_path / "project"
    assert freeze(root, upstream, upstream.first, *AUTHOR).exit_code == 0
    r = run_cli(["task", "new", "on-it", "--fixture", "demo-up", "--tier", "simple", "--outcome", "edit", "--prompt", "x",
                 "--root", root])
    assert r.exit_code == 2, r.output
    assert "fixture.json: Expected `object`, got `str` - at `$.baseline.erc`" in r.stderr
    assert "the fixture is not finished: 2 field(s) still hold a TODO(author) placeholder (kicad.verifiedWithKicadCli, " \
           "baseline.erc)" in r.stderr
    assert f"`cbledger fixture check demo-up --root {root}` lists them" in r.stderr
    assert not (root / "tasks" / "on-it").exists()
