"""The trace inspector: GET /traces/{trace_id} on a running agent (real OTLP/HTTP traffic from the
OpenTelemetry SDK, real HTTP), and `ragmon inspect FILE` on an OTLP/JSON file offline."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx
import pytest

from ragmon import semconv as sc
from ragmon.cli import main
from ragmon.export.inspector import MAX_CONTEXTS, RecentTraces, inspect_trace
from ragmon.testing import StaticJudge
from ragmon.types import Document, RagTrace, Scores
from tests.agent.conftest import SCORES, ScriptedJudge, running_agent
from tests.helpers.traffic import CONTEXTS, OtlpTraffic, healthy
from tests.ingest.otel_helpers import SpanFactory, to_otlp_json


class RelevanceJudge(StaticJudge):
    """Fixed scores plus the LLM judge's per-context verdicts (details["context_relevant"])."""

    async def score(self, trace: RagTrace) -> Scores:
        verdicts = [i % 2 == 0 for i in range(len(trace.contexts))]
        return Scores(SCORES, judge=self.name, details={"context_relevant": verdicts, "reason": "fixed"})


async def _send(traffic: OtlpTraffic, n: int) -> list[str]:
    return [await asyncio.to_thread(traffic.send, healthy(i)) for i in range(n)]


async def test_a_judged_trace_shows_what_was_extracted_scored_and_where_from(endpoint_of) -> None:
    async with running_agent(RelevanceJudge(SCORES, name="relevance")) as agent:
        traffic = OtlpTraffic(endpoint_of(agent))
        (trace_id,) = await _send(traffic, 1)
        traffic.close()
        assert await agent.wait_idle(20)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{agent.metrics_port}") as client:
            found = await client.get(f"/traces/{trace_id}")
            missing = await client.get(f"/traces/{'ab' * 16}")
    assert found.status_code == 200, found.text
    body = found.json()
    assert body["trace_id"] == trace_id and body["pipeline"] == "support" and body["service"] == "test-svc"
    assert body["question"] == healthy().question and body["answer"] == healthy().answer
    assert [c["id"] for c in body["contexts"]] == ["doc-0", "doc-1", "doc-2"]
    assert [c["text"] for c in body["contexts"]] == CONTEXTS
    assert [c["verdict"] for c in body["contexts"]] == [True, False, True]
    assert body["scores"] == SCORES and body["verdict"] == sc.VERDICT_OK and body["judge"] == "relevance"
    assert body["sources"] == {"question": f"rag: {sc.INPUT_VALUE}", "answer": f"rag: {sc.OUTPUT_VALUE}",
                               "contexts": sc.CONTEXTS_RETRIEVAL}
    assert missing.status_code == 404 and "recently judged" in missing.json()["error"]


async def test_bounded_in_count_and_size(endpoint_of) -> None:
    async with running_agent(ScriptedJudge(), trace_inspector_size=2, trace_inspector_max_chars=10) as agent:
        traffic = OtlpTraffic(endpoint_of(agent))
        ids = await _send(traffic, 3)
        traffic.close()
        assert await agent.wait_idle(20)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{agent.metrics_port}") as client:
            statuses = [(await client.get(f"/traces/{i}")).status_code for i in ids]
            last = (await client.get(f"/traces/{ids[-1]}")).json()
    assert statuses == [404, 200, 200]  # the oldest was evicted
    assert len(last["question"]) == 11 and last["question"].endswith("…") and last["truncated"] is True
    assert all(len(c["text"]) <= 11 for c in last["contexts"])


async def test_guarded_like_worst_and_off_with_the_flag(endpoint_of) -> None:
    async with running_agent(ScriptedJudge(), metrics_bearer_token="tok") as agent:
        traffic = OtlpTraffic(endpoint_of(agent))
        (trace_id,) = await _send(traffic, 1)
        traffic.close()
        assert await agent.wait_idle(20)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{agent.metrics_port}") as client:
            refused = await client.get(f"/traces/{trace_id}")
            allowed = await client.get(f"/traces/{trace_id}", headers={"Authorization": "Bearer tok"})
    assert refused.status_code == 401 and allowed.status_code == 200
    assert agent.metrics.registry.get_sample_value(
        f"{sc.M_AUTH_FAILURES}_total", {"endpoint": sc.ENDPOINT_METRICS, "reason": "token"}) == 1

    async with running_agent(ScriptedJudge(), trace_inspector=False) as agent:
        traffic = OtlpTraffic(endpoint_of(agent))
        (trace_id,) = await _send(traffic, 1)
        traffic.close()
        assert await agent.wait_idle(20)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{agent.metrics_port}") as client:
            off = await client.get(f"/traces/{trace_id}")
    assert off.status_code == 404


def test_inspect_trace_is_bounded_and_maps_verdicts_to_the_documents_judged() -> None:
    docs = tuple(Document(f"d{i}", content=None if i == 1 else f"text {i}") for i in range(MAX_CONTEXTS + 5))
    trace = RagTrace("ab" * 16, "svc", "p", question="q", answer="a", documents=docs)
    # the judge saw the documents that carry text: d0, d2, d3, ...
    verdicts = [0.9, 0.1] + [0.5] * (MAX_CONTEXTS + 2)
    view = inspect_trace(trace, details={"context_relevance": verdicts})
    assert len(view["contexts"]) == MAX_CONTEXTS and view["contexts_total"] == MAX_CONTEXTS + 5
    assert [c["verdict"] for c in view["contexts"][:3]] == [0.9, None, 0.1]
    assert view["truncated"] is True and view["scores"] == {} and view["verdict"] is None
    recent = RecentTraces(size=0, max_chars=10)
    recent.record(trace, scores={}, verdict="ok", reason="", judge="j")
    assert recent.get(trace.trace_id) is None and len(recent) == 0


def _otlp_json_file(tmp_path: Path) -> tuple[Path, str]:
    f = SpanFactory("file-svc")
    question, answer = "How much does the Pro plan cost per month?", "The Pro plan costs 49 dollars per month."
    with f.tracer.start_as_current_span("rag", attributes={
            sc.SPAN_KIND: sc.KIND_CHAIN, sc.RAGMON_PIPELINE: "support", sc.INPUT_VALUE: question}) as root:
        with f.tracer.start_as_current_span("retrieve", attributes={sc.SPAN_KIND: sc.KIND_RETRIEVER}) as span:
            for i, text in enumerate(CONTEXTS):
                span.set_attribute(sc.retrieval_document_attr(i, sc.DOCUMENT_ID), f"doc-{i}")
                span.set_attribute(sc.retrieval_document_attr(i, sc.DOCUMENT_CONTENT), text)
        with f.tracer.start_as_current_span("generate", attributes={sc.SPAN_KIND: sc.KIND_LLM}) as gen:
            gen.set_attribute(sc.OUTPUT_VALUE, answer)
        root.set_attribute(sc.OUTPUT_VALUE, answer)
        trace_id = format(root.get_span_context().trace_id, "032x")
    path = tmp_path / "traces.json"
    path.write_bytes(to_otlp_json(f.request()) + b"\n")
    return path, trace_id


def test_ragmon_inspect_prints_the_same_json_offline(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path, trace_id = _otlp_json_file(tmp_path)
    assert main(["inspect", str(path), "--trace-id", trace_id]) == 0
    body = json.loads(capsys.readouterr().out)
    assert body["trace_id"] == trace_id and body["service"] == "file-svc" and body["pipeline"] == "support"
    assert body["question"].startswith("How much") and body["answer"].startswith("The Pro plan")
    assert [c["id"] for c in body["contexts"]] == ["doc-0", "doc-1", "doc-2"]
    assert body["sources"]["question"] == f"rag: {sc.INPUT_VALUE}" and body["scores"] == {}

    assert main(["inspect", str(path), "--judge", "local"]) == 0
    (line,) = capsys.readouterr().out.splitlines()  # JSON lines: one trace
    judged = json.loads(line)
    assert set(judged["scores"]) >= {sc.METRIC_FAITHFULNESS, sc.METRIC_CONTEXT_PRECISION}
    assert judged["verdict"] in sc.VERDICTS and judged["judge"]
    assert all(isinstance(c["verdict"], float) for c in judged["contexts"])  # the local judge's relevance

    assert main(["inspect", str(path), "--trace-id", "cd" * 16]) == 2
    assert main(["inspect", str(tmp_path / "absent.json")]) == 2
    assert "cannot read" in capsys.readouterr().err
