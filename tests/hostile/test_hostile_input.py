"""Hostile input against a running agent (real receiver, real /metrics over HTTP): one request
must never break the agent for everyone after it."""

from __future__ import annotations

import asyncio
import json
import logging

import httpx
import pytest

from ragmon import semconv as sc
from tests.agent.conftest import ScriptedJudge, running_agent
from tests.helpers.eventually import eventually
from tests.helpers.scrape import scrape
from tests.hostile._support import JSON, PROTO, rag_trace, totals
from tests.ingest.otel_helpers import SpanFactory, to_otlp_dict


async def test_lone_surrogate_in_service_name_does_not_break_metrics() -> None:
    """Item 1: `"a\\ud800"` is valid JSON but not valid Unicode; once it became a label value every
    /metrics scrape answered 500 (UnicodeEncodeError) while /healthz stayed 200."""
    f = SpanFactory("placeholder")
    rag_trace(f)
    document = to_otlp_dict(f.request())
    for attribute in document["resourceSpans"][0]["resource"]["attributes"]:
        if attribute["key"] == "service.name":
            attribute["value"] = {"stringValue": "a\ud800"}
    body = json.dumps(document).encode()  # ensure_ascii: the surrogate travels as the escape \ud800
    assert b"\\ud800" in body
    async with running_agent(ScriptedJudge()) as agent:
        async with httpx.AsyncClient(timeout=10) as client:
            response = await client.post(f"http://127.0.0.1:{agent.receiver_port}/v1/traces",
                                         content=body, headers=JSON)
        assert response.status_code == 200
        assert await agent.wait_idle(20)
        s = await asyncio.to_thread(scrape, agent.metrics_port)  # raises on a 500
        again = await asyncio.to_thread(scrape, agent.metrics_port)
    assert s.value(f"{sc.M_TRACES_SCORED}_total", service="a\ufffd", pipeline="faq") == 1
    assert again.value(f"{sc.M_TRACES_RECEIVED}_total") == 1
    assert totals(s) == (1, 1)


async def test_span_ending_in_the_year_2554_does_not_own_the_latency_metrics() -> None:
    """Item 9: one retriever span with end time 2^64-1 set the P95 gauge and the histogram sum to
    1.8e10 s. Latencies outside [0, RAGMON_LATENCY_MAX_S] are counted, not observed."""
    f = SpanFactory("clock-svc")
    with f.tracer.start_as_current_span("rag", attributes={
            sc.RAGMON_STAGE: "pipeline", sc.RAGMON_PIPELINE: "faq", sc.INPUT_VALUE: "q?",
            sc.OUTPUT_VALUE: "a.", sc.RAGMON_CONTENT_SAMPLED: True}):
        span = f.tracer.start_span("search", attributes={
            sc.RAGMON_STAGE: "retriever", sc.SPAN_KIND: "RETRIEVER",
            "retrieval.documents.0.document.id": "kb-1", "retrieval.documents.0.document.content": "text"})
        span.end(end_time=2**64 - 1)
    async with running_agent(ScriptedJudge()) as agent:
        async with httpx.AsyncClient(timeout=10) as client:
            response = await client.post(f"http://127.0.0.1:{agent.receiver_port}/v1/traces",
                                         content=f.request().SerializeToString(), headers=PROTO)
        assert response.status_code == 200
        assert await agent.wait_idle(20)
        s = await asyncio.to_thread(scrape, agent.metrics_port)
    labels = {"service": "clock-svc", "pipeline": "faq"}
    assert s.value(f"{sc.M_RETRIEVAL_LATENCY}_count", **labels) == 0
    assert s.value(f"{sc.M_RETRIEVAL_LATENCY}_sum", **labels) == 0
    p95 = s.value(sc.M_RETRIEVAL_LATENCY_P95, **labels)
    assert p95 != p95 or p95 == 0  # NaN (no sample) or absent, never 1.8e10
    assert s.value(f"{sc.M_PIPELINE_LATENCY}_count", **labels) == 1  # the sane root is still measured
    assert s.value(f"{sc.M_DROPPED}_total", reason=sc.DROP_INVALID_TIMESTAMP) == 1
    assert totals(s) == (1, 1)


_MALFORMED = [
    b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\nContent-Length: -1\r\n\r\n",
    b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\nContent-Length: 4\r\n"
    b"Content-Length: 5\r\n\r\nabcd",
    b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\nContent-Length: 4\r\n"
    b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
]


async def test_malformed_http_is_counted_and_logged_once_without_traceback(caplog: pytest.LogCaptureFixture) -> None:
    """Item 10: requests aiohttp's parser refuses got a 400 but moved no counter, and each logged
    a full traceback."""
    caplog.set_level(logging.DEBUG)
    async with running_agent(ScriptedJudge()) as agent:
        for raw in _MALFORMED:
            reader, writer = await asyncio.open_connection("127.0.0.1", agent.receiver_port)
            writer.write(raw)
            await writer.drain()
            status_line = await asyncio.wait_for(reader.readline(), 30)
            writer.close()
            assert status_line.split()[1] == b"400", (raw, status_line)
        f = SpanFactory("after-svc")
        rag_trace(f)
        async with httpx.AsyncClient(timeout=10) as client:  # and the receiver still serves
            ok = await client.post(f"http://127.0.0.1:{agent.receiver_port}/v1/traces",
                                   content=f.request().SerializeToString(), headers=PROTO)
        assert ok.status_code == 200
        assert await agent.wait_idle(20)
        s = await asyncio.to_thread(scrape, agent.metrics_port)
    assert s.value(f"{sc.M_DROPPED}_total", reason=sc.DROP_MALFORMED_REQUEST) == len(_MALFORMED)
    assert s.value(f"{sc.M_REQUESTS_RECEIVED}_total", source="http", outcome=sc.OUTCOME_REJECTED) == len(_MALFORMED)
    assert not [r for r in caplog.records if r.exc_info], "no traceback for a client's malformed request"
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING and "malformed HTTP" in r.getMessage()]
    assert len(warnings) == 1


async def test_silent_clients_that_announce_16_mib_do_not_lock_out_exporters() -> None:
    """Item 5: four sockets that sent headers with `Content-Length: 16777216` and went silent made
    every other export get 503 for 45 s and more (the budget was reserved from the declared
    length, and nothing timed them out). Now bytes are reserved as they arrive, and a body that
    does not arrive within the read timeout gets 408 and the connection is closed."""
    async with running_agent(ScriptedJudge(), receiver_read_timeout_s=2.0) as agent:
        silent = []
        for _ in range(4):
            reader, writer = await asyncio.open_connection("127.0.0.1", agent.receiver_port)
            writer.write(b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\n"
                         b"Content-Length: 16777216\r\n\r\n")
            await writer.drain()
            silent.append((reader, writer))
        f = SpanFactory("exporter-svc")
        rag_trace(f)
        async with httpx.AsyncClient(timeout=10) as client:
            ok = await client.post(f"http://127.0.0.1:{agent.receiver_port}/v1/traces",
                                   content=f.request().SerializeToString(), headers=PROTO)
        assert ok.status_code == 200
        for reader, writer in silent:  # each silent client is answered 408 and disconnected
            status_line = await asyncio.wait_for(reader.readline(), 60)
            assert status_line.split()[1] == b"408"
            while await asyncio.wait_for(reader.read(65536), 60):
                pass  # until EOF: the agent closed the connection
            writer.close()

        async def counted() -> bool:
            s = await asyncio.to_thread(scrape, agent.metrics_port)
            return s.value(f"{sc.M_DROPPED}_total", reason=sc.DROP_READ_TIMEOUT) == 4

        await eventually(counted, timeout_s=30, what="four read timeouts counted")
        assert await agent.wait_idle(20)
        s = await asyncio.to_thread(scrape, agent.metrics_port)
    assert s.value(f"{sc.M_TRACES_SCORED}_total", service="exporter-svc") == 1
    assert totals(s) == (1, 1)


async def test_series_are_capped_per_service_pipeline_pair() -> None:
    """Item 4: the cap was per label, so 200 services x 200 pipelines gave 40,000 series and a
    59 s scrape. Now at most RAGMON_METRICS_MAX_LABEL_VALUES + 1 pairs exist, and no trace is lost."""
    services, pipelines, cap = 12, 12, 10
    bodies = []
    for i in range(services):
        f = SpanFactory(f"svc-{i}")
        for j in range(pipelines):
            with f.tracer.start_as_current_span("rag", attributes={
                    sc.RAGMON_STAGE: "pipeline", sc.RAGMON_PIPELINE: f"pipe-{j}", sc.RAGMON_CONTENT_SAMPLED: False}):
                pass
        bodies.append(f.request().SerializeToString())
    async with running_agent(ScriptedJudge(), metrics_max_label_values=cap, sample_rate=0.0) as agent:
        async with httpx.AsyncClient(timeout=10) as client:
            for body in bodies:
                response = await client.post(f"http://127.0.0.1:{agent.receiver_port}/v1/traces",
                                             content=body, headers=PROTO)
                assert response.status_code == 200
        assert await agent.wait_idle(20)
        s = await asyncio.to_thread(scrape, agent.metrics_port)
    pairs = {(lab["service"], lab["pipeline"]) for lab in s.labelsets(f"{sc.M_TRACES_RECEIVED}_total")}
    assert len(pairs) <= cap + 1
    assert s.value(f"{sc.M_TRACES_RECEIVED}_total") == services * pipelines
    assert totals(s) == (services * pipelines, services * pipelines)


async def test_non_ascii_digit_document_index_is_ignored_not_fatal() -> None:
    """Item 11: `retrieval.documents.².document.content` (a superscript two passes str.isdigit but
    not int()) crashed extraction and the trace was skipped as no_content. The odd key is ignored;
    the trace is judged on its well-formed documents."""
    f = SpanFactory("index-svc")
    root = {sc.RAGMON_STAGE: "pipeline", sc.RAGMON_PIPELINE: "faq", sc.INPUT_VALUE: "How do I reset my password?",
            sc.OUTPUT_VALUE: "Use the reset link on the login page.", sc.RAGMON_CONTENT_SAMPLED: True}
    retriever = {sc.RAGMON_STAGE: "retriever", sc.SPAN_KIND: "RETRIEVER", "retrieval.documents.0.document.id": "kb-1",
                 "retrieval.documents.0.document.content": "Use the reset link on the login page.",
                 "retrieval.documents.².document.content": "superscript index"}
    with f.tracer.start_as_current_span("rag", attributes=root), \
            f.tracer.start_as_current_span("search", attributes=retriever):
        pass
    async with running_agent(ScriptedJudge()) as agent:
        async with httpx.AsyncClient(timeout=10) as client:
            response = await client.post(f"http://127.0.0.1:{agent.receiver_port}/v1/traces",
                                         content=f.request().SerializeToString(), headers=PROTO)
        assert response.status_code == 200
        assert await agent.wait_idle(20)
        s = await asyncio.to_thread(scrape, agent.metrics_port)
    assert s.value(f"{sc.M_TRACES_SCORED}_total", service="index-svc") == 1
    assert (s.value(f"{sc.M_TRACES_SKIPPED}_total", service="index-svc", reason=sc.SKIP_NO_CONTENT) or 0) == 0
    assert totals(s) == (1, 1)
