"""The agent over real HTTP: the two score streams, the sum of squared scores, power-based sampling
gauges and the release info metric."""

from __future__ import annotations

import asyncio

import pytest
from prometheus_client import CollectorRegistry

from ragmon import semconv as sc
from ragmon.export.metrics import AgentMetrics
from ragmon.export.releases import ReleaseTracker
from tests.agent.conftest import SCORES, ScriptedJudge, running_agent
from tests.helpers.scrape import scrape
from tests.helpers.traffic import CONTEXTS, OtlpTraffic, Request, healthy

FAITH = sc.METRIC_FAITHFULNESS


async def _send(traffic: OtlpTraffic, requests: list[Request]) -> None:
    for r in requests:
        await asyncio.to_thread(traffic.send, r)


async def test_priority_traces_score_into_their_own_stream(endpoint_of) -> None:
    """Outside the rate, errored and thumbs-down traces are judged as sample="priority"; the rate
    stream the alerts read does not see them."""
    async with running_agent(ScriptedJudge(), sample_rate=0.0) as agent:
        traffic = OtlpTraffic(endpoint_of(agent))
        await _send(traffic, [healthy()] * 3 + [Request("q?", CONTEXTS, "an answer", error=True)] * 2
                    + [Request("q?", CONTEXTS, "an answer", extra={sc.RAGMON_FEEDBACK: "negative"})])
        assert await agent.wait_idle(20)
        s = await asyncio.to_thread(scrape, agent.metrics_port)
        traffic.close()
    assert s.value(f"{sc.M_SCORE}_count", metric=FAITH, sample=sc.SAMPLE_STREAM_PRIORITY) == 3
    assert s.value(f"{sc.M_SCORE}_count", metric=FAITH, sample=sc.SAMPLE_STREAM_RATE) == 0
    # they still feed the diagnosis counters (and /worst)
    assert s.value(f"{sc.M_DIAGNOSIS}_total") == 3
    squares = s.value(f"{sc.M_SCORE_SQUARES}_total", metric=FAITH, sample=sc.SAMPLE_STREAM_PRIORITY)
    assert squares == pytest.approx(3 * SCORES[FAITH] ** 2)


async def test_inside_the_rate_an_errored_trace_is_a_rate_sample(endpoint_of) -> None:
    async with running_agent(ScriptedJudge(), sample_rate=1.0) as agent:
        traffic = OtlpTraffic(endpoint_of(agent))
        await _send(traffic, [healthy(), Request("q?", CONTEXTS, "an answer", error=True)])
        assert await agent.wait_idle(20)
        s = await asyncio.to_thread(scrape, agent.metrics_port)
        traffic.close()
    assert s.value(f"{sc.M_SCORE}_count", metric=FAITH, sample=sc.SAMPLE_STREAM_RATE) == 2
    assert s.value(f"{sc.M_SCORE}_count", metric=FAITH, sample=sc.SAMPLE_STREAM_PRIORITY) == 0
    assert s.value(f"{sc.M_TRACES_SAMPLED}_total", reason=sc.SAMPLED_RATE) == 2
    # fixed rates are reported too, with what they can detect
    assert s.value(sc.M_SAMPLE_RATE, pipeline="support") == 1.0
    assert s.value(sc.M_DETECT_TARGET) == 0


async def test_power_based_sampling_exports_its_rate_target_and_detectable_drop(endpoint_of) -> None:
    async with running_agent(ScriptedJudge(), sample_rate=0.0, detect_drop=0.05, detect_max_rate=0.5) as agent:
        traffic = OtlpTraffic(endpoint_of(agent))
        await _send(traffic, [healthy()] * 4)
        assert await agent.wait_idle(20)
        s = await asyncio.to_thread(scrape, agent.metrics_port)
        traffic.close()
    assert s.value(sc.M_DETECT_TARGET) == 0.05
    # four traces are far too few for a 0.05 drop: the rate goes to its bound, the fixed 0 is ignored
    assert s.value(sc.M_SAMPLE_RATE, pipeline="support") == 0.5
    assert s.value(sc.M_DETECTABLE_DROP, pipeline="support") > 0.05
    assert s.value(f"{sc.M_TRACES_RECEIVED}_total") == 4


async def test_release_info_from_span_attributes(endpoint_of) -> None:
    extra = {sc.LLM_MODEL_NAME: "gpt-4o-mini", sc.LLM_PROMPT_TEMPLATE_VERSION: "v12"}
    async with running_agent(ScriptedJudge(), sample_rate=0.0) as agent:
        traffic = OtlpTraffic(endpoint_of(agent))
        await _send(traffic, [Request("q?", CONTEXTS, "an answer", extra=extra)] * 2 + [healthy()])
        assert await agent.wait_idle(20)
        s = await asyncio.to_thread(scrape, agent.metrics_port)
        traffic.close()
    rows = s.labelsets(sc.M_RELEASE_INFO)
    assert rows == [{"service": "test-svc", "pipeline": "support", "app_version": "unknown",
                     "prompt_version": "v12", "model": "gpt-4o-mini"}]


def test_release_tracker_reads_service_version_and_stays_bounded() -> None:
    metrics = AgentMetrics(CollectorRegistry())
    tracker = ReleaseTracker(metrics.release, limit=2)
    tracker.note_resource("shop", {sc.SERVICE_VERSION: "1.4.2"})
    for model in ("m1", "m2", "m3", "m4"):
        tracker.observe("shop", "shop", "qa", {sc.LLM_MODEL_NAME: model})
    tracker.observe("shop", "shop", "qa", {})  # app version alone is a release too
    value = metrics.registry.get_sample_value
    labels = {"service": "shop", "pipeline": "qa", "app_version": "1.4.2", "prompt_version": "unknown"}
    assert value(sc.M_RELEASE_INFO, {**labels, "model": "m1"}) == 1
    assert value(sc.M_RELEASE_INFO, {**labels, "model": "m3"}) is None
    overflow = {"service": "shop", "pipeline": "qa", "app_version": "_other", "prompt_version": "_other",
                "model": "_other"}
    assert value(sc.M_RELEASE_INFO, overflow) == 1
    series = [s for f in metrics.registry.collect() if f.name == sc.M_RELEASE_INFO for s in f.samples]
    assert len(series) == 3  # two releases + one overflow series
