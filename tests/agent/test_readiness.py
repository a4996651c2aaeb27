"""/readyz reads the judge's circuit through the Judge protocol: an open circuit is "degraded"."""

from __future__ import annotations

import asyncio

import httpx

from ragmon.scoring.llm import LlmJudge
from ragmon.testing import StaticJudge
from tests.agent.conftest import SCORES, running_agent
from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.helpers.traffic import OtlpTraffic, healthy


async def _readyz(agent) -> dict:
    async with httpx.AsyncClient() as client:
        response = await client.get(f"http://127.0.0.1:{agent.metrics_port}/readyz")
    assert response.status_code == 200  # degraded is still ready: traces are accounted as failed
    return response.json()


async def test_readyz_reports_the_llm_judges_open_circuit_as_degraded(endpoint_of) -> None:
    async with FakeOpenAI() as server:
        server.enqueue(*[Reply.error(500) for _ in range(3)])
        judge = LlmJudge(base_url=server.base_url, model="judge", max_retries=0, circuit_failures=1,
                         circuit_reset_s=600)
        async with running_agent(judge) as agent:
            before = await _readyz(agent)
            assert before["judge_state"] == "ok" and before["judge_circuit"] == "closed"
            traffic = OtlpTraffic(endpoint_of(agent))
            await asyncio.to_thread(traffic.send, healthy())
            assert await agent.wait_idle(20)
            traffic.close()
            after = await _readyz(agent)
    assert judge.circuit_state == "open"
    assert after["judge_state"] == "degraded" and after["judge_circuit"] == "open"


async def test_readyz_degraded_for_any_judge_whose_circuit_is_not_closed() -> None:
    judge = StaticJudge(SCORES)
    async with running_agent(judge) as agent:
        assert (await _readyz(agent))["judge_state"] == "ok"
        judge.circuit_state = "half_open"
        assert (await _readyz(agent))["judge_state"] == "degraded"
