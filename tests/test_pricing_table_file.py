"""A price table file as `cbledger pricing publish` reads it: a wrong entry is named by its model
(or route), since that is what a reader looks for in the file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cbledger.errors import UserError
from cbledger.runner.pricing import load_table, refuse_publishing

GOOD = {"segment": "api-frontier", "pinning": "strong", "input": "3", "output": "15"}


def _table(tmp_path: Path, **parts: object) -> Path:
    path = tmp_path / "prices.json"
    path.write_text(json.dumps({"tableVersion": "t1", "effectiveDate": "2026-12-01", **parts}))
    return path


def test_a_model_entry_missing_a_field_is_named_by_its_model(tmp_path: Path) -> None:
    path = _table(tmp_path, models={"gpt-good": GOOD, "claude-sonnet-4": {"segment": "api-frontier", "input": "3", "output": "15"}})
    with pytest.raises(UserError) as err:
        load_table(path)
    assert str(err.value) == f'{path}: Object missing required field `pinning` - at `$.models["claude-sonnet-4"]`'


def test_a_field_of_a_null_cost_route_is_named_by_its_route(tmp_path: Path) -> None:
    path = _table(tmp_path, nullCostRoutes={"compat:local-": {"segment": "gpu", "pinning": "strong", "reason": "ours"}})
    with pytest.raises(UserError) as err:
        load_table(path)
    assert str(err.value).startswith(f"{path}: Invalid enum value 'gpu' - at `$.nullCostRoutes[\"compat:local-\"].segment`")


def test_a_good_table_loads(tmp_path: Path) -> None:
    assert load_table(_table(tmp_path, models={"gpt-good": GOOD})).models["gpt-good"].pinning == "strong"


@pytest.mark.parametrize("price", ["-1", "1e3", "+2"])
def test_a_price_that_is_no_decimal_amount_is_said_in_words_not_as_a_pattern(tmp_path: Path, price: str) -> None:
    path = _table(tmp_path, models={"gpt-good": {**GOOD, "output": price}})
    with pytest.raises(UserError) as err:
        load_table(path)
    assert str(err.value) == (f'{path}: Expected a non-negative decimal amount as a string, like "3.00" (no sign, no '
                              f'exponent) - at `$.models["gpt-good"].output`')


def test_a_table_version_published_with_other_prices_is_refused_naming_the_file_and_field(tmp_path: Path) -> None:
    from tests.factories import run_cli

    ledger = tmp_path / "ledger.jsonl"
    assert run_cli(["init", "--ledger", ledger, "--root", tmp_path]).exit_code == 0
    path = _table(tmp_path, models={"gpt-good": GOOD})
    first = run_cli(["pricing", "publish", path, "--ledger", ledger, "--root", tmp_path])
    assert first.exit_code == 0, first.output
    again = run_cli(["pricing", "publish", path, "--ledger", ledger, "--root", tmp_path])
    assert again.exit_code == 0 and "already published; no-op" in again.output  # the same table: nothing new
    before = ledger.read_bytes()
    path.write_text(json.dumps({"tableVersion": "t1", "effectiveDate": "2026-12-01", "models": {"gpt-good": {**GOOD, "output": "16"}}}))
    changed = run_cli(["pricing", "publish", path, "--ledger", ledger, "--root", tmp_path])
    assert changed.exit_code == 2
    assert f"{path}: $.tableVersion: 't1' is already published with other prices or dates" in changed.stderr
    assert ledger.read_bytes() == before


def test_a_bare_json_number_is_read_as_the_decimal_it_spells(tmp_path: Path) -> None:
    """A price written as a JSON number is taken digit for digit (never through a binary float,
    which would make 0.1 a price of 0.1000000000000000055…)."""
    path = tmp_path / "prices.json"
    path.write_text('{"tableVersion": "t1", "effectiveDate": "2026-12-01", "models": {"gpt-good": '
                    '{"segment": "api-frontier", "pinning": "strong", "input": 0.30000000000000004, "output": 15}}}')
    price = load_table(path).models["gpt-good"]
    assert (price.input, price.output) == ("0.30000000000000004", "15")
    path.write_text(path.read_text().replace("0.30000000000000004", "0.1"))
    assert load_table(path).models["gpt-good"].input == "0.1"


def test_a_table_that_says_what_no_run_would_be_charged_is_refused_naming_the_field(tmp_path: Path) -> None:
    """Each was accepted and then meant nothing, or the wrong thing: a model listed twice was
    its last entry; a cache price was stored and never applied (copperhead counts cached tokens
    as input); a self-hosted or saved-login route with a price put USD in the rows the standard
    keeps null; a model filed under `harness` left every model row."""
    path = tmp_path / "prices.json"
    path.write_text('{"tableVersion": "t1", "effectiveDate": "2026-12-01", "models": {"m:1": '
                    + json.dumps(GOOD) + ', "m:1": ' + json.dumps({**GOOD, "input": "100"}) + "}}")
    with pytest.raises(UserError) as err:
        load_table(path)
    assert str(err.value) == f"{path}: duplicate key m:1 in one JSON object"
    cases = {
        "cacheRead": ({**GOOD, "cacheRead": "0.3"}, '$.models["m:1"].cacheRead: cached input is priced at `input`'),
        "self-hosted": ({**GOOD, "segment": "open-weight-self-hosted"},
                        '$.models["m:1"].segment: open-weight-self-hosted costs null by rule'),
        "saved-login": ({**GOOD, "segment": "saved-login", "pinning": "weak"}, '$.models["m:1"].segment: saved-login costs null by rule'),
        "harness": ({**GOOD, "segment": "harness"}, '$.models["m:1"].segment: harness is the project\'s own scripted agents\''),
    }
    for entry, said in cases.values():
        with pytest.raises(UserError) as err:
            published(_table(tmp_path, models={"m:1": entry}))
        assert str(err.value).startswith(f"{path}: {said}"), err.value
    with pytest.raises(UserError) as err:
        published(_table(tmp_path, nullCostRoutes={"gpt-": {"segment": "api-frontier", "pinning": "weak", "reason": "x"}}))
    assert str(err.value).startswith(f'{path}: $.nullCostRoutes["gpt-"].segment: api-frontier is priced by the table, '
                                     "not null by rule")
    # unpriced, a null-cost segment is what it says
    free = published(_table(tmp_path, models={"m:1": {**GOOD, "segment": "saved-login", "input": None, "output": None}}))
    assert free.models["m:1"].input is None
    # a table published before these rules were made is published again as the no-op it was
    old = load_table(_table(tmp_path, models={"m:1": cases["cacheRead"][0]}))
    refuse_publishing(old, [old], [], str(path))


def published(path: Path):  # type: ignore[no-untyped-def]
    """The table as `pricing publish` holds it to the rules, on a ledger with no table yet."""
    table = load_table(path)
    refuse_publishing(table, [], [], str(path))
    return table


def test_a_model_id_the_table_cannot_hold_is_said_in_words(tmp_path: Path) -> None:
    path = _table(tmp_path, models={"bad model!": GOOD})
    with pytest.raises(UserError) as err:
        load_table(path)
    assert str(err.value) == (f"{path}: Expected a model id: a letter or digit, then letters, digits and . _ : + - "
                              "(never two dots in a row) - at `key` in `$.models`")
