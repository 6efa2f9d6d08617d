"""The site's pages as bytes: escaping of what an agent wrote, determinism, every page present."""

from __future__ import annotations

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
    text = svg.scatter([svg.Point(label=HOSTILE, cost_usd=None, rate=0.5, low=0.2, high=0.8)], HOSTILE)
    text += svg.heatmap([HOSTILE], [HOSTILE], {(HOSTILE, HOSTILE): svg.Cell(passes=1, runs=2)}, HOSTILE)
    assert "<script" not in text and "<img" not in text
    assert "&lt;script&gt;" in text


def test_every_page_is_rendered_and_the_bytes_are_a_function_of_the_inputs():
    state = committed_state()
    evidence = {rid: RunEvidence(problem="not gathered in this test") for rid in state.runs}
    first = site.render(state, evidence)
    again = site.render(committed_state(), dict(evidence))
    assert first == again
    paths = [p for p, _ in first]
    assert paths[:4] == [site.INDEX, site.RUNS, site.REGRESSIONS, site.QUEUE]
    # a later feedback pass has a page, though no table lists it
    assert state.later_passes
    assert sorted(paths[4:]) == sorted(site.run_page(r) for r in (*state.runs, *state.later_passes))
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
    assert [p for p, _ in out][4:] == [site.run_page(rid)]
    assert b"the preserved run was not read" in dict(out)[site.run_page(rid)]


def test_a_retracted_run_says_so():
    state = committed_state()
    rid, retraction = next(iter(state.retracted.items()))
    page = site.run_html(state, state.runs[rid], RunEvidence(problem="x")).decode()
    assert "Retracted" in page and f"seq {retraction.seq}" in page
    assert 'class="verdict verdict-retracted"' in page


def test_the_command_the_regressions_page_shows_is_one_the_cli_takes():
    import html
    import re
    import shlex

    from tests.factories import run_cli
    from tests.site_helpers import REPO

    page = html.unescape(site.regressions_page(committed_state()).decode())
    [shown] = re.findall(r"<code>(cbledger project compare [^<]*)</code>", page)
    args = shlex.split(shown)[1:]
    assert args[:2] == ["project", "compare"]
    out = run_cli([*args, "--root", REPO])
    # the placeholders name no run set, which the command says in its own words; an option the
    # command does not have would be a usage error from the parser instead
    assert "No such option" not in out.stderr and "the baseline (copperhead=A) holds no agent run" in out.stdout, out.output
