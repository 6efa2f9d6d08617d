"""`cbledger fixture materialize` (from a directory or an upstream clone) and `cbledger fixture
baseline`; and the two real boards this repository ships as manifests only."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from cbledger.tasks.fixtures import summary
from cbledger.tasks.fixtures.hashing import hash_directory
from tests.factories import run_cli
from tests.test_fixtures_freeze import AUTHOR, Upstream, expected_hash
from tests.test_grading_kit import SCHEMATIC, copy_into, demo_schematic, tree_files, write_fixture

REAL = {
    "antmicro-microphone-board": "dad443ad059b7cd2ec57313967db7c511caa8bcfd1ba72dc2f02cd3560249529",
    "openlighting-dmxsun-baseboard": "f055e9296dc769d4ef037919ab6752711b6163242f8d8c8f105a960d39ae93f4",
}


def _frozen_and_complete(tmp_path) -> tuple[Upstream, Path, Path]:
    """A fixture frozen from the test upstream at its first commit, its baseline filled in by
    hand (no kicad-cli needed), then its tree removed as for an uncommitted real board."""
    upstream = Upstream(tmp_path / "upstream")
    root = tmp_path / "project"
    args = ["fixture", "freeze", "--from", upstream.path, "--commit", upstream.first, "--path", "hardware", "--id", "demo-up"]
    assert run_cli([*args, "--root", root, *AUTHOR]).exit_code == 0
    fixture_dir = root / "fixtures" / "demo-up"
    manifest = fixture_dir / "fixture.json"
    doc = json.loads(manifest.read_text())
    doc["baseline"] = {"erc": {"report": "baseline/erc.json", "errors": 0, "warnings": 0}}
    doc["kicad"]["verifiedWithKicadCli"] = "9.0.8"
    manifest.write_text(json.dumps(doc))
    shutil.rmtree(fixture_dir / "tree")
    return upstream, root, fixture_dir


def _leftovers(fixture_dir: Path) -> list[str]:
    return sorted(p.name for p in fixture_dir.iterdir() if p.name.startswith("."))


def _split(tmp_path, **kw):
    """A fixture whose tree and baseline have moved to a 'source' directory, as for a real board."""
    fixture = write_fixture(tmp_path / "project", origin="upstream", **kw)
    source = tmp_path / "source"
    source.mkdir()
    shutil.move(str(fixture.tree), source / "tree")
    shutil.move(str(fixture.dir / "baseline"), source / "baseline")
    return fixture, source


def materialize(fixture, *args):
    return run_cli(["fixture", "materialize", fixture.id, "--root", fixture.dir.parent.parent, *args])


# --------------------------------------------------------------------------- --from


@pytest.mark.parametrize("board", sorted(REAL))
def test_materialize_without_a_source_names_the_two_and_the_pinned_upstream(tmp_path, board):
    """`replay --verify` tells a reader to materialize a missing board; the bare command must then
    say where the files come from, not only that a flag is missing."""
    root = tmp_path / "project"
    (root / "fixtures" / board).mkdir(parents=True)
    (root / "tasks").mkdir()
    manifest = json.loads((Path(__file__).resolve().parent.parent / "fixtures" / board / "fixture.json").read_text())
    (root / "fixtures" / board / "fixture.json").write_text(json.dumps(manifest))
    r = run_cli(["fixture", "materialize", board, "--root", root])
    assert r.exit_code == 2, r.output
    upstream = manifest["upstream"]
    assert r.stderr.strip() == (
        f"error: fixture materialize {board}: no source given: --from DIR (a copy of the board holding tree/ and "
        f"baseline/) or --git CLONE_DIR (a clone of {upstream['url']}; rebuilt at commit {upstream['commit']})"
    )
    assert sorted(p.name for p in (root / "fixtures" / board).iterdir()) == ["fixture.json"]


def test_materialize_with_both_sources_is_refused(tmp_path):
    fixture, source = _split(tmp_path)
    r = materialize(fixture, "--from", source, "--git", source)
    assert r.exit_code == 2 and "give exactly one of --from DIR and --git CLONE_DIR" in r.stderr
    assert not fixture.tree.exists()


def test_materialize_from_a_directory_with_tree_and_baseline(tmp_path):
    fixture, source = _split(tmp_path)
    r = materialize(fixture, "--from", source)
    assert r.exit_code == 0, r.output
    assert f"demo-board: materialized 10 file(s), sha256 {fixture.manifest.sha256} verified" in r.stdout
    assert "copied baseline/: drc.json, erc.json" in r.stdout
    assert hash_directory(fixture.tree) == fixture.manifest.sha256
    assert run_cli(["fixture", "check", fixture.id, "--root", fixture.dir.parent.parent]).exit_code == 0
    again = materialize(fixture, "--from", source)
    assert "tree already materialized" in again.stdout


def test_materialize_from_a_bare_tree_asks_for_a_baseline(tmp_path):
    fixture, source = _split(tmp_path)
    r = materialize(fixture, "--from", source / "tree")
    assert r.exit_code == 0, r.output
    assert f"no baseline reports yet: run `cbledger fixture baseline demo-board --root {fixture.dir.parent.parent}`" in r.stdout


def test_a_tree_that_does_not_hash_to_the_manifest_leaves_nothing_behind(tmp_path):
    fixture, source = _split(tmp_path)
    (source / "tree" / "README.md").write_text("changed\n")
    r = materialize(fixture, "--from", source)
    assert r.exit_code == 2
    assert f"sha256 records {fixture.manifest.sha256}, but the source tree hashes to" in r.stderr
    assert "nothing written" in r.stderr
    assert not fixture.tree.exists() and not (fixture.dir / "baseline").exists()
    assert _leftovers(fixture.dir) == []


def test_a_baseline_that_disagrees_with_the_manifest_is_not_copied(tmp_path):
    fixture, source = _split(tmp_path)
    (source / "baseline" / "erc.json").write_text(json.dumps({"sheets": [{"violations": [{"type": "x", "severity": "error"}]}]}))
    r = materialize(fixture, "--from", source)
    assert r.exit_code == 1
    assert "error: baseline not copied: baseline.erc.errors: fixture.json records 0, erc.json has 1" in r.stderr
    assert fixture.tree.is_dir() and not (fixture.dir / "baseline" / "erc.json").exists()


def test_an_existing_tree_with_another_hash_needs_force(tmp_path):
    fixture, source = _split(tmp_path)
    fixture.tree.mkdir()
    (fixture.tree / "stray.txt").write_text("x\n")
    r = materialize(fixture, "--from", source)
    assert r.exit_code == 2 and "exists and hashes to" in r.stderr and "pass --force" in r.stderr
    assert materialize(fixture, "--from", source, "--force").exit_code == 0
    assert hash_directory(fixture.tree) == fixture.manifest.sha256


def test_materialize_needs_exactly_one_source(tmp_path):
    fixture, source = _split(tmp_path)
    assert materialize(fixture).exit_code == 2
    assert materialize(fixture, "--from", source, "--git", source).exit_code == 2


# --------------------------------------------------------------------------- --git


def test_materialize_from_an_upstream_clone_at_the_pinned_commit(tmp_path):
    upstream, root, fixture_dir = _frozen_and_complete(tmp_path)
    # the clone has moved on (main is at the second commit); the manifest pins the first
    r = run_cli(["fixture", "materialize", "demo-up", "--git", upstream.path, "--root", root])
    assert r.exit_code == 0, r.output
    assert hash_directory(fixture_dir / "tree") == expected_hash()
    assert "no baseline reports yet" in r.stdout


def test_materialize_from_a_clone_refuses_a_moved_hash(tmp_path):
    upstream, root, fixture_dir = _frozen_and_complete(tmp_path)
    manifest = fixture_dir / "fixture.json"
    doc = json.loads(manifest.read_text())
    doc["freeze"]["paths"] = ["hardware", "LICENSE"]
    manifest.write_text(json.dumps(doc))
    r = run_cli(["fixture", "materialize", "demo-up", "--git", upstream.path, "--root", root])
    assert r.exit_code == 2 and "nothing written" in r.stderr
    assert not (fixture_dir / "tree").exists() and _leftovers(fixture_dir) == []


def test_materialize_refuses_a_manifest_with_placeholders(tmp_path):
    upstream, root, fixture_dir = _frozen_and_complete(tmp_path)
    manifest = fixture_dir / "fixture.json"
    doc = json.loads(manifest.read_text())
    doc["upstream"]["url"] = "TODO(author): the upstream repository URL"
    manifest.write_text(json.dumps(doc))
    r = run_cli(["fixture", "materialize", "demo-up", "--git", upstream.path, "--root", root])
    assert r.exit_code == 2
    assert "fixture.json: upstream.url: placeholder left for the author" in r.stderr and "error: error" not in r.stderr


def test_materialize_from_a_clone_without_a_recipe(tmp_path):
    fixture, _source = _split(tmp_path)
    r = materialize(fixture, "--git", tmp_path)
    assert r.exit_code == 2 and "freeze: no recipe (paths taken upstream); use --from DIR instead" in r.stderr


# --------------------------------------------------------------------------- baseline


@pytest.mark.kicad
def test_baseline_runs_kicad_cli_on_a_copy_and_records_the_summary(tmp_path, kicad_cli):
    files = tree_files()
    files[SCHEMATIC] = demo_schematic(pwr_flags=False).encode()
    fixture = write_fixture(tmp_path / "project", files=files)
    before = hash_directory(fixture.tree)
    manifest = fixture.dir / "fixture.json"
    doc = json.loads(manifest.read_text())
    doc["baseline"] = {"erc": {"report": "baseline/erc.json", "errors": 0, "warnings": 0}, "note": "the author's note"}
    doc["kicad"]["verifiedWithKicadCli"] = "0.0"
    manifest.write_text(json.dumps(doc))
    r = run_cli(["fixture", "baseline", "demo-board", "--root", tmp_path / "project"])
    assert r.exit_code == 0, r.output
    assert "ERC: 2 error(s), 0 warning(s)" in r.stdout
    assert hash_directory(fixture.tree) == before  # kicad-cli ran on a copy
    after = json.loads(manifest.read_text())
    assert after["baseline"]["erc"] == {
        "report": "baseline/erc.json",
        "errors": 2,
        "errorTypes": {"power_pin_not_driven": 2},
        "warnings": 0,
    }
    assert after["baseline"]["drc"]["unconnectedItems"] == 0
    assert after["baseline"]["note"] == "the author's note"
    version = subprocess.run([kicad_cli, "version"], capture_output=True, text=True).stdout.strip()
    assert after["kicad"]["verifiedWithKicadCli"] == version
    netlist = (fixture.dir / "baseline" / "netlist.kicad_net").read_text()
    assert f'(source "{SCHEMATIC}")' in netlist and str(tmp_path) not in netlist
    assert str(tmp_path) not in (fixture.dir / "baseline" / "erc.json").read_text()
    assert run_cli(["fixture", "check", "demo-board", "--root", tmp_path / "project"]).exit_code == 0


def test_baseline_refuses_a_moved_tree(tmp_path):
    fixture = write_fixture(tmp_path / "project")
    (fixture.tree / "README.md").write_text("moved\n")
    r = run_cli(["fixture", "baseline", "demo-board", "--root", tmp_path / "project"])
    assert r.exit_code == 2 and "refusing to measure a moved tree" in r.stderr


# --------------------------------------------------------------------------- the real boards


def test_the_shipped_real_manifests_pin_the_standard_hashes(repo_root):
    for fixture_id, sha in REAL.items():
        doc = json.loads((repo_root / "fixtures" / fixture_id / "fixture.json").read_text())
        assert doc["sha256"] == sha and doc["id"] == fixture_id and doc["origin"] == "upstream"
        assert doc["upstream"]["license"] == "Apache-2.0" and len(doc["upstream"]["commit"]) == 40
        assert doc["kicad"]["verifiedWithKicadCli"] == "9.0.8"
        assert doc["freeze"]["paths"]


def test_no_third_party_file_of_a_real_board_is_tracked(repo_root):
    tracked = subprocess.run(
        ["git", "ls-files", "--", *(f"fixtures/{f}" for f in REAL)], cwd=repo_root, capture_output=True, text=True, check=True
    ).stdout.split()
    assert sorted(tracked) == sorted(f"fixtures/{f}/{name}" for f in REAL for name in (".gitignore", "README.md", "fixture.json"))
    for fixture_id in REAL:
        ignored = (repo_root / "fixtures" / fixture_id / ".gitignore").read_text().split()
        assert "/tree/" in ignored and "/baseline/" in ignored


@pytest.mark.shared
@pytest.mark.parametrize("fixture_id", sorted(REAL))
def test_the_real_boards_materialize_and_check(tmp_path, shared_real, repo_root, fixture_id):
    root = tmp_path / "project"
    d = root / "fixtures" / fixture_id
    d.mkdir(parents=True)
    shutil.copyfile(repo_root / "fixtures" / fixture_id / "fixture.json", d / "fixture.json")
    check = run_cli(["fixture", "check", fixture_id, "--root", root])
    assert check.exit_code == 1 and "not materialized" in check.stderr
    assert run_cli(["validate", "--root", root]).exit_code == 0  # a note, not an error
    r = run_cli(["fixture", "materialize", fixture_id, "--from", shared_real / "fixtures" / fixture_id, "--root", root])
    assert r.exit_code == 0, r.output
    assert f"sha256 {REAL[fixture_id]} verified" in r.stdout
    check = run_cli(["fixture", "check", fixture_id, "--root", root])
    assert check.exit_code == 0, check.output
    assert run_cli(["validate", "--root", root, "--require-trees"]).exit_code == 0


@pytest.mark.shared
@pytest.mark.parametrize("fixture_id", sorted(REAL))
def test_the_shipped_baseline_summary_is_what_the_shared_reports_say(shared_real, repo_root, fixture_id):
    doc = json.loads((repo_root / "fixtures" / fixture_id / "fixture.json").read_text())
    for kind in ("erc", "drc"):
        data = (shared_real / "fixtures" / fixture_id / "baseline" / f"{kind}.json").read_bytes()
        computed = summary.summarize(summary.load_report(data, kind), f"baseline/{kind}.json")
        assert summary.differences(doc["baseline"][kind], computed) == []


@pytest.mark.shared
@pytest.mark.kicad
def test_measuring_the_microphone_baseline_again_reproduces_the_manifest(tmp_path, shared_real, repo_root, kicad_cli):
    root = tmp_path / "project"
    d = root / "fixtures" / "antmicro-microphone-board"
    d.mkdir(parents=True)
    shipped = (repo_root / "fixtures" / "antmicro-microphone-board" / "fixture.json").read_text()
    (d / "fixture.json").write_text(shipped)
    copy_into(shared_real / "fixtures" / "antmicro-microphone-board" / "tree", d / "tree")
    assert run_cli(["fixture", "baseline", "antmicro-microphone-board", "--root", root]).exit_code == 0
    assert json.loads((d / "fixture.json").read_text()) == json.loads(shipped)


@pytest.mark.shared
@pytest.mark.parametrize("fixture_id", sorted(REAL))
def test_the_shipped_freeze_recipes_rebuild_the_real_trees_from_an_upstream_shaped_clone(
    tmp_path, shared_real, repo_root, fixture_id
):
    """The recipe in each shipped manifest, applied to a clone laid out as upstream is (the tree's
    files at their upstream paths, among files the recipe leaves out), gives the pinned hash."""
    import pygit2

    doc = json.loads((repo_root / "fixtures" / fixture_id / "fixture.json").read_text())
    into = doc["freeze"].get("into")
    tree = shared_real / "fixtures" / fixture_id / "tree"
    clone = tmp_path / "clone"
    repo = pygit2.init_repository(str(clone), initial_head="main")
    index = pygit2.Index()
    for path in sorted(p for p in tree.rglob("*") if p.is_file()):
        rel = path.relative_to(tree).as_posix()
        upstream_path = rel[len(into) + 1 :] if into else rel
        index.add(pygit2.IndexEntry(upstream_path, repo.create_blob(path.read_bytes()), pygit2.enums.FileMode.BLOB))
    index.add(pygit2.IndexEntry("README.md", repo.create_blob(b"upstream readme\n"), pygit2.enums.FileMode.BLOB))
    sig = pygit2.Signature("upstream", "upstream@example.invalid", 1_700_000_000, 0)
    commit = str(repo.create_commit("refs/heads/main", sig, sig, "upstream\n", index.write_tree(repo), []))
    doc["upstream"]["commit"] = commit  # the test clone's commit stands in for the pinned one
    root = tmp_path / "project"
    (root / "fixtures" / fixture_id).mkdir(parents=True)
    (root / "fixtures" / fixture_id / "fixture.json").write_text(json.dumps(doc))
    r = run_cli(["fixture", "materialize", fixture_id, "--git", clone, "--root", root])
    assert r.exit_code == 0, r.output
    assert f"sha256 {REAL[fixture_id]} verified" in r.stdout
