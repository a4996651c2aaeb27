"""Pipeline names (issue 13, item 3): ``ragmon.pipeline`` -> ``gen_ai.workflow.name`` -> the
configured attribute (``--pipeline-attribute``) -> ``traceloop.workflow.name`` -> the root
span's name, then ``--pipeline-rename REGEX=NAME`` rules; label cardinality stays bounded.
Spans from the real OpenTelemetry SDK, decoded from real OTLP protobuf."""

from __future__ import annotations

from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from ragmon import semconv as sc
from ragmon.agent import Agent
from ragmon.config import load_agent_config
from ragmon.errors import ConfigError
from ragmon.ingest.extract import ExtractSettings, build_rag_trace
from ragmon.testing import InMemorySource, StaticJudge
from ragmon.types import SpanRecord
from tests.ingest.otel_helpers import SpanFactory

QUESTION = "How do I reset my password?"


def records(root_attrs: dict[str, Any], child_attrs: dict[str, Any] | None = None, *,
            root_name: str = "POST /chat", resource: dict[str, Any] | None = None) -> list[SpanRecord]:
    factory = SpanFactory("names", resource=resource)
    with factory.tracer.start_as_current_span(root_name, attributes={sc.INPUT_VALUE: QUESTION, **root_attrs}), \
            factory.tracer.start_as_current_span("chat", attributes={
                sc.GEN_AI_OPERATION_NAME: sc.GEN_AI_OP_CHAT, **(child_attrs or {})}):
        pass
    return factory.records()


def name(spans: list[SpanRecord], **settings: Any) -> str:
    return build_rag_trace(spans, complete=True, settings=ExtractSettings(**settings)).pipeline


ALL = {sc.RAGMON_PIPELINE: "ragmon-name", sc.GEN_AI_WORKFLOW_NAME: "genai-name", "app.flow": "attr-name",
       sc.TRACELOOP_WORKFLOW_NAME: "traceloop-name"}


@pytest.mark.parametrize(("present", "expected"), [
    (ALL, "ragmon-name"),
    ({k: v for k, v in ALL.items() if k != sc.RAGMON_PIPELINE}, "genai-name"),
    ({"app.flow": "attr-name", sc.TRACELOOP_WORKFLOW_NAME: "traceloop-name"}, "attr-name"),
    ({sc.TRACELOOP_WORKFLOW_NAME: "traceloop-name"}, "traceloop-name"),
    ({}, "POST /chat"),
])
def test_precedence(present: dict[str, Any], expected: str) -> None:
    assert name(records(present), pipeline_attribute="app.flow") == expected


def test_gen_ai_workflow_name_on_a_child_span_names_the_pipeline() -> None:
    assert name(records({}, {sc.GEN_AI_WORKFLOW_NAME: "support"})) == "support"


def test_the_configured_attribute_is_read_from_the_resource_too() -> None:
    spans = records({}, resource={"app.flow": "from-resource"})
    assert name(spans, pipeline_attribute="app.flow") == "from-resource"
    assert name(spans) == "POST /chat"  # not configured: not read


def test_rename_rules_are_anchored_ordered_and_may_use_groups() -> None:
    spans = records({}, root_name="RetrieverQueryEngine.query")
    rules = {r"Retriever.*\.query": "first", r"RetrieverQueryEngine\.(\w+)": "qe-\\1"}
    assert name(spans, pipeline_rename=rules) == "first"
    assert name(spans, pipeline_rename=dict(reversed(list(rules.items())))) == "qe-query"
    assert name(spans, pipeline_rename={"QueryEngine": "never"}) == "RetrieverQueryEngine.query"  # anchored


def test_rename_rules_from_configuration() -> None:
    config = load_agent_config({"pipeline_rename": r"RetrieverQueryEngine\..*=docs-qa;RunnableSequence=support",
                                "pipeline_attribute": "app.flow"}, environ={})
    assert config.pipeline_rename == {r"RetrieverQueryEngine\..*": "docs-qa", "RunnableSequence": "support"}
    env = load_agent_config(environ={"RAGMON_PIPELINE_RENAME": "a=b=c"})  # the last '=' splits
    assert env.pipeline_rename == {"a=b": "c"}
    with pytest.raises(ConfigError, match="pipeline-rename"):
        load_agent_config({"pipeline_rename": "Retriever(=x"}, environ={})
    with pytest.raises(ConfigError, match="REGEX=NAME"):
        load_agent_config({"pipeline_rename": "no-name-here"}, environ={})


async def test_agent_labels_use_the_renamed_name_and_stay_bounded() -> None:
    registry = CollectorRegistry()
    source = InMemorySource()
    config = load_agent_config({"metrics_port": 0, "metrics_max_label_values": 2,
                                "pipeline_rename": r"Runnable\w+=support"}, environ={})
    async with Agent(config, registry=registry, judge=StaticJudge({sc.METRIC_FAITHFULNESS: 1.0}),
                     source=source) as agent:
        for root in ("RunnableSequence", "RunnableParallel", "a", "b", "c"):
            source.push(records({sc.OUTPUT_VALUE: "answer"}, root_name=root))
        assert await agent.wait_idle(20)
    received = {s.labels["pipeline"]: s.value for m in registry.collect() if m.name == sc.M_TRACES_RECEIVED
                for s in m.samples if s.name.endswith("_total")}
    assert received["support"] == 2  # two framework class names, one pipeline
    assert len(received) <= 3 and sc.OVERFLOW_LABEL in received  # bounded as before
    assert sum(received.values()) == 5
