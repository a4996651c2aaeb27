"""Fixtures shared by the LLM-judge tests: the OpenAI-protocol test server over real HTTP, a fresh
metrics registry, and a judge factory that closes what it made."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from ragmon.export.metrics import AgentMetrics
from ragmon.scoring.llm import LlmJudge
from tests.fakes.openai_server import FakeOpenAI


@pytest.fixture
async def server() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI() as s:
        yield s


@pytest.fixture
def metrics() -> AgentMetrics:
    return AgentMetrics(CollectorRegistry())


@pytest.fixture
async def make_judge(server: FakeOpenAI, metrics: AgentMetrics) -> AsyncIterator[Callable[..., LlmJudge]]:
    judges: list[LlmJudge] = []

    def make(**kw: Any) -> LlmJudge:
        kw.setdefault("embedding_model", "fake-embed")
        judge = LlmJudge(base_url=server.base_url, model="judge-model", metrics=metrics, **kw)
        judges.append(judge)
        return judge

    yield make
    for judge in judges:
        await judge.aclose()
