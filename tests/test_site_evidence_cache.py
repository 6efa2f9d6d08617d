"""`$CBLEDGER_SITE_EVIDENCE_CACHE`: a run page's evidence kept by what it was read from, read back
by the site's regeneration in another copy of the project, and never by `replay --verify`."""

from __future__ import annotations

import shutil
from pathlib import Path

import msgspec
import pytest

from cbledger.projections.site.evidence import RunEvidence
from cbledger.reproduce import evidence_cache, site_evidence
from tests.factories import run_cli
from tests.modes_project import Project

pytestmark = [pytest.mark.kicad]

TASK = "led-resistor-swap"


def _entries(cache: Path) -> list[Path]:
    return sorted(p for p in cache.rglob("*.msgpack"))


def test_evidence_is_kept_by_what_it_was_read_from_and_verification_never_reads_it(tmp_path, kicad_cli, monkeypatch):
    cache = tmp_path / "evidence"
    monkeypatch.setenv(evidence_cache.CACHE_ENV, str(cache))
    project = Project(tmp_path, [TASK])
    gold, _, _ = project.run(TASK, "--agent", "gold")
    noop, _, _ = project.run(TASK, "--agent", "noop")
    kept = _entries(cache)
    assert len(kept) == 2  # one per run: the site `run` wrote read each once

    # another copy of the project, its site and hint gone: nothing is restored, the pages are the same
    copy = tmp_path / "copy"
    shutil.copytree(project.root, copy)
    shutil.rmtree(copy / "results" / "site")
    restored: list[str] = []
    real = site_evidence.restore_run
    monkeypatch.setattr(site_evidence, "restore_run", lambda *a: restored.append(a[2].run_id) or real(*a))
    out = run_cli(["project", "site", "--root", copy])
    assert out.exit_code == 0, out.output
    assert restored == []
    for page in (copy / "results" / "site").rglob("*.html"):
        assert page.read_bytes() == (project.root / "results" / "site" / page.relative_to(copy / "results" / "site")).read_bytes()

    # a bundle with other bytes is another key: restored, and its page says what is wrong with it
    bundle = copy / "results" / "runs" / f"{noop.run_id}.bundle"
    bundle.write_bytes(bundle.read_bytes() + b"\0")
    out = run_cli(["project", "site", "--root", copy])
    assert out.exit_code == 0, out.output
    assert restored == [noop.run_id]
    assert len(_entries(cache)) == 2  # evidence with a problem is not kept

    # a forged entry is what the cached regeneration shows, and what verification refuses
    for path in kept:
        ev = msgspec.msgpack.decode(path.read_bytes(), type=RunEvidence)
        path.write_bytes(msgspec.msgpack.encode(msgspec.structs.replace(ev, diff="--- FORGED\n")))
    shutil.rmtree(project.root / "results" / "site")
    (project.root / "results" / ".site-made.json").unlink(missing_ok=True)
    out = project.cli("project", "site")
    assert out.exit_code == 0, out.output
    page = next(p for p in (project.root / "results" / "site").rglob("*.html") if gold.run_id in p.name)
    assert "FORGED" in page.read_text()
    verify = project.cli("replay", "--verify")
    assert verify.exit_code != 0, verify.output
    assert f"{gold.run_id}.html" in verify.output and "first difference" in verify.output, verify.output

    # what a restore reads of the fixture is in the key: a mode, the manifest, a baseline report
    from cbledger.tasks.catalog import Catalog
    from cbledger.workspace import Workspace

    fixture = Catalog(copy).fixture(gold.fixture.id)

    def key() -> str | None:  # a new catalog and cache each time: each reads the fixture afresh
        cache_now = evidence_cache.EvidenceCache(cache, Workspace.at(copy), site_evidence.DIFF_LIMIT)
        return cache_now.key(gold, Catalog(copy).fixture(gold.fixture.id))

    first = key()
    assert first is not None and key() == first
    board = next(p for p in fixture.tree.rglob("*.kicad_pcb"))
    board.chmod(0o755)
    assert key() != first  # the seed is built with the executable bit
    board.chmod(0o644)
    assert key() == first
    manifest = fixture.dir / "fixture.json"
    manifest.write_text(manifest.read_text().replace(fixture.manifest.sha256, "0" * 64))
    assert key() != first  # the seed commit's message names the manifest's tree hash
