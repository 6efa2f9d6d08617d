"""The site's pages as bytes: escaping of what an agent wrote, determinism, every page present."""

from __future__ import annotations

import itertools
import re

import msgspec
from markupsafe import escape

from cbledger.projections.site import render as site
from cbledger.projections.site import svg
from cbledger.projections.site.evidence import RunEvidence
from tests.site_helpers import HOSTILE, committed_state, hostile_evidence


def test_hostile_transcript_is_shown_not_run():
    state = committed_state()
    entry = next(iter(state.runs.values()))
    page = site.run_html(state, entry, hostile_evidence()).decode()
    assert "<script" not in page
    assert 'onerror="' not in page
    assert "<img" not in page
    assert page.count("&lt;script&gt;window.__pwned = 1&lt;/script&gt;") >= 8


def test_svg_labels_are_escaped():
    text = svg.scatter([svg.Point(number=1, label=HOSTILE, cost_usd=0.5, rate=0.5, low=0.2, high=0.8)], HOSTILE)
    text += svg.heatmap([HOSTILE], [HOSTILE], {(HOSTILE, HOSTILE): svg.Cell(passes=1, runs=2)}, HOSTILE,
                        {HOSTILE: HOSTILE}, {HOSTILE: HOSTILE})
    assert "<script" not in text and "<img" not in text
    assert "&lt;script&gt;" in text


def test_every_page_is_rendered_and_the_bytes_are_a_function_of_the_inputs():
    state = committed_state()
    evidence = {rid: RunEvidence(problem="not gathered in this test") for rid in state.runs}
    first = site.render(state, evidence)
    again = site.render(committed_state(), dict(evidence))
    assert first == again
    paths = [p for p, _ in first]
    assert paths[:3] == [site.RUNS, site.REGRESSIONS, site.QUEUE]
    # the front page, which names the head, last: written last, never ahead of the pages
    assert paths[-1] == site.INDEX
    entries = [*state.runs.values(), *state.later_passes.values()]
    tasks = [site.task_page(t) for t in sorted({e.run.task.id for e in entries})]
    models = [site.model_page(m) for m in sorted({e.run.model.id for e in entries})]
    assert paths[3:3 + len(tasks) + len(models)] == tasks + models
    # a later feedback pass has a page, though no table lists it
    assert state.later_passes
    assert sorted(paths[3 + len(tasks) + len(models):-1]) == sorted(site.run_page(r) for r in (*state.runs, *state.later_passes))
    runs_page = dict(first)[site.RUNS].decode()
    assert runs_page.count('<tr><td class="num">') == len(state.runs)


def test_the_pages_of_an_attempts_passes_link_each_other_and_a_later_one_shows_its_hints():
    state = committed_state()
    later = next(iter(state.later_passes.values()))
    assert later.run.passes and later.run.passes.first and later.run.passes.hints
    first = state.runs[later.run.passes.first]
    out = dict(site.render(state, {}, [first.run.run_id, later.run.run_id]))
    one, two = (out[site.run_page(e.run.run_id)].decode() for e in (first, later))
    assert f'<a href="../{site.run_page(later.run.run_id)}">pass 2</a> (pass)' in one
    assert f'<a href="../{site.run_page(first.run.run_id)}">pass 1</a> (fail)' in two
    assert "<strong>pass 2</strong>" in two and "<strong>pass 1</strong>" in one
    assert "hints told" in two and "hints told" not in one
    for hint in later.run.passes.hints:
        assert f"<li>{escape(hint)}</li>" in two
    # a run made without passes says nothing of them
    plain = next(e for e in state.runs.values() if not e.run.passes)
    assert "feedback pass" not in site.run_html(state, plain, None).decode()


def test_only_the_named_runs_pages_with_runs():
    state = committed_state()
    rid = sorted(state.runs)[3]
    out = site.render(state, {}, [rid, "no-such-run"])
    assert [p for p, _ in out if p.startswith("runs/")] == [site.run_page(rid)]
    assert b"the preserved run was not read" in dict(out)[site.run_page(rid)]


def test_a_retracted_run_says_so():
    state = committed_state()
    rid, retraction = next(iter(state.retracted.items()))
    page = site.run_html(state, state.runs[rid], RunEvidence(problem="x")).decode()
    assert "Retracted" in page and f"seq {retraction.seq}" in page
    assert 'class="verdict verdict-retracted"' in page


def test_task_and_model_page_names_are_safe_and_distinct():
    names = ["vendor:a/b", "vendor_a_b", "../etc", ".hidden", "plain-task_1.v2"]
    pages = [site.model_page(n) for n in names]
    assert len(set(pages)) == len(pages)
    assert site.task_page("plain-task_1.v2") == "tasks/plain-task_1.v2.html"
    for p in pages:
        stem = p.removeprefix("models/").removesuffix(".html")
        assert re.fullmatch(r"[A-Za-z0-9_-][A-Za-z0-9._-]*", stem), p


def test_frontier_keeps_single_runs_off_the_line_and_ticks_distinct():
    pts = [svg.Point(number=1, label="a", cost_usd=0.01, rate=1.0, low=0.2, high=1.0, single=True),
           svg.Point(number=2, label="b", cost_usd=0.02, rate=0.5, low=0.3, high=0.7),
           svg.Point(number=3, label="c", cost_usd=0.03, rate=0.4, low=0.3, high=0.6),
           svg.Point(number=4, label="d", cost_usd=0.04, rate=0.9, low=0.7, high=1.0)]
    assert [p.number for p in svg.frontier_points(pts)] == [2, 4]
    text = svg.scatter(pts, "t")
    ticks = re.findall(r'class="tick" text-anchor="(?:start|middle|end)">(\$[0-9.]+)<', text)
    assert len(ticks) == 5 and len(set(ticks)) == 5, ticks


def test_labels_at_one_point_are_placed_apart():
    anchors = [(100.0, 100.0, str(n)) for n in range(1, 31)]
    spots = svg.place_labels(anchors, (0.0, 0.0, 300.0, 200.0), [])
    boxes = [svg._text_box(x, y, t) for (x, y), (_, _, t) in zip(spots, anchors, strict=True)]
    for i, a in enumerate(boxes):
        assert a[0] >= 0 and a[2] <= 300 and a[1] >= 0 and a[3] <= 200
        assert not any(svg._overlaps(a, b) for b in boxes[i + 1:])


def test_heatmap_colours_are_viridis_and_monotone_in_lightness():
    colours = [svg.fill(k / 10)[0] for k in range(11)]
    assert colours[0] == "#440154" and colours[-1] == "#fde725"

    def lightness(c: str) -> float:
        r, g, b = (int(c[i:i + 2], 16) for i in (1, 3, 5))
        return 0.2126 * r + 0.7152 * g + 0.0722 * b

    assert all(lightness(a) < lightness(b) for a, b in itertools.pairwise(colours))


def test_every_link_of_the_site_names_a_page_it_renders():
    """Task and model pages are linked from the index, the runs tables and the run pages; every
    relative link resolves to a rendered page, and nothing links outside the site."""
    import html
    import posixpath

    from tests.site_helpers import crowd_state

    for state in (committed_state(), crowd_state()):
        pages = dict(site.render(state, {}))
        linked = set()
        for rel, data in pages.items():
            for href in re.findall(r'href="([^"]+)"', data.decode()):
                target = posixpath.normpath(posixpath.join(posixpath.dirname(rel), html.unescape(href)))
                assert target in pages, f"{rel} links {href}"
                linked.add(target)
        assert {p for p in pages if p.startswith(("tasks/", "models/"))} <= linked


def test_run_judge_and_rescore_rewrite_the_whole_site_unless_they_made_it_at_a_head_the_ledger_still_holds(tmp_path):
    """`regenerate_after` rewrites only the pages of the runs named since it made the site, and only
    while the ledger still holds that head: a ledger put back and grown again to the same length
    by other events kept stale pages for good (a reviewer's reproduction), as did a site-head read
    off the front page, which prints the ledger's name before it."""
    from cbledger.ledger.events import RunRetracted, RunRetractedEvent
    from cbledger.ledger.store import LedgerStore
    from cbledger.projections.writers import load_state
    from cbledger.reproduce import regenerate
    from cbledger.workspace import Workspace
    from tests import factories

    ws = Workspace.at(factories.rich_project(tmp_path))
    ws.site.mkdir(parents=True)
    (ws.site / site.INDEX).write_text("made")
    state = load_state(ws.ledger)
    assert regenerate.site_runs_due(ws, state) is None  # never made by a command: every page
    regenerate._site_made(ws, state)
    assert regenerate.site_runs_due(ws, state) == set()  # nothing since: the aggregate pages only
    kept = ws.ledger.read_bytes()
    first, second = sorted(state.runs)[:2]

    def retract(run_id: str) -> None:
        LedgerStore(ws.ledger).append([RunRetractedEvent(
            id=f"run.retracted:{run_id}:again", at=factories.at(900), actor=factories.MAINTAINER,
            body=RunRetracted(run_id=run_id, reason="a test"),
        )])

    retract(first)
    assert regenerate.site_runs_due(ws, load_state(ws.ledger)) == site.with_attempts(state, {first})
    regenerate._site_made(ws, load_state(ws.ledger))  # as the command that appended it marks it
    ws.ledger.write_bytes(kept)  # put back, and grown again by another event at the same seq
    retract(second)
    assert regenerate.site_runs_due(ws, load_state(ws.ledger)) is None
    ws.ledger.write_bytes(kept)
    LedgerStore(ws.ledger).append([msgspec.structs.replace(factories.suite_bumped(9), seq=0)])
    assert regenerate.site_runs_due(ws, load_state(ws.ledger)) is None  # a suite bump since
    ws.ledger.write_bytes(kept)
    (ws.site / site.INDEX).unlink()
    assert regenerate.site_runs_due(ws, load_state(ws.ledger)) is None  # a site removed
