"""The one logistic regression (ragmon.calibration.fit.Logistic), used by ``calibrate --fit`` and by
the benches that fit the shipped coefficients: balanced by default, or with the caller's row weights.
At the optimum the unpenalised intercept's equation holds: the weighted mean prediction equals the
weighted share of positives — a property of the fit, checked here for both weightings."""

from __future__ import annotations

import numpy as np

from ragmon.calibration.fit import Logistic


def _data(n: int = 400, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 3)) * [1.0, 5.0, 0.2] + [0.0, 2.0, -1.0]
    logit = x @ np.array([1.5, -0.3, 2.0]) + 1.0  # a minority of positives
    y = (rng.uniform(size=n) < 1 / (1 + np.exp(-logit))).astype(float)
    return x, y


def test_row_weights_are_honoured_and_the_intercept_equation_holds() -> None:
    x, y = _data()
    assert 0.05 < y.mean() < 0.4
    plain = Logistic(["a", "b", "c"]).fit(x, y, l2=1.0, weights=np.ones(len(y)))
    assert abs(plain.predict(x).mean() - y.mean()) < 1e-6  # every row counts once

    balanced = Logistic(["a", "b", "c"]).fit(x, y, l2=1.0)
    sw = np.where(y == 1, 0.5 / y.mean(), 0.5 / (1 - y.mean()))
    assert abs(float(np.sum(sw * (balanced.predict(x) - y)))) < 1e-6  # classes weighted equally
    assert balanced.predict(x).mean() > plain.predict(x).mean() + 0.05  # and that moves the scores up

    explicit = Logistic(["a", "b", "c"]).fit(x, y, l2=1.0, weights=sw)
    assert np.allclose(explicit.predict(x), balanced.predict(x), atol=1e-9)


def test_raw_weights_reproduce_the_standardised_model() -> None:
    x, y = _data(seed=1)
    model = Logistic(["a", "b", "c"]).fit(x, y)
    raw = model.raw_weights()
    z = raw["bias"] + x @ np.array([raw["a"], raw["b"], raw["c"]])
    assert np.allclose(1 / (1 + np.exp(-z)), model.predict(x), atol=1e-9)
