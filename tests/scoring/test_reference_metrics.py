"""Reference-based metrics: the RAGAS formulas, and the local judge's ``score_for_eval`` directionally."""

from __future__ import annotations

import numpy as np
import pytest

from ragmon import semconv as sc
from ragmon.scoring.judge import EvalJudge, EvalRequest
from ragmon.scoring.local import LocalJudge
from ragmon.scoring.metrics import formulas
from ragmon.types import Document, RagTrace

RECALL = sc.METRIC_CONTEXT_RECALL
CORRECTNESS = sc.METRIC_ANSWER_CORRECTNESS
ABSTENTION = sc.METRIC_ABSTENTION
PRESENCE = sc.METRIC_CITATION_PRESENCE
POINTING = sc.METRIC_CITATION_CORRECTNESS
COVERAGE = sc.METRIC_CITATION_COVERAGE
OFFLINE = {RECALL, CORRECTNESS, ABSTENTION, PRESENCE, POINTING, COVERAGE}
CITES = r"\[([^\[\]]{1,64})\]"


# --- formulas -----------------------------------------------------------------------------------
def test_context_recall_is_attributed_over_reference_claims():
    assert formulas.context_recall([True, False, True, True]) == 0.75
    assert formulas.context_recall([False]) == 0.0
    assert formulas.context_recall([]) is None


@pytest.mark.parametrize(
    ("tp", "fp", "fn", "expected"),
    [(2, 0, 0, 1.0), (1, 1, 1, 0.5), (3, 1, 0, 6 / 7), (0, 2, 3, 0.0), (2, 0, 2, 2 / 3), (0, 0, 0, None)],
)
def test_claim_f1_is_ragas_factuality(tp, fp, fn, expected):
    result = formulas.claim_f1(tp, fp, fn)
    if expected is None:
        assert result is None
        return
    assert result == pytest.approx(expected)
    # the same number as precision/recall F1 (RAGAS's fbeta_score with beta = 1)
    if tp:
        precision, recall = tp / (tp + fp), tp / (tp + fn)
        assert result == pytest.approx(2 * precision * recall / (precision + recall))


def test_answer_correctness_blends_f1_and_similarity_075_025():
    assert formulas.answer_correctness(1, 1, 1, 0.8) == pytest.approx(0.75 * 0.5 + 0.25 * 0.8)
    assert formulas.answer_correctness(0, 2, 2, 0.9) == pytest.approx(0.25 * 0.9)
    assert formulas.answer_correctness(2, 0, 0, 1.0) == 1.0
    assert formulas.answer_correctness(1, 0, 1, -0.3) == pytest.approx(0.75 * 2 / 3)  # negative cosine -> 0
    assert formulas.answer_correctness(1, 0, 1, None) == pytest.approx(2 / 3)  # no embeddings: F1 alone
    assert formulas.answer_correctness(0, 0, 0, 0.9) is None
    assert formulas.answer_correctness(1, 1, 1, 0.8, weights=(1.0, 0.0)) == 0.5
    with pytest.raises(ValueError):
        formulas.claim_f1(-1, 0, 0)


def test_cosine():
    assert formulas.cosine(np.array([1.0, 0.0]), np.array([2.0, 0.0])) == pytest.approx(1.0)
    assert formulas.cosine(np.array([1.0, 0.0]), np.array([0.0, 3.0])) == pytest.approx(0.0)
    assert formulas.cosine(np.zeros(3), np.ones(3)) == 0.0


# --- the local judge ----------------------------------------------------------------------------
CONTEXTS = [
    "The Eiffel Tower is 330 metres tall and was completed in 1889. It stands on the Champ de Mars in Paris.",
    "Gustave Eiffel's engineering company designed and built the tower as the entrance arch to the 1889 "
    "World's Fair.",
    "The tower is open to visitors every day of the year, and tickets can be bought online.",
]
QUESTION = "How tall is the Eiffel Tower and when was it completed?"
REFERENCE = "The Eiffel Tower is 330 metres tall. It was completed in 1889."
ABSENT_REFERENCE = "The Eiffel Tower weighs 10,100 tonnes. It was repainted by Georges Garnier in 1968."


def trace(answer: str, contexts=CONTEXTS, question=QUESTION, ids=None) -> RagTrace:
    ids = ids or [f"d{i}" for i in range(len(contexts))]
    docs = tuple(Document(id=i, content=c, rank=r) for r, (i, c) in enumerate(zip(ids, contexts, strict=True)))
    return RagTrace(trace_id="ab" * 16, service="svc", pipeline="qa", question=question, answer=answer,
                    documents=docs)


@pytest.fixture(scope="module")
def judge() -> LocalJudge:
    return LocalJudge()


async def test_local_judge_is_an_eval_judge_and_adds_only_what_is_asked(judge):
    assert isinstance(judge, EvalJudge)
    t = trace(REFERENCE)
    online = await judge.score(t)
    plain = await judge.score_for_eval(t, EvalRequest())
    assert dict(plain.values) == pytest.approx(dict(online.values))  # the same reference-free numbers
    assert not OFFLINE & set(plain.values)
    assert plain.details["abstained"] is False
    with_reference = await judge.score_for_eval(t, EvalRequest(reference=REFERENCE))
    assert set(with_reference.values) - set(online.values) == {RECALL, CORRECTNESS}
    everything = await judge.score_for_eval(t, EvalRequest(reference=REFERENCE, citation_pattern=CITES,
                                                           expect_abstention=True))
    assert set(everything.values) - set(online.values) == OFFLINE


def test_context_recall_high_when_the_reference_facts_are_retrieved_low_when_not(judge):
    found = judge.score_eval_sync(trace(REFERENCE), EvalRequest(reference=REFERENCE))
    missing = judge.score_eval_sync(trace(REFERENCE), EvalRequest(reference=ABSENT_REFERENCE))
    assert found.get(RECALL) is not None and found.get(RECALL) >= 0.9
    assert missing.get(RECALL) is not None and missing.get(RECALL) <= 0.1
    assert "reference claim not in the contexts" in missing.details["context_recall_reason"]
    assert [c["attributed"] for c in found.details["reference_claims"]] == [True, True]
    # half the reference retrieved
    half = judge.score_eval_sync(trace(REFERENCE), EvalRequest(
        reference="The Eiffel Tower is 330 metres tall. It was repainted by Georges Garnier in 1968."))
    assert half.get(RECALL) == pytest.approx(0.5)


def test_context_recall_is_zero_without_contexts_and_none_without_reference_claims(judge):
    empty = judge.score_eval_sync(trace(REFERENCE, contexts=[]), EvalRequest(reference=REFERENCE))
    assert empty.get(RECALL) == 0.0
    blank = judge.score_eval_sync(trace(REFERENCE), EvalRequest(reference="  "))
    assert RECALL in blank.values and blank.get(RECALL) is None and blank.get(CORRECTNESS) is None


def test_answer_correctness_high_for_a_correct_answer_low_for_a_contradicting_one(judge):
    correct = judge.score_eval_sync(trace("The Eiffel Tower is 330 metres tall. It was completed in 1889."),
                                    EvalRequest(reference=REFERENCE))
    partial = judge.score_eval_sync(trace("The Eiffel Tower is 330 metres tall."), EvalRequest(reference=REFERENCE))
    wrong = judge.score_eval_sync(trace("The Eiffel Tower is 450 metres tall. It was completed in 1925."),
                                  EvalRequest(reference=REFERENCE))
    off_topic = judge.score_eval_sync(trace("Bananas are a yellow fruit rich in potassium."),
                                      EvalRequest(reference=REFERENCE))
    declined = judge.score_eval_sync(trace("I don't know."), EvalRequest(reference=REFERENCE))
    values = [s.get(CORRECTNESS) for s in (correct, partial, wrong, off_topic, declined)]
    assert all(v is not None for v in values)
    assert values[0] >= 0.9
    assert 0.5 < values[1] < values[0]  # one of two reference facts: F1 2/3
    assert values[2] < 0.3 and values[3] < 0.3 and values[4] < 0.3
    assert correct.details["answer_correctness_counts"] == {"tp": 2, "fp": 0, "fn": 0}
    assert partial.details["answer_correctness_counts"] == {"tp": 1, "fp": 0, "fn": 1}
    assert wrong.details["answer_correctness_counts"]["tp"] == 0
    assert declined.details["answer_correctness_counts"]["tp"] == 0
    # the contradicting answer is still faithful to... nothing: its facts are not in the contexts either
    assert wrong.get(sc.METRIC_FAITHFULNESS) < 0.5


def test_citation_pointing_to_the_wrong_context_is_incorrect(judge):
    right = judge.score_eval_sync(
        trace("The Eiffel Tower is 330 metres tall [1]. Gustave Eiffel's company built the tower [2]."),
        EvalRequest(citation_pattern=CITES),
    )
    assert right.get(PRESENCE) == 1.0 and right.get(POINTING) == 1.0 and right.get(COVERAGE) == 1.0
    wrong = judge.score_eval_sync(trace("The Eiffel Tower is 330 metres tall [3]."),
                                  EvalRequest(citation_pattern=CITES))
    assert wrong.get(POINTING) == 0.0 and wrong.get(COVERAGE) == 0.0 and wrong.get(PRESENCE) == 1.0
    assert wrong.details["citations"][0]["citations"][0] == {"key": "3", "context": 3, "supported": False}


def test_citation_metrics_with_ids_unknown_keys_and_uncited_claims(judge):
    t = trace(
        "The Eiffel Tower is 330 metres tall [kb-1]. It is open every day of the year [kb-9]. "
        "It was completed in 1889.",
        ids=["kb-1", "kb-2", "kb-3"],
    )
    s = judge.score_eval_sync(t, EvalRequest(citation_pattern=CITES))
    assert s.get(PRESENCE) == pytest.approx(2 / 3)
    assert s.get(POINTING) == pytest.approx(1 / 2)  # the unknown key cannot be correct
    assert s.get(COVERAGE) == pytest.approx(1 / 3)
    assert s.details["unknown_citations"] == ["kb-9"]
    # markers are stripped before judging: "[1]" is not a number missing from the contexts
    assert s.get(sc.METRIC_FAITHFULNESS) > 0.5


def test_an_answer_without_markers_has_no_citations(judge):
    s = judge.score_eval_sync(trace(REFERENCE), EvalRequest(citation_pattern=CITES))
    assert s.get(PRESENCE) == 0.0 and s.get(POINTING) is None and s.get(COVERAGE) == 0.0


def test_abstention_only_for_no_answer_questions_but_always_in_details(judge):
    declined = judge.score_eval_sync(trace("The context does not say how tall the tower is."),
                                     EvalRequest(expect_abstention=True))
    invented = judge.score_eval_sync(trace("The tower is 412 metres tall."), EvalRequest(expect_abstention=True))
    assert declined.get(ABSTENTION) == 1.0 and invented.get(ABSTENTION) == 0.0
    answerable = judge.score_eval_sync(trace("I don't know."), EvalRequest(reference=REFERENCE))
    assert ABSTENTION not in answerable.values
    assert answerable.details["abstained"] is True and answerable.details["abstention_phrase"] == "I don't know"


def test_claim_support_ranks_supported_above_unsupported(judge):
    supports = judge.claim_support(
        ["The Eiffel Tower is 330 metres tall.",
         "The tower was designed by an Italian sculptor for the Olympic Games.",
         "Bananas are rich in potassium and grow in the tropics."],
        CONTEXTS, QUESTION,
    )
    assert supports[0] > 0.9
    assert supports[1] < 0.5 and supports[2] < 0.5
