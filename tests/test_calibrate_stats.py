"""The calibration statistics against values computed by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ragmon.calibration import stats


def test_rankdata_averages_ties() -> None:
    assert stats.rankdata([3, 1, 3, 2]).tolist() == [3.5, 1.0, 3.5, 2.0]
    assert stats.rankdata([5, 5, 5]).tolist() == [2.0, 2.0, 2.0]


def test_roc_auc_with_ties() -> None:
    # pairs (good, failure): (.9,.4)=1 (.9,.1)=1 (.4,.4)=1/2 (.4,.1)=1  -> 3.5 / 4
    assert stats.roc_auc([1, 1, 0, 0], [0.9, 0.4, 0.4, 0.1]) == pytest.approx(0.875)
    assert stats.roc_auc([1, 0], [0.2, 0.8]) == 0.0
    assert stats.roc_auc([1, 0, 1, 0], [0.5, 0.5, 0.5, 0.5]) == 0.5
    assert math.isnan(stats.roc_auc([1, 1], [0.1, 0.2]))


def test_roc_auc_matches_pair_counting() -> None:
    rng = np.random.default_rng(1)
    y = rng.integers(0, 2, 60)
    s = rng.integers(0, 5, 60) / 4  # many ties
    good, bad = s[y == 1], s[y == 0]
    pairs = [(g > b) + 0.5 * (g == b) for g in good for b in bad]
    assert stats.roc_auc(y, s) == pytest.approx(sum(pairs) / len(pairs))


def test_confusion_and_derived_metrics() -> None:
    labels = [1, 1, 0, 0, 1, 0]
    scores = [0.9, 0.3, 0.2, 0.6, 0.7, 0.4]
    c = stats.confusion(labels, scores, 0.5)  # predicted failures: indices 1, 2, 5
    assert (c.tp, c.fp, c.fn, c.tn) == (2, 1, 1, 2)
    assert stats.balanced_accuracy(c) == pytest.approx(2 / 3)
    p, r, f1 = stats.precision_recall_f1(c)
    assert (p, r, f1) == pytest.approx((2 / 3, 2 / 3, 2 / 3))
    # observed 4/6, expected .5*.5 + .5*.5 = .5  -> (2/3 - 1/2) / (1/2)
    assert stats.cohen_kappa(c) == pytest.approx(1 / 3)


def test_kappa_and_precision_edge_cases() -> None:
    perfect = stats.Confusion(tp=3, fp=0, fn=0, tn=5)
    assert stats.cohen_kappa(perfect) == 1.0
    never_flags = stats.Confusion(tp=0, fp=0, fn=3, tn=5)
    p, r, f1 = stats.precision_recall_f1(never_flags)
    assert math.isnan(p) and r == 0.0 and math.isnan(f1)
    assert stats.balanced_accuracy(never_flags) == 0.5
    assert math.isnan(stats.cohen_kappa(stats.Confusion(0, 0, 0, 0)))


def test_best_threshold_maximises_balanced_accuracy() -> None:
    t, ba = stats.best_threshold([0, 0, 1, 1], [0.1, 0.2, 0.3, 0.4])
    assert t == pytest.approx(0.25) and ba == 1.0
    # one failure scores high: best is still between .2 and .3 (BA = (1/2 + 1) / 2 = .75)
    t, ba = stats.best_threshold([0, 0, 1, 1], [0.1, 0.9, 0.3, 0.4])
    assert ba == pytest.approx(0.75)
    assert 0.1 < t < 0.3
    assert math.isnan(stats.best_threshold([1, 1], [0.2, 0.3])[0])


def test_bootstrap_interval() -> None:
    y = np.array([0, 0, 0, 1, 1, 1] * 5)
    s = np.array([0.1, 0.2, 0.3, 0.7, 0.8, 0.9] * 5)
    assert stats.bootstrap_ci(y, s, stats.roc_auc, n=200, seed=3) == (1.0, 1.0)
    s2 = np.random.default_rng(0).random(len(y))
    lo, hi = stats.bootstrap_ci(y, s2, stats.roc_auc, n=300, seed=3)
    assert lo < stats.roc_auc(y, s2) < hi
    assert stats.bootstrap_ci(y, s2, stats.roc_auc, n=300, seed=3) == (lo, hi)  # seeded
    assert all(math.isnan(v) for v in stats.bootstrap_ci(y, s2, stats.roc_auc, n=0))


def test_paired_bootstrap_interval_of_a_difference() -> None:
    # calibrate --fit's gain: AUC(refit) - AUC(default) on the same resampled rows
    y = np.array([0, 0, 0, 1, 1, 1] * 5)
    perfect = np.array([0.1, 0.2, 0.3, 0.7, 0.8, 0.9] * 5)
    noisy = np.random.default_rng(0).random(len(y))
    assert stats.bootstrap_ci(y, noisy, stats.roc_auc, n=200, seed=3, baseline=noisy) == (0.0, 0.0)
    lo, hi = stats.bootstrap_ci(y, perfect, stats.roc_auc, n=300, seed=3, baseline=noisy)
    assert 0.0 < lo < 1.0 - stats.roc_auc(y, noisy) < hi <= 1.0
    # the resamples are the unpaired interval's (same seed): each bound is 1 - the noisy judge's
    noisy_lo, noisy_hi = stats.bootstrap_ci(y, noisy, stats.roc_auc, n=300, seed=3)
    assert (lo, hi) == pytest.approx((1.0 - noisy_hi, 1.0 - noisy_lo))
    assert all(math.isnan(v) for v in stats.bootstrap_ci(y, perfect, stats.roc_auc, n=0, baseline=noisy))


def test_ranking_metrics_by_hand() -> None:
    # one query each, in the judge's order (scores descending)
    one = stats.ranking_metrics([[1, 0, 1, 0]], [[0.9, 0.8, 0.7, 0.6]], k=3)
    assert one["map"] == pytest.approx((1 / 1 + 2 / 3) / 2) and one["mrr"] == 1.0
    late = stats.ranking_metrics([[0, 0, 1]], [[0.9, 0.8, 0.7]], k=2)
    assert late["mrr"] == pytest.approx(1 / 3) and late["ndcg@2"] == 0.0
    dcg = 1 / math.log2(3) + 1 / math.log2(4)
    idcg = 1 + 1 / math.log2(3)
    assert stats.ranking_metrics([[0, 1, 1]], [[0.9, 0.8, 0.7]], k=3)["ndcg@3"] == pytest.approx(dcg / idcg)
    nothing = stats.ranking_metrics([[0, 0]], [[0.9, 0.8]], k=2)  # not computable: no query counts
    assert nothing["queries"] == 0 and math.isnan(nothing["map"])
    m = stats.ranking_metrics([[1, 0], [0, 1], [0, 0]], [[0.9, 0.1], [0.9, 0.1], [0.5, 0.4]], k=2)
    assert m["queries"] == 2  # the query without a relevant item is left out
    assert m["map"] == pytest.approx(0.75) and m["mrr"] == pytest.approx(0.75)
    # ties keep the given order
    assert stats.ranking_order([0.5, 0.5, 0.9]).tolist() == [2, 0, 1]
