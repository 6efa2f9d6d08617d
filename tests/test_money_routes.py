"""Money and provenance through the real harness: copperhead 0.9.0 on its compat, OpenAI and
Anthropic routes, each pointed at a loopback server that answers like a provider (usage, a dated
model id) with a fake key of the right shape — no network, no real key.

Covered: the project's own scripted endpoint under a plain `--model compat:X` is recorded as
scripted; a missing or refused key stops the plan before any run; a run stopped at
`--max-cost-usd` records its cap and its spend; a campaign stops starting runs at `--budget-usd`;
a back-dated price table is refused; `rerun` reproduces OpenAI- and Anthropic-route runs from
their cassettes, offline; `show` names the table and rates, `--dry-run` estimates a range,
`doctor` reports the key and the table.
"""

from __future__ import annotations

import datetime as _dt
import json
from pathlib import Path

import msgspec
import pytest

from cbledger.runner import cassette as cassette_mod
from cbledger.runner.endpoint import script
from cbledger.runner.endpoint.server import Endpoint
from tests.fake_provider import ANTHROPIC_KEY, NAMED, FakeProvider
from tests.test_real_harness import KEYS, build

pytestmark = [pytest.mark.slow, pytest.mark.kicad, pytest.mark.shared, pytest.mark.copperhead]

TASK = "led-resistor-swap"
#: USD per million tokens: 1,000 in and 100 out cost 1,000 + 1,000 micro-dollars
PRICES = {"segment": "api-frontier", "pinning": "strong", "input": "1.00", "output": "10.00"}
BASE_KEYS = (*KEYS, "OPENAI_BASE_URL", "ANTHROPIC_BASE_URL")


@pytest.fixture
def no_keys(monkeypatch):
    for name in BASE_KEYS:
        monkeypatch.delenv(name, raising=False)


def priced(tmp_path: Path, shared_real: Path, copperhead_cli: Path):
    project = build(tmp_path, shared_real, copperhead_cli)
    publish(project, tmp_path, "test-2026", "2026-01-01", {"gpt-test": PRICES, "claude-test": PRICES})
    return project


def publish(project, tmp_path: Path, version: str, effective: str, models: dict):
    path = tmp_path / f"{version}.json"
    path.write_text(json.dumps({"tableVersion": version, "effectiveDate": effective, "models": models}))
    return project.cli("pricing", "publish", path)


def runs_of(project, model: str) -> list:
    return [r for r in project.events("run.recorded") if r.model.id == model]


def test_the_scripted_endpoint_under_a_plain_compat_model_is_recorded_as_scripted(
    tmp_path, shared_real, kicad_cli, copperhead_cli, no_keys
):
    project = build(tmp_path, shared_real, copperhead_cli)
    idle = script.load(project.root / "sessions" / "idle.json")
    with Endpoint() as endpoint:
        endpoint.serve("", idle)  # what `cbledger endpoint serve` does
        result = project.run(TASK, "--model", "compat:qwen-local", "--segment", "open-weight-hosted", "--repeats", "1",
                             env={"COPPERHEAD_BASE_URL": endpoint.base_url()})
    assert result.exit_code == 0, result.output
    (run,) = runs_of(project, "compat:qwen-local")
    assert run.run_mode == "scripted" and run.model.provider == "scripted-endpoint" and run.model.segment == "harness"
    assert run.cost.usd_micros is None and run.provider_models == []
    assert "answered by the project's scripted endpoint" in run.runner_note
    board = (project.root / "LEADERBOARD.md").read_text()
    before, scripted = board.split("Real harness, scripted model", 1)
    assert "compat:qwen-local" not in before and "compat:qwen-local" in scripted  # never a model row
    assert "**No real model has been evaluated in this ledger yet.**" in before
    assert "no run of a real model: no run had a provider key in reach" in before
    assert "No real model has been evaluated in this ledger yet." in (project.root / "results" / "site" / "index.html").read_text()
    # under a money limit too, the endpoint's answers cost nothing: once metered, the run was
    # priced (and could be stopped) though it is recorded as scripted
    publish(project, tmp_path, "local-2026", "2026-01-01", {"compat:paid-local": PRICES})
    with Endpoint() as endpoint:  # a session whose answers report their tokens
        endpoint.serve("", script.load(project.root / "tasks" / TASK / "sessions" / "solve.json"))
        limited = project.run(TASK, "--model", "compat:paid-local", "--repeats", "1", "--max-cost-usd", "0.000001",
                              env={"COPPERHEAD_BASE_URL": endpoint.base_url()})
    assert limited.exit_code == 0, limited.output
    (run,) = runs_of(project, "compat:paid-local")
    assert run.run_mode == "scripted" and run.cost.usd_micros is None and not run.cost_cap
    project.verify()


def test_an_openai_route_run_names_its_model_is_priced_and_reruns_from_its_cassette(
    tmp_path, shared_real, kicad_cli, copperhead_cli, no_keys
):
    project = priced(tmp_path, shared_real, copperhead_cli)
    with FakeProvider() as provider:
        env = provider.env()
        result = project.run(TASK, "--model", "gpt-test", "--repeats", "1", env=env)
        assert result.exit_code == 0, result.output
        assert provider.probes == ["/v1/models"]  # the preflight's one request, no tokens
        doctor = project.cli("doctor", "--model", "gpt-test", "--json", env=env)
    (run,) = runs_of(project, "gpt-test")
    assert run.run_mode == "agent" and run.provider_models == [NAMED["openai"]]
    assert run.stats.tokens_in == 1000 and run.stats.tokens_out == 100
    assert run.cost.usd_micros == 2000 and run.cost.price_table_version == "test-2026"
    tape = cassette_mod.load(project.root / run.cassette.path, expect=run.cassette.blake3)
    assert tape.route == "openai" and [e.model for e in tape.exchanges] == [NAMED["openai"]]

    board = (project.root / "LEADERBOARD.md").read_text()
    assert "No real model has been evaluated" not in board and "real-model runs: 1 with a key" in board
    assert f"| `gpt-test` | `{NAMED['openai']}` | 1 |" in board  # the model the provider named
    checks = json.loads(doctor.output)["checks"]
    assert checks["credential"]["ok"] and "OPENAI_API_KEY" in checks["credential"]["detail"]
    assert checks["price table"]["ok"] and "gpt-test: $1.00 in, $10.00 out" in checks["price table"]["detail"]

    shown = project.cli("show", run.run_id)
    assert "priced by  price table test-2026 (effective 2026-01-01): $1.00 in, $10.00 out per 1M tokens" in shown.output

    # the provider is gone: the rerun is served the cassette, offline
    rerun = project.cli("rerun", run.run_id, env={"COPPERHEAD_CLI": str(copperhead_cli)})
    assert rerun.exit_code == 0, rerun.output
    assert f"{run.run_id}  identical" in rerun.output

    # a table back-dated over the recorded run is refused, and nothing is appended
    before = project.ledger.read_bytes()
    refused = publish(project, tmp_path, "backdated", "2026-06-01", {"gpt-test": {**PRICES, "input": "2.00"}})
    assert refused.exit_code == 2 and "would re-price 1 recorded run(s)" in refused.output
    assert project.ledger.read_bytes() == before
    # a later one that amends only another model is taken; gpt-test keeps the price it inherits
    later = (_dt.datetime.now(_dt.UTC).date() + _dt.timedelta(days=30)).isoformat()
    assert publish(project, tmp_path, "later", later, {"acme-new": PRICES}).exit_code == 0
    assert publish(project, tmp_path, "amend", "2026-01-02", {"other-model": PRICES}).exit_code == 0

    plan = project.run(TASK, "--model", "gpt-test", "--repeats", "2", "--dry-run")
    assert plan.exit_code == 0, plan.output
    assert ("cost estimate for gpt-test under price table amend ($1.00 in, $10.00 out per 1M tokens): "
            "$0.0040 to $0.0040 (median $0.0040) for 2 run(s), from 1 past run(s) of the same tasks") in plan.output
    assert project.cli("project", "all").exit_code == 0  # the tables published since the run
    project.verify()


def test_an_anthropic_route_run_names_its_model_and_reruns_from_its_cassette(
    tmp_path, shared_real, kicad_cli, copperhead_cli, no_keys
):
    project = priced(tmp_path, shared_real, copperhead_cli)
    with FakeProvider() as provider:
        result = project.run(TASK, "--model", "claude-test", "--repeats", "1", env=provider.env())
        assert result.exit_code == 0, result.output
        assert provider.calls == [("anthropic", "/v1/messages")]
    (run,) = runs_of(project, "claude-test")
    assert run.provider_models == [NAMED["anthropic"]] and run.cost.usd_micros == 2000
    tape = cassette_mod.load(project.root / run.cassette.path, expect=run.cassette.blake3)
    assert tape.route == "anthropic"
    rerun = project.cli("rerun", run.run_id, env={"COPPERHEAD_CLI": str(copperhead_cli)})
    assert rerun.exit_code == 0, rerun.output
    assert f"{run.run_id}  identical" in rerun.output


def test_a_missing_or_refused_key_stops_the_plan_before_any_run(tmp_path, shared_real, kicad_cli, copperhead_cli, no_keys):
    project = priced(tmp_path, shared_real, copperhead_cli)
    before = project.ledger.read_bytes()
    with FakeProvider() as provider:
        env = provider.env()
        del env["ANTHROPIC_API_KEY"]
        missing = project.run(TASK, "--model", "claude-test", "--repeats", "1", env=env)
        assert missing.exit_code == 2
        assert "error: --model claude-test needs $ANTHROPIC_API_KEY, which is not set" in missing.output
        doctor = project.cli("doctor", "--model", "claude-test", env=env)
        assert doctor.exit_code == 1 and "FAIL  credential   --model claude-test needs $ANTHROPIC_API_KEY" in doctor.output

        wrong = project.run(TASK, "--model", "claude-test", "--repeats", "1",
                            env={**env, "ANTHROPIC_API_KEY": ANTHROPIC_KEY.replace("fake", "gone")})
        assert wrong.exit_code == 2 and "$ANTHROPIC_API_KEY was refused by" in wrong.output and "(HTTP 401)" in wrong.output
        malformed = project.run(TASK, "--model", "gpt-test", "--repeats", "1", env={**env, "OPENAI_API_KEY": "not-a-key"})
        assert malformed.exit_code == 2 and "$OPENAI_API_KEY is not shaped like an openai key" in malformed.output
        spaced = project.run(TASK, "--model", "gpt-test", "--repeats", "1", env={**env, "OPENAI_API_KEY": "sk-a b"})
        assert spaced.exit_code == 2 and "$OPENAI_API_KEY holds white space: not a key" in spaced.output
        no_cli = project.cli("run", TASK, "--model", "gpt-test", "--repeats", "1", "--agent", "copperhead",
                             "--copperhead-cli", str(tmp_path / "nope" / "cli.js"), env=env)
        assert no_cli.exit_code == 2 and "nope/cli.js does not exist" in no_cli.output, no_cli.output
        on_dask = project.cli("run", TASK, "--model", "gpt-test", "--repeats", "1", "--agent", "copperhead",
                              "--max-cost-usd", "1", "--executor", "dask", "--scheduler", "tcp://127.0.0.1:1", env=env)
        assert on_dask.exit_code == 2 and "run with --executor local" in on_dask.output, on_dask.output
        assert provider.calls == []
    assert project.ledger.read_bytes() == before
    # refused before the campaign's plan is kept: a corrected command is not "another plan"
    assert not list((project.root / "results").glob("campaigns/*.json"))
    assert not project.sandboxes.exists() or list(project.sandboxes.iterdir()) == []


def test_a_run_stopped_at_its_cost_cap_records_the_cap_and_its_spend(tmp_path, shared_real, kicad_cli, copperhead_cli, no_keys):
    project = priced(tmp_path, shared_real, copperhead_cli)
    # every call bills 100,000 tokens in: $0.10; the cap is reached after the third
    with FakeProvider("loop", tokens_in=100_000, tokens_out=0) as provider:
        result = project.run(TASK, "--model", "claude-test", "--repeats", "1", "--max-cost-usd", "0.25", env=provider.env())
        assert result.exit_code == 0, result.output
        assert len(provider.calls) == 3  # the fourth call was never sent
    (run,) = runs_of(project, "claude-test")
    assert msgspec.to_builtins(run.cost_cap) == {"capUsdMicros": 250_000, "spentUsdMicros": 300_000, "campaignBudgetUsdMicros": None}
    assert run.cost.usd_micros == 300_000 and run.stats.tokens_in == 300_000
    assert "stopped at the --max-cost-usd cap of $0.2500: spent $0.3000" in run.runner_note
    # said where a reader looks: the run's line and `show` (they once read as a plain failure)
    assert f"{run.run_id}  fail" in result.output and "; stopped by a money limit" in result.output
    shown = project.cli("show", run.run_id)
    assert "  stopped    by a money limit: " in shown.output and "$0.2500" in shown.output, shown.output
    tape = cassette_mod.load(project.root / run.cassette.path, expect=run.cassette.blake3)
    assert [e.status for e in tape.exchanges] == [200, 200, 200, 402]
    # the refusal is on the cassette: the stopped run re-executes the same way, offline
    rerun = project.cli("rerun", run.run_id, env={"COPPERHEAD_CLI": str(copperhead_cli)})
    assert rerun.exit_code == 0 and f"{run.run_id}  identical" in rerun.output, rerun.output
    project.verify()


def test_a_campaign_stops_starting_runs_at_its_budget(tmp_path, shared_real, kicad_cli, copperhead_cli, no_keys):
    project = priced(tmp_path, shared_real, copperhead_cli)
    with FakeProvider("loop", tokens_in=100_000, tokens_out=0) as provider:
        result = project.run(TASK, "--model", "gpt-test", "--repeats", "3", "--budget-usd", "0.15", env=provider.env())
        assert result.exit_code == 0, result.output
        assert len(provider.calls) == 2
    (run,) = runs_of(project, "gpt-test")
    assert run.cost_cap.campaign_budget_usd_micros == 150_000 and run.cost_cap.spent_usd_micros == 200_000
    for repeat in (2, 3):
        assert f"{TASK} slot {repeat}/3: not run: the campaign's --budget-usd $0.1500 was spent ($0.2000 so far)" in result.output
    # the same command again resumes the campaign, whose budget its first run spent: it once
    # started the open slots afresh and spent the budget a second time
    with FakeProvider("loop", tokens_in=100_000, tokens_out=0) as provider:
        again = project.run(TASK, "--model", "gpt-test", "--repeats", "3", "--budget-usd", "0.15", env=provider.env())
        assert again.exit_code == 0, again.output
        assert provider.calls == []
    assert f"{TASK} slot 2/3: not run: the campaign's --budget-usd $0.1500 was spent ($0.2000 so far)" in again.output
    # without the limit, the campaign's plan keeps it: a bare resume once ran the open slots unmetered
    with FakeProvider("loop", tokens_in=100_000, tokens_out=0) as provider:
        bare = project.run(TASK, "--model", "gpt-test", "--repeats", "3", env=provider.env())
        assert bare.exit_code == 0, bare.output
        assert provider.calls == []
    assert "under the money limits its plan keeps (--budget-usd 0.15)" in bare.output
    assert f"{TASK} slot 2/3: not run: the campaign's --budget-usd $0.1500 was spent ($0.2000 so far)" in bare.output
    assert len(runs_of(project, "gpt-test")) == 1
    project.verify()


def test_what_runs_killed_with_their_driver_spent_counts_against_the_budget(
    tmp_path, shared_real, kicad_cli, copperhead_cli, no_keys,
):
    """A run killed with its driver is never recorded, but the provider billed every call it
    answered: the resumed campaign once started with its whole budget again, and the printed
    resume command dropped the budget altogether."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from cbledger.runner import budget, campaign
    from cbledger.workspace import Workspace

    project = priced(tmp_path, shared_real, copperhead_cli)
    argv = [TASK, "--model", "gpt-test", "--repeats", "1", "--budget-usd", "1", "--campaign", "paid", "--no-key-check"]
    # every call bills 100,000 tokens in: $0.10, answered after 0.4 s
    with FakeProvider("loop", tokens_in=100_000, tokens_out=0, delay=0.4) as provider:
        driver = subprocess.Popen(
            [sys.executable, "-c", "from cbledger.cli.app import main; main()", "run", *argv, "--agent", "copperhead",
             "--copperhead-cli", str(copperhead_cli), "--sandbox-root", str(project.sandboxes), "--root", str(project.root)],
            env={**os.environ, **provider.env()}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )
        try:
            deadline = time.monotonic() + 120
            while len(provider.calls) < 3:
                assert driver.poll() is None and time.monotonic() < deadline, "no third model call"
                time.sleep(0.05)
            driver.send_signal(signal.SIGTERM)
            _, err = driver.communicate(timeout=60)
        finally:
            if driver.poll() is None:
                driver.kill()
                driver.wait()
    assert driver.returncode == 143, err
    assert runs_of(project, "gpt-test") == []  # killed: nothing recorded
    journal = campaign.spend_journal(Workspace.at(project.root), "paid")
    killed = budget.unrecorded_spend(journal, set())
    assert killed >= 200_000 and killed % 100_000 == 0, killed
    assert f"have spent ${killed / 1e6:.4f} on model calls the provider answered" in err
    assert "--resume paid --budget-usd 1 --no-key-check" in err  # the resume it prints keeps the limit
    # ... and records it: LEADERBOARD.md summed only recorded runs, short of the bill by the killed ones
    assert "recorded as spend.unrecorded" in err
    (spend,) = project.events("spend.unrecorded")
    assert (spend.campaign, spend.model, spend.usd_micros) == ("paid", "gpt-test", killed)
    # the same command resumes the campaign with what the killed run spent already spent
    with FakeProvider("loop", tokens_in=100_000, tokens_out=0) as provider:
        again = project.run(*argv, env=provider.env())
        assert again.exit_code == 0, again.output
        assert len(provider.calls) == (1_000_000 - killed) // 100_000
    # and says so: after a kill no interrupt message did (an OOM kill, a reboot)
    assert (f"campaign paid: runs of it killed with their driver spent ${killed / 1e6:.4f} on model calls the provider "
            "answered, which no run records (--budget-usd counts it)") in again.output
    (run,) = runs_of(project, "gpt-test")
    assert run.cost.usd_micros == 1_000_000 - killed
    assert len(project.events("spend.unrecorded")) == 1  # the resume recorded it again as the same event
    board = (project.root / "LEADERBOARD.md").read_text()
    listed = board.split("## Spend no run records: runs killed with their driver")[1].split("\n## ")[0]
    assert f"${killed / 1e6:.4f} in all, over 1 run(s)" in listed and f"| `{spend.run_id}` |" in listed
    assert "`gpt-test`" in listed
    project.verify()


def test_a_run_whose_provider_reported_absurd_usage_is_stopped_and_costs_what_was_metered(
    tmp_path, shared_real, kicad_cli, copperhead_cli, no_keys,
):
    """10^15 tokens a call: the meter once read it as nothing, and the run-end figures out of
    range were recorded as 0, so the run cost $0 and a later budget never counted it."""
    project = priced(tmp_path, shared_real, copperhead_cli)
    with FakeProvider("loop", tokens_in=10**15, tokens_out=0) as provider:
        result = project.run(TASK, "--model", "gpt-test", "--repeats", "1", "--max-cost-usd", "1", env=provider.env())
        assert result.exit_code == 0, result.output
        assert len(provider.calls) == 1  # stopped at the next call
    (run,) = runs_of(project, "gpt-test")
    assert run.cost_cap.spent_usd_micros > 1_000_000 and run.cost.usd_micros == run.cost_cap.spent_usd_micros
    project.verify()


def test_a_run_whose_run_end_tokens_cannot_be_read_costs_null_not_zero(
    tmp_path, shared_real, kicad_cli, copperhead_cli, no_keys,
):
    """With no money limit to meter it, a run whose run-end token figures are out of range has
    them recorded as 0, which priced at $0: a real figure in every cost per passing task. Its
    cost is unknown, and null says so."""
    project = priced(tmp_path, shared_real, copperhead_cli)
    with FakeProvider("finish", tokens_in=10**15, tokens_out=0) as provider:
        result = project.run(TASK, "--model", "gpt-test", "--repeats", "1", env=provider.env())
        assert result.exit_code == 0, result.output
    (run,) = runs_of(project, "gpt-test")
    assert run.stats.tokens_in == 0 and run.cost.usd_micros is None, (run.stats, run.cost)
    assert "cost unknown (null): run-end's token figures could not be read" in run.runner_note
    project.verify()


def test_answers_that_report_no_usage_are_said_at_once_and_noted_on_the_run(
    tmp_path, shared_real, kicad_cli, copperhead_cli, no_keys,
):
    """An answer without usage (an OpenAI stream asked without include_usage) was metered as
    nothing, silently: the limits the operator set counted none of that spend."""
    project = priced(tmp_path, shared_real, copperhead_cli)
    with FakeProvider("finish", usage=False) as provider:
        result = project.run(TASK, "--model", "gpt-test", "--repeats", "1", "--max-cost-usd", "1", env=provider.env())
        assert result.exit_code == 0, result.output
        assert provider.calls
    (run,) = runs_of(project, "gpt-test")
    warning = f"warning: run {run.run_id}: the provider answered without reporting token usage"
    assert result.output.count(warning) == 1, result.output
    assert f"{len(provider.calls)} answer(s) of the provider reported no token usage" in run.runner_note
    # run-end sums what was reported, which here is nothing: a billed run is no known $0
    assert run.cost.usd_micros is None, run.cost
    assert "cost unknown (null): " in run.runner_note
    project.verify()


def test_an_estimate_with_no_past_model_run_says_which_runs_do_not_count():
    from cbledger.runner.cost_estimate import Estimate

    line = Estimate("gpt-test", "t1", ("1.00", "10.00"), unestimated=["led-resistor-swap"]).line()
    assert "no past model run of these tasks to estimate from (runs of session scripts, gold and noop are not counted)" in line
    assert line.endswith("; not estimated (no past model run): led-resistor-swap")
    # nothing left to run is not "no past run" (a campaign's dry run once all its slots are in)
    assert Estimate("gpt-test", "t1", ("1.00", "10.00")).line().endswith("): $0.0000: no run is left to run")


def test_the_estimate_holds_each_run_to_the_cap_and_says_what_the_budget_left_pays_for():
    """The dry run's estimate ignored the money limits: it priced runs past the cap each would be
    stopped at, and said nothing of a budget the campaign (and its killed runs, in the journal)
    had mostly spent."""
    from types import SimpleNamespace

    from cbledger.ledger.events import Ablations
    from cbledger.runner.cost_estimate import for_plan
    from cbledger.runner.ledger_view import LedgerView
    from tests.factories import pricing_published, run_recorded

    runs = {r.run_id: r for r in (run_recorded(n).body for n in (1, 18, 35))}
    assert {r.task.id for r in runs.values()} == {"fix-net-1"}
    view = LedgerView(pricing=pricing_published().body, runs=runs)
    plan = SimpleNamespace(model_id="claude-sonnet-4.5", runs=[SimpleNamespace(task=SimpleNamespace(id="fix-net-1"))] * 4,
                           ablations=run_recorded(1).body.ablations)
    free = for_plan(plan, view)
    assert free.high > 4 * 100_000 and free.limits_line() is None
    est = for_plan(plan, view, cap=100_000, budget=250_000, spent=50_000, unrecorded=20_000)
    assert (est.low, est.median, est.high) == (400_000, 400_000, 400_000)
    assert est.left == 200_000 and est.within_budget() == 2
    line = est.limits_line()
    assert line is not None and "each run stops at the --max-cost-usd cap of $0.1000" in line, line
    assert "$0.0500 spent by the campaign so far, $0.0200 of it by killed runs no run records, $0.2000 left" in line, line
    assert "pays for about 2 of the 4 estimated run(s)" in line, line
    doc = est.as_json()
    assert (doc["budgetLeftUsdMicros"], doc["runsWithinBudgetAtMedian"], doc["unrecordedUsdMicros"]) == (200_000, 2, 20_000)
    # an ablation's runs spend a fraction of a default run's: each condition is estimated from its own
    two_turns = msgspec.structs.replace(runs[run_recorded(1).body.run_id], run_id="ablated", ablations=Ablations(max_turns=2),
                                        stats=msgspec.structs.replace(runs[run_recorded(1).body.run_id].stats, tokens_in=1, tokens_out=1))
    mixed = LedgerView(pricing=pricing_published().body, runs={**runs, "ablated": two_turns})
    assert for_plan(plan, mixed).low == free.low  # the default plan: the two-turn run is not counted
    ablated = for_plan(SimpleNamespace(model_id=plan.model_id, runs=plan.runs, ablations=Ablations(max_turns=2)), mixed)
    assert ablated.basis == 1 and ablated.high < free.low, (ablated.basis, ablated.high, free.low)
    # a tool subset is a set: the same one named in another order, twice over, is the same condition
    subset = msgspec.structs.replace(two_turns, ablations=Ablations(tool_subset=["read_file", "finish"]))
    asked = SimpleNamespace(model_id=plan.model_id, runs=plan.runs, ablations=Ablations(tool_subset=["finish", "read_file", "finish"]))
    assert for_plan(asked, LedgerView(pricing=pricing_published().body, runs={"subset": subset})).basis == 1
