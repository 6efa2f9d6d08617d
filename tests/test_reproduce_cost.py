"""The cost a run records is what its run-end tokens cost under the price table it names, both
held by the ledger: `replay --verify` prices every costed run again and names one that differs
(a hand-edited cost, re-chained, would otherwise change a published cost per passing task)."""

from __future__ import annotations

from pathlib import Path

import msgspec

from cbledger.ledger.events import Cost, CostCapStop
from cbledger.projections.writers import load_state
from cbledger.reproduce.figures import cost_findings
from tests.factories import new_ledger, pricing_published, run_recorded


def _priced(n: int, usd_micros: int | None = None, table: str = "2026-01", replay_of: str | None = None):
    event = run_recorded(n)
    body = event.body
    stats = body.stats
    assert stats is not None and body.model.id == "claude-sonnet-4.5"
    honest = stats.tokens_in * 3 + stats.tokens_out * 15  # the factory table: 3 and 15 micro-USD a token
    cost = Cost(usd_micros=honest if usd_micros is None else usd_micros, price_table_version=table)
    return msgspec.structs.replace(event, body=msgspec.structs.replace(body, cost=cost, replay_of=replay_of))


def _findings(tmp_path: Path, *runs) -> dict:
    store = new_ledger(tmp_path / "events.jsonl")
    store.append([pricing_published(1), *runs])
    return cost_findings(load_state(store))


def test_a_run_priced_as_the_runner_prices_it_passes(tmp_path):
    assert _findings(tmp_path, _priced(1), _priced(2)) == {}


def test_an_edited_cost_is_named_with_both_figures(tmp_path):
    honest = _priced(2).body.cost.usd_micros
    found = _findings(tmp_path, _priced(1), _priced(2, usd_micros=honest + 1))
    [(run_id, [f])] = found.items()
    assert run_id == _priced(2).body.run_id
    assert (f.kind, f.field, f.expected, f.actual) == ("cost-mismatch", "cost.usdMicros", honest + 1, honest)


def test_a_cost_under_a_price_table_the_ledger_never_held_is_named(tmp_path):
    [(_, [f])] = _findings(tmp_path, _priced(1, table="2031-01")).items()
    assert f.actual is None and "no pricing.published before it holds" in f.message


def test_a_replay_keeps_its_originals_cost_and_is_not_priced_again(tmp_path):
    assert _findings(tmp_path, _priced(1), _priced(2, usd_micros=7, replay_of=_priced(1).body.run_id)) == {}


def test_a_cost_naming_no_price_table_is_named_unless_a_money_limit_metered_it(tmp_path):
    """A figure with a null table (a scripted run's null cost edited to 250000, re-chained) was not
    priced at all, so `replay --verify` passed it and the leaderboard summed it."""
    [(run_id, [f])] = _findings(tmp_path, _priced(1), _priced(2, usd_micros=250_000, table=None)).items()
    assert run_id == _priced(2).body.run_id and (f.kind, f.expected, f.actual) == ("cost-mismatch", 250_000, None)
    assert "names no price table" in f.message
    # a run a money limit stopped before run-end costs what the proxy metered, kept with the cap
    stopped = _priced(3, usd_micros=4_200, table=None)
    body = stopped.body
    assert body.stats is not None
    stats = msgspec.structs.replace(body.stats, exit_path="cap-exceeded")
    cap = CostCapStop(cap_usd_micros=4_000, spent_usd_micros=4_200)
    stopped = msgspec.structs.replace(stopped, body=msgspec.structs.replace(body, stats=stats, cost_cap=cap))
    assert _findings(tmp_path / "capped", _priced(1), stopped) == {}
    # and no more than that: a metered figure edited is priced like any other
    cap = CostCapStop(cap_usd_micros=4_000, spent_usd_micros=4_100)
    edited = msgspec.structs.replace(stopped, body=msgspec.structs.replace(stopped.body, cost_cap=cap))
    [(_, [f])] = _findings(tmp_path / "edited", _priced(1), edited).items()
    assert f.kind == "cost-mismatch" and f.expected == 4_200


def test_a_backdated_table_published_before_the_run_is_part_of_the_table_the_run_names(tmp_path):
    """The runner prices under every table published so far, merged in effective-date order:
    one published after version V but effective before it still amends V's day. Verify must
    merge the same tables, not only those published before V was."""
    from cbledger.ledger.events import ModelPrice

    def table(version: str, month: int, models: dict):
        ev = pricing_published(1, id=f"pricing.published:{version}")
        body = msgspec.structs.replace(ev.body, table_version=version, effective_date=ev.body.effective_date.replace(month=month),
                                       models=models, null_cost_routes={})
        return msgspec.structs.replace(ev, body=body)

    def sonnet(i: str, o: str) -> dict:
        return {"claude-sonnet-4.5": ModelPrice(segment="api-frontier", pinning="weak", input=i, output=o)}

    run = run_recorded(1)
    assert run.body.timings.started_at.month >= 3 and run.body.stats is not None
    stats = run.body.stats
    early, latest = table("A", 1, sonnet("3", "15")), table("V", 3, {"gpt-5-mini": ModelPrice(
        segment="api-cheap", pinning="strong", input="1", output="1")})
    backdated = table("C", 2, sonnet("6", "30"))  # published after V, effective before it
    honest = stats.tokens_in * 6 + stats.tokens_out * 30
    priced = msgspec.structs.replace(run, body=msgspec.structs.replace(run.body, cost=Cost(usd_micros=honest, price_table_version="V")))
    store = new_ledger(tmp_path / "events.jsonl")
    store.append([early, latest, backdated, priced])
    assert cost_findings(load_state(store)) == {}
    # a table published after the run is none the runner could have read: the run's figure stands
    # against the tables before it, and the figure it would give is named
    store = new_ledger(tmp_path / "after.jsonl")
    store.append([early, latest, priced, backdated])
    [(_, [f])] = cost_findings(load_state(store)).items()
    assert (f.expected, f.actual) == (honest, stats.tokens_in * 3 + stats.tokens_out * 15)


def test_a_cost_recorded_under_the_earlier_merge_of_tables_still_verifies(tmp_path):
    """Before a later table's null-cost route replaced an earlier price, the price stood: a run
    the runner priced then, under the later table's version, is what that rule gives, and an old
    ledger holding one must still verify. Any other figure is still named."""
    from cbledger.ledger.events import NullCostRoute

    run = run_recorded(1)
    stats = run.body.stats
    assert stats is not None
    priced = pricing_published(1)
    route = msgspec.structs.replace(priced, id="pricing.published:routes", body=msgspec.structs.replace(
        priced.body, table_version="routes", effective_date=priced.body.effective_date.replace(day=2), models={},
        null_cost_routes={"claude-sonnet-4.5": NullCostRoute(segment="saved-login", pinning="weak", reason="login")}))
    earlier = stats.tokens_in * 3 + stats.tokens_out * 15

    def recorded(usd: int):
        return msgspec.structs.replace(run, body=msgspec.structs.replace(
            run.body, cost=Cost(usd_micros=usd, price_table_version="routes")))

    store = new_ledger(tmp_path / "events.jsonl")
    store.append([priced, route, recorded(earlier)])
    assert cost_findings(load_state(store)) == {}
    store = new_ledger(tmp_path / "other.jsonl")
    store.append([priced, route, recorded(earlier + 1)])
    [(_, [f])] = cost_findings(load_state(store)).items()
    assert f.expected == earlier + 1 and f.actual is None  # the route now: no price at all
