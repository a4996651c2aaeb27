"""Answer relevancy on concise answers and on echoes padded with off-topic text.

A production RAG answer is often one short sentence ("Paris.", "The capital of France is
Paris.") that reuses the question's words; it must read as relevant. (A bare fragment without a
verb, "49 dollars a month.", scores 0.47: borderline, listed among the judge's blind spots.) An
answer that repeats the question and then talks about something else must not borrow the echo's
closeness to the question.
"""

from __future__ import annotations

import pytest

from ragmon import semconv as sc
from ragmon.scoring.local import LocalJudge

PRO = "How much does the Pro plan cost per month?"
PRO_CONTEXTS = ["The Pro plan costs 49 dollars per month and includes 10 seats.",
                "Refunds are available within 30 days of purchase for annual plans."]
PARIS = "What is the capital of France?"
PARIS_CONTEXTS = ["Paris is the capital and most populous city of France."]


@pytest.fixture(scope="module")
def judge() -> LocalJudge:
    return LocalJudge()


@pytest.mark.parametrize(
    ("question", "contexts", "answer"),
    [
        (PRO, PRO_CONTEXTS, "The Pro plan costs 49 dollars per month."),
        (PARIS, PARIS_CONTEXTS, "Paris."),
        (PARIS, PARIS_CONTEXTS, "The capital of France is Paris."),
    ],
)
def test_concise_direct_answers_are_relevant(judge: LocalJudge, question: str, contexts: list[str],
                                             answer: str) -> None:
    relevancy = judge.score_sync(question, contexts, answer).get(sc.METRIC_ANSWER_RELEVANCY)
    assert relevancy is not None and relevancy >= 0.5, (answer, relevancy)


@pytest.mark.parametrize(
    "answer",
    [
        PRO,  # a pure echo
        f"{PRO} Our office dog is called Biscuit and loves long walks in the park.",  # echo + off topic
        "Our office dog is called Biscuit and loves long walks in the park.",
    ],
)
def test_echoes_and_off_topic_answers_are_not(judge: LocalJudge, answer: str) -> None:
    relevancy = judge.score_sync(PRO, PRO_CONTEXTS, answer).get(sc.METRIC_ANSWER_RELEVANCY)
    assert relevancy is not None and relevancy < 0.5, (answer, relevancy)
