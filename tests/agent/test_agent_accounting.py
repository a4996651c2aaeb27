"""Agent end to end over real HTTP with a scripted (non-model) judge: accounting and metrics."""

from __future__ import annotations

import asyncio

import httpx

from ragmon import semconv as sc
from tests.agent.conftest import ScriptedJudge, running_agent
from tests.helpers.scrape import scrape
from tests.helpers.traffic import CONTEXTS, OtlpTraffic, Request, healthy


def _identity(s, service="test-svc"):
    received = s.value(f"{sc.M_TRACES_RECEIVED}_total", service=service)
    scored = s.value(f"{sc.M_TRACES_SCORED}_total", service=service)
    skipped = s.value(f"{sc.M_TRACES_SKIPPED}_total", service=service)
    failed = s.value(f"{sc.M_TRACES_FAILED}_total", service=service)
    return received, scored, skipped, failed


async def _send(traffic: OtlpTraffic, requests):
    return [await asyncio.to_thread(traffic.send, r) for r in requests]


async def test_every_trace_is_accounted_scored_skipped_or_failed(endpoint_of):
    async with running_agent(ScriptedJudge()) as agent:
        traffic = OtlpTraffic(endpoint_of(agent))
        reqs = [healthy()] * 5 + [
            Request("q?", CONTEXTS, "over budget answer"),
            Request("q?", CONTEXTS, "broken reply please"),
            Request("q?", CONTEXTS, "hidden", content=False),
            Request("q?", CONTEXTS, None),  # retrieval only: latency yes, judge no
        ]
        await _send(traffic, reqs)
        assert await agent.wait_idle(20)
        s = await asyncio.to_thread(scrape, agent.metrics_port)
        traffic.close()
    received, scored, skipped, failed = _identity(s)
    assert received == 9
    assert scored == 5
    assert s.value(f"{sc.M_TRACES_SKIPPED}_total", reason=sc.SKIP_BUDGET) == 1
    assert s.value(f"{sc.M_TRACES_SKIPPED}_total", reason=sc.SKIP_NO_CONTENT) == 1
    assert s.value(f"{sc.M_TRACES_SKIPPED}_total", reason=sc.SKIP_NO_ANSWER) == 1
    assert s.value(f"{sc.M_TRACES_FAILED}_total", reason=sc.FAIL_INVALID_REPLY, judge="scripted") == 1
    assert received == scored + skipped + failed
    # latency is measured on all traffic, including unjudged traces
    assert s.value(f"{sc.M_RETRIEVAL_LATENCY}_count", pipeline="support") == 9
    assert s.value(f"{sc.M_PIPELINE_LATENCY}_count", pipeline="support") == 9
    assert s.value(sc.M_RETRIEVAL_LATENCY_P95, pipeline="support") > 0
    assert s.value(f"{sc.M_SCORE}_count", metric=sc.METRIC_FAITHFULNESS) == 5
    assert s.value(f"{sc.M_SCORE}_sum", metric=sc.METRIC_CONTEXT_PRECISION) == 5 * 0.7
    assert s.value(f"{sc.M_DIAGNOSIS}_total", verdict=sc.VERDICT_OK) == 5


async def test_sampling_rate_zero_still_measures_latency(endpoint_of):
    judge = ScriptedJudge()
    async with running_agent(judge, sample_rate=0.0, priority_errors=True) as agent:
        traffic = OtlpTraffic(endpoint_of(agent))
        await _send(traffic, [healthy()] * 4 + [Request("q?", CONTEXTS, "an answer", error=True)])
        assert await agent.wait_idle(20)
        s = await asyncio.to_thread(scrape, agent.metrics_port)
        traffic.close()
    assert s.value(f"{sc.M_TRACES_SKIPPED}_total", reason=sc.SKIP_NOT_SAMPLED) == 4
    # an error trace is judged regardless of the rate
    assert s.value(f"{sc.M_TRACES_SAMPLED}_total", reason=sc.SAMPLED_PRIORITY_ERROR) == 1
    assert len(judge.seen) == 1
    assert s.value(f"{sc.M_RETRIEVAL_LATENCY}_count") == 5


async def test_trace_without_root_closes_on_timeout(endpoint_of):
    async with running_agent(ScriptedJudge(), trace_timeout_s=0.5) as agent:
        traffic = OtlpTraffic(endpoint_of(agent))
        await _send(traffic, [Request("q?", CONTEXTS, "answer", with_root=False)])
        assert await agent.wait_idle(10)
        s = await asyncio.to_thread(scrape, agent.metrics_port)
        traffic.close()
    assert s.value(f"{sc.M_TRACES_INCOMPLETE}_total") == 1
    assert s.value(f"{sc.M_TRACES_RECEIVED}_total") == 1
    assert s.value(f"{sc.M_RETRIEVAL_LATENCY}_count") == 1


async def test_open_trace_limit_evicts_oldest_and_counts(endpoint_of):
    async with running_agent(ScriptedJudge(), max_open_traces=50, trace_timeout_s=30,
                             sample_rate=0.0) as agent:
        traffic = OtlpTraffic(endpoint_of(agent))
        await _send(traffic, [Request("q?", CONTEXTS, None, with_root=False)] * 80)
        await asyncio.sleep(0.5)
        s = await asyncio.to_thread(scrape, agent.metrics_port)
        traffic.close()
        assert s.value(f"{sc.M_DROPPED}_total", reason=sc.DROP_OPEN_TRACES_FULL) == 30
        assert s.value(sc.M_OPEN_TRACES) <= 50
        assert s.value(f"{sc.M_TRACES_RECEIVED}_total") == 30
    # stop() closes the remaining 50; nothing is lost
    final = agent.metrics.registry.get_sample_value
    assert final(f"{sc.M_TRACES_RECEIVED}_total", {"service": "test-svc", "pipeline": "support"}) == 80


async def test_exemplars_worst_health_and_readiness(endpoint_of):
    async with running_agent(ScriptedJudge(), worst_max_chars=10) as agent:
        traffic = OtlpTraffic(endpoint_of(agent))
        (trace_id,) = await _send(traffic, [healthy()])
        assert await agent.wait_idle(20)
        base = f"http://127.0.0.1:{agent.metrics_port}"
        async with httpx.AsyncClient() as client:
            om = await client.get(f"{base}/metrics", headers={"Accept": "application/openmetrics-text; version=1.0.0"})
            worst = (await client.get(f"{base}/worst")).json()["worst"]
            health = await client.get(f"{base}/healthz")
            ready = await client.get(f"{base}/readyz")
        traffic.close()
    assert om.headers["content-type"].startswith("application/openmetrics-text")
    assert f'trace_id="{trace_id}"' in om.text
    assert worst[0]["trace_id"] == trace_id
    assert len(worst[0]["question"]) <= 11  # capped to worst_max_chars + marker
    assert health.status_code == 200
    assert ready.status_code == 200 and ready.json()["source_ready"] is True


async def test_garbage_bodies_are_rejected_and_agent_keeps_serving(endpoint_of):
    async with running_agent(ScriptedJudge()) as agent:
        url = endpoint_of(agent)
        async with httpx.AsyncClient() as client:
            bad = await client.post(url, content=b"\x00\xffnot protobuf",
                                    headers={"Content-Type": "application/x-protobuf"})
            wrong = await client.post(url, content=b"hello", headers={"Content-Type": "text/plain"})
        traffic = OtlpTraffic(url)
        await _send(traffic, [healthy()])
        assert await agent.wait_idle(20)
        s = await asyncio.to_thread(scrape, agent.metrics_port)
        traffic.close()
    assert bad.status_code == 400
    assert wrong.status_code == 415
    assert s.value(f"{sc.M_DROPPED}_total", reason=sc.DROP_MALFORMED_BODY) >= 1
    assert s.value(f"{sc.M_DROPPED}_total", reason=sc.DROP_UNSUPPORTED_MEDIA) >= 1
    assert s.value(f"{sc.M_TRACES_SCORED}_total") == 1
