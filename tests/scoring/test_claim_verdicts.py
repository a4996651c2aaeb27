"""Claim verdicts of the local judge on real sentences: a changed number, negation, name, month or
unit is ``contradicted`` with its evidence and reason; paraphrases, lists and claims combining two
sentences are not; and one contradiction in a long answer moves faithfulness clearly."""

from __future__ import annotations

import pytest

from ragmon.scoring import claim_verdicts as cv
from ragmon.scoring.local import LocalJudge
from ragmon.scoring.local._online import online_values

CONTEXTS = [
    "The Team plan costs $19 per month and includes 5 seats.",
    "The Business plan costs $49 per month and includes 20 seats. It adds single sign-on.",
    "Refunds are possible within 30 days of purchase.",
    "Support is available by e-mail from Monday to Friday. The office moved to Lisbon in March 2021.",
    "The warehouse is in Porto.",
]


@pytest.fixture(scope="module")
def judge() -> LocalJudge:
    return LocalJudge(cache_size=0)


def verdicts(judge: LocalJudge, answer: str) -> tuple[float, list[dict]]:
    details: dict = {}
    values = online_values(judge.analyse("What do the plans cost?", CONTEXTS, answer), details)
    return values["faithfulness"], details[cv.DETAIL_KEY]


@pytest.mark.parametrize(("answer", "reason"), [
    ("The Team plan costs $49 per month.", "number 49 ≠ 19"),
    ("The Business plan costs $49 per week.", "unit: week ≠ month"),
    ("Refunds are not possible within 30 days of purchase.", "negation"),
    ("The office moved to Lisbon in June 2021.", "date: June ≠ March"),
    ("The office moved to Porto in March 2021.", "name: Porto ≠ Lisbon"),  # Porto: the warehouse's city
    ("The office moved to Madrid in March 2021.", "name(s) not in contexts: Madrid"),  # a name they do not hold
])
def test_a_changed_fact_is_contradicted_with_its_evidence(judge, answer, reason):
    score, found = verdicts(judge, answer)
    [v] = found
    assert v["verdict"] == cv.CONTRADICTED and reason in v["reason"], v
    assert v["evidence"] and v["evidence"] in " ".join(CONTEXTS)
    assert score < 0.5


@pytest.mark.parametrize("answer", [
    "The Business plan costs $49 per month.",
    "Team costs 19 dollars a month, with five seats.",  # paraphrase, number word
    "Both plans are billed monthly: Team at $19 and Business at $49.",  # two sentences in one claim
    "Plans: Team ($19/month, 5 seats), Business ($49/month, 20 seats).",  # a list
    "You can get a refund within 30 days of purchase.",
])
def test_paraphrases_lists_and_combined_claims_are_not_contradicted(judge, answer):
    _, found = verdicts(judge, answer)
    assert all(v["verdict"] != cv.CONTRADICTED for v in found), found


@pytest.mark.parametrize("answer", [
    "Based on the given passages, the Team plan costs $49 per month.",
    "According to passage 1, the Team plan costs $49 per month.",
    "Passage 1 mentions that the Team plan costs $49 per month.",
    "The Team plan costs $49 per month (Passage 1).",
])
def test_an_attribution_does_not_exempt_a_changed_fact(judge, answer):
    """"Based on the passages, X" claims X: the attribution is not a statement about the sources."""
    score, found = verdicts(judge, answer)
    assert [v["verdict"] for v in found] == [cv.CONTRADICTED], found
    assert "49" in found[0]["reason"] and score < 0.5


@pytest.mark.parametrize("answer", [
    "The Team plan costs $19 per month (Passage 7).",  # a citation's number is not a quantity
    "According to Passage 3 and 4, the Team plan includes 5 seats [2].",
    "The passages do not mention a plan that costs $99.",  # a meta-statement stays one
])
def test_citations_and_meta_statements_are_not_contradictions(judge, answer):
    _, found = verdicts(judge, answer)
    assert all(v["verdict"] != cv.CONTRADICTED for v in found), found


def test_one_contradiction_in_a_long_answer_moves_the_score(judge):
    faithful = ("The Team plan costs $19 per month and includes 5 seats. The Business plan costs $49 per month. "
                "It adds single sign-on. Refunds are possible within 30 days of purchase. Support is available "
                "by e-mail from Monday to Friday.")
    edited = faithful.replace("Refunds are possible", "Refunds are not possible")
    before, _ = verdicts(judge, faithful)
    after, found = verdicts(judge, edited)
    assert [v["verdict"] for v in found].count(cv.CONTRADICTED) == 1
    assert before - after >= 0.15, (before, after)


def test_the_verdict_shape_is_bounded():
    long = cv.ClaimVerdict("x" * 1000, cv.UNSUPPORTED, "y" * 1000, None).as_detail()
    assert len(long["claim"]) == cv.MAX_TEXT_CHARS and long["reason"] is None
    assert len(cv.as_details(cv.ClaimVerdict(str(i), cv.SUPPORTED) for i in range(50))) == cv.MAX_CLAIM_VERDICTS
    with pytest.raises(ValueError, match="verdict"):
        cv.ClaimVerdict("c", "maybe")
    assert cv.contradicts({}) is None and cv.contradicts({cv.DETAIL_KEY: []}) is False
