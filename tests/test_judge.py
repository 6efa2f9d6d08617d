"""`cbledger judge`: rubric files, the judge's answer, the route, and a scripted judge end to end.

The judge provider here is the project's own loopback endpoint serving a scripted judge session
(`cbledger.runner.endpoint`): the same OpenAI-compatible wire a real judge model answers on, with
no model, no key and no network.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from cbledger.errors import UserError
from cbledger.ledger.events import RubricScoredEvent
from cbledger.ledger.store import LedgerStore
from cbledger.runner import ledger_view
from cbledger.runner.judge import client
from cbledger.runner.judge.judge import read_answer
from cbledger.tasks import rubric
from tests.factories import run_cli

REPO = Path(__file__).resolve().parent.parent
SOLVE = "20261201T205440Z-compat-scripted-solve-led-resistor-swap-r1-0edfec"
IDLE = "20261201T205541Z-compat-scripted-idle-led-resistor-swap-r1-e672a9"
RUBRIC = """# Rubric

Judge the edit as a reviewer of the schematic would.

- `explains-choice` (3 points): the change says why the new value was chosen
- `tidy-edit` (2 points): nothing but the resistor and its documentation changed
"""


def _rubric(tmp_path: Path, text: str = RUBRIC) -> rubric.Rubric:
    (tmp_path / "rubric.md").write_text(text)
    found = rubric.load(tmp_path, None)
    assert found is not None
    return found


def test_a_rubric_is_read_into_criteria_and_its_context_kept(tmp_path):
    r = _rubric(tmp_path)
    assert [(c.id, c.max_points) for c in r.criteria] == [("explains-choice", 3), ("tidy-edit", 2)]
    assert "reviewer of the schematic" in r.text
    assert rubric.load(tmp_path / "nothing-here", None) is None


@pytest.mark.parametrize("line, says", [
    ("- `tidy` (two points): words", "rubric.md:3: a criterion reads"),
    ("- `tidy` (0 points): words", "has 0 points"),
    ("- `a` (1 point): x\n- `a` (2 points): y", "given twice"),
])
def test_a_malformed_rubric_is_refused_naming_the_file_and_line(tmp_path, line, says):
    with pytest.raises(UserError, match=says):
        _rubric(tmp_path, f"# R\n\n{line}\n")


def test_a_rubric_without_criteria_is_refused(tmp_path):
    with pytest.raises(UserError, match="no criterion"):
        _rubric(tmp_path, "# just prose\n")


def test_the_answer_is_read_in_rubric_order_and_a_bad_one_refused(tmp_path):
    r = _rubric(tmp_path)
    scores, why = read_answer('```json\n{"criteria": {"tidy-edit": 2, "explains-choice": 1}, "rationale": "ok"}\n```', r)
    assert [(s.id, s.points, s.max_points) for s in scores] == [("explains-choice", 1, 3), ("tidy-edit", 2, 2)]
    assert why == "ok"
    for answer, says in (
        ('{"criteria": {"tidy-edit": 2}}', "left criterion 'explains-choice' out of its answer"),
        ('{"criteria": {"tidy-edit": 2, "explains-choice": 4}}', "0 to 3"),
        ('{"criteria": {"tidy-edit": 2, "explains-choice": 1, "style": 1}}', "does not have: style"),
        ('{"criteria": {"tidy-edit": true, "explains-choice": 1}}', "whole number"),
        ("I think it is fine", "not one JSON object"),
    ):
        with pytest.raises(UserError, match=says):
            read_answer(answer, r)


def test_the_judge_route_follows_the_runners_key_rules():
    loop = client.route("compat:judge", {"COPPERHEAD_BASE_URL": "http://127.0.0.1:9/v1"})
    assert (loop.base_url, loop.wire_model, loop.key) == ("http://127.0.0.1:9/v1", "judge", None)
    with pytest.raises(UserError, match="COPPERHEAD_API_KEY_ENV"):
        client.route("compat:judge", {"COPPERHEAD_BASE_URL": "https://judge.example/v1", "OPENAI_API_KEY": "k"})
    remote = client.route("compat:judge", {
        "COPPERHEAD_BASE_URL": "https://judge.example/v1", "COPPERHEAD_API_KEY_ENV": "JUDGE_KEY", "JUDGE_KEY": "s3",
    })
    assert remote.key == "s3"
    with pytest.raises(UserError, match="OPENAI_API_KEY"):
        client.route("gpt-judge", {})
    with pytest.raises(UserError, match="only OpenAI-compatible"):
        client.route("claude-judge", {"ANTHROPIC_API_KEY": "k"})


@pytest.fixture
def project(tmp_path):
    """A copy of the project with the committed ledger and its preserved runs, and a rubric for
    led-resistor-swap (the bundled tasks carry none: adding one is a suite change)."""
    root = tmp_path / "project"
    root.mkdir()
    for name in ("pyproject.toml",):
        shutil.copy(REPO / name, root / name)
    for name in ("tasks", "fixtures", "suites", "sessions"):
        shutil.copytree(REPO / name, root / name)
    (root / "results").mkdir()
    for name in ("ledger", "runs", "suites", "checkpoints"):
        shutil.copytree(REPO / "results" / name, root / "results" / name)
    (root / "tasks" / "led-resistor-swap" / "rubric.md").write_text(RUBRIC)
    bump = run_cli(["suite", "bump", "--reason", "a rubric for led-resistor-swap", "--skip-trial", "--root", root])
    assert bump.exit_code == 0, bump.stderr  # a rubric is part of the suite
    return root


def _session(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "judge.json"
    path.write_text(json.dumps({
        "format": "cbledger-session/1", "name": "fair", "model": "judge-echo-7",
        "exchanges": [{"turn": {"text": text, "usage": {"in": 1200, "out": 40}}}],
    }))
    return path


def _price_table(tmp_path: Path) -> Path:
    path = tmp_path / "prices.json"
    path.write_text(json.dumps({
        "tableVersion": "judge-test", "effectiveDate": "2026-12-01",
        "models": {"compat:judge-fair": {"segment": "api-cheap", "pinning": "strong", "input": "1.50", "output": "10"}},
    }))
    return path


def test_a_scripted_judge_scores_selected_runs_and_records_its_lane(project, tmp_path):
    run_cli(["pricing", "publish", str(_price_table(tmp_path)), "--root", str(project)])
    answer = '{"criteria": {"explains-choice": 2, "tidy-edit": 2}, "rationale": "narrow and right"}'
    out = run_cli([
        "judge", "--select", f"runs={SOLVE},{IDLE}", "--session", str(_session(tmp_path, answer)),
        "--root", str(project), "--json",
    ])
    result = json.loads(out.stdout)
    assert sorted(s["runId"] for s in result["scored"]) == sorted([SOLVE, IDLE]) and not result["failed"]
    events = [s.event for s in LedgerStore(project / "results/ledger/events.jsonl").read(types={"rubric.scored"})]
    assert len(events) == 2 and all(isinstance(e, RubricScoredEvent) for e in events)
    body = events[0].body
    assert body.judge_model == "compat:judge-fair" and body.score == pytest.approx(0.8)
    assert [(c.id, c.points, c.max_points) for c in body.criteria] == [("explains-choice", 2, 3), ("tidy-edit", 2, 2)]
    assert body.usage.lane == "harness-judge" and (body.usage.tokens_in, body.usage.tokens_out) == (1200, 40)
    assert body.usage.cost.usd_micros == 1200 * 1.5 + 40 * 10 and body.usage.cost.price_table_version == "judge-test"
    assert body.usage.provider_models == ["judge-echo-7"]
    assert len(body.prompt_sha256) == 64 and events[0].body.prompt_sha256 != events[1].body.prompt_sha256
    # the runs are of suite 1.3.0; the rubric was recorded by the bump after it
    # another version's board replaces the published one only where asked (--out)
    refused = run_cli(["project", "leaderboard", "--suite", "1.3.0", "--root", str(project)])
    assert refused.exit_code == 2 and "another version's tables" in refused.stderr and "give --out FILE" in refused.stderr
    assert run_cli(["project", "leaderboard", "--suite", "1.3.0", "--out", project / "LEADERBOARD-1.3.0.md",
                    "--root", str(project)]).exit_code == 0
    board = (project / "LEADERBOARD-1.3.0.md").read_text()
    judged = board[board.index("## Model-judged"):board.index("## Suite versions")]
    assert "explains-choice 2/3; tidy-edit 2/2" in judged and "$0.0022" in judged  # one call of 2200 micro-USD a row


def test_a_run_whose_task_has_no_rubric_is_skipped_and_a_bad_answer_records_nothing(project, tmp_path):
    other = "20261201T205635Z-compat-scripted-refuse-blind-led-resistor-swap-r1-66c420"
    unjudged = "20261129T225946Z-harness-gold-mcu-add-decoupling-cap-r1-1c390d"  # a task no suite gave a rubric
    out = run_cli(["judge", "--select", f"runs={unjudged}", "--session", str(_session(tmp_path, "{}")),
                   "--root", str(project), "--json"])
    assert json.loads(out.stdout)["skipped"] == [{"runId": unjudged, "reason": "task mcu-add-decoupling-cap has no rubric"}]
    # a rubric the suite kept, deleted since: not "no rubric", which would read as a task never judged
    before = (project / "results/ledger/events.jsonl").read_bytes()
    (project / "tasks" / "led-resistor-swap" / "rubric.md").unlink()
    out = run_cli(["judge", "--select", f"runs={other}", "--session", str(_session(tmp_path, "{}")),
                   "--root", str(project), "--json"])
    [failed] = json.loads(out.stdout)["failed"]
    assert out.exit_code == 1 and "rubric.md: removed, but suite" in failed["error"] and "kept it" in failed["error"]
    assert (project / "results/ledger/events.jsonl").read_bytes() == before
    (project / "tasks" / "led-resistor-swap" / "rubric.md").write_text(RUBRIC)
    out = run_cli(["judge", "--select", f"runs={other}", "--session", str(_session(tmp_path, '{"criteria": {}}')),
                   "--root", str(project), "--json"])
    assert out.exit_code == 1 and "explains-choice" in json.loads(out.stdout)["failed"][0]["error"]
    assert (project / "results/ledger/events.jsonl").read_bytes() == before


def test_judge_is_off_unless_a_selection_is_named(project):
    out = run_cli(["judge", "--select", "", "--model", "compat:x", "--root", str(project)])
    assert out.exit_code == 2 and "names no run" in out.stderr


@pytest.mark.parametrize("select, says", [
    ("runs=nope", "runs=nope: no such run in results/ledger/events.jsonl"),
    (f"runs={SOLVE},{SOLVE[:-1]}", f"runs={SOLVE[:-1]}: no such run in results/ledger/events.jsonl (did you mean '{SOLVE}'"),
    ("batch=nope", "no run in results/ledger/events.jsonl is selected; nothing judged"),
    ("since=2030-01-01", "is selected; nothing judged"),
])
def test_a_selection_that_holds_no_run_or_names_an_unknown_one_is_refused(project, tmp_path, select, says):
    """`judge` once printed "judged 0" and exited 0 for a mistyped id, and judged the runs of a
    list beside it without a word."""
    before = (project / "results/ledger/events.jsonl").read_bytes()
    out = run_cli(["judge", "--select", select, "--session", str(_session(tmp_path, "{}")), "--root", str(project)])
    assert out.exit_code == 2 and says in out.stderr, out.output
    assert (project / "results/ledger/events.jsonl").read_bytes() == before


def test_judge_outside_a_project_is_refused_and_a_skip_says_why(project, tmp_path, monkeypatch):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    out = run_cli(["--results", project / "results", "judge", "--select", "all", "--session", str(_session(tmp_path, "{}"))])
    assert out.exit_code == 2 and "judge reads each task's rubric" in out.stderr, out.output
    assert f"no cbledger project at or above {elsewhere}" in out.stderr
    monkeypatch.chdir(project)
    other = "20261201T205643Z-compat-scripted-refuse-blind-mcu-add-decoupling-cap-r1-298f17"
    out = run_cli(["judge", "--select", f"runs={other}", "--session", str(_session(tmp_path, "{}"))])
    assert out.exit_code == 0 and f"{other}: skipped (task mcu-add-decoupling-cap has no rubric)" in out.stdout, out.output


def test_a_malformed_rubric_is_bad_input_refused_before_any_run_is_judged(project, tmp_path):
    """It once failed each run of the task in turn (exit 1), after judging the runs before them."""
    (project / "tasks" / "led-resistor-swap" / "rubric.md").write_text("# R\n\n- `tidy` (0 points): words\n")
    before = (project / "results/ledger/events.jsonl").read_bytes()
    out = run_cli(["judge", "--select", f"runs={SOLVE},{IDLE}", "--session", str(_session(tmp_path, "{}")), "--root", str(project)])
    assert out.exit_code == 2 and "rubric.md:3: criterion 'tidy' has 0 points" in out.stderr, out.output
    assert (project / "results/ledger/events.jsonl").read_bytes() == before


def test_judge_regenerates_the_site_with_the_other_outputs(project, tmp_path, monkeypatch):
    """`judge` once regenerated every output but the site: a committed site then failed
    `replay --verify` ("projections differ"): with none before it, the site it leaves is whole."""
    assert not (project / "results" / "site").exists()
    answer = '{"criteria": {"explains-choice": 2, "tidy-edit": 2}, "rationale": "narrow and right"}'
    out = run_cli(["judge", "--select", f"runs={SOLVE}", "--session", str(_session(tmp_path, answer)), "--root", str(project)])
    assert out.exit_code == 0, out.output
    check = run_cli(["project", "site", "--check", "--root", str(project)])
    assert check.exit_code == 0 and check.stdout.endswith("site/: up to date\n"), check.output
    # with the site in place, a command reads again only the runs its events name: each `run`,
    # `judge` and `rescore` once restored every run of the ledger for the site's evidence (the
    # session's evidence cache would answer for the scored run too: counted without it)
    from cbledger.reproduce import evidence_cache, site_evidence

    monkeypatch.delenv(evidence_cache.CACHE_ENV, raising=False)

    restored: list[str] = []
    real = site_evidence.restore_run

    def counting(workspace, catalog, run, seq, into):
        restored.append(run.run_id)
        return real(workspace, catalog, run, seq, into)

    site_evidence.restore_run = counting
    try:
        again = '{"criteria": {"explains-choice": 1, "tidy-edit": 2}, "rationale": "a second look"}'
        out = run_cli(["judge", "--select", f"runs={SOLVE}", "--again", "--session", str(_session(tmp_path, again)),
                       "--root", str(project)])
    finally:
        site_evidence.restore_run = real
    assert out.exit_code == 0, out.output
    assert restored == [SOLVE], out.output
    # and what it wrote is what a whole regeneration writes for the pages the score changes (the
    # end-to-end tests of the modes verify every page after runs regenerated so, one by one)
    from cbledger.projections.site import render as site
    from cbledger.projections.writers import load_state
    from cbledger.workspace import Workspace

    workspace = Workspace.at(project)
    state = load_state(workspace.ledger)
    expected = site.render(state, site_evidence.gather(workspace, state, [SOLVE]), [SOLVE])
    assert site.run_page(SOLVE) in dict(expected)
    assert [rel for rel, data in expected if (workspace.site / rel).read_bytes() != data] == []


@pytest.mark.parametrize("how", ["edited", "added-after-the-bump"])
def test_a_rubric_the_suite_did_not_keep_is_refused_and_nothing_is_recorded(project, tmp_path, how):
    """`judge` once accepted a rubric in no kept suite definition."""
    run = SOLVE
    if how == "edited":
        path = project / "tasks" / "led-resistor-swap" / "rubric.md"
        path.write_text(RUBRIC.replace("(3 points)", "(30 points)"))
    else:
        (project / "tasks" / "mcu-add-decoupling-cap" / "rubric.md").write_text(RUBRIC)
        run = "20261129T225946Z-harness-gold-mcu-add-decoupling-cap-r1-1c390d"
    before = (project / "results/ledger/events.jsonl").read_bytes()
    out = run_cli(["judge", "--select", f"runs={run}", "--session", str(_session(tmp_path, "{}")),
                   "--root", str(project), "--json"])
    [failed] = json.loads(out.stdout)["failed"]
    current = ledger_view.read(project / "results/ledger/events.jsonl").suite
    assert current is not None and current.previous is not None  # the version the fixture's bump recorded
    assert out.exit_code == 1 and f"not the rubric suite {current.suite_version} kept" in failed["error"], out.output
    assert ("changed" if how == "edited" else "not in its definitions") in failed["error"]
    assert (project / "results/ledger/events.jsonl").read_bytes() == before


def test_replay_names_a_rubric_score_whose_criteria_are_not_the_kept_rubric(project):
    from cbledger.ledger.events import Actor, CriterionScore, RubricScored, make_event
    from cbledger.projections.writers import load_state
    from cbledger.reproduce.rubrics import rubric_findings
    from cbledger.tasks.catalog import Catalog

    ledger = project / "results/ledger/events.jsonl"
    kept = [CriterionScore(id="explains-choice", points=2, max_points=3), CriterionScore(id="tidy-edit", points=1, max_points=2)]
    invented = [CriterionScore(id="explains-choice", points=20, max_points=30)]
    for n, criteria in enumerate((kept, invented), 1):
        body = RubricScored(run_id=SOLVE, suite_version="1.4.0", judge_model="compat:judge-x", prompt_sha256="ab" * 32,
                            score=sum(c.points for c in criteria) / sum(c.max_points for c in criteria), criteria=criteria)
        LedgerStore(ledger).append([make_event(body, id=f"rubric:{SOLVE}:{n}", actor=Actor(kind="maintainer", name="t"))])
    state = load_state(ledger)
    [finding] = rubric_findings(state, {"1.4.0": Catalog(project)})
    assert finding.kind == "rubric-not-kept" and finding.run_id == SOLVE and "('explains-choice', 30)" in finding.message
    assert finding.seq == state.rubric[SOLVE][1].seq
    (project / "tasks" / "led-resistor-swap" / "rubric.md").unlink()  # a task whose kept definitions hold none
    assert len(rubric_findings(state, {"1.4.0": Catalog(project)})) == 2


@pytest.mark.parametrize("where", ["in-the-second-call", "right-after-the-first-append"])
def test_an_interrupted_judge_says_what_it_recorded_and_what_is_next(project, tmp_path, monkeypatch, where):
    """Ctrl-C mid-batch printed only `error: interrupted`: one score was already appended and the
    outputs left behind it, so `replay --verify` failed until `project all`, and nothing said so.
    An interrupt landing just after an append must still name that score."""
    from cbledger.runner.judge import judge as judge_mod

    chat, append, calls = judge_mod.client.chat, LedgerStore.append, []

    def interrupted_on_the_second(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return chat(*args, **kwargs)

    def interrupted_after(self, events, *args, **kwargs):
        append(self, events, *args, **kwargs)
        raise KeyboardInterrupt

    if where == "in-the-second-call":
        monkeypatch.setattr(judge_mod.client, "chat", interrupted_on_the_second)
    else:
        monkeypatch.setattr(LedgerStore, "append", interrupted_after)
    answer = '{"criteria": {"explains-choice": 2, "tidy-edit": 2}, "rationale": "ok"}'
    out = run_cli(["judge", "--select", f"runs={SOLVE},{IDLE}", "--session", str(_session(tmp_path, answer)),
                   "--root", str(project)])
    assert out.exit_code == 130, out.output
    events = list(LedgerStore(project / "results/ledger/events.jsonl").read(types={"rubric.scored"}))
    assert len(events) == 1 and events[0].event.body.run_id in out.stderr
    assert "1 score(s) recorded before it" in out.stderr and "project all" in out.stderr
    assert "the same command judges the rest" in out.stderr
    # the same command pays only for the run it had not reached: the first score is the one that counts
    monkeypatch.undo()
    scored = events[0].event.body.run_id
    again = run_cli(["judge", "--select", f"runs={SOLVE},{IDLE}", "--session", str(_session(tmp_path, answer)),
                     "--root", str(project)])
    assert again.exit_code == 0, again.output
    assert f"{scored}: skipped (already scored (the first score counts; --again scores it again))" in again.stdout
    events = list(LedgerStore(project / "results/ledger/events.jsonl").read(types={"rubric.scored"}))
    assert sorted(e.event.body.run_id for e in events) == sorted([SOLVE, IDLE])
    # asked for, a run is scored again: kept, and not the one that counts
    more = run_cli(["judge", "--select", f"runs={scored}", "--again", "--session", str(_session(tmp_path, answer)),
                    "--root", str(project), "--no-project"])
    assert more.exit_code == 0 and f"{scored}: 0.80 (model-judged)" in more.stdout, more.output
    ids = [e.id for e in LedgerStore(project / "results/ledger/events.jsonl").read(types={"rubric.scored"})]
    assert ids.count(f"rubric:{scored}:1") == 1 and ids.count(f"rubric:{scored}:2") == 1
