from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest
from prometheus_client import CollectorRegistry

from ragmon import semconv as sc
from ragmon.agent import Agent
from ragmon.config import load_agent_config
from ragmon.errors import JudgeBudgetExceeded, JudgeReplyError
from ragmon.testing import StaticJudge
from ragmon.types import RagTrace, Scores

SCORES = {sc.METRIC_FAITHFULNESS: 0.9, sc.METRIC_ANSWER_RELEVANCY: 0.8, sc.METRIC_CONTEXT_PRECISION: 0.7}


class ScriptedJudge(StaticJudge):
    """ragmon.testing's StaticJudge whose verdict depends on the answer text, for accounting
    tests that must not depend on a model: 'budget' -> over budget, 'broken' -> bad reply,
    'slow' -> takes a while, anything else -> fixed scores."""

    def __init__(self, delay_s: float = 0.0) -> None:
        super().__init__(SCORES, name="scripted")
        self.delay_s = delay_s

    async def score(self, trace: RagTrace) -> Scores:
        self.seen.append(trace.trace_id)
        answer = trace.answer or ""
        if self.delay_s or "slow" in answer:
            await asyncio.sleep(self.delay_s or 0.5)
        if "budget" in answer:
            raise JudgeBudgetExceeded("daily budget exhausted")
        if "broken" in answer:
            raise JudgeReplyError("judge reply was not JSON")
        return Scores(SCORES, judge=self.name, details={"reason": "scripted"})


@contextlib.asynccontextmanager
async def running_agent(judge=None, **overrides) -> AsyncIterator[Agent]:
    settings = {"receiver_port": 0, "metrics_port": 0, "trace_timeout_s": 2.0, "shutdown_grace_s": 5.0}
    settings.update(overrides)
    agent = Agent(load_agent_config(settings, environ={}), registry=CollectorRegistry(), judge=judge)
    await agent.start()
    try:
        yield agent
    finally:
        await agent.stop()


@pytest.fixture
def endpoint_of():
    return lambda agent: f"http://127.0.0.1:{agent.receiver_port}/v1/traces"
