"""Bootstrap statistics: coverage on known distributions, edge cases, the paired test's p-value."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.stats

from ragmon.evaluation import stats


def test_interval_covers_the_true_mean_about_95_percent_of_the_time() -> None:
    rng = np.random.default_rng(42)
    trials, covered = 300, 0
    for trial in range(trials):
        sample = rng.binomial(1, 0.7, size=80).astype(float)
        ci = stats.bootstrap_ci(sample.tolist(), seed=trial)
        assert ci is not None
        covered += ci[0] <= 0.7 <= ci[1]
    assert 0.88 <= covered / trials <= 0.99


def test_interval_agrees_with_scipy_percentile_bootstrap() -> None:
    sample = np.random.default_rng(3).gamma(2.0, 0.2, size=400)
    ours = stats.bootstrap_mean(sample.tolist())
    theirs = scipy.stats.bootstrap(
        (sample,), np.mean, n_resamples=20000, method="percentile", random_state=np.random.default_rng(0)
    ).confidence_interval
    se = sample.std(ddof=1) / math.sqrt(sample.size)
    assert ours.mean == pytest.approx(sample.mean())
    assert ours.ci95 is not None
    assert abs(ours.ci95[0] - theirs.low) < 0.15 * se
    assert abs(ours.ci95[1] - theirs.high) < 0.15 * se
    assert ours.ci95[1] - ours.ci95[0] == pytest.approx(2 * 1.96 * se, rel=0.1)


def test_none_and_nan_are_skipped() -> None:
    est = stats.bootstrap_mean([1.0, None, 0.0, math.nan, None])
    assert est.n == 2 and est.mean == 0.5
    assert est.to_dict()["n"] == 2


def test_no_value_and_one_value() -> None:
    assert stats.bootstrap_mean([]) == stats.MeanEstimate(n=0, mean=None, ci95=None)
    assert stats.bootstrap_mean([None]).to_dict() == {"mean": None, "ci95": None, "n": 0}
    assert stats.bootstrap_ci([]) is None
    one = stats.bootstrap_mean([0.25])
    assert one.mean == 0.25 and one.ci95 == (0.25, 0.25)
    assert one.to_dict() == {"mean": 0.25, "ci95": [0.25, 0.25], "n": 1}


def test_seeded_and_reproducible() -> None:
    values = np.random.default_rng(5).random(100).tolist()
    assert stats.bootstrap_mean(values, seed=1) == stats.bootstrap_mean(values, seed=1)
    assert stats.bootstrap_mean(values, seed=1).ci95 != stats.bootstrap_mean(values, seed=2).ci95


def test_many_values_are_resampled_in_chunks() -> None:
    values = np.random.default_rng(6).random(5000)  # 5000 x 2000 indices: several chunks
    est = stats.bootstrap_mean(values.tolist())
    assert est.ci95 is not None
    se = values.std(ddof=1) / math.sqrt(values.size)
    assert est.ci95[0] < values.mean() < est.ci95[1]
    assert est.ci95[1] - est.ci95[0] == pytest.approx(2 * 1.96 * se, rel=0.1)


def test_bad_resample_count() -> None:
    with pytest.raises(ValueError, match="n_resamples"):
        stats.bootstrap_mean([1.0, 2.0], n_resamples=0)


def _ids(values: np.ndarray) -> dict[str, float | None]:
    return {f"q{i}": float(v) for i, v in enumerate(values)}


def test_paired_identical_runs() -> None:
    values = _ids(np.random.default_rng(8).random(200))
    delta = stats.paired_bootstrap(values, dict(values))
    assert delta.n == 200
    assert delta.mean_delta == 0.0
    assert delta.ci95 == (0.0, 0.0)
    assert delta.p_value == 1.0


def test_paired_large_true_drop_is_significant() -> None:
    rng = np.random.default_rng(9)
    base = rng.random(200)
    current = base - 0.1 + rng.normal(0, 0.1, 200)
    delta = stats.paired_bootstrap(_ids(current), _ids(base))
    assert delta.mean_delta == pytest.approx(float((current - base).mean()))
    assert delta.p_value is not None and delta.p_value < 0.01
    assert delta.p_value == pytest.approx(2 / 2001)  # no resample on the other side: the +1 floor
    assert delta.ci95 is not None and delta.ci95[1] < 0


def test_paired_noise_is_not_significant() -> None:
    rng = np.random.default_rng(10)
    base = rng.random(100)
    current = base + rng.normal(0, 0.2, 100)
    current -= (current - base).mean() - 0.005  # tiny true shift, large noise
    delta = stats.paired_bootstrap(_ids(current), _ids(base))
    assert delta.p_value is not None and delta.p_value > 0.5
    assert delta.ci95 is not None and delta.ci95[0] < 0 < delta.ci95[1]


def test_paired_p_value_is_symmetric_in_direction() -> None:
    rng = np.random.default_rng(11)
    a, b = rng.random(60), rng.random(60)
    forward = stats.paired_bootstrap(_ids(a), _ids(b))
    backward = stats.paired_bootstrap(_ids(b), _ids(a))
    assert forward.mean_delta is not None and backward.mean_delta is not None
    assert forward.mean_delta == pytest.approx(-backward.mean_delta)
    assert forward.p_value == backward.p_value


def test_paired_uses_only_shared_ids_with_values() -> None:
    current = {"a": 1.0, "b": 0.5, "c": None, "d": 0.0}
    baseline = {"b": 0.25, "c": 1.0, "d": 0.5, "e": 1.0, "a": math.nan}
    delta = stats.paired_bootstrap(current, baseline)
    assert delta.n == 2  # b and d
    assert delta.current_mean == 0.25 and delta.baseline_mean == 0.375
    assert delta.mean_delta == pytest.approx(-0.125)
    assert delta.p_value is not None


def test_paired_order_of_ids_does_not_matter() -> None:
    rng = np.random.default_rng(12)
    current, baseline = _ids(rng.random(50)), _ids(rng.random(50))
    shuffled = dict(reversed(list(current.items())))
    assert stats.paired_bootstrap(current, baseline) == stats.paired_bootstrap(shuffled, baseline)


def test_paired_degenerate_cases() -> None:
    empty = stats.paired_bootstrap({"a": 1.0}, {"b": 1.0})
    assert empty.n == 0 and empty.mean_delta is None and empty.p_value is None and empty.ci95 is None
    single = stats.paired_bootstrap({"a": 1.0}, {"a": 0.5})
    assert single.n == 1 and single.mean_delta == 0.5 and single.ci95 == (0.5, 0.5)
    assert single.p_value is None  # one pair cannot be tested
