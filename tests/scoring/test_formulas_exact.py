"""Exact formulas (issue 13, item 5): a score equal to a threshold compares equal.

RAGAS's context precision divides by Σ vᵢ + ε; with ε = 1e-10 one relevant context out of two at
rank 2 came out 0.49999999995 and fell under the default 0.5 threshold, so a trace was diagnosed
as a retrieval failure that the metric's own definition puts exactly on the line."""

from __future__ import annotations

from fractions import Fraction
from itertools import product

import pytest

from ragmon import semconv as sc
from ragmon.scoring.metrics import formulas
from ragmon.scoring.metrics.diagnosis import diagnose
from ragmon.types import Scores


def _exact(verdicts: tuple[bool, ...]) -> Fraction:
    relevant, total = 0, Fraction(0)
    for i, v in enumerate(verdicts, start=1):
        if v:
            relevant += 1
            total += Fraction(relevant, i)
    return total / relevant if relevant else Fraction(0)


def test_half_is_exactly_half() -> None:
    assert formulas.context_precision([False, True]) == 0.5
    assert formulas.context_precision([True, False, False, True]) == 0.75  # (1 + 2/4) / 2


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 6])
def test_every_verdict_pattern_is_the_correctly_rounded_fraction(n: int) -> None:
    for verdicts in product([False, True], repeat=n):
        assert formulas.context_precision(verdicts) == float(_exact(verdicts)), verdicts


def test_ragas_epsilon_is_still_available_on_request() -> None:
    assert formulas.context_precision([False, True], epsilon=formulas.EPSILON) == pytest.approx(0.49999999995)
    assert formulas.context_precision([False, False], epsilon=formulas.EPSILON) == 0.0


def test_a_score_on_the_threshold_is_not_a_failure() -> None:
    precision = formulas.context_precision([False, True])
    assert precision is not None
    scores = Scores({sc.METRIC_CONTEXT_PRECISION: precision, sc.METRIC_FAITHFULNESS: 1.0,
                     sc.METRIC_ANSWER_RELEVANCY: 1.0}, judge="t")
    verdict, reason = diagnose(scores, {sc.METRIC_CONTEXT_PRECISION: 0.5})
    assert verdict == sc.VERDICT_OK, reason
    below = formulas.context_precision([False, False, True])  # 1/3
    assert below is not None
    assert diagnose(Scores({sc.METRIC_CONTEXT_PRECISION: below}, judge="t"),
                    {sc.METRIC_CONTEXT_PRECISION: 0.5})[0] == sc.VERDICT_RETRIEVAL
