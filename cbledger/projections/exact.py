"""The regression gate's two tests, paired by task, in exact arithmetic.

**Pass rate: an exact conditional test, stratified by task.** The null hypothesis is that, task by
task, a run of the candidate passes as often as a run of the baseline. Given a task's total passes
over both sides, which of its runs are the candidate's is then a draw without replacement, so the
candidate's passes on that task follow a hypergeometric law; the tasks are independent, so the
candidate's total passes follow the convolution of those laws. The one-sided p-value is the
probability, under that law, of the candidate passing no more often than it did. Pairing by task
is what keeps a candidate that ran only the easy tasks (or only the hard ones) from looking better
(or worse) than the baseline on the same tier: a task run on one side only carries no evidence
here. Everything is an exact fraction; no normal approximation is made, which is what matters at
three repeats a task.

**Cost per passing task: a permutation test, stratified by task.** Under the null, a task's runs
(each with its USD and verdict) are exchangeable between the sides. The statistic is the ratio of
the candidate's cost per passing task to the baseline's over the paired tasks; its p-value is the
share of the relabellings, within each task, whose ratio is at least the observed one. When the
relabellings number at most `EXACT_LIMIT` they are all enumerated (an exact p); otherwise
`DRAWS` of them are drawn by a fixed-seed generator (SplitMix64, written here so that the draws,
and so the p-value, are the same on every machine and every Python), and p = (1 + hits) /
(1 + draws).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from fractions import Fraction
from math import comb

from msgspec import Struct

EXACT_LIMIT = 20_000
DRAWS = 4_000
SEED = 0x6362_6C65_6467_6572  # "cbledger"
_MASK = (1 << 64) - 1


class PassCounts(Struct, frozen=True):
    """One task's passes and runs on each side."""

    baseline_passes: int
    baseline_runs: int
    candidate_passes: int
    candidate_runs: int


class CostRun(Struct, frozen=True):
    passed: bool
    usd_micros: int


class CostStratum(Struct, frozen=True):
    """One task's runs on each side, each with its USD and verdict."""

    baseline: list[CostRun]
    candidate: list[CostRun]


def hypergeometric(total: int, successes: int, draws: int) -> dict[int, Fraction]:
    """P(k successes among `draws` taken without replacement from `total` holding `successes`)."""
    lo, hi = max(0, draws - (total - successes)), min(draws, successes)
    whole = comb(total, draws)
    return {k: Fraction(comb(successes, k) * comb(total - successes, draws - k), whole) for k in range(lo, hi + 1)}


def drop_p_value(strata: Sequence[PassCounts]) -> Fraction:
    """P(the candidate passes at most as often as it did | each task's total passes), exactly."""
    law: dict[int, Fraction] = {0: Fraction(1)}
    observed = 0
    for s in strata:
        pmf = hypergeometric(s.baseline_runs + s.candidate_runs, s.baseline_passes + s.candidate_passes, s.candidate_runs)
        observed += s.candidate_passes
        nxt: dict[int, Fraction] = {}
        for total, p in law.items():
            for k, q in pmf.items():
                nxt[total + k] = nxt.get(total + k, Fraction(0)) + p * q
        law = nxt
    return sum((p for total, p in law.items() if total <= observed), Fraction(0))


# --------------------------------------------------------------------------- cost per passing task


def cost_per_passing_task(runs_by_task: Sequence[Sequence[CostRun]]) -> Fraction | None:
    """All the USD over the tasks with at least one passing run; None when no task passed."""
    passed = sum(1 for runs in runs_by_task if any(r.passed for r in runs))
    if not passed:
        return None
    return Fraction(sum(r.usd_micros for runs in runs_by_task for r in runs), passed)


def _ratio_key(candidate: Fraction | None, baseline: Fraction | None) -> tuple[int, Fraction]:
    """An orderable form of candidate / baseline: a side that passed no task costs without bound."""
    if candidate is None and baseline is None:
        return (1, Fraction(1))
    if candidate is None:
        return (2, Fraction(0))
    if baseline is None:
        return (0, Fraction(0))
    return (1, candidate / baseline if baseline else Fraction(1))


def _key(strata: Sequence[CostStratum], picks: Sequence[Sequence[int]]) -> tuple[int, Fraction]:
    cand, base = [], []
    for s, pick in zip(strata, picks, strict=True):
        pool = [*s.baseline, *s.candidate]
        chosen = set(pick)
        cand.append([r for i, r in enumerate(pool) if i in chosen])
        base.append([r for i, r in enumerate(pool) if i not in chosen])
    return _ratio_key(cost_per_passing_task(cand), cost_per_passing_task(base))


class SplitMix64:
    """A tiny generator whose output is fixed by its seed on any machine and any Python."""

    def __init__(self, seed: int) -> None:
        self.state = seed & _MASK

    def next(self) -> int:
        self.state = (self.state + 0x9E3779B97F4A7C15) & _MASK
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
        return z ^ (z >> 31)

    def below(self, n: int) -> int:
        """Uniform on 0..n-1, by rejection (no modulo bias)."""
        limit = (1 << 64) - ((1 << 64) % n)
        while True:
            x = self.next()
            if x < limit:
                return x % n

    def sample(self, n: int, k: int) -> list[int]:
        """k distinct indices of range(n): a partial Fisher-Yates shuffle."""
        items = list(range(n))
        for i in range(k):
            j = i + self.below(n - i)
            items[i], items[j] = items[j], items[i]
        return items[:k]


def cost_rise_p_value(strata: Sequence[CostStratum], draws: int = DRAWS, seed: int = SEED) -> tuple[Fraction, bool]:
    """(p, exact): the share of within-task relabellings whose cost ratio is at least the observed."""
    sizes = [(len(s.baseline) + len(s.candidate), len(s.candidate)) for s in strata]
    observed_picks = [range(len(s.baseline), len(s.baseline) + len(s.candidate)) for s in strata]
    observed = _key(strata, observed_picks)
    count = 1
    for n, k in sizes:
        count *= comb(n, k)
        if count > EXACT_LIMIT:
            break
    if count <= EXACT_LIMIT:
        hits = total = 0
        for picks in itertools.product(*(itertools.combinations(range(n), k) for n, k in sizes)):
            total += 1
            hits += _key(strata, picks) >= observed
        return Fraction(hits, total), True
    rng = SplitMix64(seed)
    hits = 0
    for _ in range(draws):
        hits += _key(strata, [rng.sample(n, k) for n, k in sizes]) >= observed
    return Fraction(1 + hits, 1 + draws), False
