"""The one Backoff: exponential, equal jitter (each wait in the upper half of its step), capped."""

from __future__ import annotations

import random

import pytest

from ragmon.backoff import Backoff


def test_equal_jitter_in_the_upper_half_of_each_step_and_capped() -> None:
    backoff = Backoff(base_s=0.5, max_s=10.0, rng=random.Random(3))
    for attempt in range(12):
        ceiling = min(10.0, 0.5 * 2**attempt)
        delays = [backoff.delay(attempt) for _ in range(200)]
        assert min(delays) >= ceiling / 2 and max(delays) <= ceiling
        assert max(delays) - min(delays) > ceiling / 4  # really spread over the half, not one value
    assert backoff.delay(10_000) <= 10.0  # a long outage never overflows


def test_retry_after_wins_capped_with_a_little_jitter() -> None:
    backoff = Backoff(base_s=1.0, max_s=8.0, max_retry_after_s=60.0, rng=random.Random(1))
    assert 3.0 <= backoff.delay(5, retry_after_s=3.0) <= 3.5
    assert 60.0 <= backoff.delay(0, retry_after_s=10_000) <= 60.5


@pytest.mark.parametrize("base, cap", [(0.0, 1.0), (2.0, 1.0)])
def test_bad_bounds_fail(base: float, cap: float) -> None:
    with pytest.raises(ValueError):
        Backoff(base, cap)
