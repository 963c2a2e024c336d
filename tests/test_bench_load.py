"""How ``bench/load.py`` decides whether a stream falls behind: the growth of its lag over the feed,
a least-squares slope through one point per closing second, with a 95% interval. The expected
figures are worked out by hand below."""

from __future__ import annotations

import math

import pytest

from bench.load import BEHIND_S, Phase, fit, points

#: deviations orthogonal to time within every four consecutive seconds (e - e - e + e, and
#: 4k - (4k+1) - (4k+2) + (4k+3) = 0), so they leave the slope exact and each residual is +-e
PATTERN = (1, -1, -1, 1)


def series(slope: float, mean: float, e: float, step: int = 10, count: int = 24) -> list[tuple[float, float]]:
    return [(float(i * step), mean + slope * i * step + e * PATTERN[i % 4]) for i in range(count)]


def test_growth_is_the_slope_times_the_span_with_two_standard_errors():
    # 24 points 10 s apart: span 230 s; the lag grows 1 s every 120 s: 230 / 120 s over the feed
    grown = fit([series(1 / 120, 3.0, 0.5)])
    assert grown is not None
    assert grown.seconds == pytest.approx(230 / 120)
    # sum of squared time deviations: 100 * 24 * (24^2 - 1) / 12 = 115,000; residual variance
    # 24 * 0.25 / (24 - 2) with a mean and a slope fitted
    assert grown.margin == pytest.approx(2 * math.sqrt(24 * 0.25 / 22 / 115_000) * 230)
    assert grown.low > BEHIND_S  # 1.92 - 0.71: it falls behind


def test_streams_are_fitted_each_about_its_own_mean():
    # one stream at 1 s of lag and one at 9 s, both flat: no growth, whatever their levels
    flat = fit([series(0.0, 1.0, 0.25), series(0.0, 9.0, 0.25)])
    assert flat is not None and flat.seconds == pytest.approx(0.0, abs=1e-12)
    # both growing 1 s a minute, at different levels: the shared slope is that one
    both = fit([series(1 / 60, 1.0, 0.25), series(1 / 60, 9.0, 0.25)])
    assert both is not None and both.seconds == pytest.approx(230 / 60)


def test_windows_closing_in_one_second_count_once():
    # a hundred meters' windows closing in the same second are one point, their median lag
    samples = [(0.0, lag) for lag in (1.0, 2.0, 30.0)] + [(30.0, 2.0), (60.0, 2.0)]
    assert points(samples) == [(0.0, 2.0), (30.0, 2.0), (60.0, 2.0)]


def test_a_phase_names_only_the_streams_that_measurably_fall_behind():
    phase = Phase("airflow", 3)
    phase.lags = {0: series(1 / 60, 2.0, 0.1),  # +3.8 s, tight: falls behind
                  1: series(0.0, 2.0, 0.1),  # flat
                  2: series(1 / 120, 2.0, 6.0)}  # +1.9 s, but within the noise
    grown = dict(phase.grown())
    assert [i for i, g in phase.grown() if g.low > BEHIND_S] == [0]
    assert grown[2].seconds > BEHIND_S > grown[2].low
    assert phase.grown()[0][0] == 0  # the largest growth first
    phase.lags[3] = [(0.0, 1.0), (30.0, 9.0)]  # two closing seconds: no line to speak of
    assert phase.growth(3) is None and 3 not in dict(phase.grown())
