"""The one wiring function: every part takes its settings as a section of the table, and the
agent is the parts' owner, not a class over mixins."""

from __future__ import annotations

import dataclasses
import logging

import pytest
from prometheus_client import CollectorRegistry

from ragmon._log import LogOnce
from ragmon.agent import Agent
from ragmon.agent.judge_pool import JudgePoolSettings
from ragmon.agent.latency import LatencySettings
from ragmon.agent.router import TraceRouter
from ragmon.agent.wiring import AssemblerSettings, CapacitySettings, InspectSettings, build_parts
from ragmon.config import load_agent_config, settings_by_name
from ragmon.ingest.extract import ExtractSettings
from ragmon.sampling.power import DetectSettings
from ragmon.sampling.sampler import SamplingPolicy, SamplingSettings
from ragmon.testing import InMemorySource, StaticJudge
from ragmon.types import SpanRecord

SECTIONS = (AssemblerSettings, SamplingSettings, DetectSettings, LatencySettings, JudgePoolSettings,
            CapacitySettings, InspectSettings, ExtractSettings)


def _build(**settings):
    config = load_agent_config(settings, environ={})
    return build_parts(config, registry=CollectorRegistry(), clock=lambda: 0.0, release=lambda token: None,
                               log_once=LogOnce(logging.getLogger("test")))


@pytest.mark.parametrize("section", SECTIONS, ids=lambda s: s.__name__)
def test_every_section_names_settings_of_the_table(section):
    assert {f.name for f in dataclasses.fields(section)} <= set(settings_by_name())


def test_sampling_comes_from_its_section():
    parts = _build(sample_rate=0.2, pipeline_sample_rates="cheap=0.05,gold=0.5", priority_errors=False,
                           priority_slow_retrieval_s=2.0, priority_min_top_score=0.3)
    assert parts.policy == SamplingPolicy(rate=0.2, pipeline_rates={"cheap": 0.05, "gold": 0.5},
                                          priority_errors=False, priority_feedback=True, slow_retrieval_s=2.0,
                                          min_top_score=0.3)
    assert parts.policy.max_rate == 0.5
    latency_only = parts.router.latency_only
    assert latency_only is not None and latency_only.bound == 0.5  # no judging rate reaches beyond it
    assert not parts.power.adaptive


def test_power_sampling_comes_from_its_section():
    parts = _build(sample_rate=0.1, detect_drop=0.1, detect_within_s=600, detect_max_rate=0.4, detect_replicas=3)
    target = parts.power.target
    assert parts.power.adaptive
    assert (target.drop, target.window_s, target.max_rate, target.replicas) == (0.1, 600, 0.4, 3)
    latency_only = parts.router.latency_only
    assert latency_only is not None and latency_only.bound == 0.4  # adaptive rates stay within detect_max_rate


def test_every_trace_is_read_in_full_when_any_may_be_judged():
    assert _build(sample_rate=1.0).router.latency_only is None
    assert _build(sample_rate=0.1, fast_path=False).router.latency_only is None
    assert _build(sample_rate=0.1, pipeline_sample_rates="all=1.0").router.latency_only is None


def test_the_assembler_takes_its_section():
    now = [0.0]
    config = load_agent_config({"trace_timeout_s": 5.0, "sample_rate": 0.0}, environ={})
    parts = build_parts(config, registry=CollectorRegistry(), clock=lambda: now[0], release=lambda token: None,
                        log_once=LogOnce(logging.getLogger("test")))
    child = SpanRecord(trace_id="a" * 32, span_id="2" * 16, parent_span_id="1" * 16, name="retrieve",
                       start_time_ns=0, end_time_ns=1, attributes={"ragmon.pipeline": "p"},
                       resource={"service.name": "svc"})
    parts.router.submit([child])
    now[0] = 4.0
    parts.router.expire()
    assert parts.assembler.open_count == 1  # within trace_timeout_s
    now[0] = 6.0
    parts.router.expire()
    assert parts.assembler.open_count == 0
    assert parts.metrics.registry.get_sample_value(
        "ragmon_traces_incomplete_total", {"service": "svc", "pipeline": "p", "reason": "timeout"}) == 1


async def test_the_agent_owns_parts_not_mixins():
    assert Agent.__mro__ == (Agent, object)
    source = InMemorySource()
    agent = Agent(load_agent_config({"metrics_port": 0}, environ={}), registry=CollectorRegistry(),
                  judge=StaticJudge({"faithfulness": 1.0}), source=source)
    await agent.start()
    try:
        assert source.sink is agent.parts.router  # the router is the SpanSink sources are given ...
    finally:
        await agent.stop()
    sink_methods = {"latency_only", "submit", "batch", "backpressure", "admit", "flush_where", "hand_over_where",
                    "unaccounted"}
    assert sink_methods <= set(dir(TraceRouter))
    assert not sink_methods & set(dir(Agent))  # ... and the agent forwards none of its methods
