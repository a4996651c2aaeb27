"""Judges under adversarial answers (issue 17, item 12: the judges engineer owns the fix; this
is the attacker's regression test, kept here with the other hostile cases)."""

from __future__ import annotations

import pytest

from ragmon import semconv as sc
from ragmon.scoring.local import LocalJudge
from ragmon.types import Document, RagTrace

QUESTION = "How much does the Pro plan cost per month?"
CONTEXTS = ("The Pro plan costs 49 dollars per month and includes 10 seats.",
            "Refunds are available within 30 days of purchase for annual plans.")


@pytest.fixture(scope="module")
def judge() -> LocalJudge:
    return LocalJudge()


async def test_an_answer_that_only_repeats_the_question_is_not_relevant(judge: LocalJudge) -> None:
    trace = RagTrace(
        trace_id="0" * 31 + "c", service="hostile", pipeline="faq", question=QUESTION,
        answer=f"{QUESTION} Our office dog is called Biscuit and loves long walks in the park.",
        documents=tuple(Document(id=f"d{i}", content=c, rank=i) for i, c in enumerate(CONTEXTS)))
    scores = await judge.score(trace)
    relevancy = scores.get(sc.METRIC_ANSWER_RELEVANCY)
    assert relevancy is not None and relevancy < 0.5, f"answer relevancy {relevancy} for an off-topic answer"
