"""The latency-only fast path gives the same metrics and accounting as the full path.

The same OTLP/HTTP bodies (made by the real OpenTelemetry SDK and ragmon's own SDK, some of them
edited into hostile shapes) are posted to two real agents over real HTTP, one with ``fast_path``
on and one with it off, under several sampling configurations; the /metrics expositions must be
equal line for line (creation timestamps and judge timings aside), and the judge must see the
same traces. Text-bearing traffic (the SDK's default, OpenInference, GenAI, LangChain/OpenLLMetry
shapes) must take the light path too: the assembler's ``path_counts`` tell.

The Kafka source hands a fetched batch over inside the sink's ``batch()`` (metric updates applied once,
at its end: ``ingest/tally.py``); the same bodies handed over that way give the same exposition,
judged traces and released delivery tokens, on either path, as one submission at a time.
"""

from __future__ import annotations

import contextlib
import copy
import json
import math
import random
from collections import Counter
from collections.abc import Iterator, Mapping
from typing import Any

import httpx
import pytest
from opentelemetry import trace as otel_trace
from opentelemetry.context import Context
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import NonRecordingSpan, SpanContext, Status, StatusCode, TraceFlags
from prometheus_client import CollectorRegistry, Histogram, generate_latest
from prometheus_client import Counter as PromCounter

import ragmon
from ragmon import semconv as sc
from ragmon.agent import Agent
from ragmon.config import load_agent_config
from ragmon.ingest.decode import otlp_proto
from ragmon.ingest.decode.otlp import decode_export_request
from ragmon.ingest.extract import CONTENT_KEYS, CONTENT_PREFIXES, LatencyOnly, LightSpan, latency_keys, role_of
from ragmon.ingest.tally import Tally
from ragmon.testing import InMemorySource, StaticJudge
from ragmon.types import SpanRecord

from .otel_helpers import SpanFactory

SCORES = {sc.METRIC_FAITHFULNESS: 0.9, sc.METRIC_ANSWER_RELEVANCY: 0.8, sc.METRIC_CONTEXT_PRECISION: 0.7}
PROTOBUF = {"Content-Type": "application/x-protobuf"}


# --- the corpus: real SDK spans, one list of request bodies ------------------------------------
def _ragmon_trace(f: SpanFactory, i: int, *, text: bool = False, error: bool = False) -> None:
    t = f.tracer
    with t.start_as_current_span("rag") as root:
        root.set_attribute(sc.SPAN_KIND, sc.KIND_CHAIN)
        root.set_attribute(sc.RAGMON_PIPELINE, ("search", "faq", "support")[i % 3])
        root.set_attribute(sc.RAGMON_CONTENT_SAMPLED, text)
        root.set_attribute("http.route", "/ask")  # read by nobody: skipped by key
        if text:
            root.set_attribute(sc.INPUT_VALUE, f"question {i}?")
            root.set_attribute(sc.OUTPUT_VALUE, f"answer {i}")
        with t.start_as_current_span("retrieve") as span:
            span.set_attribute(sc.SPAN_KIND, sc.KIND_RETRIEVER)
            span.set_attribute("db.system", "qdrant")
            for d in range(i % 6):
                span.set_attribute(sc.retrieval_document_attr(d, sc.DOCUMENT_ID), f"doc-{d % 4}")  # repeats
                if d % 2 == 0:
                    span.set_attribute(sc.retrieval_document_attr(d, sc.DOCUMENT_SCORE), 0.9 - d / 10)
                if text:
                    span.set_attribute(sc.retrieval_document_attr(d, sc.DOCUMENT_CONTENT), f"text {d}")
            if error:
                span.set_status(Status(StatusCode.ERROR, "store down"))
        with t.start_as_current_span("generate") as span:
            span.set_attribute(sc.SPAN_KIND, sc.KIND_LLM)
            span.set_attribute(sc.LLM_MODEL_NAME, ("gpt-4o-mini", "unknown", "llama")[i % 3])
            span.set_attribute(sc.LLM_PROMPT_TEMPLATE_VERSION, f"v{i % 2}")


def _genai_trace(f: SpanFactory, i: int) -> None:
    t = f.tracer
    with t.start_as_current_span("answer") as root:
        root.set_attribute(sc.GEN_AI_WORKFLOW_NAME, "genai-flow")
        with t.start_as_current_span("retrieval docs") as span:
            span.set_attribute(sc.GEN_AI_OPERATION_NAME, sc.GEN_AI_OP_RETRIEVAL)
        with t.start_as_current_span("rewrite") as span:
            span.set_attribute(sc.GEN_AI_OPERATION_NAME, sc.GEN_AI_OP_CHAT)
            span.set_attribute(sc.GEN_AI_REQUEST_MODEL, "small")
        with t.start_as_current_span("chat") as span:
            span.set_attribute(sc.GEN_AI_OPERATION_NAME, sc.GEN_AI_OP_CHAT)
            span.set_attribute(sc.GEN_AI_REQUEST_MODEL, "big")
            span.set_attribute(sc.GEN_AI_RESPONSE_MODEL, f"big-{i % 2}")


def _openinference_nested(f: SpanFactory, i: int) -> None:
    """Framework shapes: a RETRIEVER inside a RETRIEVER (the inner one has the documents), a
    RERANKER, an LLM inside an LLM, nested CHAINs, a pipeline named by a custom attribute."""
    t = f.tracer
    with t.start_as_current_span("RetrieverQueryEngine.query") as root:
        root.set_attribute(sc.SPAN_KIND, sc.KIND_CHAIN)
        root.set_attribute("app.flow", f"flow-{i % 2}")
        with t.start_as_current_span("inner chain") as chain:
            chain.set_attribute(sc.SPAN_KIND, sc.KIND_CHAIN)
            with t.start_as_current_span("retrieve") as outer:
                outer.set_attribute(sc.SPAN_KIND, sc.KIND_RETRIEVER)
                with t.start_as_current_span("vector retrieve") as inner:
                    inner.set_attribute(sc.SPAN_KIND, "retriever")  # lower case: kinds are upper-cased
                    for d in range(3):
                        inner.set_attribute(sc.retrieval_document_attr(d, sc.DOCUMENT_ID), f"n{i}-{d}")
                        inner.set_attribute(sc.retrieval_document_attr(d, sc.DOCUMENT_SCORE), 0.3 + d / 10)
            with t.start_as_current_span("rerank") as span:
                span.set_attribute(sc.SPAN_KIND, sc.KIND_RERANKER)
                if i % 2:
                    span.set_attribute(f"{sc.RERANKER_OUTPUT_DOCUMENTS_PREFIX}.0.{sc.DOCUMENT_ID}", f"n{i}-2")
                    span.set_attribute(f"{sc.RERANKER_OUTPUT_DOCUMENTS_PREFIX}.0.{sc.DOCUMENT_SCORE}", 0.95)
        with t.start_as_current_span("llm") as llm, t.start_as_current_span("openai.chat") as inner_llm:
            llm.set_attribute(sc.SPAN_KIND, sc.KIND_LLM)
            inner_llm.set_attribute(sc.SPAN_KIND, sc.KIND_LLM)
            inner_llm.set_attribute(sc.LLM_MODEL_NAME, "gpt-4o")


def _traceloop_trace(f: SpanFactory) -> None:
    t = f.tracer
    with t.start_as_current_span("qa.workflow") as root:
        root.set_attribute(sc.TRACELOOP_SPAN_KIND, sc.TRACELOOP_KIND_WORKFLOW)
        root.set_attribute(sc.TRACELOOP_WORKFLOW_NAME, "loop-flow")
        with t.start_as_current_span("VectorIndexRetriever.task") as span:
            span.set_attribute(sc.TRACELOOP_ENTITY_NAME, "VectorIndexRetriever.task")
        with t.start_as_current_span("openai.chat") as span:
            span.set_attribute(sc.LLM_REQUEST_TYPE, "chat")


def _not_rag(f: SpanFactory) -> None:
    with f.tracer.start_as_current_span("build-index") as root:
        root.set_attribute(sc.SPAN_KIND, "EMBEDDING")
        with f.tracer.start_as_current_span("embed") as span:
            span.set_status(Status(StatusCode.ERROR))  # an error outside any RAG span


# --- text-bearing traffic: what real instrumentations send by default ---------------------------
WORDS = ("the", "plan", "includes", "seats", "billing", "support", "export", "audit", "logs", "single",
         "sign", "on", "api", "access")


def _words(n: int, seed: int) -> str:
    return " ".join(WORDS[(seed * 7 + k * 3) % len(WORDS)] for k in range(n))


def _sdk_bodies() -> list[bytes]:
    """ragmon's own SDK with content on (its default): question, answer, document text."""
    memory = InMemorySpanExporter()
    ragmon.init(service_name="sdk-app", exporter="none", span_processor=SimpleSpanProcessor(memory),
                content_rate=1.0, set_global=False)
    try:
        @ragmon.retriever
        def search(query: str, i: int) -> list[Any]:
            if i % 4 == 0:  # plain strings: ids are content hashes (two equal ones)
                return [_words(20, i), _words(20, i), _words(30, i + 1)]
            if i % 4 == 1:  # ids from metadata (the source), shared by chunks
                return [{"text": _words(40, d), "metadata": {"source": f"s{d % 2}.md"}} for d in range(4)]
            return [{"id": f"kb-{(i + d) % 7}", "text": _words(150, d) if d != 2 else "   ",
                     "score": 0.2 + d / 10} for d in range(5)]

        @ragmon.generator(model="gpt-4o-mini")
        def answer(query: str, docs: list[Any]) -> str:
            return _words(40, len(docs))

        @ragmon.pipeline
        def support(query: str, i: int) -> str:
            out = answer(query, search(query, i))
            if i % 5 == 1:
                ragmon.record_feedback("thumbs_down" if i % 2 else "positive")
            return out

        @ragmon.pipeline(name="faq")
        def faq(query: str, i: int) -> str:
            return answer(query, [])

        ids = []
        for i in range(12):
            support(f"question {i} about seats?", i)
            faq(f"faq {i}?", i)
            ids.append(ragmon.current_trace_id())
        ragmon.record_feedback(0, trace_id="ab" * 16)  # a late feedback call: no request
    finally:
        ragmon.shutdown()
    return [encode_spans(memory.get_finished_spans()).SerializeToString()]


def _oi_text_trace(f: SpanFactory, i: int) -> None:
    """OpenInference with text: documents (with ids, and LangChain's without), chat messages,
    an LLM inside an LLM whose inner span holds the answer, and a query rewrite."""
    t = f.tracer
    with t.start_as_current_span("chain") as root:
        root.set_attribute(sc.SPAN_KIND, sc.KIND_CHAIN)
        root.set_attribute(sc.INPUT_VALUE, json.dumps({"question": f"q{i}"}))
        root.set_attribute(sc.OUTPUT_VALUE, f"a{i}")
        with t.start_as_current_span("rewrite") as span:
            span.set_attribute(sc.SPAN_KIND, sc.KIND_LLM)
            span.set_attribute(sc.LLM_MODEL_NAME, "rewriter")
            span.set_attribute(f"{sc.LLM_OUTPUT_MESSAGES_PREFIX}.0.message.role", "assistant")
            span.set_attribute(f"{sc.LLM_OUTPUT_MESSAGES_PREFIX}.0.message.content", f"rewritten q{i}")
        with t.start_as_current_span("retrieve") as span:
            span.set_attribute(sc.SPAN_KIND, sc.KIND_RETRIEVER)
            span.set_attribute(sc.INPUT_VALUE, f"q{i}")
            for d in range(3 + i % 3):
                if i % 2:  # LangChain's instrumentor: no document.id, the source in the metadata
                    span.set_attribute(sc.retrieval_document_attr(d, sc.DOCUMENT_METADATA),
                                       json.dumps({"source": f"f{d % 2}.txt"}))
                else:
                    span.set_attribute(sc.retrieval_document_attr(d, sc.DOCUMENT_ID), f"d{d}")
                    span.set_attribute(sc.retrieval_document_attr(d, sc.DOCUMENT_SCORE), 0.4 + d / 10)
                span.set_attribute(sc.retrieval_document_attr(d, sc.DOCUMENT_CONTENT), _words(50, d))
        with t.start_as_current_span("llm") as llm, t.start_as_current_span("openai.chat") as inner:
            llm.set_attribute(sc.SPAN_KIND, sc.KIND_LLM)
            llm.set_attribute(sc.LLM_MODEL_NAME, "outer-model")
            inner.set_attribute(sc.SPAN_KIND, sc.KIND_LLM)
            inner.set_attribute(sc.LLM_MODEL_NAME, "inner-model")
            inner.set_attribute(f"{sc.LLM_INPUT_MESSAGES_PREFIX}.0.message.role", "user")
            inner.set_attribute(f"{sc.LLM_INPUT_MESSAGES_PREFIX}.0.message.content", f"Context: ... q{i}")
            inner.set_attribute(f"{sc.LLM_OUTPUT_MESSAGES_PREFIX}.0.message.role", "assistant")
            # an answer that is only blanks is no answer: then the rewrite is the generation
            inner.set_attribute(f"{sc.LLM_OUTPUT_MESSAGES_PREFIX}.0.message.content", "  " if i % 3 == 2 else f"a{i}")


def _genai_text_trace(f: SpanFactory, i: int) -> None:
    """OTel GenAI: documents as JSON (with text; or ids only, their text in the messages), chat
    messages; or no retrieval span at all, the contexts in the messages."""
    t = f.tracer
    with t.start_as_current_span("invoke_agent") as root:
        root.set_attribute(sc.GEN_AI_WORKFLOW_NAME, "genai-text")
        kind = i % 3
        if kind != 2:
            with t.start_as_current_span("retrieval") as span:
                span.set_attribute(sc.GEN_AI_OPERATION_NAME, sc.GEN_AI_OP_RETRIEVAL)
                docs = [{"id": f"g{d}", "score": 0.5 + d / 10} | ({"content": _words(60, d)} if kind == 0 else {})
                        for d in range(3)]
                span.set_attribute(sc.GEN_AI_RETRIEVAL_DOCUMENTS, json.dumps(docs))
        with t.start_as_current_span("chat") as span:
            span.set_attribute(sc.GEN_AI_OPERATION_NAME, sc.GEN_AI_OP_CHAT)
            span.set_attribute(sc.GEN_AI_REQUEST_MODEL, "big")
            context = "\n".join(f"[g{d}] {_words(30, d)}" for d in range(3))
            span.set_attribute(sc.GEN_AI_INPUT_MESSAGES, json.dumps(
                [{"role": "user", "parts": [{"type": "text", "content": f"{context}\nQuestion: q{i}"}]}]))
            span.set_attribute(sc.GEN_AI_OUTPUT_MESSAGES, json.dumps(
                [{"role": "assistant", "parts": [{"type": "text", "content": f"a{i}"}]}]))


def _openllmetry_text_trace(f: SpanFactory, i: int) -> None:
    """OpenLLMetry/LangChain: documents as JSON entity output, a vector DB's db.query.result
    events, completions as gen_ai.prompt/completion attributes."""
    t = f.tracer
    with t.start_as_current_span("qa.workflow") as root:
        root.set_attribute(sc.TRACELOOP_SPAN_KIND, sc.TRACELOOP_KIND_WORKFLOW)
        root.set_attribute(sc.TRACELOOP_WORKFLOW_NAME, "loop-text")
        root.set_attribute(sc.TRACELOOP_ENTITY_INPUT, json.dumps({"inputs": {"question": f"q{i}"}}))
        with t.start_as_current_span("VectorStoreRetriever.task") as span:
            span.set_attribute(sc.TRACELOOP_ENTITY_NAME, "VectorStoreRetriever.task")
            docs = [{"lc": 1, "type": "constructor", "kwargs": {"page_content": _words(40, d),
                                                                 "metadata": {"source": f"p{d}.pdf"}}}
                    for d in range(2 + i % 2)]
            span.set_attribute(sc.TRACELOOP_ENTITY_OUTPUT, json.dumps({"outputs": docs}))
        with t.start_as_current_span("chroma.query") as span:
            for d in range(2):
                span.add_event(sc.DB_QUERY_RESULT_EVENT, {sc.DB_QUERY_RESULT_ID: f"c{d}",
                                                          sc.DB_QUERY_RESULT_DOCUMENT: _words(20, d),
                                                          sc.DB_QUERY_RESULT_DISTANCE: 0.1 * d})
        with t.start_as_current_span("openai.chat") as span:
            span.set_attribute(sc.LLM_REQUEST_TYPE, "chat")
            span.set_attribute(sc.GEN_AI_RESPONSE_MODEL, "gpt-4o")
            span.set_attribute(f"{sc.GEN_AI_PROMPT_PREFIX}.0.role", "user")
            span.set_attribute(f"{sc.GEN_AI_PROMPT_PREFIX}.0.content", f"q{i}")
            span.set_attribute(f"{sc.GEN_AI_COMPLETION_PREFIX}.0.role", "assistant")
            span.set_attribute(f"{sc.GEN_AI_COMPLETION_PREFIX}.0.content", f"a{i}")
            if i % 2:
                span.set_attribute(sc.RAGMON_FEEDBACK, "bad")


def _text_bodies() -> list[bytes]:
    f = SpanFactory("text-app")
    for i in range(9):
        _oi_text_trace(f, i)
        _genai_text_trace(f, i)
        _openllmetry_text_trace(f, i)
    body = f.request().SerializeToString()
    return [*_sdk_bodies(), body]


# traces of the text corpus whose latency-only fields need their text (contexts found in the
# messages: GenAI ids-only documents, or no retrieval span): extracted in full, by design
TEXT_FULL_TRACES = 6


def _bodies() -> list[bytes]:
    bodies: list[bytes] = []

    def flush(f: SpanFactory) -> None:
        bodies.append(f.request().SerializeToString())
        f.clear()

    f = SpanFactory("shop")
    for i in range(30):
        _ragmon_trace(f, i, text=i % 5 == 0, error=i % 7 == 3)
    flush(f)
    for i in range(8):
        _genai_trace(f, i)
        _openinference_nested(f, i)
        _traceloop_trace(f)
        _not_rag(f)
    flush(f)

    # negative feedback on a trace of its own (a late feedback call) and on a RAG trace
    with f.tracer.start_as_current_span("feedback") as span:
        span.set_attribute(sc.RAGMON_FEEDBACK, "thumbs_down")
        span.set_attribute(sc.RAGMON_PIPELINE, "search")
    with f.tracer.start_as_current_span("rag") as root:
        root.set_attribute(sc.RAGMON_STAGE, sc.STAGE_PIPELINE)
        root.set_attribute(sc.RAGMON_FEEDBACK, -1)
    flush(f)

    # one trace split over three requests, root last; and a trace whose root never comes
    root_cm = f.tracer.start_as_current_span("split-root")
    root = root_cm.__enter__()
    root.set_attribute(sc.RAGMON_PIPELINE, "split")
    with f.tracer.start_as_current_span("retrieve") as span:
        span.set_attribute(sc.RAGMON_STAGE, sc.STAGE_RETRIEVER)
        span.set_attribute(sc.retrieval_document_attr(0, sc.DOCUMENT_ID), "a")
    flush(f)
    with f.tracer.start_as_current_span("generate") as span:
        span.set_attribute(sc.RAGMON_STAGE, sc.STAGE_GENERATOR)
    with f.tracer.start_as_current_span("orphan-root", context=Context()), \
            f.tracer.start_as_current_span("orphan") as span:
        span.set_attribute(sc.SPAN_KIND, sc.KIND_RETRIEVER)
    orphan_only = [s for s in f.finished() if s.name != "orphan-root"]
    f.exporter.clear()
    from .otel_helpers import encode

    bodies.append(encode(orphan_only).SerializeToString())
    root_cm.__exit__(None, None, None)
    flush(f)

    # a local root under a remote parent (an app called through an instrumented gateway)
    remote = SpanContext(trace_id=0x1234_5678_9ABC_DEF0_1234_5678_9ABC_DEF0, span_id=0x1111_2222_3333_4444,
                         is_remote=True, trace_flags=TraceFlags(1))
    ctx = otel_trace.set_span_in_context(NonRecordingSpan(remote))
    with f.tracer.start_as_current_span("gateway-entry", context=ctx) as span:
        span.set_attribute(sc.RAGMON_STAGE, sc.STAGE_PIPELINE)
        span.set_attribute(sc.RAGMON_PIPELINE, "behind-gateway")
        with f.tracer.start_as_current_span("retrieve") as child:
            child.set_attribute(sc.SPAN_KIND, sc.KIND_RETRIEVER)
    flush(f)

    # the attribute limit evicts the span kind: documents alone must make it a retriever
    limited = SpanFactory("shop", max_attributes=6)
    with limited.tracer.start_as_current_span("rag") as root:
        root.set_attribute(sc.RAGMON_PIPELINE, "limited")
        with limited.tracer.start_as_current_span("retrieve") as span:
            span.set_attribute(sc.SPAN_KIND, sc.KIND_RETRIEVER)
            for d in range(5):
                span.set_attribute(sc.retrieval_document_attr(d, sc.DOCUMENT_ID), f"x{d}")
    flush(limited)

    bodies.append(_hostile(f))
    bodies.append(bodies[0])  # a redelivered export: late spans of closed traces
    bodies.extend(_text_bodies())
    return bodies


def _hostile(f: SpanFactory) -> bytes:
    """Real spans edited into what hostile or broken exporters send."""
    for i in range(6):
        _ragmon_trace(f, i)
    with f.tracer.start_as_current_span("with-event") as span:
        span.set_attribute(sc.SPAN_KIND, sc.KIND_RETRIEVER)
        span.add_event(sc.EXCEPTION_EVENT, {sc.EXCEPTION_TYPE: "Timeout"})
    request: ExportTraceServiceRequest = f.request()
    f.clear()
    spans = request.resource_spans[0].scope_spans[0].spans
    spans[0].trace_id = b"\x01\x02\x03"  # wrong length
    spans[1].span_id = bytes(8)  # all zero
    spans[2].parent_span_id = b"\x05" * 5  # wrong length
    spans[3].end_time_unix_nano = 2**64 - 1  # ends in the year 2554
    spans[4].start_time_unix_nano = spans[4].end_time_unix_nano + 10**9  # ends before it starts
    spans[5].parent_span_id = bytes(8)  # all-zero parent: a root
    spans[10].dropped_attributes_count = 7  # hit the exporter's attribute limit
    for span in list(spans[6:9]):
        spans.append(copy.deepcopy(span))  # duplicates
    odd = spans[9]
    for attr in odd.attributes:
        if attr.key == sc.RAGMON_PIPELINE:
            attr.value.int_value = 42  # a pipeline name that is a number
        if attr.key == sc.SPAN_KIND:
            attr.value.ClearField("value")  # an empty value
    odd.attributes.add(key=sc.LLM_MODEL_NAME).value.array_value.values.add().string_value = "listed"
    odd.attributes.add(key=sc.RAGMON_STAGE).value.kvlist_value.values.add(key="k").value.bool_value = True
    return request.SerializeToString()


@pytest.fixture(scope="module")
def bodies() -> list[bytes]:
    return _bodies()


# --- running an agent ------------------------------------------------------------------------
async def _run(bodies: list[bytes], settings: Mapping[str, Any], *,
               fast: bool) -> tuple[list[str], list[str], Counter[str]]:
    config = load_agent_config({"receiver_port": 0, "metrics_port": 0, "judge_concurrency": 1,
                                "trace_timeout_s": 60.0, **settings, "fast_path": fast}, environ={})
    registry = CollectorRegistry()
    judge = StaticJudge(SCORES)
    agent = Agent(config, registry=registry, judge=judge)
    await agent.start()
    try:
        assert (agent.parts.router.latency_only is not None) == (fast and settings.get("sample_rate", 1.0) < 1.0)
        async with httpx.AsyncClient() as client:
            for body in bodies:
                reply = await client.post(f"http://127.0.0.1:{agent.receiver_port}/v1/traces",
                                          content=body, headers=PROTOBUF)
                assert reply.status_code == 200, reply.text
    finally:
        await agent.stop()
    return _exposition(registry), sorted(judge.seen), agent._assembler.path_counts


def _exposition(registry: CollectorRegistry) -> list[str]:
    noisy = ("_created", "ragmon_judge_duration_seconds")  # wall-clock values
    return [line for line in generate_latest(registry).decode().splitlines()
            if not line.startswith("#") and not any(n in line for n in noisy)]


def _value(lines: list[str], prefix: str) -> float:
    return sum(float(line.rsplit(" ", 1)[1]) for line in lines if line.startswith(prefix))


CONFIGS = {
    "rate 0": {"sample_rate": 0.0},
    "rate 0.5, per-pipeline rates": {"sample_rate": 0.5, "pipeline_sample_rates": {"faq": 0.2, "split": 0.9}},
    "all priority rules, pipeline attribute and renames": {
        "sample_rate": 0.1, "priority_slow_retrieval_s": 0.0005, "priority_min_top_score": 0.5,
        "pipeline_attribute": "app.flow", "pipeline_rename": {"flow-(.*)": r"renamed-\1", "sea.*": "s"},
    },
    "no priority rules": {"sample_rate": 0.2, "priority_errors": False, "priority_feedback": False},
    "power-based rates": {"sample_rate": 0.0, "detect_drop": 0.1, "detect_max_rate": 0.3},
    "small trace bounds": {"sample_rate": 0.0, "max_open_traces": 1, "max_spans_per_trace": 2},
}


@pytest.mark.parametrize("name", list(CONFIGS))
async def test_fast_path_gives_the_full_paths_metrics_and_accounting(bodies: list[bytes], name: str) -> None:
    settings = CONFIGS[name]
    full, judged_full, full_paths = await _run(bodies, settings, fast=False)
    fast, judged_fast, fast_paths = await _run(bodies, settings, fast=True)
    assert fast == full
    assert judged_fast == judged_full
    assert full_paths["light"] == 0
    if name == "rate 0":
        # every trace is read lightly but those whose fields need their text
        assert fast_paths["full"] == TEXT_FULL_TRACES
        assert fast_paths["light"] == full_paths["full"] - TEXT_FULL_TRACES
    else:
        assert fast_paths["light"] > 0
    # the corpus does reach the interesting branches
    assert _value(full, "ragmon_traces_received_total") > 50
    assert _value(full, 'ragmon_traces_skipped_total{pipeline="_not_rag"') > 0
    assert _value(full, 'ragmon_dropped_total{reason="malformed_span"}') == 3
    assert _value(full, "ragmon_spans_attribute_limit_hit_total") > 0
    assert _value(full, "ragmon_traces_incomplete_total") > 0  # the orphan
    if name == "rate 0":
        assert judged_full  # errors and negative feedback are judged at rate 0
        assert _value(full, 'ragmon_dropped_total{reason="late_span"}') > 0  # the redelivered export
    if name == "small trace bounds":
        assert _value(full, 'ragmon_dropped_total{reason="open_traces_limit"}') > 0
        assert _value(full, 'ragmon_dropped_total{reason="spans_per_trace_limit"}') > 0


# --- the decoder -----------------------------------------------------------------------------
def _records(batch_spans: list[SpanRecord | LightSpan]) -> Iterator[SpanRecord]:
    for span in batch_spans:
        yield span.to_record() if isinstance(span, LightSpan) else span


def test_light_decode_reads_every_span_lightly_text_by_presence_only(bodies: list[bytes]) -> None:
    latency_only = LatencyOnly(0.0, latency_keys())
    doc_prefixes = (sc.RETRIEVAL_DOCUMENTS_PREFIX, sc.RERANKER_OUTPUT_DOCUMENTS_PREFIX)
    text_spans = 0
    for body in bodies:
        full = decode_export_request(body, content_type="application/x-protobuf")
        light = decode_export_request(body, content_type="application/x-protobuf", latency_only=latency_only)
        # the same spans, rejections and messages; a light span decodes to the same record
        assert (light.rejected_spans, light.errors) == (full.rejected_spans, full.errors)
        assert list(_records(list(light.spans))) == full.spans
        for span, record in zip(light.spans, full.spans, strict=True):
            assert isinstance(span, LightSpan)  # text, messages, feedback and events included
            # values read: the latency keys and document ids / scores, never text
            assert set(span.attributes) <= latency_keys() | {
                k for k in span.attributes if k.startswith(doc_prefixes)
                and k.endswith((sc.DOCUMENT_ID, sc.DOCUMENT_SCORE))}
            assert "http.route" not in span.attributes and "db.system" not in span.attributes
            # of the content keys only where they are
            content = {k for k in record.attributes if k in CONTENT_KEYS or k.startswith(CONTENT_PREFIXES)
                       or (k.startswith(doc_prefixes) and not k.endswith((sc.DOCUMENT_ID, sc.DOCUMENT_SCORE)))}
            assert set(span.content) == content
            assert all(span.value(k) == record.attributes[k] for k in content)
            assert span.role == role_of(record.attributes, record.events)
            assert span.retriever_event == any(e.name == sc.DB_QUERY_RESULT_EVENT for e in record.events)
            text_spans += bool(content)
    assert text_spans > 100


def test_traces_inside_the_judging_bound_are_decoded_in_full(bodies: list[bytes]) -> None:
    everything = decode_export_request(bodies[0], content_type="application/x-protobuf",
                                       latency_only=LatencyOnly(1.0, latency_keys()))
    assert not any(isinstance(s, LightSpan) for s in everything.spans)
    half = decode_export_request(bodies[0], content_type="application/x-protobuf",
                                 latency_only=LatencyOnly(0.5, latency_keys()))
    kinds = {}
    for span in half.spans:
        kinds.setdefault(span.trace_id, set()).add(isinstance(span, LightSpan))
    assert any(True in k for k in kinds.values()) and any(k == {False} for k in kinds.values())


# --- the per-batch handover (the Kafka source's) ---------------------------------------------
async def _run_in_memory(bodies: list[bytes], settings: Mapping[str, Any], *, fast: bool,
                         batched: bool) -> tuple[list[str], list[str], list[Any]]:
    """Bodies decoded as the Kafka source decodes a message, handed over with a delivery token each:
    all inside one ``batch()`` of the agent's sink, its router (as one fetched batch), or one submission at a time."""
    config = load_agent_config({"metrics_port": 0, "judge_concurrency": 1, "trace_timeout_s": 60.0,
                                **settings, "fast_path": fast}, environ={})
    registry = CollectorRegistry()
    judge = StaticJudge(SCORES)
    source = InMemorySource()
    agent = Agent(config, registry=registry, judge=judge, source=source)
    await agent.start()
    try:
        sink = agent.parts.router
        with sink.batch() if batched else contextlib.nullcontext():
            for offset, body in enumerate(bodies):
                decoded = decode_export_request(body, content_type="application/x-protobuf",
                                                latency_only=sink.latency_only)
                source.push(decoded.spans, ("topic", 0, offset))  # type: ignore[arg-type]
    finally:
        await agent.stop()
    return _exposition(registry), sorted(judge.seen), sorted(source.released)


@pytest.mark.parametrize("name", list(CONFIGS))
async def test_a_batch_handed_over_at_once_gives_the_same_metrics_and_accounting(bodies: list[bytes],
                                                                                 name: str) -> None:
    settings = CONFIGS[name]
    reference = await _run_in_memory(bodies, settings, fast=False, batched=False)
    assert await _run_in_memory(bodies, settings, fast=True, batched=True) == reference
    assert await _run_in_memory(bodies, settings, fast=False, batched=True) == reference
    exposition, _judged, released = reference
    assert _value(exposition, "ragmon_traces_received_total") > 50
    assert _value(exposition, "ragmon_retrieval_latency_seconds_count") > 0
    assert len(released) == len(bodies)  # every delivery is released once its traces are accounted


def test_tally_applies_counts_and_observations_as_one_call_per_value_does() -> None:
    rng = random.Random(5)
    bounds = (0.005, 0.01, 0.1, 0.25, 1.0, 2.5, 10.0)
    values = [rng.random() * 3 for _ in range(500)] + list(bounds) + [0.0, -1.0, 1e-12, 1e9, math.inf, math.nan]
    rng.shuffle(values)
    expositions = []
    for deferred in (False, True):
        registry = CollectorRegistry()
        histogram = Histogram("h_seconds", "h", ["k"], buckets=bounds, registry=registry)
        counter = PromCounter("c", "c", ["k"], registry=registry)
        tally = Tally()
        for i, value in enumerate(values):
            child = histogram.labels(str(i % 3))
            if deferred:
                tally.observe(child, value)
                tally.inc(counter.labels(str(i % 2)))
            else:
                child.observe(value)
                counter.labels(str(i % 2)).inc()
        tally.flush()
        expositions.append(_exposition(registry))
    assert expositions[0] == expositions[1]
    assert any("_sum" in line and "NaN" in line for line in expositions[1])


async def test_keys_the_extraction_cannot_index_give_the_same_metrics_on_both_paths() -> None:
    """Document keys whose index no reader takes (too many digits for int(), not digits at all), a
    huge key and a huge resource: the light decoder hands what it cannot read to the full one and
    keeps none of them in its memos; the agents still agree."""
    f = SpanFactory("odd-keys", resource={"deployment.blob": "x" * 10_000})
    for i in range(4):
        with f.tracer.start_as_current_span("rag") as root:
            root.set_attribute(sc.RAGMON_PIPELINE, "odd")
            root.set_attribute("k" * 100_000, "a huge key nobody reads")
            with f.tracer.start_as_current_span("retrieve") as span:
                span.set_attribute(sc.SPAN_KIND, sc.KIND_RETRIEVER)
                span.set_attribute(sc.retrieval_document_attr(0, sc.DOCUMENT_ID), "d0")
                if i % 2:
                    span.set_attribute(f"{sc.RETRIEVAL_DOCUMENTS_PREFIX}.{'9' * 5000}.{sc.DOCUMENT_ID}", "big")
                else:
                    span.set_attribute(f"{sc.RETRIEVAL_DOCUMENTS_PREFIX}.x.{sc.DOCUMENT_ID}", "not indexed")
    bodies = [f.request().SerializeToString()]
    settings = {"sample_rate": 0.0}
    reference = await _run_in_memory(bodies, settings, fast=False, batched=False)
    assert await _run_in_memory(bodies, settings, fast=True, batched=True) == reference
    assert _value(reference[0], "ragmon_traces_received_total") == 4
    latency_only = LatencyOnly(0.0, latency_keys())
    decode_export_request(bodies[0], content_type="application/x-protobuf", latency_only=latency_only)
    assert all(len(key) <= 256 for key in latency_only.plans._plans)
    assert all(len(raw) <= 256 for raw in latency_only.plans.by_raw)
    assert all(len(raw) <= 4096 for raw in otlp_proto._RESOURCES._seen)


def test_the_views_span_order_is_sorteds_stable_order() -> None:
    from ragmon.ingest.extract._latency import _START_END, _in_order

    rng = random.Random(5)
    origin = otlp_proto.ProtoMessage(b"", ExportTraceServiceRequest())
    for size in (0, 1, 2, 3, 5, 16, 17, 40):
        for _ in range(50):
            spans = [LightSpan(origin, (0, 0, i, 0, 0), "", "ab" * 16, f"{i:016x}", None, False, 0.0, "s",
                               rng.randint(0, 3), rng.randint(0, 3), "UNSET", 0, {}, {}, "svc", {}, False, {}, {},
                               None, 0)
                     for i in range(size)]
            assert _in_order(spans) == sorted(spans, key=_START_END)  # the same objects, ties in input order
