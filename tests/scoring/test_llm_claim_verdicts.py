"""The LLM judge's compact call returns the same claim verdicts as the local judge (supported /
contradicted / unsupported with evidence and reason), over real HTTP with the OpenAI-protocol test
server: still one chat call per trace; replies of the earlier shape still parse; an item naming no
claim is counted, not guessed; a contradiction weighs on faithfulness as in the local judge."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ragmon.scoring import claim_verdicts as cv
from ragmon.scoring.llm import LlmJudge
from ragmon.scoring.metrics import formulas
from ragmon.types import Document, RagTrace
from tests.fakes.openai_server import FakeOpenAI, Reply, compact_responder

CONTEXTS = ["The Team plan costs $19 per month.", "The Business plan costs $49 per month."]
ANSWER = "The Team plan costs $49 per month. The Business plan costs $49 per month."


def trace() -> RagTrace:
    return RagTrace(trace_id="ab" * 16, service="s", pipeline="p", question="What do the plans cost?",
                    answer=ANSWER, documents=tuple(Document(id=str(i), content=c, rank=i)
                                                   for i, c in enumerate(CONTEXTS)))


def with_contradictions(items: list[Any]):
    def respond(body: dict[str, Any]) -> Reply:
        verdict = json.loads(compact_responder(body).content or "{}")
        verdict["claims"] = [{"sentence": 1, "claim": "The Team plan costs $49 per month.", "supported": False},
                             {"sentence": 2, "claim": "The Business plan costs $49 per month.", "supported": True}]
        if items is not None:
            verdict["contradicted"] = items
        return Reply.json(verdict)
    return respond


async def score(server: FakeOpenAI):
    judge = LlmJudge(base_url=server.base_url, model="m", embedding_model="e", cache_ttl_s=0, cache_size=0)
    try:
        return await judge.score(trace())
    finally:
        await judge.aclose()


async def test_contradicted_claims_come_back_with_evidence_in_one_call():
    async with FakeOpenAI() as server:
        server.responder = with_contradictions(
            [{"claim": 1, "evidence": CONTEXTS[0], "reason": "number 49 ≠ 19"}])
        scores = await score(server)
        assert len(server.chat_requests) == 1
        schema = server.chat_requests[0].body["response_format"]["json_schema"]["schema"]
    assert "contradicted" in schema["required"]
    verdicts = scores.details[cv.DETAIL_KEY]
    assert [v["verdict"] for v in verdicts] == [cv.CONTRADICTED, cv.SUPPORTED]
    assert verdicts[0]["evidence"] == CONTEXTS[0] and verdicts[0]["reason"] == "number 49 ≠ 19"
    assert scores.details["supported_share"] == 0.5  # the RAGAS definition, kept beside
    assert scores.get("faithfulness") == pytest.approx(formulas.with_contradictions(0.5, 1, 2))


@pytest.mark.parametrize(("items", "invalid"), [(None, 0), ([{"claim": 7, "evidence": "x", "reason": "y"},
                                                              {"claim": "one"}, "junk"], 3)])
async def test_an_earlier_reply_or_bad_items_never_invent_a_contradiction(items, invalid):
    async with FakeOpenAI() as server:
        server.responder = with_contradictions(items)
        scores = await score(server)
    verdicts = scores.details[cv.DETAIL_KEY]
    assert [v["verdict"] for v in verdicts] == [cv.UNSUPPORTED, cv.SUPPORTED]
    assert scores.get("faithfulness") == 0.5
    assert scores.details.get("invalid_contradictions", 0) == invalid
