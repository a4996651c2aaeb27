"""`--judge llm` end to end: real OTLP spans -> the agent -> the LLM judge over real HTTP
(the OpenAI-protocol test server) -> Prometheus metrics scraped over HTTP."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from prometheus_client import CollectorRegistry

from ragmon import semconv as sc
from ragmon.agent import Agent
from ragmon.config import load_agent_config
from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.helpers.scrape import scrape
from tests.helpers.traffic import CONTEXTS, OtlpTraffic, Request, contradicting, healthy


@contextlib.asynccontextmanager
async def llm_agent(server: FakeOpenAI, **overrides) -> AsyncIterator[Agent]:
    settings = {
        "receiver_port": 0, "metrics_port": 0, "trace_timeout_s": 2.0, "shutdown_grace_s": 5.0,
        "judge": "llm", "judge_base_url": server.base_url, "judge_model": "judge-model",
        "judge_embedding_model": "fake-embed", "judge_api_key": "sk-e2e",
    }
    settings.update(overrides)
    agent = Agent(load_agent_config(settings, environ={}), registry=CollectorRegistry())
    await agent.start()
    try:
        yield agent
    finally:
        await agent.stop()


async def send(agent: Agent, requests: list[Request]) -> None:
    traffic = OtlpTraffic(f"http://127.0.0.1:{agent.receiver_port}/v1/traces")
    try:
        for request in requests:
            await asyncio.to_thread(traffic.send, request)
    finally:
        await asyncio.to_thread(traffic.close)
    assert await agent.wait_idle(30)


def accounted(m, pipeline="support") -> tuple[float, float]:
    received = m.value(f"{sc.M_TRACES_RECEIVED}_total", pipeline=pipeline)
    parts = (m.value(f"{sc.M_TRACES_SCORED}_total", pipeline=pipeline)
             + m.value(f"{sc.M_TRACES_SKIPPED}_total", pipeline=pipeline)
             + m.value(f"{sc.M_TRACES_FAILED}_total", pipeline=pipeline))
    return received, parts


async def test_agent_scores_traces_with_the_llm_judge():
    async with FakeOpenAI() as server, llm_agent(server) as agent:
        await send(agent, [healthy(), Request("How much is Pro?", CONTEXTS, "Bananas grow on Mars in winter.")])
        m = await asyncio.to_thread(scrape, agent.metrics_port)
    assert m.value(f"{sc.M_TRACES_SCORED}_total", judge="llm") == 2
    assert m.value(f"{sc.M_SCORE}_count", judge="llm", metric="faithfulness") == 2
    # healthy: its one sentence is in the contexts; the other is not (the server's default responder)
    assert m.value(f"{sc.M_SCORE}_bucket", judge="llm", metric="faithfulness", le="0.05") == 1
    assert m.value(f"{sc.M_JUDGE_REQUESTS}_total", judge="llm", outcome="ok") == 4  # 2 chat + 2 embeddings
    assert m.value(f"{sc.M_JUDGE_TOKENS}_total", judge="llm", kind="completion") == 100
    assert len(server.chat_requests) == 2
    assert all(r.headers["Authorization"] == "Bearer sk-e2e" for r in server.chat_requests)
    received, parts = accounted(m)
    assert received == parts == 2


async def test_agent_counts_budget_skips_and_judge_failures():
    async with FakeOpenAI() as server:
        # a day budget that one trace (~1 000 tokens reserved, 150 spent) fits and a second does not
        server.responder = lambda body: Reply.json(
            {"claims": [], "contexts": [{"rank": i, "relevant": True} for i in (1, 2, 3)], "questions": [],
             "noncommittal": False}, usage=(1_300, 200))
        async with llm_agent(server, judge_budget_tokens_per_day=1_800, judge_concurrency=1) as agent:
            await send(agent, [healthy(), Request("Is SSO included?", CONTEXTS, "Only in Enterprise."),
                               Request("Refunds?", CONTEXTS, "Within 30 days.")])
            m = await asyncio.to_thread(scrape, agent.metrics_port)
        assert m.value(f"{sc.M_TRACES_SCORED}_total", judge="llm") == 1
        assert m.value(f"{sc.M_TRACES_SKIPPED}_total", reason="budget") == 2
        assert m.value(sc.M_JUDGE_BUDGET_REMAINING, window="day") == 300
        assert len(server.chat_requests) == 1
        received, parts = accounted(m)
        assert received == parts == 3

        server.responder = lambda body: Reply.error(500)
        # one trace at a time: with several in flight, all may fail before the breaker opens
        async with llm_agent(server, judge_max_retries=0, judge_circuit_failures=2, judge_concurrency=1) as agent:
            await send(agent, [healthy(), contradicting(), Request("Is SSO included?", CONTEXTS, "No.")])
            m = await asyncio.to_thread(scrape, agent.metrics_port)
        assert m.value(f"{sc.M_TRACES_FAILED}_total", judge="llm", reason="http_error") == 2
        assert m.value(f"{sc.M_TRACES_FAILED}_total", judge="llm", reason="circuit_open") == 1
        assert m.value(sc.M_JUDGE_CIRCUIT_OPEN, judge="llm") == 1
        received, parts = accounted(m)
        assert received == parts == 3


async def test_retry_after_longer_than_the_agents_fallback_bound_is_honoured():
    """A 429 asking to wait longer than judge_timeout_s x (retries + 2) — the bound the agent puts
    on judges that do not bound themselves — still ends in a scored trace, not failed{timeout}."""
    async with FakeOpenAI() as server:
        server.enqueue(Reply.error(429, retry_after="1"), Reply.error(429, retry_after="1"))
        async with llm_agent(server, judge_timeout_s=0.2, judge_max_retries=2) as agent:
            await send(agent, [healthy()])
            m = await asyncio.to_thread(scrape, agent.metrics_port)
    assert 2 * 1.0 > 0.2 * (2 + 2)  # the waits exceed the fallback bound
    assert m.value(f"{sc.M_TRACES_SCORED}_total", judge="llm") == 1
    assert m.value(f"{sc.M_TRACES_FAILED}_total", judge="llm", reason="timeout") == 0
    assert m.value(f"{sc.M_JUDGE_REQUESTS}_total", judge="llm", outcome="retry") == 2  # both 429s retried
