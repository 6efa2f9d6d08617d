"""A run's run-end figures, derived again from its preserved transcript.

`run.recorded` copies the transcript's `run-end` figures (turns, tokens, repair cycles, duration,
exit path, the files it committed) into `stats`, and LEADERBOARD.md publishes sums of them. A
re-grade reads the transcript for its assertions but not these figures, so a hand-edited token
count, re-chained with the rest, would pass every other check while changing a published number.
Deriving them again with the runner's own rule (`runner.execute.stats_from`) from the restored
transcript, whose digest `check_digests` has already compared, closes that gap offline; the cost
is then priced again from those tokens under the price table the run names, which the ledger
holds.
"""

from __future__ import annotations

import msgspec
import pygit2
from blake3 import blake3

from cbledger.grading.evidence import transcript as transcript_mod
from cbledger.grading.evidence.tree import view
from cbledger.ledger.events import PricingPublished, RunRecorded
from cbledger.projections.fold import LedgerState
from cbledger.reproduce.findings import Finding
from cbledger.reproduce.restore import evidence_commits
from cbledger.runner import pricing
from cbledger.runner.cassette import Cassette
from cbledger.runner.execute import stats_from


def figures_findings(
    repo: pygit2.Repository, run: RunRecorded, seq: int, complete: bool, cassette: Cassette | None = None,
) -> list[Finding]:
    """One finding per recorded figure that the preserved transcript (and, for a run without
    `run-end`, its cassette and agent time) does not give. A run whose transcript is missing or
    altered gets none here: `check_digests` already fails it, and a figure derived from other
    bytes would prove nothing."""
    ref = run.evidence.get("transcript")
    if ref is None:
        return []
    capture, _ = evidence_commits(repo, run, complete)
    if capture is None:
        return []
    data = view(repo, capture).read(ref.path)
    if data is None or len(data) != ref.bytes or blake3(data).hexdigest() != ref.blake3:
        return []
    # The cap a synthesized record states is the run's setting, not a transcript figure.
    cap = run.stats.max_turns if run.stats is not None else 0
    transcript = transcript_mod.parse_transcript(data, ref.path)
    if run.task.mode == "create":  # its stage transcripts, merged as grading merged them
        baseline = view(repo, run.sandbox.baseline_sha) if repo.get(run.sandbox.baseline_sha) is not None else None
        transcript = transcript_mod.load(view(repo, capture), baseline)
    derived, _ = stats_from(transcript, run.runner_exit, cap, cassette, run.timings.agent_ms)
    if derived != run.stats and transcript.run_end is None and cassette is not None:
        # recorded before cache reads and writes counted as input: what that rule gives stands
        earlier, _ = stats_from(transcript, run.runner_exit, cap, cassette, run.timings.agent_ms, cache=False)
        if earlier == run.stats:
            return []
    recorded, again = msgspec.to_builtins(run.stats), msgspec.to_builtins(derived)
    if recorded is None or again is None:
        if recorded == again:
            return []  # a run-end whose exit path the runner does not know: no figures, as recorded
        said = "null" if recorded is None else "recorded"
        gives = "figures" if again is not None else "no figures this runner records"
        return [_finding(run, seq, "stats", recorded, f"stats are {said}, but the preserved transcript gives {gives}", again)]
    return [
        _finding(run, seq, f"stats.{name}", recorded.get(name),
                 f"stats.{name} is {recorded.get(name)!r}, but the preserved transcript gives {value!r}", value)
        for name, value in again.items()
        if recorded.get(name) != value
    ]


def _finding(run: RunRecorded, seq: int, field: str, expected: object, message: str, actual: object = None) -> Finding:
    return Finding(check="run", kind="stats-mismatch", message=message, seq=seq, run_id=run.run_id,
                   field=field, file=run.evidence["transcript"].path, expected=expected, actual=actual)


def cost_findings(state: LedgerState) -> dict[str, list[Finding]]:
    """Per run, a finding when its recorded cost is not what its tokens cost under the price
    table it names. The runner prices a run from its run-end tokens (checked against the
    transcript above) under the latest `pricing.published`, so the cost a leaderboard sums is a
    function of what the ledger already holds: a hand-edited cost, re-chained, is named here. A
    replay carries its original's cost, and a null cost states no figure; neither is priced."""
    tables: dict[str, PricingPublished | None] = {}
    earlier: dict[str, PricingPublished] = {}
    seen: list[PricingPublished] = []
    out: dict[str, list[Finding]] = {}
    entries: list[tuple[int, RunRecorded]] = [(e.seq, e.run) for e in state.runs.values()]
    entries += [(p.seq, p.run) for p in state.later_passes.values()]
    by_seq = sorted([(p.seq, p.body) for p in state.pricing] + [(s, r) for s, r in entries], key=lambda x: x[0])
    for seq, item in by_seq:
        if isinstance(item, PricingPublished):
            seen.append(item)
            tables.clear()  # a table published later can still amend an earlier version's day
            # what a version named when it was published, merged as runs were priced before a later
            # table's route replaced an earlier price: a figure recorded under that rule stands
            earlier[item.table_version] = pricing.as_of(seen, item.table_version, both_ways=False) or item
            continue
        run, cost = item, item.cost
        if cost.usd_micros is None or run.replay_of is not None or run.stats is None:
            continue
        if run.cost_cap and cost.usd_micros == run.cost_cap.spent_usd_micros and (
            run.stats.exit_path == "cap-exceeded" or run.stats.tokens_in + run.stats.tokens_out == 0
        ):
            continue  # stopped by a money limit with no run-end: its cost is the proxy's meter, kept with the cap
        if cost.price_table_version is None:
            # the runner names the table it priced a run under; a figure without one (a scripted
            # run's, which costs nothing by rule) comes from no table and no meter
            out.setdefault(run.run_id, []).append(Finding(
                check="run", kind="cost-mismatch", seq=seq, run_id=run.run_id, field="cost.usdMicros",
                message=f"cost.usdMicros is {cost.usd_micros}, but the run names no price table and no money limit "
                        "metered it: nothing the ledger holds gives that figure",
                expected=cost.usd_micros, actual=None,
            ))
            continue
        version = cost.price_table_version
        if version not in tables:
            # a run names the table in effect at its start, with all it inherited from the tables
            # published before the run, a backdated one published after that version included
            tables[version] = pricing.as_of(seen, version)
        table = tables[version]
        again = _priced(table, run)
        if again != cost.usd_micros and _priced(earlier.get(version), run) == cost.usd_micros:
            continue
        if again != cost.usd_micros:
            where = f"price table {cost.price_table_version}" if table else f"price table {cost.price_table_version}, which no pricing.published before it holds"
            out.setdefault(run.run_id, []).append(Finding(
                check="run", kind="cost-mismatch", seq=seq, run_id=run.run_id, field="cost.usdMicros",
                message=f"cost.usdMicros is {cost.usd_micros}, but {run.stats.tokens_in} tokens in and "
                        f"{run.stats.tokens_out} out of {run.model.id} cost {again} under {where}",
                expected=cost.usd_micros, actual=again,
            ))
    return out


def _priced(table: PricingPublished | None, run: RunRecorded) -> int | None:
    """What the run's tokens cost under `table` (None: no price, no table, or no stats)."""
    route = pricing.route(run.model.id, table)
    if route is None or run.stats is None:
        return None
    return pricing.usd_micros(route.price, run.stats.tokens_in, run.stats.tokens_out)
