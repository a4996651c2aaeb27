"""LocalJudge on small hand-written traces: failures must score lower than healthy answers."""

from __future__ import annotations

import pytest

from ragmon import semconv as sc
from ragmon.errors import ModelError
from ragmon.scoring.judge import Judge
from ragmon.scoring.local import LocalJudge
from ragmon.types import Document, RagTrace

FAITH = sc.METRIC_FAITHFULNESS
RELEVANCY = sc.METRIC_ANSWER_RELEVANCY
PRECISION = sc.METRIC_CONTEXT_PRECISION

CONTEXTS = [
    "The Eiffel Tower is 330 metres tall and was completed in 1889. It stands on the Champ de Mars in Paris.",
    "Gustave Eiffel's engineering company designed and built the tower as the entrance arch to the 1889 "
    "World's Fair.",
    "The tower is open to visitors every day of the year, and tickets can be bought online.",
]
QUESTION = "How tall is the Eiffel Tower and when was it completed?"
FAITHFUL = "The Eiffel Tower is 330 metres tall. It was completed in 1889."

BANK_CONTEXTS = [
    "Savings accounts at Northwind Bank pay 2.5% interest per year, credited monthly.",
    "Customers can open a savings account online with a minimum deposit of 100 dollars.",
]
BANK_QUESTION = "What interest rate does a Northwind Bank savings account pay?"
BANK_FAITHFUL = "A Northwind Bank savings account pays 2.5% interest per year, credited monthly."


@pytest.fixture(scope="module")
def judge() -> LocalJudge:
    return LocalJudge()


def test_is_a_judge(judge: LocalJudge) -> None:
    assert isinstance(judge, Judge)
    assert judge.name == "local"


def test_faithful_answer_scores_high(judge: LocalJudge) -> None:
    s = judge.score_sync(QUESTION, CONTEXTS, FAITHFUL)
    assert s.judge == "local"
    for value in (s.get(FAITH), s.get(RELEVANCY), s.get(PRECISION)):
        assert value is not None and 0.0 <= value <= 1.0
    assert s.get(FAITH) is not None and s.get(FAITH) > 0.7
    assert s.get(RELEVANCY) is not None and s.get(RELEVANCY) > 0.7


@pytest.mark.parametrize(
    ("question", "contexts", "good", "bad", "reason_word"),
    [
        # a changed number
        (QUESTION, CONTEXTS, FAITHFUL,
         "The Eiffel Tower is 450 metres tall. It was completed in 1889.", "450"),
        (BANK_QUESTION, BANK_CONTEXTS, BANK_FAITHFUL,
         "A Northwind Bank savings account pays 4.5% interest per year, credited monthly.", "4.5"),
        # a negation
        (QUESTION, CONTEXTS, "The tower is open to visitors every day of the year.",
         "The tower is not open to visitors every day of the year.", "negation"),
        # a swapped name
        (QUESTION, CONTEXTS, "Gustave Eiffel's engineering company designed and built the tower.",
         "Thomas Edison's engineering company designed and built the tower.", "edison"),
    ],
)
def test_contradictions_score_lower(
    judge: LocalJudge, question: str, contexts: list[str], good: str, bad: str, reason_word: str
) -> None:
    faithful = judge.score_sync(question, contexts, good)
    broken = judge.score_sync(question, contexts, bad)
    assert faithful.get(FAITH) is not None and broken.get(FAITH) is not None
    assert broken.get(FAITH) < 0.5 < faithful.get(FAITH)
    assert reason_word in str(broken.details["faithfulness_reason"]).lower()
    assert broken.details["least_supported_claim"]


def test_off_topic_answer_scores_low_relevancy(judge: LocalJudge) -> None:
    on_topic = judge.score_sync(BANK_QUESTION, BANK_CONTEXTS, BANK_FAITHFUL)
    off_topic = judge.score_sync(
        BANK_QUESTION, BANK_CONTEXTS, "Bananas are a good source of potassium and grow in warm climates."
    )
    assert on_topic.get(RELEVANCY) is not None and off_topic.get(RELEVANCY) is not None
    assert off_topic.get(RELEVANCY) < 0.3 < 0.7 < on_topic.get(RELEVANCY)
    assert off_topic.get(FAITH) is not None and off_topic.get(FAITH) < 0.5
    assert "answer_relevancy_reason" in off_topic.details


def test_irrelevant_contexts_lower_context_precision(judge: LocalJudge) -> None:
    noise = [
        "The Great Barrier Reef is the world's largest coral reef system, off the coast of Queensland.",
        "Photosynthesis converts light energy into chemical energy stored in glucose.",
    ]
    hit = judge.score_sync(QUESTION, CONTEXTS[:2], FAITHFUL)
    miss = judge.score_sync(QUESTION, noise, FAITHFUL)
    late = judge.score_sync(QUESTION, noise + CONTEXTS[:1], FAITHFUL)
    assert hit.get(PRECISION) is not None and miss.get(PRECISION) is not None
    assert late.get(PRECISION) is not None
    assert miss.get(PRECISION) < 0.2 < late.get(PRECISION) < 0.8 < hit.get(PRECISION)
    assert miss.details["irrelevant_contexts"] == [0, 1]
    assert len(late.details["context_relevance"]) == 3
    # the answer is not supported by the wrong contexts either
    assert miss.get(FAITH) is not None and hit.get(FAITH) is not None
    assert miss.get(FAITH) < hit.get(FAITH)


def test_same_domain_retrieval_miss_gets_low_context_precision(judge: LocalJudge) -> None:
    # Every context comes from the right knowledge base but none addresses the question: the
    # relevance model must judge them on an absolute scale, not only against each other.
    # (Before the fit saw synthetic retrieval misses this trace got context precision 0.5.)
    wrong_topic = [
        "Our mobile app lets you freeze a lost card instantly and order a replacement card.",
        "Branch opening hours are 9 am to 5 pm on weekdays; some branches also open on Saturday mornings.",
        "To report fraud, call the 24-hour hotline and never share your PIN with anyone.",
    ]
    answer = "A Northwind Bank savings account pays 2.5% interest per year."
    miss = judge.score_sync(BANK_QUESTION, wrong_topic, answer)
    hit = judge.score_sync(BANK_QUESTION, BANK_CONTEXTS, answer)
    assert miss.get(PRECISION) is not None and hit.get(PRECISION) is not None
    assert miss.get(PRECISION) < 0.5 <= hit.get(PRECISION)
    assert miss.details["irrelevant_contexts"] == [0, 1, 2]
    assert miss.details["context_precision_reason"]


def test_missing_parts_give_none(judge: LocalJudge) -> None:
    no_answer = judge.score_sync(QUESTION, CONTEXTS, None)
    assert no_answer.get(FAITH) is None and no_answer.get(RELEVANCY) is None
    assert no_answer.get(PRECISION) is not None
    no_question = judge.score_sync(None, CONTEXTS, FAITHFUL)
    assert no_question.get(RELEVANCY) is None and no_question.get(PRECISION) is None
    assert no_question.get(FAITH) is not None
    no_contexts = judge.score_sync(QUESTION, [], FAITHFUL)
    assert no_contexts.get(PRECISION) is None
    assert no_contexts.get(FAITH) == 0.0
    blank = judge.score_sync("  ", ["", "  "], "")
    assert blank.as_dict() == {}


async def test_async_score_matches_sync(judge: LocalJudge) -> None:
    trace = RagTrace(
        trace_id="0" * 32,
        service="svc",
        pipeline="rag",
        question=QUESTION,
        answer=FAITHFUL,
        documents=tuple(Document(id=str(i), content=c, rank=i) for i, c in enumerate(CONTEXTS)),
    )
    async_scores = await judge.score(trace)
    sync_scores = judge.score_sync(QUESTION, CONTEXTS, FAITHFUL)
    assert async_scores.as_dict() == pytest.approx(sync_scores.as_dict())
    await judge.aclose()


def test_bad_model_path_fails_fast(tmp_path) -> None:
    with pytest.raises(ModelError, match="not found"):
        LocalJudge(model_path=str(tmp_path / "missing.onnx"))
    wrong = tmp_path / "model.onnx"
    wrong.write_bytes(b"not a model")
    with pytest.raises(ModelError, match="checksum"):
        LocalJudge(model_path=str(wrong), sha256="0" * 64)
