"""RAGAS formulas against hand-computed values."""

import numpy as np
import pytest

from ragmon.scoring.metrics import formulas


def test_faithfulness_is_supported_over_claims():
    assert formulas.faithfulness([True, True, False, True]) == pytest.approx(0.75)
    assert formulas.faithfulness([False, False]) == 0.0
    assert formulas.faithfulness([True]) == 1.0


def test_faithfulness_without_claims_is_none_not_perfect():
    assert formulas.faithfulness([]) is None


@pytest.mark.parametrize(
    ("verdicts", "expected"),
    [
        ([True], 1.0),
        ([True, False, False], 1.0),  # the only relevant context is ranked first
        ([False, False, True], 1 / 3),  # precision@3 = 1/3, one relevant item
        ([False, True], 0.5),
        ([True, False, True], (1 / 1 + 2 / 3) / 2),  # = 0.8333
        ([False, True, False, True], (1 / 2 + 2 / 4) / 2),  # = 0.5
        ([True, True, False], 1.0),
        ([False, True, True], (1 / 2 + 2 / 3) / 2),  # = 0.5833
    ],
)
def test_context_precision_is_rank_weighted_average_precision(verdicts, expected):
    assert formulas.context_precision(verdicts) == pytest.approx(expected, abs=1e-8)


def test_context_precision_all_irrelevant_is_zero_and_no_contexts_is_none():
    assert formulas.context_precision([False, False, False]) == 0.0
    assert formulas.context_precision([]) is None


def test_relevant_first_beats_relevant_last():
    first = formulas.context_precision([True, False, False, False])
    last = formulas.context_precision([False, False, False, True])
    assert first is not None and last is not None
    assert first > last


def test_answer_relevancy_is_mean_cosine_to_the_question():
    q = np.array([1.0, 0.0])
    generated = np.array([[1.0, 0.0], [0.0, 1.0], [3.0, 3.0]])  # cosines 1, 0, 1/sqrt(2); norms ignored
    expected = (1.0 + 0.0 + 2**-0.5) / 3
    assert formulas.answer_relevancy(q, generated, noncommittal=False) == pytest.approx(expected)


def test_answer_relevancy_noncommittal_is_zero_and_no_questions_is_none():
    q = np.array([1.0, 0.0])
    assert formulas.answer_relevancy(q, np.array([[1.0, 0.0]]), noncommittal=True) == 0.0
    assert formulas.answer_relevancy(q, np.zeros((0, 2)), noncommittal=False) is None


def test_answer_relevancy_is_clipped_to_a_ratio():
    q = np.array([1.0, 0.0])
    assert formulas.answer_relevancy(q, np.array([[-1.0, 0.0]]), noncommittal=False) == 0.0


def test_a_contradiction_caps_faithfulness_below_the_threshold() -> None:
    assert formulas.with_contradictions(0.9, 0, 6) == 0.9  # no contradiction: the score as it was
    assert formulas.with_contradictions(0.9, 1, 6) == formulas.CONTRADICTION_CAP  # 0.9 x 11/12 > 0.45
    assert formulas.with_contradictions(0.3, 1, 2) == pytest.approx(0.3 * 0.75)  # under the cap: lowered
    assert formulas.with_contradictions(0.8, 6, 6) == pytest.approx(0.4)  # every claim: half the score
