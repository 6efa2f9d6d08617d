"""Price tables as the standard means them: the table in effect on a run's start day, tables
that amend some models and inherit the rest, a run naming the table it was priced by, a table
that would re-price recorded runs refused; and the usage a proxy meters a run's spend from."""

from __future__ import annotations

import datetime as _dt
import re

import msgspec
import pytest

from cbledger.errors import UserError
from cbledger.ledger.events import ModelPrice, PricingPublished
from cbledger.ledger.types import MAX_COUNT
from cbledger.runner import budget, pricing
from tests.factories import run_recorded

DAY = _dt.date(2026, 3, 1)


def table(version: str, effective: str, **models: tuple[str, str]) -> PricingPublished:
    return PricingPublished(
        table_version=version, effective_date=_dt.date.fromisoformat(effective),
        models={m: ModelPrice(segment="api-frontier", pinning="strong", input=i, output=o) for m, (i, o) in models.items()},
    )


def rates(t: PricingPublished | None, model: str) -> tuple[str | None, str | None] | None:
    found = pricing.route(model, t)
    return (found.price.input, found.price.output) if found and found.price else None


def test_the_table_in_effect_is_chosen_by_effective_date_not_ledger_order():
    jan, mar = table("jan", "2026-01-01", a=("1", "2")), table("mar", "2026-03-01", a=("3", "4"))
    # published out of order: March's first, January's after it
    tables = [mar, jan]
    assert pricing.in_effect(tables, _dt.date(2025, 12, 31)) is None
    assert pricing.in_effect(tables, _dt.date(2026, 2, 28)).table_version == "jan"
    assert rates(pricing.in_effect(tables, _dt.date(2026, 2, 28)), "a") == ("1", "2")
    assert pricing.in_effect(tables, DAY).table_version == "mar" and rates(pricing.in_effect(tables, DAY), "a") == ("3", "4")


def test_a_table_amends_some_models_and_inherits_the_rest():
    base = table("base", "2026-01-01", a=("1", "2"), b=("5", "6"))
    amend = table("amend", "2026-02-01", b=("7", "8"), c=("9", "9"))
    now = pricing.in_effect([base, amend], DAY)
    assert now.table_version == "amend"
    assert (rates(now, "a"), rates(now, "b"), rates(now, "c")) == (("1", "2"), ("7", "8"), ("9", "9"))
    # the version a run recorded resolves to the same merged table (what replay --verify re-prices with)
    assert pricing.as_of([base, amend], "amend") == now
    assert rates(pricing.as_of([base, amend], "base"), "b") == ("5", "6")
    assert pricing.as_of([base, amend], "nope") is None


def test_a_null_cost_route_matches_by_id_or_prefix_and_a_later_table_wins_either_way():
    """docs/RUNNER.md's own example keys a route `compat:local-`: every id it begins is that
    route's, the longest key first; a key ending in no separator covers an id only up to a `:`.
    A later table that lists a priced model as a route (or a route's id as a priced model)
    replaces it, as it replaces a price."""
    from cbledger.ledger.events import NullCostRoute

    own = NullCostRoute(segment="open-weight-self-hosted", pinning="strong", reason="our own GPUs")
    login = NullCostRoute(segment="saved-login", pinning="weak", reason="subscription")
    routes = msgspec.structs.replace(table("r", "2026-01-01"), null_cost_routes={"compat:local-": own, "codex": login, "compat:": login})
    assert pricing.route("compat:local-llama", routes).segment == "open-weight-self-hosted"
    assert pricing.route("compat:local-7b", routes).price is None
    assert pricing.route("compat:hosted-x", routes).segment == "saved-login"  # the shorter key
    assert pricing.route("codex:gpt-5", routes).segment == "saved-login"
    assert pricing.route("codex", routes).segment == "saved-login"
    assert pricing.route("codexa", routes) is None and pricing.route("compat", routes) is None

    priced = table("a", "2026-01-01", **{"compat:local-llama": ("1", "2"), "compat:qwen": ("1", "2")})
    later = msgspec.structs.replace(table("b", "2026-02-01"), null_cost_routes={"compat:local-": own, "compat:qwen": own})
    now = pricing.in_effect([priced, later], DAY)
    assert now.table_version == "b"
    assert pricing.route("compat:qwen", now) == pricing.Route("open-weight-self-hosted", "strong", None)
    assert pricing.route("compat:local-llama", now).price is None
    assert rates(pricing.as_of([priced, later], "a"), "compat:qwen") == ("1", "2")
    again = pricing.in_effect([priced, later, table("c", "2026-03-01", **{"compat:qwen": ("4", "5")})], DAY)
    assert rates(again, "compat:qwen") == ("4", "5") and pricing.route("compat:local-llama", again).price is None


def test_a_table_that_would_re_price_a_recorded_run_is_refused():
    base = table("base", "2026-01-01", a=("1", "2"))
    body = run_recorded().body
    run = msgspec.structs.replace(
        body, model=msgspec.structs.replace(body.model, id="a"), run_mode="agent",
        timings=msgspec.structs.replace(body.timings, started_at=_dt.datetime(2026, 3, 5, 10, tzinfo=_dt.UTC)),
    )
    back = table("back", "2026-03-05", a=("2", "2"))
    with pytest.raises(UserError, match=r"back\.json: effectiveDate 2026-03-05 would re-price 1 recorded run\(s\).*after 2026-03-05"):
        pricing.refuse_repricing(back, [base], [run], "back.json")
    # after the run's day, or the same price, or another model: nothing reaches back
    pricing.refuse_repricing(table("later", "2026-03-06", a=("2", "2")), [base], [run], "later.json")
    pricing.refuse_repricing(table("same", "2026-02-01", a=("1", "2")), [base], [run], "same.json")
    pricing.refuse_repricing(table("other", "2026-02-01", b=("9", "9")), [base], [run], "other.json")


def test_the_metered_usage_reads_both_providers_shapes_and_a_stream():
    assert budget.usage({"usage": {"prompt_tokens": 10, "completion_tokens": 3}}, None) == (10, 3)
    anthropic = {"usage": {"input_tokens": 10, "cache_read_input_tokens": 5, "cache_creation_input_tokens": 1, "output_tokens": 4}}
    assert budget.usage(anthropic, None) == (16, 4)
    events = ['{"type":"message_start","message":{"usage":{"input_tokens":20,"output_tokens":1}}}',
              '{"type":"message_delta","usage":{"output_tokens":9}}', "[DONE]"]
    assert budget.usage(None, events) == (20, 9)
    assert budget.usage({"usage": {"prompt_tokens": -5, "completion_tokens": True}}, None) == (0, 0)
    # reported as zero is not the same as not reported: the second is what no limit can count
    assert budget.usage({"choices": []}, ['{"choices": []}', "[DONE]"]) is None


def test_a_meter_stops_at_its_cap_and_draws_on_its_campaigns_purse():
    price = ModelPrice(segment="api-frontier", pinning="strong", input="1.00", output="0")
    purse = budget.Purse(250_000)
    first = budget.Meter(price, 150_000, purse)
    first.add(100_000, 0)
    assert first.stop_reason() is None and first.stopped() is None
    first.add(100_000, 0)
    assert first.stop_reason() == "the --max-cost-usd cap of $0.1500"
    first.refuse()
    assert msgspec.to_builtins(first.stopped()) == {"capUsdMicros": 150_000, "spentUsdMicros": 200_000, "campaignBudgetUsdMicros": 250_000}
    second = budget.Meter(price, None, purse)
    second.add(60_000, 0)
    assert purse.spent_micros == 260_000 and purse.exhausted()
    assert second.stop_reason() == "the campaign's --budget-usd of $0.2500"
    with pytest.raises(UserError, match="--budget-usd must be a positive amount"):
        budget.MoneyLimits(budget_usd="-1")
    with pytest.raises(UserError, match="--max-cost-usd 'ten' is not an amount in USD"):
        budget.MoneyLimits(max_cost_usd="ten")


def test_a_money_limit_needs_a_token_price():
    table = PricingPublished(table_version="t", effective_date=DAY, models={
        "priced": ModelPrice(segment="api-frontier", pinning="strong", input="1", output="2"),
        "unpriced": ModelPrice(segment="open-weight-hosted", pinning="strong", input=None, output=None),
    })
    limits = budget.MoneyLimits(max_cost_usd="1.50")
    assert budget.guard("priced", table, limits).cap_micros == 1_500_000
    assert budget.guard("priced", table, budget.MoneyLimits()) is None
    for model in ("unpriced", "absent"):
        with pytest.raises(UserError, match=f"has no token price for {model}"):
            budget.guard(model, table, limits)


def test_limits_finer_than_a_micro_dollar_and_figures_past_any_real_one_are_never_read_as_nothing(tmp_path):
    """A cap under a micro-dollar became a cap of zero, one with a seventh decimal was rounded
    down below what was given, a provider's absurd token count or a price past any real one
    metered as $0 and switched every limit off, and a price of 1e400 was published."""
    for given in ("0.0000001", "0.1370004"):
        with pytest.raises(UserError, match=rf"--max-cost-usd {given}: at most six decimal places"):
            budget.MoneyLimits(max_cost_usd=given)
    assert budget.MoneyLimits(max_cost_usd="0.1370000").run_cap_micros == 137_000
    # past the largest count a run event holds, a run spent and then could not be recorded
    # (`1e30` ended the dry run in a traceback, `1E+400000000` every check)
    for given in ("9007199254.740992", "10000000000", "1e30", "1E+400000000"):
        with pytest.raises(UserError, match=rf"--budget-usd {re.escape(given)}: past the largest amount a run records "
                                            r"\(\$9007199254\.740991\)"):
            budget.MoneyLimits(budget_usd=given)
    assert budget.MoneyLimits(budget_usd="9007199254.740991").budget_micros == MAX_COUNT
    assert budget.usage({"usage": {"prompt_tokens": 10**15, "completion_tokens": 1}}, None) == (10**12, 1)
    cheap = ModelPrice(segment="api-cheap", pinning="strong", input="1", output="1")
    absurd = ModelPrice(segment="api-cheap", pinning="strong", input="1" + "0" * 21, output="1")
    for price, tokens in ((cheap, 10**12), (absurd, 10)):
        meter = budget.Meter(price, 5_000_000, None)
        meter.add(tokens, 0)
        assert meter.stop_reason() == "the --max-cost-usd cap of $5.0000", (price, tokens)
    table = tmp_path / "prices.json"
    table.write_text('{"tableVersion": "t", "effectiveDate": "2026-01-01", "models": {"m:x": '
                     '{"segment": "api-cheap", "pinning": "strong", "input": 1e400, "output": "1"}}}')
    with pytest.raises(UserError, match=r'\$\.models\["m:x"\]\.input: 1000.* USD per million tokens is past any real price'):
        pricing.refuse_publishing(pricing.load_table(table), [], [], str(table))


def test_a_stop_note_quotes_the_limit_as_given_and_the_spend_that_limit_counts():
    """The budget's stop quoted the run's spend as if it were the campaign's, and a cap of
    $0.137001 read as $0.1370."""
    price = ModelPrice(segment="api-cheap", pinning="strong", input="1", output="1")
    purse = budget.Purse(250_000)
    purse.add(200_000)
    run = budget.Meter(price, 137_001, purse)
    run.add(60_000, 0)
    run.refuse()
    assert run.note().startswith("stopped at the campaign's --budget-usd of $0.2500: the campaign spent $0.2600, this run $0.0600")
    capped = budget.Meter(price, 137_001, None)
    capped.add(137_001, 0)
    assert capped.note().startswith("stopped at the --max-cost-usd cap of $0.137001: spent $0.1370")


def test_a_recorded_run_of_unknown_cost_counts_what_the_journal_metered_of_it(tmp_path):
    """A run some of whose answers reported no usage records a null cost; the campaign's spend
    counted it as nothing, so a resumed campaign's --budget-usd forgot what the meter saw it
    spend (the journal's lines were skipped as those of a recorded run)."""
    import msgspec

    from cbledger.ledger.events import CampaignSlot
    from cbledger.runner import campaign
    from cbledger.runner.ledger_view import LedgerView
    from cbledger.workspace import Workspace
    from tests.factories import run_recorded

    def of_campaign(n: int, cost: int | None):
        body = run_recorded(n).body
        return msgspec.structs.replace(body, campaign=CampaignSlot(id="c", slot=n, attempt=1),
                                       cost=msgspec.structs.replace(body.cost, usd_micros=cost))

    known, unknown, other = of_campaign(1, 70_000), of_campaign(2, None), run_recorded(3).body
    ws = Workspace.at(tmp_path)
    purse = budget.Purse(None)
    purse.journal = campaign.spend_journal(ws, "c")
    purse.journal.parent.mkdir(parents=True)
    purse.batch = known.batch
    purse.add(60_000, known.run_id, 60_000)  # its recorded cost counts, not the meter's
    purse.add(40_000, unknown.run_id, 40_000)
    purse.add(5_000, "c.t-s9-a1", 5_000)  # killed: no run records it
    view = LedgerView(runs={r.run_id: r for r in (known, unknown, other)})
    assert campaign.spent(ws, view, "c") == (70_000 + 40_000, 5_000)


def test_the_spend_journal_keeps_each_runs_last_spend_and_a_write_it_cannot_make_warns(tmp_path, capsys):
    """What a killed run spent is read back from its last line; a line cut short by the kill is
    skipped; a journal that cannot be written never fails the call being metered."""
    purse = budget.Purse(1_000_000)
    purse.journal, purse.batch = tmp_path / "c.spend.jsonl", "b1"
    purse.add(100_000, "c.t-s1-a1", 100_000)
    purse.add(100_000, "c.t-s1-a1", 200_000)
    purse.add(50_000, "c.t-s2-a1", 50_000)
    with open(purse.journal, "a") as f:
        f.write('{"batch": "b1", "run": "c.t-s3')  # a line a power cut left half written
    later = budget.Purse(None)  # the next invocation's: its lines start on a line of their own
    later.journal, later.batch = purse.journal, "b2"
    later.add(30_000, "c.t-s3-a1", 30_000)
    assert budget.unrecorded_spend(purse.journal, set(), batch="b2") == 30_000
    assert budget.unrecorded_spend(purse.journal, set(), batch="b1") == 250_000
    assert budget.unrecorded_spend(purse.journal, {("b1", "c.t-s1-a1")}) == 80_000  # recorded: its cost counts instead
    assert budget.unrecorded_spend(purse.journal, set(), batch="b3") == 0
    assert budget.unrecorded_spend(tmp_path / "none.jsonl", set()) == 0
    purse.journal = tmp_path / "no-such-dir" / "c.spend.jsonl"
    purse.add(10, "c.t-s4-a1", 10)
    purse.add(10, "c.t-s4-a1", 20)
    assert purse.spent_micros == 250_020
    assert capsys.readouterr().err.count("is not kept for a resumed campaign's budget") == 1


def test_the_proxy_meters_each_answer_by_its_own_mark():
    """One answer carrying the project's endpoint mark once switched metering off for every
    later answer of the run, a gateway that passed the header through disabling both limits."""
    from cbledger.runner.recorder import Recorder

    price = ModelPrice(segment="api-cheap", pinning="strong", input="1", output="1")
    with Recorder("http://127.0.0.1:9/v1", "openai-compat", "compat:x") as rec:
        rec.meter = budget.Meter(price, 1_000_000, None)
        body = b'{"usage": {"prompt_tokens": 100, "completion_tokens": 0}}'
        rec.add("POST", "/v1/chat/completions", b"{}", 200, body, None, 0.0, metered=False)
        rec.add("POST", "/v1/chat/completions", b"{}", 200, body, None, 0.0)
        assert rec.meter.tokens_in == 100 and rec.meter.spent_micros == 100


def test_a_segment_given_for_a_model_the_table_files_elsewhere_is_refused():
    """`--segment` names the segment of a model the table does not list. Given for a listed
    model it kept the table's price and replaced its segment: an api-frontier model ranked
    among api-cheap ones."""
    from cbledger.runner.execute import route_and_segment

    t = table("t", "2026-01-01", a=("3", "15"))
    with pytest.raises(UserError, match=r"--segment api-cheap: price table t files model a under api-frontier"):
        route_and_segment("a", t, "api-cheap")
    assert route_and_segment("a", t, "api-frontier")[1] == "api-frontier"
    assert route_and_segment("a", t, None)[1] == "api-frontier"
    assert route_and_segment("b", t, "api-cheap") == (None, "api-cheap")


def test_a_model_run_is_never_filed_under_the_harness_segment():
    """`--segment harness` made a billed model's runs the harness's own: out of every model row,
    and "neither gold nor noop" in the harness check."""
    from cbledger.runner.execute import cost_segment

    assert cost_segment("open-weight-hosted") == "open-weight-hosted"
    with pytest.raises(UserError, match="--segment harness: that segment is the project's scripted agents'"):
        cost_segment("harness")
