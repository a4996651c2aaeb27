"""The LLM judge's building blocks: backoff, circuit breaker, rate limiter, budget, cache."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import pytest

from ragmon import semconv as sc
from ragmon.backoff import Backoff
from ragmon.errors import JudgeBudgetExceeded
from ragmon.scoring.llm import LlmJudge
from ragmon.scoring.llm.budget import TokenBudget
from ragmon.scoring.llm.cache import TtlCache, content_key
from ragmon.scoring.llm.resilience import CircuitBreaker, RateLimiter, parse_retry_after
from ragmon.types import Document, RagTrace
from tests.fakes.clock import ManualClock
from tests.fakes.openai_server import FakeOpenAI, Reply

PRECISION = sc.METRIC_CONTEXT_PRECISION


def test_parse_retry_after():
    assert parse_retry_after("3") == 3.0
    assert parse_retry_after("0.5") == 0.5
    assert parse_retry_after("-4") == 0.0
    assert parse_retry_after(None) is None
    assert parse_retry_after("soon") is None
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT", now_epoch=1445412470.0) == pytest.approx(10.0)
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT", now_epoch=1445412490.0) == 0.0


def test_backoff_grows_exponentially_with_jitter_and_caps():
    backoff = Backoff(base_s=1.0, max_s=10.0, rng=random.Random(1))
    for attempt in range(8):
        ceiling = min(10.0, 2.0**attempt)
        delays = {backoff.delay(attempt) for _ in range(20)}
        assert all(ceiling / 2 <= d <= ceiling for d in delays)
        assert len(delays) > 1  # jittered
    assert 5.0 <= backoff.delay(0, retry_after_s=5.0) <= 5.5
    assert backoff.delay(0, retry_after_s=10_000) <= 120.5  # an absurd Retry-After is capped


def test_circuit_breaker_half_open_lets_exactly_one_trial_through():
    clock = ManualClock()
    changes: list[str] = []
    breaker = CircuitBreaker(failures=2, reset_s=10, clock=clock, on_change=changes.append)
    breaker.record_failure()
    assert breaker.allow()
    breaker.record_success()  # success resets the consecutive count
    breaker.record_failure()
    assert breaker.state == "closed"
    breaker.record_failure()
    assert breaker.state == "open" and not breaker.allow()
    clock.advance(10)
    assert breaker.state == "half_open"
    assert breaker.allow()
    assert not breaker.allow()  # the trial is in flight
    breaker.release()  # the trial said nothing about health (e.g. a 429)
    assert breaker.allow()
    breaker.record_success()
    assert breaker.state == "closed"
    assert changes == ["open", "closed"]


async def test_rate_limiter_requests_and_tokens():
    clock = ManualClock()
    limiter = RateLimiter(requests_per_minute=60, tokens_per_minute=600, clock=clock, sleep=clock.sleep)
    for _ in range(3):
        await limiter.acquire(200)  # 600 tokens: the whole minute's allowance
    assert clock.sleeps == []
    await limiter.acquire(300)
    assert sum(clock.sleeps) == pytest.approx(30.0)  # 300 tokens at 10 tokens/s
    await limiter.acquire(10_000)  # larger than a minute's allowance: waits for a full bucket, then goes
    assert sum(clock.sleeps) == pytest.approx(90.0)


async def test_unlimited_rate_limiter_never_sleeps():
    clock = ManualClock()
    limiter = RateLimiter(clock=clock, sleep=clock.sleep)
    for _ in range(100):
        await limiter.acquire(10_000)
    assert clock.sleeps == []


def test_budget_minute_and_day_windows():
    wall = ManualClock(start=1_800_000_000.0)  # a whole minute, and 00:00 UTC is 86400-aligned
    remaining: dict[str, int] = {}
    budget = TokenBudget(per_minute=1_000, per_day=2_500, clock=wall, on_remaining=remaining.__setitem__)
    assert remaining == {"minute": 1_000, "day": 2_500}
    reservation = budget.reserve(800)
    with pytest.raises(JudgeBudgetExceeded, match="minute"):
        budget.reserve(300)
    budget.settle(reservation, 500)  # the call cost less than reserved
    assert budget.remaining("minute") == 500
    budget.reserve(300)
    wall.advance(60)
    assert budget.remaining("minute") == 1_000
    assert budget.remaining("day") == 2_500 - 800
    budget.settle(budget.reserve(900), 900)
    wall.advance(60)
    with pytest.raises(JudgeBudgetExceeded, match="day"):
        budget.reserve(900)
    assert remaining["day"] == 2_500 - 1_700
    wall.advance(86_400)
    assert budget.remaining("day") == 2_500


def test_budget_settle_after_the_window_closed_charges_the_new_window():
    wall = ManualClock(start=1_800_000_000.0)
    budget = TokenBudget(per_minute=1_000, clock=wall)
    reservation = budget.reserve(400)
    wall.advance(61)
    budget.settle(reservation, 700)
    assert budget.remaining("minute") == 300
    assert not TokenBudget(clock=wall).enabled


def test_cache_ttl_and_lru_bound():
    clock = ManualClock()
    cache: TtlCache[int] = TtlCache(max_size=2, ttl_s=10, clock=clock)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.get("a") == 1  # a is now most recently used
    cache.put("c", 3)
    assert cache.get("b") is None and cache.get("a") == 1 and cache.get("c") == 3
    assert len(cache) == 2
    clock.advance(10)
    assert cache.get("a") is None
    disabled: TtlCache[int] = TtlCache(max_size=0, ttl_s=10, clock=clock)
    disabled.put("a", 1)
    assert disabled.get("a") is None


def test_content_key_covers_everything_that_changes_the_verdict():
    base: dict[str, Any] = {"mode": "compact", "model": "m", "question": "q", "contexts": ["a", "b"], "answer": "x"}
    keys = {content_key(**base)}
    for change in ({"mode": "parity"}, {"model": "n"}, {"question": "q2"}, {"contexts": ["b", "a"]},
                   {"contexts": ["ab"]}, {"answer": "y"}):
        keys.add(content_key(**{**base, **change}))
    assert len(keys) == 7
    assert len(content_key(**base)) == 64  # a sha256 digest: no user text kept as a key


async def test_concurrency_bound_holds_over_real_http():
    async with FakeOpenAI() as server:
        server.responder = lambda body: Reply.slow(0.2, then=Reply.json({
            "claims": [], "contexts": [{"rank": 1, "relevant": True}], "questions": [], "noncommittal": False}))
        judge = LlmJudge(base_url=server.base_url, model="m", concurrency=2, cache_size=0)
        try:
            traces = [
                RagTrace(f"{i:032x}", "s", "p", question="q", answer=f"a{i}", documents=(Document("d", "c"),))
                for i in range(6)
            ]
            results = await asyncio.gather(*(judge.score(t) for t in traces))
        finally:
            await judge.aclose()
        assert all(r.get(PRECISION) == pytest.approx(1.0) for r in results)
        assert len(server.chat_requests) == 6
        assert server.max_in_flight == 2
