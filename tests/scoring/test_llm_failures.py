"""Every failure mode of the judge endpoint, over real HTTP: outcome, exception and metrics.

Backoff delays go through an injected sleep (``ManualClock.sleep``), so nothing here waits
for wall-clock time except the two timeout tests, whose client timeout is 0.2 s.
"""

from __future__ import annotations

import email.utils
import json
import random

import pytest

from ragmon import semconv as sc
from ragmon.errors import (
    JudgeCircuitOpenError,
    JudgeConnectError,
    JudgeError,
    JudgeHTTPError,
    JudgeRateLimitedError,
    JudgeReplyError,
    JudgeReplyTruncatedError,
    JudgeTimeoutError,
)
from ragmon.scoring.llm import FORMAT_JSON_OBJECT, FORMAT_NONE, LlmJudge
from ragmon.types import Document, RagTrace
from tests.fakes.clock import ManualClock
from tests.fakes.openai_server import FakeOpenAI, Reply

FAITH = sc.METRIC_FAITHFULNESS
PRECISION = sc.METRIC_CONTEXT_PRECISION

GOOD = {
    "claims": [{"claim": "Paris is the capital of France.", "supported": True}],
    "contexts": [{"rank": 1, "relevant": True}, {"rank": 2, "relevant": False}],
    "questions": ["What is the capital of France?"],
    "noncommittal": False,
}
TRACE = RagTrace(
    trace_id="cd" * 16, service="svc", pipeline="qa", question="What is the capital of France?",
    answer="Paris is the capital of France.",
    documents=(Document("a", "Paris is the capital of France.", rank=0), Document("b", "Bananas.", rank=1)),
)


@pytest.fixture
def clock():
    return ManualClock()


@pytest.fixture
async def make_judge(server, metrics, clock):
    judges: list[LlmJudge] = []

    def make(**kw) -> LlmJudge:
        kw.setdefault("embedding_model", "fake-embed")
        kw.setdefault("clock", clock)
        kw.setdefault("sleep", clock.sleep)
        kw.setdefault("rng", random.Random(7))
        kw.setdefault("cache_size", 0)
        judge = LlmJudge(base_url=kw.pop("base_url", server.base_url), model="m", metrics=metrics, **kw)
        judges.append(judge)
        return judge

    yield make
    for judge in judges:
        await judge.aclose()


def requests(metrics, outcome):
    return metrics.registry.get_sample_value(f"{sc.M_JUDGE_REQUESTS}_total", {"judge": "llm", "outcome": outcome}) or 0


def chat_outcomes(metrics):
    names = ["ok", "retry", "timeout", "connect_error", "http_error", "rate_limited", "invalid_reply",
             "reply_truncated", "circuit_open"]
    return {o: requests(metrics, o) for o in names if requests(metrics, o)}


# --- retries -------------------------------------------------------------------------------
async def test_429_is_retried_after_the_servers_retry_after(server, make_judge, metrics, clock):
    server.enqueue(Reply.error(429, retry_after="7"), Reply.json(GOOD))
    scores = await make_judge(backoff_base_s=0.5).score(TRACE)
    assert scores.get(FAITH) == 1.0
    assert len(server.chat_requests) == 2
    assert len(clock.sleeps) == 1
    assert 7.0 <= clock.sleeps[0] <= 7.25  # Retry-After plus at most base/2 jitter
    assert chat_outcomes(metrics) == {"retry": 1, "ok": 2}  # chat + embeddings


async def test_retry_after_as_an_http_date(server, make_judge, clock):
    when = email.utils.formatdate(timeval=__import__("time").time() + 30, usegmt=True)
    server.enqueue(Reply.error(503, retry_after=when), Reply.json(GOOD))
    await make_judge().score(TRACE)
    assert 25 <= clock.sleeps[0] <= 31


async def test_429_until_retries_run_out_fails_rate_limited(server, make_judge, metrics, clock):
    server.enqueue(*[Reply.error(429)] * 3)
    with pytest.raises(JudgeRateLimitedError) as info:
        await make_judge(max_retries=2).score(TRACE)
    assert info.value.reason == sc.FAIL_RATE_LIMITED
    assert len(server.chat_requests) == 3
    assert chat_outcomes(metrics) == {"retry": 2, "rate_limited": 1}


async def test_5xx_backoff_is_exponential_with_jitter_and_capped(server, make_judge, metrics, clock):
    server.enqueue(*[Reply.error(500)] * 6)
    with pytest.raises(JudgeHTTPError) as info:
        await make_judge(max_retries=5, backoff_base_s=1.0, backoff_max_s=8.0, circuit_failures=100).score(TRACE)
    assert info.value.reason == sc.FAIL_HTTP and info.value.status == 500
    assert len(clock.sleeps) == 5
    for attempt, delay in enumerate(clock.sleeps):
        ceiling = min(8.0, 1.0 * 2**attempt)
        assert ceiling / 2 <= delay <= ceiling
    assert chat_outcomes(metrics) == {"retry": 5, "http_error": 1}


async def test_4xx_other_than_429_is_not_retried(server, make_judge, metrics):
    server.enqueue(Reply.error(401, message="invalid api key"))
    with pytest.raises(JudgeHTTPError) as info:
        await make_judge().score(TRACE)
    assert info.value.status == 401 and not info.value.retriable
    assert len(server.chat_requests) == 1
    assert chat_outcomes(metrics) == {"http_error": 1}


async def test_timeout_is_retried_then_fails_as_timeout(server, make_judge, metrics):
    server.enqueue(Reply.slow(3.0), Reply.slow(3.0))
    with pytest.raises(JudgeTimeoutError) as info:
        await make_judge(timeout_s=0.2, max_retries=1).score(TRACE)
    assert info.value.reason == sc.FAIL_TIMEOUT
    assert chat_outcomes(metrics) == {"retry": 1, "timeout": 1}


async def test_timeout_then_success(server, make_judge, metrics):
    # a timeout with room for the fast reply on a loaded machine (0.2 s once flaked under memory pressure)
    server.enqueue(Reply.slow(6.0), Reply.json(GOOD))
    scores = await make_judge(timeout_s=1.0, max_retries=1).score(TRACE)
    assert scores.get(PRECISION) == pytest.approx(1.0)
    assert chat_outcomes(metrics) == {"retry": 1, "ok": 2}


async def test_unreachable_endpoint_fails_as_connect_error(make_judge, metrics):
    dead = FakeOpenAI()
    await dead.start()
    url = dead.base_url
    await dead.stop()  # nothing listens on that port any more
    with pytest.raises(JudgeConnectError) as info:
        await make_judge(base_url=url, max_retries=1).score(TRACE)
    assert info.value.status is None and info.value.reason == sc.FAIL_CONNECT
    assert "ConnectError" in str(info.value) and url in str(info.value)
    assert chat_outcomes(metrics) == {"retry": 1, "connect_error": 1}


# --- replies that are not what we asked for ------------------------------------------------
@pytest.mark.parametrize(
    "bad",
    [
        Reply.text("I think the answer is faithful."),  # invalid JSON
        Reply.text('{"claims": [{"claim": "Paris", "supp', finish_reason="length"),  # truncated JSON
        Reply.json({"faithfulness": 1.0, "relevancy": 0.9}),  # wrong schema
        Reply.json({**GOOD, "contexts": [{"rank": 1, "relevant": True}]}),  # a context verdict missing
    ],
    ids=["invalid", "truncated", "wrong_schema", "missing_verdict"],
)
async def test_one_repair_attempt_fixes_a_bad_reply(server, make_judge, metrics, bad):
    server.enqueue(bad, Reply.json(GOOD))
    scores = await make_judge().score(TRACE)
    assert scores.get(FAITH) == 1.0
    repair = server.chat_requests[1].body["messages"]
    assert repair[-2] == {"role": "assistant", "content": bad.content}
    assert repair[-1]["role"] == "user" and "could not be used" in repair[-1]["content"]
    first_outcome = "reply_truncated" if bad.finish_reason == "length" else "invalid_reply"
    assert chat_outcomes(metrics) == {first_outcome: 1, "ok": 2}
    assert scores.details["calls"] == 3  # both chat calls are paid for, plus embeddings


@pytest.mark.parametrize(
    "bad",
    [Reply.text("not json"), Reply.text('{"claims": ['), Reply.json({"score": 1})],
    ids=["invalid", "truncated", "wrong_schema"],
)
async def test_a_second_bad_reply_fails_as_invalid_reply(server, make_judge, metrics, bad):
    server.enqueue(bad, bad)
    with pytest.raises(JudgeReplyError) as info:
        await make_judge().score(TRACE)
    assert info.value.reason == sc.FAIL_INVALID_REPLY
    assert len(server.chat_requests) == 2  # exactly one repair attempt
    assert chat_outcomes(metrics) == {"invalid_reply": 2}
    tokens = metrics.registry.get_sample_value(f"{sc.M_JUDGE_TOKENS}_total", {"judge": "llm", "kind": "prompt"})
    assert tokens == 200  # failed traces still spent tokens, and they are counted


async def test_a_reply_cut_off_at_max_tokens_twice_fails_naming_the_cap(server, make_judge, metrics):
    cut = Reply.text('{"claims": [{"claim": "Paris is the capital of', finish_reason="length")
    server.enqueue(cut, cut)
    with pytest.raises(JudgeReplyTruncatedError) as info:
        await make_judge(max_completion_tokens=256).score(TRACE)
    assert info.value.reason == sc.FAIL_REPLY_TRUNCATED
    assert "cut off at max_tokens (256" in str(info.value) and "RAGMON_JUDGE_MAX_COMPLETION_TOKENS" in str(info.value)
    assert [r.body["max_tokens"] for r in server.chat_requests] == [256, 256]
    repair = server.chat_requests[1].body["messages"][-1]["content"]
    assert "cut off at the 256-token limit" in repair  # the model is told why, not only that
    assert chat_outcomes(metrics) == {"reply_truncated": 2}


async def test_a_cut_off_reply_that_still_parses_is_used(server, make_judge, metrics):
    server.enqueue(Reply(content=json.dumps(GOOD), usage=(100, 50), finish_reason="length"))
    scores = await make_judge().score(TRACE)
    assert scores.get(FAITH) == 1.0
    assert chat_outcomes(metrics) == {"ok": 2}  # the chat call and the embeddings


async def test_json_in_code_fences_and_prose_needs_no_repair(server, make_judge, metrics):
    server.enqueue(Reply.text("Here you go:\n```json\n" + json.dumps(GOOD, indent=2) + "\n```\nDone."))
    scores = await make_judge().score(TRACE)
    assert scores.get(FAITH) == 1.0
    assert len(server.chat_requests) == 1


async def test_a_body_that_is_not_a_chat_completion_fails_as_invalid_reply(server, make_judge, metrics):
    server.enqueue(Reply.raw('{"result": "ok"}'))
    with pytest.raises(JudgeReplyError):
        await make_judge().score(TRACE)
    assert chat_outcomes(metrics) == {"invalid_reply": 1}


async def test_missing_usage_is_estimated_from_text(server, make_judge, metrics):
    server.enqueue(Reply.json(GOOD, usage=None))
    scores = await make_judge(embedding_model=None).score(TRACE)  # MiniLM: no embeddings usage either
    prompt_chars = sum(len(m["content"]) for m in server.chat_requests[0].body["messages"])
    assert scores.prompt_tokens >= prompt_chars // 4
    assert scores.completion_tokens == -(-len(json.dumps(GOOD)) // 4)
    assert scores.details["usage_estimated"] is True
    registry = metrics.registry
    assert registry.get_sample_value(f"{sc.M_JUDGE_TOKENS}_total", {"judge": "llm", "kind": "prompt"}) == (
        scores.prompt_tokens
    )


# --- response_format fallback ----------------------------------------------------------------
async def test_server_rejecting_json_schema_falls_back_to_json_object(server, make_judge, metrics):
    server.reject_formats = {"json_schema"}
    judge = make_judge()
    scores = await judge.score(TRACE)
    assert scores.get(FAITH) == 1.0
    types = [(r.body.get("response_format") or {}).get("type") for r in server.chat_requests]
    assert types == ["json_schema", "json_object"]
    assert judge.response_format == FORMAT_JSON_OBJECT
    await judge.score(RagTrace(**{**_fields(TRACE), "answer": "Paris."}))
    assert server.chat_requests[-1].body["response_format"]["type"] == "json_object"  # remembered
    assert requests(metrics, "http_error") == 1


async def test_server_rejecting_any_response_format_gets_plain_requests(server, make_judge):
    server.reject_formats = {"json_schema", "json_object"}
    judge = make_judge()
    scores = await judge.score(TRACE)
    assert scores.get(FAITH) is not None
    assert judge.response_format == FORMAT_NONE
    assert "response_format" not in server.chat_requests[-1].body


def _fields(trace):
    return {f: getattr(trace, f) for f in trace.__dataclass_fields__}


# --- circuit breaker -------------------------------------------------------------------------
async def test_circuit_opens_after_consecutive_failures_fails_fast_and_recovers(server, make_judge, metrics, clock):
    judge = make_judge(max_retries=0, circuit_failures=3, circuit_reset_s=30)
    gauge = {"judge": "llm"}
    server.enqueue(*[Reply.error(502)] * 3)
    for _ in range(3):
        with pytest.raises(JudgeHTTPError):
            await judge.score(TRACE)
    assert metrics.registry.get_sample_value(sc.M_JUDGE_CIRCUIT_OPEN, gauge) == 1
    assert judge.circuit_state == "open"

    with pytest.raises(JudgeCircuitOpenError) as info:
        await judge.score(TRACE)
    assert info.value.reason == sc.FAIL_CIRCUIT_OPEN
    assert len(server.chat_requests) == 3  # nothing sent while open
    assert requests(metrics, "circuit_open") == 1

    clock.advance(30)
    assert judge.circuit_state == "half_open"
    server.enqueue(Reply.error(502))  # the trial fails: open again for another 30 s
    with pytest.raises(JudgeHTTPError):
        await judge.score(TRACE)
    assert judge.circuit_state == "open"
    with pytest.raises(JudgeCircuitOpenError):
        await judge.score(TRACE)

    clock.advance(30)
    scores = await judge.score(TRACE)  # the trial succeeds: closed
    assert scores.get(FAITH) == 1.0
    assert judge.circuit_state == "closed"
    assert metrics.registry.get_sample_value(sc.M_JUDGE_CIRCUIT_OPEN, gauge) == 0


async def test_429_and_bad_replies_do_not_open_the_circuit(server, make_judge):
    judge = make_judge(max_retries=0, circuit_failures=2)
    server.enqueue(Reply.error(429), Reply.error(429), Reply.text("x"), Reply.text("y"))
    for _ in range(3):
        with pytest.raises(JudgeError):
            await judge.score(TRACE)
    assert judge.circuit_state == "closed"


# --- client-side rate limits -----------------------------------------------------------------
async def test_requests_per_minute_limit_waits_instead_of_sending(server, make_judge, clock):
    judge = make_judge(requests_per_minute=2, embedding_model=None)
    for i in range(3):
        await judge.score(RagTrace(**{**_fields(TRACE), "answer": f"Paris {i}."}))
    assert len(server.chat_requests) == 3
    assert clock.sleeps == [pytest.approx(30.0)]  # third request waited for one token: 60 s / 2


async def test_tokens_per_minute_limit_spaces_large_requests(server, make_judge, clock):
    judge = make_judge(tokens_per_minute=3_000, max_completion_tokens=1_000, embedding_model=None)
    for i in range(3):
        await judge.score(RagTrace(**{**_fields(TRACE), "answer": f"Paris {i}."}))
    assert len(clock.sleeps) >= 1 and all(s > 0 for s in clock.sleeps)
    assert sum(clock.sleeps) < 60


async def test_a_500_naming_response_format_also_falls_back(server, make_judge, metrics):
    # llama-cpp-python's server answers an unknown response_format type with HTTP 500
    server.enqueue(Reply.error(500, message="('body', 'response_format', 'type'): Input should be 'text'"))
    judge = make_judge(max_retries=0)
    scores = await judge.score(TRACE)
    assert scores.get(FAITH) == 1.0
    assert judge.response_format == FORMAT_JSON_OBJECT
    assert judge.circuit_state == "closed"
