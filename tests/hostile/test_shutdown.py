"""Shutdown under hostile conditions: stop() always ends, and every trace is accounted, also in
the last scrape Prometheus gets before the process exits."""

from __future__ import annotations

import asyncio
import contextlib
import sys

import httpx
import pytest
from prometheus_client import CollectorRegistry

from ragmon import semconv as sc
from ragmon.agent import Agent
from ragmon.config import load_agent_config
from ragmon.testing import StaticJudge
from ragmon.types import RagTrace, Scores
from tests.agent.conftest import SCORES, running_agent
from tests.helpers.eventually import eventually
from tests.helpers.scrape import Scrape, scrape
from tests.hostile._support import PROTO, agent_process, rag_trace, totals
from tests.ingest.otel_helpers import SpanFactory

# stop() must end; this bound only turns a hang into a failure instead of a stuck test run
_HANG = 60


class SwallowingJudge(StaticJudge):
    """A judge that turns cancellation into a fallback answer, as a library that catches
    everything would. On Python 3.11 asyncio.wait_for does the same when the cancellation lands
    as the judge finishes; either way the worker went back to its queue and stop() waited forever."""

    def __init__(self, bounds_own_duration: bool) -> None:
        super().__init__(SCORES, name="swallowing")
        self.bounds_own_duration = bounds_own_duration
        self.entered = asyncio.Event()

    async def score(self, trace: RagTrace) -> Scores:
        self.entered.set()
        with contextlib.suppress(asyncio.CancelledError):  # swallowed
            await asyncio.Event().wait()
        return Scores(SCORES, judge=self.name)


def _registry_totals(agent: Agent) -> tuple[float, float]:
    def total(name: str) -> float:
        return sum(s.value for m in agent.metrics.registry.collect() for s in m.samples if s.name == name)
    received = total(f"{sc.M_TRACES_RECEIVED}_total")
    accounted = sum(total(f"{n}_total") for n in (sc.M_TRACES_SCORED, sc.M_TRACES_SKIPPED, sc.M_TRACES_FAILED))
    return received, accounted


async def _send(agent: Agent, traces: int) -> None:
    f = SpanFactory("stop-svc")
    for _ in range(traces):
        rag_trace(f)
    async with httpx.AsyncClient(timeout=10) as client:
        response = await client.post(f"http://127.0.0.1:{agent.receiver_port}/v1/traces",
                                     content=f.request().SerializeToString(), headers=PROTO)
    assert response.status_code == 200


@pytest.mark.parametrize("bounds_own_duration", [True, False], ids=["self-bounded", "outer-timeout"])
async def test_stop_ends_when_a_judge_swallows_cancellation(bounds_own_duration: bool) -> None:
    """Item 2: stop() awaited judge workers whose cancellation had been swallowed: it never returned."""
    judge = SwallowingJudge(bounds_own_duration)
    config = load_agent_config({"receiver_port": 0, "metrics_port": 0, "judge_concurrency": 2,
                                "shutdown_grace_s": 0.2}, environ={})
    agent = Agent(config, registry=CollectorRegistry(), judge=judge)
    await agent.start()
    await _send(agent, 5)
    await asyncio.wait_for(judge.entered.wait(), _HANG)
    await asyncio.wait_for(agent.stop(), _HANG)
    received, accounted = _registry_totals(agent)
    assert received == 5 and accounted == 5


async def test_final_counts_reach_one_last_scrape() -> None:
    """Also seen: the shutdown's skips{shutdown} were counted after Prometheus' last scrape. With
    RAGMON_SHUTDOWN_FINAL_SCRAPE_S the metrics stay up until one more scrape is served."""

    class Stuck(StaticJudge):
        async def score(self, trace: RagTrace) -> Scores:
            await asyncio.Event().wait()
            raise AssertionError("unreachable")

    async with running_agent(Stuck(SCORES), shutdown_grace_s=0.2, shutdown_final_scrape_s=60.0) as agent:
        await _send(agent, 3)
        port = agent.metrics_port
        stopping = asyncio.create_task(agent.stop())

        async def final() -> Scrape:
            s = await asyncio.to_thread(scrape, port)
            assert s.value(f"{sc.M_TRACES_SKIPPED}_total", reason=sc.SKIP_SHUTDOWN) == 3
            return s

        last = await eventually(final, timeout_s=_HANG, what="a scrape with the shutdown's skips")
        await asyncio.wait_for(stopping, _HANG)
    assert totals(last) == (3, 3)
    assert last.value(sc.M_JUDGE_BACKLOG) == 0


@pytest.mark.skipif(sys.platform != "linux", reason="signals and /proc as on the Dockerfile's base")
def test_sigterm_during_a_flood_exits_with_everything_accounted() -> None:
    """Item 2, as it was seen: `ragmon agent --shutdown-grace-s 1`, a flood, `kill -TERM`."""
    with agent_process("--shutdown-grace-s=1", "--shutdown-final-scrape-s=30", "--judge-concurrency=4") as agent:
        f = SpanFactory("flood-svc")
        for i in range(200):
            rag_trace(f, question=f"question {i}?", answer=f"answer {i}.", document=f"document {i} " * 50)
        body = f.request().SerializeToString()
        with httpx.Client(timeout=30) as client:
            for _ in range(5):
                client.post(agent.url, content=body, headers=PROTO)  # 200 or 503: both are fine
        agent.proc.send_signal(15)
        last = None
        while agent.proc.poll() is None:  # scrape until the process is gone: keep the last one
            try:
                last = agent.scrape()
            except httpx.HTTPError:
                break
        assert agent.proc.wait(timeout=_HANG) == 0
    assert last is not None
    received, accounted = totals(last)
    assert received == accounted > 0
