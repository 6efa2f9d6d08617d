"""The site in a real browser: Debian's headless Chromium, driven through its own chromedriver.

Each page kind is opened from `file://` (the site promises to need no server), must log no
console error, and is checked for its structure against the data it was rendered from. A
screenshot of each kind is written under the test's temporary directory and its path printed
(`pytest -s` shows it). Without Chromium the test skips; under CI=true that is a failure.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from cbledger.ledger.durable import write_atomic
from cbledger.projections.site import render as site
from cbledger.reproduce.site_evidence import gather
from cbledger.workspace import Workspace
from tests.site_helpers import REPO, committed_state, hostile_evidence

IN_CI = os.environ.get("CI", "").lower() in {"1", "true", "yes"}
HOSTILE_RUN = "hostile"


def _browser():
    chromium, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if chromium is None or driver is None:
        what = "chromium and chromium-driver (scripts/install-system)"
        if IN_CI:
            pytest.fail(f"{what} are required when CI=true", pytrace=False)
        pytest.skip(f"{what} not installed")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1300,1800"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(executable_path=driver), options=options)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The committed ledger's site with the evidence of a few synthetic-board runs (those need no
    third-party data), plus one page of hostile evidence."""
    state = committed_state()
    chosen = [next(r for r in sorted(state.runs) if f"-{kind}-" in r) for kind in
              ("compat-scripted-solve-led-resistor-swap-v1", "harness-noop-mcu-rename-i2c-nets-v1")]
    evidence = gather(Workspace.at(REPO), state, chosen)
    out = tmp_path_factory.mktemp("site")
    for rel, data in site.render(state, evidence):
        write_atomic(out / rel, data)
    victim = state.runs[chosen[0]]
    write_atomic(out / site.run_page(HOSTILE_RUN), site.run_html(state, victim, hostile_evidence()))
    shots = tmp_path_factory.mktemp("screenshots")
    print(f"\nsite screenshots: {shots}")
    return state, evidence, chosen, out, shots


@pytest.fixture(scope="module")
def browser():
    driver = _browser()
    yield driver
    driver.quit()


def _open(driver, path: Path, shots: Path, name: str):
    driver.get(path.as_uri())
    errors = [e for e in driver.get_log("browser") if e.get("level") == "SEVERE"]
    assert errors == [], f"{path.name}: console errors {errors}"
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(1300, min(max(height, 600), 6000))
    driver.save_screenshot(str(shots / f"{name}.png"))
    assert (shots / f"{name}.png").stat().st_size > 1000


def test_index_page(built, browser):
    from selenium.webdriver.common.by import By

    state, _evidence, _chosen, out, shots = built
    _open(browser, out / site.INDEX, shots, "index")
    assert browser.find_element(By.TAG_NAME, "h1").text == "Leaderboard"
    assert f"at seq {state.head_seq}" in browser.find_element(By.CSS_SELECTOR, "p.snapshot").text
    harness_rows = browser.find_elements(By.CSS_SELECTOR, "table.harness tbody tr")
    tasks = {rid_entry.run.task.id for rid_entry in state.runs.values() if rid_entry.run.run_id not in state.retracted}
    assert 0 < len(harness_rows) <= len(tasks)
    heat = browser.find_elements(By.CSS_SELECTOR, "svg.heatmap g.cell")
    assert heat, "the heat map drew no cell"
    assert browser.find_elements(By.TAG_NAME, "script") == []


def test_runs_page_links_every_run(built, browser):
    from selenium.webdriver.common.by import By

    state, _evidence, chosen, out, shots = built
    _open(browser, out / site.RUNS, shots, "runs")
    links = browser.find_elements(By.CSS_SELECTOR, "table.runs tbody a")
    assert len(links) == len(state.runs)
    target = next(a for a in links if a.text == chosen[0])
    target.click()
    assert browser.find_element(By.TAG_NAME, "h1").text == f"Run {chosen[0]}"


def test_run_page_shows_assertions_conversation_and_diff(built, browser):
    from selenium.webdriver.common.by import By

    state, evidence, chosen, out, shots = built
    run_id = next(r for r in chosen if "solve" in r)
    _open(browser, out / site.run_page(run_id), shots, "run")
    grades = state.grades[run_id]
    assert len(browser.find_elements(By.CSS_SELECTOR, "tr.assertion")) == sum(len(g.grade.assertions) for g in grades.values())
    ev = evidence[run_id]
    assert ev.problem is None
    assert len(browser.find_elements(By.CSS_SELECTOR, "div.turn")) == len(ev.turns)
    assert len(browser.find_elements(By.CSS_SELECTOR, "div.turn.tool details")) == sum(t.kind == "tool" for t in ev.turns)
    assert "diff --git" in browser.find_element(By.CSS_SELECTOR, "pre.diff").text
    assert len(browser.find_elements(By.CSS_SELECTOR, "table.chain tbody tr")) == len(ev.chain) >= 2
    assert [c.text for c in browser.find_elements(By.CSS_SELECTOR, "table.reports tbody td:first-child")] == ["ERC", "DRC"]
    # folded: a tool result is hidden until its summary is clicked
    first_tool = browser.find_element(By.CSS_SELECTOR, "div.turn.tool details")
    result = first_tool.find_element(By.CSS_SELECTOR, "pre.result")
    assert not result.is_displayed()
    first_tool.find_element(By.TAG_NAME, "summary").click()
    assert result.is_displayed()


def test_hostile_run_page_runs_nothing(built, browser):
    from selenium.webdriver.common.by import By

    _state, _evidence, _chosen, out, shots = built
    _open(browser, out / site.run_page(HOSTILE_RUN), shots, "run-hostile")
    assert browser.execute_script("return window.__pwned === undefined")
    assert browser.find_elements(By.TAG_NAME, "script") == []
    assert browser.find_elements(By.CSS_SELECTOR, "main img") == []
    assert "<script>window.__pwned = 1</script>" in browser.find_element(By.CSS_SELECTOR, "pre.diff").text


def test_regressions_and_work_queue_pages(built, browser):
    from selenium.webdriver.common.by import By

    _state, _evidence, _chosen, out, shots = built
    _open(browser, out / site.REGRESSIONS, shots, "regressions")
    assert browser.find_element(By.TAG_NAME, "h1").text == "Regressions"
    assert browser.find_elements(By.CSS_SELECTOR, "section.comparison") or "nothing to gate" in browser.page_source
    _open(browser, out / site.QUEUE, shots, "workqueue")
    assert browser.find_element(By.TAG_NAME, "h1").text == "Work queue"
    nav = [a.text for a in browser.find_elements(By.CSS_SELECTOR, "header a")]
    assert nav == ["Leaderboard", "Runs", "Regressions", "Work queue"]


def test_leaderboard_charts_with_agent_rows(tmp_path, browser):
    """The committed ledger has no agent run yet; the factory's rich ledger has three models over
    three tiers, costed and not, so each tier's chart and the interval bars are drawn."""
    from selenium.webdriver.common.by import By

    from cbledger.ledger.store import LedgerStore
    from cbledger.projections.fold import current_suite
    from cbledger.projections.metrics import suite_metrics
    from cbledger.projections.writers import load_state
    from tests.factories import MAINTAINER, rich_stream

    ledger = tmp_path / "events.jsonl"
    LedgerStore(ledger).init("site-test", MAINTAINER)
    LedgerStore(ledger).append(rich_stream().drafts()[1:])
    state = load_state(ledger)
    write_atomic(tmp_path / "site" / site.INDEX, site.index_page(state))
    shots = tmp_path / "screenshots"
    shots.mkdir()
    print(f"\nsite screenshots: {shots}")
    _open(browser, tmp_path / "site" / site.INDEX, shots, "index-agents")
    main = next(g for g in suite_metrics(state, current_suite(state)).groups if g.main)
    tiers = {r.tier for r in main.rows if r.condition == "default"}
    charts = browser.find_elements(By.CSS_SELECTOR, "section.group:first-of-type svg.scatter")
    assert len(charts) == len(tiers)
    points = browser.find_elements(By.CSS_SELECTOR, "section.group:first-of-type svg.scatter g.point")
    assert len(points) == sum(1 for r in main.rows if r.condition == "default")
    uncosted = sum(1 for r in main.rows if r.condition == "default" and r.cost_per_pass_micros is None)
    assert len(browser.find_elements(By.CSS_SELECTOR, "section.group:first-of-type svg.scatter g.point.hollow")) == uncosted
    bars = browser.find_elements(By.CSS_SELECTOR, "section.group:first-of-type table.leaderboard .bar .ci")
    assert len(bars) == len(points)
    labels = {e.text for e in browser.find_elements(By.CSS_SELECTOR, "section.group:first-of-type svg.scatter text.label")}
    assert labels == {r.model for r in main.rows if r.condition == "default"}
