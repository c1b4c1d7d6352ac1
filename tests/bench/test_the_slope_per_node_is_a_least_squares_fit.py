"""The slopes the scale bench prints under its table (MiB and ms per 1,000 nodes)."""

from __future__ import annotations

import pytest
from bench.apiload import slope


def test_points_on_a_line_give_its_slope() -> None:
    assert slope([500, 2000, 5000], [100 + 0.03 * n for n in (500, 2000, 5000)]) == pytest.approx(
        0.03
    )


def test_scattered_points_give_the_least_squares_slope() -> None:
    # x mean 2, y mean 2; sxy = (-1)(-1) + 0 + (1)(2) = 3, sxx = 2.
    assert slope([1, 2, 3], [1, 1, 4]) == pytest.approx(1.5)


def test_a_flat_series_has_slope_zero_and_a_falling_one_is_negative() -> None:
    assert slope([600, 2000], [90.0, 90.0]) == 0
    assert slope([600, 2000], [90.0, 83.0]) == pytest.approx(-0.005)


def test_one_size_or_mismatched_lengths_give_no_slope() -> None:
    with pytest.raises(ValueError, match="constant"):  # statistics.StatisticsError
        slope([500, 500], [1.0, 2.0])
    with pytest.raises(ValueError, match="length"):
        slope([500, 2000], [1.0])
