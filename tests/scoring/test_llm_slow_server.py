"""A slow local model server degrades to slow scoring, not to an open circuit: over real HTTP with the
OpenAI-protocol test server, set up like a llama.cpp server with one slot (requests queue on the
server). Waiting for a free request slot never counts against the request timeout; timeouts and
429/503 replies lower the requests in flight instead of opening the circuit; a server that is really
down (connection refused) still opens it; every failure names its cause."""

from __future__ import annotations

import asyncio
import random

import pytest

from ragmon import semconv as sc
from ragmon.errors import (
    JudgeCircuitOpenError,
    JudgeConnectError,
    JudgeHTTPError,
    JudgeRateLimitedError,
    JudgeTimeoutError,
)
from ragmon.scoring.llm import LlmJudge
from ragmon.scoring.llm.resilience import AdaptiveConcurrency
from ragmon.types import Document, RagTrace
from tests.fakes.clock import ManualClock
from tests.fakes.openai_server import FakeOpenAI, Reply, compact_responder

OUTCOMES = ("ok", "retry", "timeout", "connect_error", "http_error", "rate_limited", "invalid_reply", "circuit_open")


def trace(i: int = 0) -> RagTrace:
    return RagTrace(trace_id=f"{i + 1:032x}", service="s", pipeline="p", question="What is the capital of France?",
                    answer=f"Paris is the capital of France. It has {i} bridges.",
                    documents=(Document("a", "Paris is the capital of France.", rank=0),))


def outcomes(metrics) -> dict[str, float]:
    values = {o: metrics.registry.get_sample_value(f"{sc.M_JUDGE_REQUESTS}_total", {"judge": "llm", "outcome": o})
              for o in OUTCOMES}
    return {o: v for o, v in values.items() if v}


def limit_gauge(metrics) -> float | None:
    return metrics.registry.get_sample_value(sc.M_JUDGE_CONCURRENCY_LIMIT, {"judge": "llm"})


def slow(delay_s: float):
    return lambda body: Reply.slow(delay_s, then=compact_responder(body))


@pytest.fixture
async def judges(metrics):
    made: list[LlmJudge] = []
    clock = ManualClock()

    def make(base_url: str, **kw) -> LlmJudge:
        kw.setdefault("sleep", clock.sleep)  # backoff between retries without waiting for it
        kw.setdefault("clock", clock)
        judge = LlmJudge(base_url=base_url, model="m", embedding_model="e", cache_size=0, metrics=metrics,
                         rng=random.Random(3), **kw)
        made.append(judge)
        return judge

    yield make
    for judge in made:
        await judge.aclose()


async def test_a_one_slot_server_scores_every_trace_though_the_queue_outlasts_the_timeout(server, judges, metrics):
    # 8 traces at once, 0.3 s each on a server that works on one at a time: the last one is answered
    # 2.4 s after it was handed to the judge, past the 1 s timeout, and still scores. (With 8
    # requests sent at once, the server's own queue made every one from the 4th on time out.)
    server.slots = 1
    server.responder = slow(0.3)
    judge = judges(server.base_url, timeout_s=1.0, concurrency=8)
    results = await asyncio.gather(*(judge.score(trace(i)) for i in range(8)))
    assert all(r.get(sc.METRIC_FAITHFULNESS) is not None for r in results)
    assert outcomes(metrics) == {"ok": 16}  # 8 chat calls and 8 embedding calls, nothing retried
    assert server.max_in_flight == 1  # a reply taking over a quarter of the timeout never adds a request
    assert judge.circuit_state == "closed"


async def test_a_server_slower_than_the_timeout_fails_as_timeout_and_never_opens_the_circuit(server, judges,
                                                                                              metrics):
    server.responder = slow(3.0)
    judge = judges(server.base_url, timeout_s=0.2, max_retries=1, circuit_failures=2)
    for i in range(3):
        with pytest.raises(JudgeTimeoutError) as info:
            await judge.score(trace(i))
        assert info.value.reason == sc.FAIL_TIMEOUT
        assert "no reply within 0.2s of sending it" in str(info.value)
    assert outcomes(metrics) == {"retry": 3, "timeout": 3}
    assert judge.circuit_state == "closed"
    assert limit_gauge(metrics) == 1


async def test_a_server_that_is_down_still_opens_the_circuit_and_says_why(judges, metrics):
    dead = FakeOpenAI()
    await dead.start()
    url = dead.base_url
    await dead.stop()  # connection refused from now on
    judge = judges(url, max_retries=0, circuit_failures=2)
    for i in range(2):
        with pytest.raises(JudgeConnectError) as info:
            await judge.score(trace(i))
        assert info.value.reason == sc.FAIL_CONNECT and "unreachable" in str(info.value)
    assert judge.circuit_state == "open"
    with pytest.raises(JudgeCircuitOpenError) as opened:
        await judge.score(trace(2))
    assert f"judge endpoint {url} unreachable" in str(opened.value)  # the cause that opened it
    assert outcomes(metrics) == {"connect_error": 2, "circuit_open": 1}


async def test_503_and_429_lower_the_requests_in_flight_fast_replies_raise_them(server, judges, metrics):
    judge = judges(server.base_url, concurrency=4, circuit_failures=1, max_retries=0)
    for i in range(3):  # 3 fast chat replies: 1 -> 4 in slow start (embedding calls have a limit of their own)
        await judge.score(trace(i))
    assert limit_gauge(metrics) == 4
    server.enqueue(Reply.error(503, message="no free slot"))  # what a llama.cpp server with busy slots answers
    with pytest.raises(JudgeHTTPError) as info:
        await judge.score(trace(10))
    assert info.value.status == 503 and "HTTP 503 (busy): no free slot" in str(info.value)
    assert limit_gauge(metrics) == 2
    server.enqueue(Reply.error(429))
    with pytest.raises(JudgeRateLimitedError):
        await judge.score(trace(11))
    assert limit_gauge(metrics) == 1
    assert judge.circuit_state == "closed"  # busy is not down, even with circuit_failures=1
    assert outcomes(metrics) == {"ok": 6, "http_error": 1, "rate_limited": 1}


# --- the limit itself -----------------------------------------------------------------------------
async def test_one_halving_per_round_of_requests():
    limit = AdaptiveConcurrency(8, timeout_s=10.0)
    for _ in range(7):  # slow start: +1 per fast reply
        limit.release(await limit.acquire(), latency_s=0.1)
    assert limit.limit == 8
    taken = [await limit.acquire() for _ in range(8)]
    for t in taken:  # all 8 time out together: one halving, not three
        limit.release(t, overload=True)
    assert limit.limit == 4
    limit.release(await limit.acquire(), overload=True)  # a request of the new round halves again
    assert limit.limit == 2


async def test_after_overload_the_limit_grows_by_one_per_round_of_fast_replies():
    limit = AdaptiveConcurrency(8, timeout_s=10.0)
    limit.release(await limit.acquire(), latency_s=0.1)
    limit.release(await limit.acquire(), latency_s=0.1)
    limit.release(await limit.acquire(), overload=True)  # 3 -> 1, slow start over
    assert limit.limit == 1
    limit.release(await limit.acquire(), latency_s=0.1)
    assert limit.limit == 2
    limit.release(await limit.acquire(), latency_s=0.1)
    assert limit.limit == 2  # 2 fast replies for the next step
    limit.release(await limit.acquire(), latency_s=0.1)
    assert limit.limit == 3


async def test_a_reply_past_half_the_timeout_is_overload_and_one_between_holds():
    limit = AdaptiveConcurrency(4, timeout_s=10.0)
    limit.release(await limit.acquire(), latency_s=0.1)
    limit.release(await limit.acquire(), latency_s=0.1)
    assert limit.limit == 3
    limit.release(await limit.acquire(), latency_s=4.0)  # between a quarter and half: hold
    assert limit.limit == 3
    limit.release(await limit.acquire(), latency_s=6.0)  # past half the timeout
    assert limit.limit == 1


async def test_a_waiter_gets_the_slot_a_release_frees_and_a_cancelled_one_leaves_no_trace():
    limit = AdaptiveConcurrency(1, timeout_s=10.0)
    first = await limit.acquire()
    cancelled = asyncio.create_task(limit.acquire())
    waiting = asyncio.create_task(limit.acquire())
    await asyncio.sleep(0)
    assert not waiting.done()
    cancelled.cancel()
    limit.release(first, latency_s=0.1)
    await waiting
    assert limit.in_flight == 1
    with pytest.raises(asyncio.CancelledError):
        await cancelled
