"""Money limits: a cap per run (`--max-cost-usd`) and a budget per campaign (`--budget-usd`),
enforced live from the usage the provider reports through the recording proxy.

The proxy is the one place every model call of a run passes, and each answer names its tokens,
so the spend is known after every call, before the next one is sent. Once a run's spend reaches
its cap, or the campaign's reaches its budget, the proxy answers the harness's next call itself
with a refusal (HTTP 402) instead of forwarding it: nothing more is spent, the harness ends on a
provider error (its `run-end` reports its tokens), and the run is recorded with the cap and the
spend (`run.recorded.costCap`). A call already on its way is not cut off, so a run can end above
its cap by at most its last call. The campaign then starts no further run and says which it did
not run.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from cbledger.errors import UserError
from cbledger.ledger.events import CostCapStop, ModelPrice
from cbledger.ledger.types import MAX_COUNT, MAX_TOKENS
from cbledger.runner import pricing

#: the proxy's answer to a call past a limit: no SDK retries it, and copperhead ends the run
REFUSAL_STATUS = 402
REFUSAL_CODE = "cost_limit_reached"


def usd_to_micros(value: str | Decimal, flag: str) -> int:
    try:
        usd = Decimal(value)
    except (InvalidOperation, ValueError):
        raise UserError(f"{flag} {value!r} is not an amount in USD") from None
    if not usd.is_finite() or usd <= 0:
        raise UserError(f"{flag} must be a positive amount in USD, not {value}")
    if usd > Decimal(MAX_COUNT) / 1_000_000:
        # the run event records its limits in micro-dollars: past the largest count it holds, a
        # run spent its money and then could not be recorded
        raise UserError(f"{flag} {value}: past the largest amount a run records ({pricing.usd_limit(MAX_COUNT)})")
    if usd.as_tuple().exponent < -6 and usd != usd.quantize(Decimal("0.000001")):  # type: ignore[operator]
        # spend is metered in micro-dollars: a finer limit would be rounded to one not given
        raise UserError(f"{flag} {value}: at most six decimal places (spend is metered to the micro-dollar)")
    return int(usd * 1_000_000)


@dataclass(frozen=True)
class MoneyLimits:
    """What the operator allowed: USD per run and per campaign (None: no limit), and whether a
    route's key is checked with one request to its provider before the first run."""

    max_cost_usd: str | None = None
    budget_usd: str | None = None
    key_check: bool = True

    def __post_init__(self) -> None:
        self.run_cap_micros, self.budget_micros  # noqa: B018 -- a bad amount is refused before anything runs

    def args(self) -> tuple[str, ...]:
        """The limits (and a skipped key check) as flags: what a printed resume command must carry
        (the campaign's plan keeps them too; the printed line says them all the same)."""
        return ((("--max-cost-usd", self.max_cost_usd) if self.max_cost_usd is not None else ())
                + (("--budget-usd", self.budget_usd) if self.budget_usd is not None else ())
                + (() if self.key_check else ("--no-key-check",)))

    @property
    def run_cap_micros(self) -> int | None:
        return usd_to_micros(self.max_cost_usd, "--max-cost-usd") if self.max_cost_usd is not None else None

    @property
    def budget_micros(self) -> int | None:
        return usd_to_micros(self.budget_usd, "--budget-usd") if self.budget_usd is not None else None


def usage(body: Any, events: list[Any] | None, *, cache: bool = True) -> tuple[int, int] | None:
    """The tokens (in, out) one answer reports: OpenAI's `usage` (of the body or the last chunk
    that has one), Anthropic's (`message_start` and the last `message_delta` of a stream); cache
    reads and writes count as input, as copperhead counts them. None when it reports no usage at
    all (an OpenAI stream asked without `include_usage`): nothing a limit can count.
    `cache=False` reads Anthropic's input as runs recorded before cache tokens were counted did
    (`replay --verify` accepts their figures as the rule they were recorded under gives them)."""
    items: list[Any] = [body]
    for ev in events or []:
        data = getattr(ev, "data", ev)
        try:
            items.append(json.loads(data))
        except (TypeError, ValueError):
            continue
    tokens_in = tokens_out = 0
    reported = False
    for item in items:
        if not isinstance(item, dict):
            continue
        u = item.get("usage")
        if not isinstance(u, dict) and isinstance(item.get("message"), dict):
            u = item["message"].get("usage")
        if not isinstance(u, dict):
            continue
        reported = True
        if "prompt_tokens" in u or "completion_tokens" in u:
            tokens_in = max(tokens_in, _int(u.get("prompt_tokens")))
            tokens_out = max(tokens_out, _int(u.get("completion_tokens")))
        else:
            seen_in = sum(_int(u.get(k)) for k in (_INPUT_KEYS if cache else _INPUT_KEYS[:1]))
            tokens_in = max(tokens_in, seen_in)
            tokens_out = max(tokens_out, _int(u.get("output_tokens")))
    return (tokens_in, tokens_out) if reported else None


#: what Anthropic reports as input: the prompt, and the cache read and written for it
_INPUT_KEYS = ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")


def _int(value: Any) -> int:
    """A reported token count; one past any real figure is held at the largest a run may
    record, so it still reaches every limit (read as nothing, it once switched them off)."""
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        return 0
    return min(value, MAX_TOKENS)


class Purse:
    """A campaign's budget, shared by its runs' meters (thread-safe).

    What a run spends is also written, call by call, to the campaign's spend journal
    (`results/campaigns/<ID>.spend.jsonl`): a run killed with its driver (Ctrl-C, SIGTERM,
    SIGKILL) is never recorded, but the provider billed every call it answered, and the next
    invocation of the campaign counts that against the budget (`unrecorded_spend`)."""

    def __init__(self, budget_micros: int | None):
        self.budget_micros = budget_micros
        self._lock = threading.Lock()
        self._spent = 0
        self.journal: Path | None = None
        self.batch: str | None = None
        self.journal_lost = False
        self._tail_checked = False

    def add(self, micros: int, run_id: str | None = None, run_spent: int = 0) -> None:
        with self._lock:
            self._spent += micros
            if self.journal is not None and run_id is not None and micros:
                # one write of one line, appended: whole, or absent with the process killed mid-call
                line = json.dumps({"batch": self.batch, "run": run_id, "spentUsdMicros": run_spent}) + "\n"
                try:
                    fd = os.open(self.journal, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
                    try:
                        if not self._tail_checked:  # a line a power cut left half written ends here
                            size = os.fstat(fd).st_size
                            if size and os.pread(fd, 1, size - 1) != b"\n":
                                line = "\n" + line
                            self._tail_checked = True
                        os.write(fd, line.encode())
                    finally:
                        os.close(fd)
                except OSError as exc:
                    # a full or read-only disk must not fail the call being relayed: this
                    # invocation's purse still holds the spend; only a resume would miss it
                    if not self.journal_lost:
                        self.journal_lost = True
                        print(f"warning: {self.journal}: {exc.strerror or exc}: the spend of runs killed from here on "
                              "is not kept for a resumed campaign's budget", file=sys.stderr)

    @property
    def spent_micros(self) -> int:
        with self._lock:
            return self._spent

    def exhausted(self) -> bool:
        return self.budget_micros is not None and self.spent_micros >= self.budget_micros

    def not_started_note(self) -> str:
        return (f"not run: the campaign's --budget-usd {pricing.usd_limit(self.budget_micros or 0)} was spent "
                f"({pricing.usd(self.spent_micros)} so far)")


def journal_spend(journal: Path, *, batch: str | None = None) -> dict[tuple[str | None, str], int]:
    """Per run ((batch, run id)), the spend the journal holds: each run's last line (its whole
    spend so far); only `batch`'s when given. A line cut short by a kill, or not JSON, is skipped."""
    last: dict[tuple[str | None, str], int] = {}
    try:
        text = journal.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return last
    for line in text.splitlines():
        try:
            item = json.loads(line)
            key, spent = (item["batch"], item["run"]), item["spentUsdMicros"]
        except (ValueError, KeyError, TypeError):
            continue
        # a line no run wrote (edited by hand: a number for a batch, a list for a run) is skipped,
        # as a line cut short is: it must not stop the budget's count, nor the spend's recording
        if not (isinstance(key[0], str | None) and isinstance(key[1], str)) or isinstance(spent, bool):
            continue
        if isinstance(spent, int) and (batch is None or key[0] == batch):
            last[key] = max(spent, last.get(key, 0))
    return last


def unrecorded_spend(journal: Path, recorded: set[tuple[str | None, str]], *, batch: str | None = None) -> int:
    """The spend the journal holds for runs not among `recorded` ((batch, run id) of the runs
    the ledger holds)."""
    return sum(spent for key, spent in journal_spend(journal, batch=batch).items() if key not in recorded)


class Meter:
    """One run's spend as the proxy sees it, against its cap and its campaign's purse."""

    def __init__(self, price: ModelPrice, cap_micros: int | None, purse: Purse | None, run_id: str | None = None):
        self.price, self.cap_micros, self.purse, self.run_id = price, cap_micros, purse, run_id
        self._lock = threading.Lock()
        self.tokens_in = self.tokens_out = 0
        self._spent = 0
        self.refused = 0
        #: answers that reported no usage: spent, for all a limit can tell, nothing
        self.unreported = 0

    def add(self, tokens_in: int, tokens_out: int) -> None:
        with self._lock:
            self.tokens_in += tokens_in
            self.tokens_out += tokens_out
            # a spend past any real figure prices as unknown: held at the largest, never as zero
            now = pricing.usd_micros(self.price, self.tokens_in, self.tokens_out)
            now = MAX_COUNT if now is None else now
            delta, self._spent = now - self._spent, now
        if self.purse is not None:
            self.purse.add(delta, self.run_id, now)

    def answer(self, tokens: tuple[int, int] | None) -> None:
        """One answer's tokens, or None when it reported none. The first such answer is said at
        once: money is being spent that no limit counts, and the run's own figure comes later."""
        if tokens is not None:
            self.add(*tokens)
            return
        with self._lock:
            self.unreported += 1
            first = self.unreported == 1
        if first:
            print(f"warning: run {self.run_id or '?'}: the provider answered without reporting token usage; "
                  "--max-cost-usd and --budget-usd cannot count such answers", file=sys.stderr)

    def unreported_note(self) -> str | None:
        """What the run records when answers went uncounted."""
        if not self.unreported:
            return None
        return (f"{self.unreported} answer(s) of the provider reported no token usage: the money limits "
                "could not count them")

    @property
    def spent_micros(self) -> int:
        with self._lock:
            return self._spent

    def stop_reason(self) -> str | None:
        """Why the next call must not be sent, or None."""
        if self.cap_micros is not None and self.spent_micros >= self.cap_micros:
            return f"the --max-cost-usd cap of {pricing.usd_limit(self.cap_micros)}"
        if self.purse is not None and self.purse.exhausted() and self.purse.budget_micros is not None:
            return f"the campaign's --budget-usd of {pricing.usd_limit(self.purse.budget_micros)}"
        return None

    def spent_words(self) -> str:
        """What was spent, as the limit that stopped the run counts it: the run's against its
        cap, the campaign's (this run's beside it) against the budget."""
        run = pricing.usd(self.spent_micros)
        capped = self.cap_micros is not None and self.spent_micros >= self.cap_micros
        if self.purse is not None and self.purse.budget_micros is not None and not capped:
            return f"the campaign spent {pricing.usd(self.purse.spent_micros)}, this run {run}"
        return f"spent {run}"

    def refuse(self) -> dict:
        with self._lock:
            self.refused += 1
        why = self.stop_reason() or "a money limit"
        # keys in sorted order, as the cassette keeps them: a rerun serves the same bytes, and the
        # harness, which writes the error body into its transcript, writes the same text
        return {"error": {"code": REFUSAL_CODE,
                          "message": f"cbledger stopped this run at {why}: {self.spent_words()}",
                          "type": "cost_limit"}}

    def stopped(self) -> CostCapStop | None:
        """What the run records when a limit stopped it (a call was refused)."""
        if not self.refused:
            return None
        return CostCapStop(cap_usd_micros=self.cap_micros, spent_usd_micros=self.spent_micros,
                           campaign_budget_usd_micros=self.purse.budget_micros if self.purse is not None else None)

    def note(self) -> str:
        return (f"stopped at {self.stop_reason() or 'a money limit'}: {self.spent_words()} "
                f"({self.tokens_in} tokens in, {self.tokens_out} out, as the provider reported them)")


def price_for_limits(model_id: str, table, limits: MoneyLimits) -> ModelPrice | None:
    """The price a limit is enforced with; refuses a limit on a model with no token price."""
    if limits.max_cost_usd is None and limits.budget_usd is None:
        return None
    found = pricing.route(model_id, table)
    if found is None or found.price is None or found.price.input is None or found.price.output is None:
        raise UserError(
            f"--max-cost-usd and --budget-usd are enforced from the price table, which has no token price for {model_id}"
        )
    return found.price


@dataclass(frozen=True)
class Guard:
    """A suite run's money limits as its runs' meters apply them: the model's price, the cap per
    run, and the campaign's purse every run draws on."""

    price: ModelPrice
    cap_micros: int | None
    purse: Purse

    def meter(self, run_id: str | None = None) -> Meter:
        return Meter(self.price, self.cap_micros, self.purse, run_id)


def guard(model_id: str, table, limits: MoneyLimits | None) -> Guard | None:
    """The guard for a plan's runs; None when no limit was asked for."""
    if limits is None:
        return None
    price = price_for_limits(model_id, table, limits)
    if price is None:
        return None
    return Guard(price, limits.run_cap_micros, Purse(limits.budget_micros))
