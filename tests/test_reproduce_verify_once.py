"""`replay --verify` restores each preserved run once: the re-grade and the site's check read the
same restore, serially and with `--jobs`. A page that no longer matches is still caught."""

from __future__ import annotations

from collections import Counter

import pytest

from cbledger.reproduce import runs as runs_mod
from cbledger.reproduce import site_evidence
from tests.test_reproduce_verify import cli, copy_project

pytestmark = [pytest.mark.slow, pytest.mark.kicad]


@pytest.fixture
def project(tmp_path_factory, tmp_path, kicad_cli, copperhead_cli):
    return copy_project(tmp_path_factory, tmp_path, copperhead_cli)


@pytest.fixture
def restores(project, monkeypatch) -> Counter:
    """Every restore made in this process after the project was built, by run id (a `--jobs`
    worker counts in its own)."""
    made: Counter = Counter()
    real = runs_mod.restore_run

    def counting(workspace, catalog, run, seq, into):
        made[run.run_id] += 1
        return real(workspace, catalog, run, seq, into)

    monkeypatch.setattr(runs_mod, "restore_run", counting)
    monkeypatch.setattr(site_evidence, "restore_run", counting)
    return made


def test_each_run_is_restored_once_for_the_regrade_and_the_site_check(project, restores):
    result = cli(project, "replay", "--verify")
    assert result.exit_code == 0, result.output
    assert len(restores) == 4 and set(restores.values()) == {1}


def test_without_projections_no_evidence_is_read(project, restores, monkeypatch):
    def unwanted(*args, **kwargs):
        raise AssertionError("site evidence read with --no-projections")

    monkeypatch.setattr(site_evidence, "from_restored", unwanted)
    result = cli(project, "replay", "--verify", "--no-projections")
    assert result.exit_code == 0, result.output
    assert set(restores.values()) == {1}


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_a_changed_run_page_is_still_a_difference(project, jobs):
    page = sorted((project / "results" / "site" / "runs").glob("*.html"))[0]  # its evidence came from the re-grade's restore
    text = page.read_text()
    assert "</body>" in text
    page.write_text(text.replace("</body>", "<p>edited</p></body>"))
    result = cli(project, "replay", "--verify", "--jobs", jobs)
    assert result.exit_code != 0
    assert page.name in result.output
