"""The abstention recogniser shared by both judges (pure)."""

from __future__ import annotations

import pytest

from ragmon.scoring.metrics import formulas
from ragmon.scoring.metrics.abstention import check, is_abstention, refusal_phrase


@pytest.mark.parametrize(
    "answer",
    [
        "I don't know.",
        "I do not know the answer to that.",
        "I’m not sure.",
        "The context does not contain information about the CEO's salary.",
        "The provided documents don't mention when the bridge was built.",
        "I cannot answer this question based on the given passages.",
        "Sorry, I couldn't find that in the knowledge base.",
        "There is no information about this in the sources.",
        "No information is available on that topic.",
        "The answer is not mentioned in the provided context.",
        "Based on the passages, there is not enough information to determine the date.",
        "I am unable to answer that. The documents only describe pricing.",
        "",
        "   ",
    ],
)
def test_declining_answers_abstain(answer):
    assert is_abstention(answer)


@pytest.mark.parametrize(
    "answer",
    [
        "Paris is the capital of France.",
        "The tower is 330 metres tall. It was completed in 1889.",
        "Paris is the capital. The context does not give its population.",  # answers first
        "You cannot answer emails on the free plan; upgrade to Pro.",  # "cannot answer" about the product
        "Knowing the answer requires reading chapter 3.",
    ],
)
def test_answers_do_not_abstain(answer):
    assert not is_abstention(answer)


def test_the_phrase_is_reported_for_details_even_when_the_answer_answers():
    assert check("I don't know.").phrase == "I don't know"
    assert check("").phrase == "empty answer"
    answered = check("Paris is the capital. The context does not give its population.")
    assert not answered.abstained and answered.phrase == "The context does not give"
    assert refusal_phrase("Paris is lovely.") is None
    assert check(None).abstained


def test_abstention_formula():
    assert formulas.abstention(True) == 1.0
    assert formulas.abstention(False) == 0.0
