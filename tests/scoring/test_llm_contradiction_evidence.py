"""A ``contradicted`` item of the LLM judge's reply counts only when its evidence quotes a context
the judge was shown (tolerant of case, whitespace, quotes and small edits): over real HTTP with the
OpenAI-protocol test server, a reply whose evidence quotes the answer, or nothing in the contexts,
does not lower the score, and the dropped item is counted by reason."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ragmon import semconv as sc
from ragmon.scoring import claim_verdicts as cv
from ragmon.scoring.judge import EvalRequest
from ragmon.scoring.llm import LlmJudge
from ragmon.scoring.llm.evidence import (
    MIN_CONTAINMENT,
    EvidenceIndex,
    checked,
    containment,
    tokens,
)
from ragmon.scoring.llm.verdicts import parse_compact
from ragmon.scoring.metrics import formulas
from ragmon.types import Document, RagTrace
from tests.fakes.openai_server import FakeOpenAI, Reply, compact_responder

CONTEXTS = [
    "Brightdesk offers three plans. The Team plan costs $19 per month and includes 10 seats.",
    "The Business plan costs $49 per month. It adds single sign-on and audit logs.",
]
# sentence 1 changes the Team plan's price (a one-edit contradiction of context 1); sentence 2 is supported
ANSWER = "The Team plan costs $49 per month and includes 10 seats. The Business plan adds single sign-on."
CLAIMS = [
    {"sentence": 1, "claim": "The Team plan costs $49 per month.", "supported": False},
    {"sentence": 1, "claim": "The Team plan includes 10 seats.", "supported": True},
    {"sentence": 2, "claim": "The Business plan adds single sign-on.", "supported": True},
]
NOT_CONTRADICTED = formulas.faithfulness_with_contradictions([False, True, True], 0)


def trace() -> RagTrace:
    return RagTrace(trace_id="ef" * 16, service="s", pipeline="p", question="What does the Team plan cost?",
                    answer=ANSWER, documents=tuple(Document(id=f"d{i}", content=c, rank=i)
                                                   for i, c in enumerate(CONTEXTS)))


def replying(contradicted: list[dict[str, Any]], claims: list[dict[str, Any]] = CLAIMS):
    def respond(body: dict[str, Any]) -> Reply:
        verdict = json.loads(compact_responder(body).content or "{}")
        verdict["claims"] = claims
        verdict["contradicted"] = contradicted
        return Reply.json(verdict)
    return respond


async def judged(server: FakeOpenAI, metrics=None, contradicted=(), claims=CLAIMS, eval_request=None):
    server.responder = replying(list(contradicted), claims)
    judge = LlmJudge(base_url=server.base_url, model="m", embedding_model="e", cache_size=0, metrics=metrics)
    try:
        if eval_request is not None:
            return await judge.score_for_eval(trace(), eval_request)
        return await judge.score(trace())
    finally:
        await judge.aclose()


def dropped(metrics, reason: str) -> float:
    value = metrics.registry.get_sample_value(f"{sc.M_JUDGE_INVALID_CONTRADICTIONS}_total",
                                              {"judge": "llm", "reason": reason})
    return value or 0.0


def verdicts(scores) -> list[str]:
    return [v["verdict"] for v in scores.details[cv.DETAIL_KEY]]


# --- over real HTTP ---------------------------------------------------------------------------
@pytest.mark.parametrize("evidence", [
    "The Team plan costs $19 per month and includes 10 seats.",  # verbatim
    "“the team plan costs $19 per month,   and includes 10 seats”",  # case, quotes, whitespace, a comma
    "The Team plan costs $19 a month and includes ten seats.",  # two small edits in 11 tokens
    "Team plan costs $19 per month",  # part of the sentence
])
async def test_a_contradiction_quoting_a_context_counts(server, metrics, evidence):
    scores = await judged(server, metrics, [{"claim": 1, "evidence": evidence, "reason": "number 49 ≠ 19"}])
    assert verdicts(scores) == [cv.CONTRADICTED, cv.SUPPORTED, cv.SUPPORTED]
    assert scores.details[cv.DETAIL_KEY][0]["evidence"] == " ".join(evidence.split())
    assert scores.get(sc.METRIC_FAITHFULNESS) == pytest.approx(
        formulas.faithfulness_with_contradictions([False, True, True], 1))
    assert scores.get(sc.METRIC_FAITHFULNESS) < NOT_CONTRADICTED
    assert "invalid_contradictions" not in scores.details
    assert dropped(metrics, sc.INVALID_CONTRADICTION_NOT_IN_SOURCES) == 0


@pytest.mark.parametrize(("evidence", "reason"), [
    # the answer's own sentence, quoted back (what a 1.5B model did in 3 of 4 items)
    ("The Team plan costs $49 per month and includes 10 seats.", sc.INVALID_CONTRADICTION_QUOTES_ANSWER),
    ("The Team plan costs $49 per month.", sc.INVALID_CONTRADICTION_QUOTES_ANSWER),
    # a reason in place of a quote, a paraphrase, nothing
    ("This sentence directly contradicts the answer", sc.INVALID_CONTRADICTION_NOT_IN_SOURCES),
    ("Brightdesk's cheapest offering is priced at nineteen dollars monthly.", sc.INVALID_CONTRADICTION_NOT_IN_SOURCES),
    ("", sc.INVALID_CONTRADICTION_NOT_IN_SOURCES),
    ("$19", sc.INVALID_CONTRADICTION_NOT_IN_SOURCES),
])
async def test_evidence_that_quotes_the_answer_or_no_context_does_not_lower_the_score(server, metrics, evidence,
                                                                                       reason):
    scores = await judged(server, metrics, [{"claim": 1, "evidence": evidence, "reason": "number"}])
    plain = await judged(server, None, [])
    assert scores.get(sc.METRIC_FAITHFULNESS) == plain.get(sc.METRIC_FAITHFULNESS) == NOT_CONTRADICTED
    assert verdicts(scores) == [cv.UNSUPPORTED, cv.SUPPORTED, cv.SUPPORTED]  # the claim's own verdict
    assert scores.details["invalid_contradictions"] == 1
    assert scores.details["invalid_contradiction_reasons"] == {reason: 1}
    assert dropped(metrics, reason) == 1


async def test_a_dropped_contradiction_leaves_a_supported_claim_supported(server, metrics):
    scores = await judged(server, metrics, [
        {"claim": 2, "evidence": ANSWER.split(". ")[0], "reason": "negation"},  # the claim's own sentence
        {"claim": 1, "evidence": CONTEXTS[0].split(". ")[1], "reason": "number 49 ≠ 19"},  # a real one
        {"claim": 9, "evidence": CONTEXTS[1], "reason": "?"},  # names no claim
    ])
    assert verdicts(scores) == [cv.CONTRADICTED, cv.SUPPORTED, cv.SUPPORTED]
    assert scores.details["invalid_contradiction_reasons"] == {
        sc.INVALID_CONTRADICTION_NO_CLAIM: 1, sc.INVALID_CONTRADICTION_QUOTES_ANSWER: 1}
    assert dropped(metrics, sc.INVALID_CONTRADICTION_NO_CLAIM) == 1
    assert dropped(metrics, sc.INVALID_CONTRADICTION_QUOTES_ANSWER) == 1


async def test_the_evaluation_prompt_checks_evidence_the_same_way(server, metrics):
    bad = [{"claim": 1, "evidence": "The Team plan costs $49 per month.", "reason": "number"}]
    scores = await judged(server, metrics, bad, eval_request=EvalRequest(reference=None))
    assert scores.get(sc.METRIC_FAITHFULNESS) == NOT_CONTRADICTED
    assert dropped(metrics, sc.INVALID_CONTRADICTION_QUOTES_ANSWER) == 1


# --- the match itself (pure) ----------------------------------------------------------------------
def test_tokens_ignore_case_quotes_dashes_and_keep_numbers_whole():
    assert tokens("“It’s  $6.2 BILLION” — in 1,000 cases") == ("it's", "6.2", "billion", "in", "1,000", "cases")


def test_containment_is_share_of_the_quote_found_in_order_in_one_window():
    source = tokens("a b c d e f g h i j k l m n o p")
    assert containment(tokens("d e f g h"), source) == 1.0
    assert containment(tokens("d e x g h"), source) == pytest.approx(0.8)
    assert containment(tokens("h g f e d"), source) == pytest.approx(0.2)  # order counts
    # the same words spread over the whole source are not a quote
    assert containment(tokens("a e i m p"), source) < MIN_CONTAINMENT


def test_a_short_quote_must_match_exactly_and_a_longer_one_may_lose_a_fifth():
    index = EvidenceIndex(["The Team plan costs $19 per month and includes 10 seats."])
    assert index.check("costs $19 per month").valid
    assert not index.check("costs $29 per month").valid  # 4 tokens: no edit allowed
    assert index.check("The Team plan costs $19 each month and includes 10 seats").valid  # 1 of 11 changed
    assert not index.check("The Team plan costs $29 each month and has 10 users").valid  # 4 of 11


def test_a_one_edit_answer_quoted_back_is_told_from_its_source_sentence():
    context = "Revenue rose 15 percent in 2019 to 6.2 billion."
    answer = "Revenue rose 30 percent in 2019 to 6.2 billion."
    index = EvidenceIndex([context])
    assert index.check(context, [answer]).valid
    quoted = index.check(answer, [answer])
    assert quoted.in_context >= MIN_CONTAINMENT  # tolerant enough to match the context alone...
    assert not quoted.valid and quoted.reason == sc.INVALID_CONTRADICTION_QUOTES_ANSWER  # ...but it is the answer


def test_an_inserted_negation_makes_the_answer_hold_the_quote_less_tightly_than_its_source():
    context = "BNP values tend to increase with age and are higher in women than men."
    answer = "BNP values tend to increase with age and are not higher in women than men."
    index = EvidenceIndex([context])
    assert index.check(context, [answer]).valid  # both hold every token; only the source holds them in a row
    assert index.check(answer, [answer]).reason == sc.INVALID_CONTRADICTION_QUOTES_ANSWER


def test_an_ellipsis_joins_parts_of_a_quote():
    index = EvidenceIndex(["The Team plan, which most small companies choose, costs $19 per month in 2024."])
    assert index.check("The Team plan ... costs $19 per month").valid
    assert not index.check("The Team plan ... is free for students and schools").valid


def test_checked_keeps_a_reply_without_contradictions_as_it_is():
    verdict = parse_compact({"claims": CLAIMS, "context_relevant": {"context 1": True, "context 2": True},
                             "questions": [], "contradicted": []}, 2)
    assert checked(verdict, CONTEXTS, [ANSWER]) is verdict
