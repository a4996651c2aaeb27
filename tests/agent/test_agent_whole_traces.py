"""Never judged on part of the data, over real HTTP: a trace whose announced retrieval span never
comes is counted incomplete (missing_spans) and skipped, not judged as if it had no documents; a
retrieval that returned nothing gets its own verdict, no_context, and no faithfulness score."""

from __future__ import annotations

import asyncio

from ragmon import semconv as sc
from tests.agent.conftest import ScriptedJudge, running_agent
from tests.helpers.scrape import scrape
from tests.helpers.traffic import OtlpTraffic

ANSWER = "The Pro plan costs 49 dollars per month."


def send(traffic: OtlpTraffic, *, documents: int, announced_retrievers: int, sent_retrievers: int) -> str:
    """A trace as ragmon's SDK writes it: stages marked, the pipeline span announcing its spans."""
    tracer = traffic.tracer
    with tracer.start_as_current_span("rag") as root:
        root.set_attributes({sc.RAGMON_STAGE: sc.STAGE_PIPELINE, sc.SPAN_KIND: sc.KIND_CHAIN,
                             sc.RAGMON_PIPELINE: "support", sc.INPUT_VALUE: "How much is Pro?",
                             sc.OUTPUT_VALUE: ANSWER, sc.RAGMON_CONTENT_SAMPLED: True,
                             sc.RAGMON_RETRIEVER_SPANS: announced_retrievers, sc.RAGMON_GENERATOR_SPANS: 1})
        for _ in range(sent_retrievers):
            with tracer.start_as_current_span("search") as span:
                span.set_attributes({sc.RAGMON_STAGE: sc.STAGE_RETRIEVER, sc.SPAN_KIND: sc.KIND_RETRIEVER,
                                     sc.RAGMON_PIPELINE: "support", sc.INPUT_VALUE: "How much is Pro?"})
                for i in range(documents):
                    span.set_attribute(sc.retrieval_document_attr(i, sc.DOCUMENT_ID), f"d{i}")
                    span.set_attribute(sc.retrieval_document_attr(i, sc.DOCUMENT_CONTENT), ANSWER)
        with tracer.start_as_current_span("llm") as span:
            span.set_attributes({sc.RAGMON_STAGE: sc.STAGE_GENERATOR, sc.SPAN_KIND: sc.KIND_LLM,
                                 sc.RAGMON_PIPELINE: "support", sc.OUTPUT_VALUE: ANSWER})
        return format(root.get_span_context().trace_id, "032x")


async def test_missing_part_is_incomplete_not_judged_and_empty_retrieval_is_no_context(endpoint_of) -> None:
    judge = ScriptedJudge()
    async with running_agent(judge, trace_timeout_s=0.5) as agent:
        traffic = OtlpTraffic(endpoint_of(agent))
        whole = await asyncio.to_thread(send, traffic, documents=2, announced_retrievers=1, sent_retrievers=1)
        missing = await asyncio.to_thread(send, traffic, documents=2, announced_retrievers=2, sent_retrievers=1)
        empty = await asyncio.to_thread(send, traffic, documents=0, announced_retrievers=1, sent_retrievers=1)
        assert await agent.wait_idle(20)
        s = await asyncio.to_thread(scrape, agent.metrics_port)
        traffic.close()
    assert judge.seen == [whole]  # only the whole trace with documents is judged
    assert missing != empty
    assert s.value(f"{sc.M_TRACES_RECEIVED}_total") == 3
    assert s.value(f"{sc.M_TRACES_INCOMPLETE}_total", reason="missing_spans") == 1
    assert s.value(f"{sc.M_TRACES_SKIPPED}_total", reason=sc.SKIP_INCOMPLETE) == 1
    assert s.value(f"{sc.M_TRACES_SKIPPED}_total", reason=sc.SKIP_NO_CONTEXT) == 1
    assert s.value(f"{sc.M_DIAGNOSIS}_total", verdict=sc.VERDICT_NO_CONTEXT) == 1
    assert s.value(f"{sc.M_SCORE}_count", metric=sc.METRIC_FAITHFULNESS) == 1  # no 0 from the empty one
