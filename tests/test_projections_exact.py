"""The gate's tests in exact arithmetic: hand-worked values, a brute-force check, fixed draws."""

from __future__ import annotations

import itertools
from fractions import Fraction
from math import comb

from hypothesis import given, settings
from hypothesis import strategies as st

from cbledger.projections.exact import (
    EXACT_LIMIT,
    CostRun,
    CostStratum,
    PassCounts,
    SplitMix64,
    cost_rise_p_value,
    drop_p_value,
    hypergeometric,
)


def test_hypergeometric_hand_values():
    # six runs of a task, four passing; which three are the candidate's?
    assert hypergeometric(6, 4, 3) == {1: Fraction(4, 20), 2: Fraction(12, 20), 3: Fraction(4, 20)}
    assert hypergeometric(6, 6, 3) == {3: Fraction(1)}


def test_drop_p_values_worked_by_hand():
    P = PassCounts
    assert drop_p_value([P(3, 3, 3, 3), P(3, 3, 0, 3)]) == Fraction(1, 20)  # one task lost whole
    assert drop_p_value([P(3, 3, 2, 3), P(3, 3, 1, 3)]) == Fraction(1, 10)  # the same three, spread
    assert drop_p_value([P(3, 3, 2, 3)]) == Fraction(1, 2)  # one flip
    assert drop_p_value([P(3, 3, 3, 3)]) == 1  # nothing changed: no evidence


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 3), st.integers(1, 3)).flatmap(
    lambda nm: st.tuples(st.integers(0, nm[0]), st.just(nm[0]), st.integers(0, nm[1]), st.just(nm[1]))
), min_size=1, max_size=3))
def test_drop_p_value_equals_brute_force_enumeration(raw):
    """Every way of choosing which runs of each task are the candidate's, counted one by one."""
    strata = [PassCounts(*t) for t in raw]
    pools, observed = [], 0
    for s in strata:
        pools.append((s.baseline_runs + s.candidate_runs, s.baseline_passes + s.candidate_passes, s.candidate_runs))
        observed += s.candidate_passes
    hits = total = 0
    for picks in itertools.product(*(itertools.combinations(range(n), m) for n, _, m in pools)):
        total += 1
        passes = sum(sum(1 for i in pick if i < k) for (_, k, _), pick in zip(pools, picks, strict=True))
        hits += passes <= observed
    assert drop_p_value(strata) == Fraction(hits, total)


def test_splitmix64_reference_outputs():
    """The published first outputs for seed 0, so the draws are the same everywhere."""
    rng = SplitMix64(0)
    assert [rng.next() for _ in range(3)] == [0xE220A8397B1DCDAF, 0x6E789E6AA1B965F4, 0x06C45D188009454F]
    picks = SplitMix64(7).sample(10, 4)
    assert len(set(picks)) == 4 and all(0 <= p < 10 for p in picks) and picks == SplitMix64(7).sample(10, 4)


def _stratum(base: list[tuple[bool, int]], cand: list[tuple[bool, int]]) -> CostStratum:
    return CostStratum([CostRun(p, u) for p, u in base], [CostRun(p, u) for p, u in cand])


def test_cost_permutation_exact_and_drawn():
    dear = [_stratum([(True, 100)] * 3, [(True, 140)] * 3) for _ in range(2)]
    p, exact = cost_rise_p_value(dear)
    assert exact and p == Fraction(1, comb(6, 3) ** 2)  # only the observed labelling is as dear
    same = [_stratum([(True, 100)] * 3, [(True, 100)] * 3) for _ in range(2)]
    assert cost_rise_p_value(same) == (Fraction(1), True)
    many = [_stratum([(True, 100)] * 3, [(True, 140)] * 3) for _ in range(7)]
    assert comb(6, 3) ** 7 > EXACT_LIMIT
    p, exact = cost_rise_p_value(many)
    assert not exact and p == Fraction(1, 4001) and cost_rise_p_value(many) == (p, exact)  # fixed seed: the same p


def test_a_candidate_that_passes_nothing_costs_without_bound():
    strata = [_stratum([(True, 100)] * 3, [(False, 100)] * 3)]
    p, _ = cost_rise_p_value(strata)
    assert p == Fraction(1, 20)  # only the labelling with every pass on the baseline side is as bad
