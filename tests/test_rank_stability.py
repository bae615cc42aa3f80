"""Kendall's tau-b on known values (worked by hand; the same as scipy.stats.kendalltau's tau-b)."""

from __future__ import annotations

import pytest

from kernelrank.rank_stability import kendall_tau_b


def test_the_same_order_is_one_and_the_reverse_minus_one() -> None:
    assert kendall_tau_b([1, 2, 3, 4], [10, 20, 30, 40]) == 1.0
    assert kendall_tau_b([1, 2, 3, 4], [4, 3, 2, 1]) == -1.0


def test_six_concordant_and_four_discordant_pairs_give_a_fifth() -> None:
    assert kendall_tau_b([1, 2, 3, 4, 5], [3, 4, 1, 2, 5]) == pytest.approx(0.2)


def test_ties_leave_pairs_out_and_shrink_the_denominator() -> None:
    # n0 = 6, one tie in each: 4 concordant pairs, none discordant: 4 / sqrt(5 * 5)
    assert kendall_tau_b([1, 2, 2, 3], [1, 2, 3, 3]) == pytest.approx(0.8)


def test_undefined_without_two_entries_or_with_everything_tied() -> None:
    assert kendall_tau_b([], []) is None
    assert kendall_tau_b([1], [1]) is None
    assert kendall_tau_b([1, 1, 1], [1, 2, 3]) is None


def test_rankings_of_different_lengths_are_refused() -> None:
    with pytest.raises(ValueError, match="same entries"):
        kendall_tau_b([1, 2], [1])
