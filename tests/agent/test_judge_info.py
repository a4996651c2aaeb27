"""``ragmon_judge_info{judge, version, profile}``: what the agent judges with, read from its real
/metrics over HTTP; and the one start-up line when the judge is not fitted to this domain."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client import CollectorRegistry

from ragmon import semconv as sc
from ragmon.agent import Agent
from ragmon.config import load_agent_config
from ragmon.scoring.local._profile import JUDGE_VERSION, JudgeProfile, save_profile
from ragmon.scoring.reader.model import READER_SHA256
from tests.fakes.openai_server import FakeOpenAI

NOT_FITTED = "default judge, not fitted to this domain"

# the local judge runs its features (JUDGE_VERSION) and the shipped reader, named by its file's sha256
LOCAL_VERSION = f"{JUDGE_VERSION}+reader.{READER_SHA256[:12]}"


@contextlib.asynccontextmanager
async def running_agent(**settings: Any) -> AsyncIterator[Agent]:
    """An agent whose judge is built from its settings by the factory, as `ragmon agent` does."""
    config = load_agent_config({"receiver_port": 0, "metrics_port": 0, **settings}, environ={})
    async with Agent(config, registry=CollectorRegistry()) as agent:
        yield agent


async def _judge_info(agent) -> list[str]:
    async with httpx.AsyncClient() as client:
        text = (await client.get(f"http://127.0.0.1:{agent.metrics_port}/metrics")).text
    return [line for line in text.splitlines() if line.startswith(sc.M_JUDGE_INFO + "{")]


def _not_fitted_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if NOT_FITTED in r.getMessage()]


async def test_local_judge_without_profile_says_not_fitted(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="ragmon")
    async with running_agent(judge="local") as agent:
        lines = await _judge_info(agent)
    assert lines == [f'ragmon_judge_info{{judge="local",profile="none",version="{LOCAL_VERSION}"}} 1.0']
    [line] = _not_fitted_lines(caplog)
    assert "ragmon calibrate" in line and "--judge-profile" in line and "docs/judges.md" in line


async def test_local_judge_with_a_profile_reports_its_name(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="ragmon")
    named = tmp_path / "p1.json"
    save_profile(JudgeProfile(faithfulness_threshold=0.4, meta={"name": "shop faq/v2"}), named)
    unnamed = tmp_path / "support-2026-12.json"
    save_profile(JudgeProfile(faithfulness_threshold=0.4), unnamed)
    async with running_agent(judge="local", judge_profile=str(named)) as agent:
        # the name is a bounded label value: characters outside [A-Za-z0-9_.-] become _
        assert await _judge_info(agent) == [
            f'ragmon_judge_info{{judge="local",profile="shop_faq_v2",version="{LOCAL_VERSION}"}} 1.0']
    async with running_agent(judge="local", judge_profile=str(unnamed)) as agent:
        assert await _judge_info(agent) == [
            f'ragmon_judge_info{{judge="local",profile="support-2026-12",version="{LOCAL_VERSION}"}} 1.0']
    assert _not_fitted_lines(caplog) == []


async def test_llm_judge_reports_its_model(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="ragmon")
    async with FakeOpenAI() as server, running_agent(judge="llm", judge_base_url=server.base_url,
                                                     judge_model="judge-model-7") as agent:
        lines = await _judge_info(agent)
    assert lines == ['ragmon_judge_info{judge="llm",profile="none",version="judge-model-7"} 1.0']
    [line] = _not_fitted_lines(caplog)
    assert "ragmon calibrate LABELS.jsonl --judge llm" in line
