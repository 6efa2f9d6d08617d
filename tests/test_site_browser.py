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


def _viewport(driver, width: int, height: int) -> None:
    """An exact layout viewport (a window's size would include its frame)."""
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                           {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})


def _open(driver, path: Path, shots: Path, name: str, width: int = 1300):
    _viewport(driver, width, 900)
    driver.get(path.as_uri())
    errors = [e for e in driver.get_log("browser") if e.get("level") == "SEVERE"]
    assert errors == [], f"{path.name}: console errors {errors}"
    height = driver.execute_script("return document.documentElement.scrollHeight")
    _viewport(driver, width, min(max(height, 600), 6000))
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
    links = browser.find_elements(By.CSS_SELECTOR, "table.runs tbody td:nth-child(2) a")
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


#: every text box of each chart that overlaps another of the same chart, as the browser laid them out
_OVERLAPS = """
const out = [];
for (const svg of document.querySelectorAll('svg.chart')) {
  const boxes = [...svg.querySelectorAll('text')].map(t => [t.textContent, t.getBoundingClientRect()])
    .filter(([, r]) => r.width > 0 && r.height > 0);
  for (let i = 0; i < boxes.length; i++) for (let j = i + 1; j < boxes.length; j++) {
    const [a, ra] = boxes[i], [b, rb] = boxes[j];
    const w = Math.min(ra.right, rb.right) - Math.max(ra.left, rb.left);
    const h = Math.min(ra.bottom, rb.bottom) - Math.max(ra.top, rb.top);
    if (w > 0.5 && h > 0.5) out.push([svg.getAttribute('aria-label'), a, b]);
  }
}
return out;
"""

#: text of a chart that the browser draws outside the chart's own box (a label cut off)
_CLIPPED = """
const out = [];
for (const svg of document.querySelectorAll('svg.chart')) {
  const box = svg.getBoundingClientRect();
  for (const t of svg.querySelectorAll('text')) {
    const r = t.getBoundingClientRect();
    if (r.left < box.left - 0.5 || r.right > box.right + 0.5 || r.top < box.top - 0.5 || r.bottom > box.bottom + 0.5)
      out.push([svg.getAttribute('aria-label'), t.textContent]);
  }
}
return out;
"""


@pytest.fixture(scope="module")
def crowd(tmp_path_factory):
    """The whole site of `crowd_stream`: crowded charts, both cost segments, single runs."""
    from tests.site_helpers import crowd_state

    state = crowd_state()
    out = tmp_path_factory.mktemp("crowd-site")
    for rel, data in site.render(state, {}):
        write_atomic(out / rel, data)
    return state, out


def _page_kinds(built, crowd) -> dict[str, Path]:
    state, _evidence, chosen, out, _shots = built
    cstate, cout = crowd
    first_task = sorted(e.run.task.id for e in cstate.runs.values())[0]
    return {
        "leaderboard": cout / site.INDEX, "leaderboard-committed": out / site.INDEX,
        "task": cout / site.task_page(first_task),
        "model": cout / site.model_page("vendor:twin-0-with-a-rather-long-provider-model-name"),
        "task-committed": out / site.task_page(state.runs[chosen[0]].run.task.id),
        "run": out / site.run_page(next(r for r in chosen if "solve" in r)), "runs": out / site.RUNS,
        "regressions": cout / site.REGRESSIONS, "workqueue": cout / site.QUEUE,
    }


KINDS = ["leaderboard", "leaderboard-committed", "task", "model", "task-committed", "run", "runs", "regressions", "workqueue"]


@pytest.mark.parametrize("width", [1400, 400])
@pytest.mark.parametrize("kind", KINDS)
def test_every_page_kind_fits_its_width_and_no_chart_label_overlaps(built, crowd, browser, kind, width):
    """At a desktop and a phone width: the document never scrolls sideways (wide tables and
    charts scroll inside their own box), no two labels of a chart overlap, none is cut off."""
    shots = built[4]
    _open(browser, _page_kinds(built, crowd)[kind], shots, f"{kind}-{width}", width)
    overflow = browser.execute_script(
        "const d = document.documentElement; return [d.scrollWidth, d.clientWidth]")
    assert overflow[0] <= overflow[1], f"{kind} at {width}px: the document is {overflow[0]}px wide"
    assert browser.execute_script(_OVERLAPS) == []
    assert browser.execute_script(_CLIPPED) == []
    nav = browser.execute_script("return [...document.querySelectorAll('header a')].map(a => a.getBoundingClientRect().top)")
    assert len(set(nav)) == 1, f"the navigation's links wrap onto {len(set(nav))} lines"


def test_crowded_frontier_draws_every_costed_model_once_and_keeps_the_rules(crowd, browser, built):
    """Five models at one point get five readable numbers; each cost segment has its own chart;
    a model without a cost is named beside the chart, not drawn at $0; the single run is marked
    and listed apart, never ranked above the repeated models."""
    from selenium.webdriver.common.by import By

    from cbledger.projections.fold import current_suite
    from cbledger.projections.metrics import ALL_TIERS, COSTED_SEGMENTS, suite_metrics

    state, out = crowd
    _open(browser, out / site.INDEX, built[4], "crowd-index", 1400)
    pooled = [r for g in suite_metrics(state, current_suite(state)).groups if g.main
              for r in g.default_rows() if r.tier == ALL_TIERS]
    main = browser.find_element(By.CSS_SELECTOR, "section.group")
    captions = [f.text for f in main.find_elements(By.CSS_SELECTOR, "figure.frontier figcaption")]
    segments = [s for s in COSTED_SEGMENTS if any(r.segment == s for r in pooled)]
    assert captions == [f"Segment {s}" for s in segments] and len(segments) == 2
    drawn = [r for r in pooled if r.segment in COSTED_SEGMENTS and r.cost_per_pass_micros is not None]
    assert len(main.find_elements(By.CSS_SELECTOR, "svg.scatter g.point")) == len(drawn)
    assert len(main.find_elements(By.CSS_SELECTOR, "svg.scatter g.point.single")) == sum(r.single_repeat for r in drawn) == 1
    apart = " ".join(p.text for p in main.find_elements(By.CSS_SELECTOR, "p.apart"))
    assert "vendor:half-costed" in apart and "claude-code" in apart
    for label in main.find_elements(By.CSS_SELECTOR, "svg.scatter text.label"):
        assert label.text.isdigit()
    # the tier tables: the single run sits in its own unranked table
    single = main.find_elements(By.CSS_SELECTOR, "table.single tbody tr")
    assert single and all("vendor:lucky-once" in r.text and "single run" in r.text for r in single)
    for table in main.find_elements(By.CSS_SELECTOR, "table.costed"):
        assert "vendor:lucky-once" not in table.text
        heads = [h.text for h in table.find_elements(By.CSS_SELECTOR, "thead th")]
        assert sum(h.startswith("cost per passing task") for h in heads) == len({
            r.text.split("\n")[0] for r in table.find_elements(By.CSS_SELECTOR, "tbody td:nth-child(3)")})


def test_task_and_model_pages_link_both_ways(crowd, browser, built):
    from selenium.webdriver.common.by import By

    _state, out = crowd
    _open(browser, out / site.INDEX, built[4], "crowd-index-links", 1400)
    browser.find_element(By.LINK_TEXT, "vendor:steady-six").click()
    assert browser.find_element(By.TAG_NAME, "h1").text == "Model vendor:steady-six"
    rows = browser.find_elements(By.CSS_SELECTOR, "table.pairs tbody tr")
    assert len(rows) == 3  # one per task it ran
    rows[0].find_element(By.TAG_NAME, "a").click()
    assert browser.find_element(By.TAG_NAME, "h1").text.startswith("Task ")
    models = [r.find_element(By.TAG_NAME, "a").text for r in browser.find_elements(By.CSS_SELECTOR, "table.pairs tbody tr")]
    assert "vendor:steady-six" in models
    # a single run never above a repeated one
    singles = [i for i, r in enumerate(browser.find_elements(By.CSS_SELECTOR, "table.pairs tbody tr")) if "single" in r.get_attribute("class")]
    assert not singles or singles[0] >= len(models) - len(singles)
    run_link = browser.find_element(By.CSS_SELECTOR, "table.runs tbody td:nth-child(2) a")
    run_id = run_link.text
    run_link.click()
    assert browser.find_element(By.TAG_NAME, "h1").text == f"Run {run_id}"
    browser.find_element(By.CSS_SELECTOR, "table.summary a[href*='models/']").click()
    assert browser.find_element(By.TAG_NAME, "h1").text.startswith("Model ")
