"""The LLM judge's ``score_for_eval`` over real HTTP against the OpenAI-protocol test server."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from ragmon import semconv as sc
from ragmon.scoring.judge import EvalJudge, EvalRequest
from ragmon.scoring.llm import prompts as p
from ragmon.types import Document, RagTrace
from tests.fakes.openai_server import Reply, fenced_payload, hashed_embedding

RECALL = sc.METRIC_CONTEXT_RECALL
CORRECTNESS = sc.METRIC_ANSWER_CORRECTNESS
ABSTENTION = sc.METRIC_ABSTENTION
PRESENCE = sc.METRIC_CITATION_PRESENCE
POINTING = sc.METRIC_CITATION_CORRECTNESS
COVERAGE = sc.METRIC_CITATION_COVERAGE
CITES = r"\[([^\[\]]{1,64})\]"

QUESTION = "What is the capital of France?"
CONTEXTS = ("Paris is the capital and largest city of France.", "Bananas are yellow.", "France is in Europe.")
CITED_ANSWER = "Paris is the capital of France [1]. France is in Europe [2]."
STRIPPED = "Paris is the capital of France. France is in Europe."
REFERENCE = "Paris is the capital of France. Paris has 2 million people."
# sha256 of the online compact prompt: the agent's path and the benchmark's prompt hashes must
# never change because offline evaluation was added (bench/judge_llm.py keys results by it)
COMPACT_TASK_SHA256 = "632f28aad50f1a94"  # 2026-12: claims a context contradicts, with evidence (issue 29)


def trace(answer=CITED_ANSWER, contexts=CONTEXTS, question=QUESTION) -> RagTrace:
    docs = tuple(Document(id=f"d{i}", content=c, rank=i) for i, c in enumerate(contexts))
    return RagTrace(trace_id="cd" * 16, service="svc", pipeline="qa", question=question, answer=answer, documents=docs)


def hashed_cosine(a: str, b: str) -> float:
    x, y = np.array(hashed_embedding(a)), np.array(hashed_embedding(b))
    return float(x @ y / (np.linalg.norm(x) * np.linalg.norm(y)))


def test_the_online_compact_prompt_is_unchanged():
    assert hashlib.sha256(p.COMPACT_TASK.encode()).hexdigest()[:16] == COMPACT_TASK_SHA256
    # the evaluation variant with nothing to add is the online prompt, byte for byte
    assert p.compact_eval_task(reference=False, citations=False) == p.COMPACT_TASK
    inp = p.JudgeInput(QUESTION, CONTEXTS, STRIPPED)
    assert p.compact_eval_messages(inp, nonce="0" * 16) == p.compact_messages(inp, nonce="0" * 16)
    assert p.compact_eval_task(reference=True, citations=True).startswith(p.COMPACT_TASK.split("\nReply format:")[0])


async def test_online_score_still_sends_the_online_prompt(server, make_judge):
    await make_judge().score(trace())
    body = server.chat_requests[0].body
    assert body["messages"][0]["content"].startswith(p.COMPACT_TASK + "\n\n")
    assert set(fenced_payload(body)) == {"question", "contexts", "answer_sentences"}
    assert body["response_format"]["json_schema"]["name"] == "rag_judgement"


async def test_compact_eval_is_one_chat_call_with_reference_and_citations(server, make_judge, metrics):
    judge = make_judge()
    assert isinstance(judge, EvalJudge)
    scores = await judge.score_for_eval(
        trace(), EvalRequest(reference=REFERENCE, citation_pattern=CITES, expect_abstention=False)
    )
    chats = server.chat_requests
    assert len(chats) == 1
    body = chats[0].body
    schema = body["response_format"]["json_schema"]
    assert schema["name"] == "rag_evaluation"
    assert set(schema["schema"]["required"]) == {
        "claims", "contradicted", "context_relevant", "questions", "noncommittal", "reference_claims",
        "citation_supported",
    }
    assert "in_reference" in schema["schema"]["properties"]["claims"]["items"]["required"]
    payload = fenced_payload(body)
    # markers are stripped before claims are judged; each citation names its claim and context
    assert payload["answer_sentences"] == {"sentence 1": "Paris is the capital of France.",
                                           "sentence 2": "France is in Europe."}
    assert payload["reference_sentences"] == {"sentence 1": "Paris is the capital of France.",
                                              "sentence 2": "Paris has 2 million people."}
    assert payload["citations"] == {
        "citation 1": {"claim": "Paris is the capital of France.", "context": "context 1"},
        "citation 2": {"claim": "France is in Europe.", "context": "context 2"},
    }
    assert "citation 1..2" in body["messages"][1]["content"]

    # the fake's word-share rule: reference claim 2 is neither in the contexts nor in the answer;
    # answer claim 2 is not in the reference; "France is in Europe" is not in context 2
    assert scores.get(RECALL) == pytest.approx(0.5)
    similarity = hashed_cosine(STRIPPED, REFERENCE)
    assert scores.details["answer_correctness_counts"] == {"tp": 1, "fp": 1, "fn": 1}
    assert scores.get(CORRECTNESS) == pytest.approx(0.75 * 0.5 + 0.25 * similarity, abs=1e-6)
    assert scores.get(PRESENCE) == 1.0 and scores.get(POINTING) == 0.5 and scores.get(COVERAGE) == 0.5
    assert scores.get(sc.METRIC_FAITHFULNESS) == 1.0  # the online metrics come with it
    assert ABSTENTION not in scores.values
    assert scores.details["abstained"] is False
    embeds = [r.body["input"] for r in server.requests if r.path == "/v1/embeddings"]
    assert [STRIPPED, REFERENCE] in embeds  # answer correctness's semantic part
    assert scores.details["calls"] == 3  # 1 chat + 2 embeddings
    assert metrics.registry.get_sample_value(
        f"{sc.M_JUDGE_REQUESTS}_total", {"judge": "llm", "outcome": "ok"}) == 3


async def test_only_what_the_request_needs_is_asked(server, make_judge):
    judge = make_judge()
    scores = await judge.score_for_eval(trace(), EvalRequest(citation_pattern=CITES))
    schema = server.chat_requests[-1].body["response_format"]["json_schema"]["schema"]
    assert "reference_claims" not in schema["required"] and "citation_supported" in schema["required"]
    assert "in_reference" not in schema["properties"]["claims"]["items"]["required"]
    assert set(scores.values) == {sc.METRIC_FAITHFULNESS, sc.METRIC_ANSWER_RELEVANCY, sc.METRIC_CONTEXT_PRECISION,
                                  PRESENCE, POINTING, COVERAGE}

    plain = await judge.score_for_eval(trace(answer=STRIPPED), EvalRequest())
    body = server.chat_requests[-1].body
    assert body["messages"][0]["content"].startswith(p.COMPACT_TASK + "\n\n")
    assert set(fenced_payload(body)) == {"question", "contexts", "answer_sentences"}
    online = await make_judge(cache_size=0).score(trace(answer=STRIPPED))
    assert dict(plain.values) == pytest.approx(dict(online.values))


async def test_blank_reference_is_not_computable(server, make_judge):
    scores = await make_judge().score_for_eval(trace(answer=STRIPPED), EvalRequest(reference=" "))
    assert RECALL in scores.values and scores.get(RECALL) is None and scores.get(CORRECTNESS) is None
    assert "reference_sentences" not in fenced_payload(server.chat_requests[0].body)


async def test_no_answer_questions_score_abstention(server, make_judge):
    judge = make_judge()
    declined = await judge.score_for_eval(trace(answer="I don't know."), EvalRequest(expect_abstention=True))
    invented = await judge.score_for_eval(trace(answer="The capital is Lyon."), EvalRequest(expect_abstention=True))
    assert declined.get(ABSTENTION) == 1.0 and invented.get(ABSTENTION) == 0.0
    # the judge's own noncommittal verdict also counts as declining
    server.enqueue(Reply.json({"claims": [], "context_relevant": {f"context {i}": False for i in (1, 2, 3)},
                               "questions": [], "noncommittal": True}))
    evasive = await judge.score_for_eval(trace(answer="Hard to say, it depends."),
                                         EvalRequest(expect_abstention=True))
    assert evasive.get(ABSTENTION) == 1.0 and evasive.details["abstention_phrase"] == "judged noncommittal"


async def test_a_reply_missing_the_new_fields_gets_the_repair_attempt(server, make_judge, metrics):
    server.enqueue(Reply.json({"claims": [], "context_relevant": {f"context {i}": True for i in (1, 2, 3)},
                               "questions": [QUESTION], "noncommittal": False}))
    scores = await make_judge().score_for_eval(trace(), EvalRequest(reference=REFERENCE, citation_pattern=CITES))
    assert len(server.chat_requests) == 2  # the repair call is answered by the responder
    repair = server.chat_requests[1].body["messages"][-1]["content"]
    assert "in_reference" in repair or "reference_claims" in repair
    assert metrics.registry.get_sample_value(
        f"{sc.M_JUDGE_REQUESTS}_total", {"judge": "llm", "outcome": "invalid_reply"}) == 1
    assert scores.get(RECALL) == pytest.approx(0.5)


async def test_eval_results_are_cached_apart_from_online_ones(server, make_judge):
    judge = make_judge()
    await judge.score(trace())
    await judge.score_for_eval(trace(), EvalRequest(reference=REFERENCE))
    again = await judge.score_for_eval(trace(), EvalRequest(reference=REFERENCE))
    assert len(server.chat_requests) == 2
    assert again.details["cached"] is True and again.get(RECALL) == pytest.approx(0.5)
    await judge.score_for_eval(trace(), EvalRequest(reference=REFERENCE + " It is old."))
    assert len(server.chat_requests) == 3


def parity_responder(reference_statements, recall, answer_in_reference, reference_in_answer, citation_verdicts):
    """Answers every parity prompt, the offline ones included (calls run concurrently)."""

    def respond(body):
        system = body["messages"][0]["content"]
        payload = fenced_payload(body)
        if "standalone statements" in system:
            if payload["answer"] == REFERENCE:
                return Reply.json({"statements": reference_statements})
            return Reply.json({"statements": ["Paris is the capital of France."]})
        if "attributed to the contexts" in system:
            return Reply.json({"verdicts": [{"statement": s, "reason": "r", "verdict": v}
                                            for s, v in zip(payload["reference_sentences"], recall, strict=True)]})
        if "true positive" in system:
            return Reply.json({
                "answer_statements": [{"statement": s, "reason": "r", "in_reference": v}
                                      for s, v in zip(payload["answer_statements"], answer_in_reference, strict=True)],
                "reference_statements": [{"statement": s, "reason": "r", "in_answer": v} for s, v in
                                         zip(payload["reference_statements"], reference_in_answer, strict=True)],
            })
        if "directly inferred" in system:
            # a citation check has one cited context; the faithfulness check has them all
            verdict = citation_verdicts[payload["contexts"][0]] if len(payload["contexts"]) == 1 else 1
            return Reply.json({"verdicts": [{"statement": s, "reason": "r", "verdict": verdict}
                                            for s in payload["statements"]]})
        if "Generate one question" in system:
            return Reply.json({"question": QUESTION, "noncommittal": 0})
        if "context" in payload:
            return Reply.json({"reason": "r", "verdict": 1})
        raise AssertionError(system)

    return respond


async def test_parity_mode_adds_the_ragas_calls(server, make_judge):
    server.responder = parity_responder(
        reference_statements=["Paris is the capital of France.", "Paris has 2 million people."],
        recall=[1, 0],
        answer_in_reference=[1],
        reference_in_answer=[1, 0],
        citation_verdicts={CONTEXTS[0]: 1, CONTEXTS[2]: 0},
    )
    answer = "Paris is the capital of France [1]. France is in Europe [3]."
    scores = await make_judge(mode="parity").score_for_eval(
        trace(answer=answer), EvalRequest(reference=REFERENCE, citation_pattern=CITES)
    )
    # 8 online parity calls + recall + reference statements + classification + 2 cited contexts
    assert len(server.chat_requests) == 13
    assert scores.get(RECALL) == pytest.approx(0.5)
    assert scores.details["answer_correctness_counts"] == {"tp": 1, "fp": 0, "fn": 1}
    similarity = hashed_cosine(STRIPPED, REFERENCE)
    assert scores.get(CORRECTNESS) == pytest.approx(0.75 * 2 / 3 + 0.25 * similarity, abs=1e-6)
    assert scores.get(PRESENCE) == 1.0 and scores.get(POINTING) == 0.5 and scores.get(COVERAGE) == 0.5
