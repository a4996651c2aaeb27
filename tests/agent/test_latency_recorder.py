"""The latency recorder alone: one path for a trace read in full and one read for latency only,
what every trace records (received, incomplete, duplicates, latencies, P95, contexts source,
releases, traffic), and latencies it refuses to observe."""

from __future__ import annotations

import logging
from collections.abc import Hashable

from prometheus_client import CollectorRegistry

from ragmon import semconv as sc
from ragmon._log import LogOnce
from ragmon.agent.latency import LatencyRecorder, LatencySettings, latency_view
from ragmon.export.metrics import AgentMetrics
from ragmon.export.releases import ReleaseTracker
from ragmon.ingest.tally import Tally
from ragmon.types import Document, RagTrace

SP = {"service": "svc", "pipeline": "p"}


def _recorder(max_s: float = 60.0) -> tuple[LatencyRecorder, AgentMetrics, Tally, list[Hashable]]:
    metrics = AgentMetrics(CollectorRegistry())
    tally = Tally()
    traffic: list[Hashable] = []
    recorder = LatencyRecorder(LatencySettings(latency_max_s=max_s, latency_window_s=300.0), metrics, tally,
                               ReleaseTracker(metrics.release, 200), clock=lambda: 100.0,
                               observe_traffic=traffic.append, log_once=LogOnce(logging.getLogger("test")))
    return recorder, metrics, tally, traffic


def _trace(trace_id: str = "a" * 32, **fields) -> RagTrace:
    values = {"retrieval_latency_s": 0.25, "generation_latency_s": 1.5, "pipeline_latency_s": 2.0,
              "documents": (Document("d1", "text", 0.9), Document("d2", "more", 0.4)),
              "attributes": {sc.RAGMON_CONTEXTS_SOURCE: sc.CONTEXTS_RETRIEVAL, sc.LLM_MODEL_NAME: "m-1"}}
    values.update(fields)
    return RagTrace(trace_id=trace_id, service="svc", pipeline="p", **values)


def test_a_trace_records_its_traffic_and_latencies():
    recorder, metrics, tally, traffic = _recorder()
    series = recorder.record(latency_view(_trace()), "root", duplicate=False)
    assert series is not None and series.key == ("svc", "p")
    get = metrics.registry.get_sample_value
    assert get(f"{sc.M_TRACES_RECEIVED}_total", SP) == 0  # applied with the tally, once per submission
    tally.flush()
    assert get(f"{sc.M_TRACES_RECEIVED}_total", SP) == 1
    assert get(f"{sc.M_RETRIEVAL_LATENCY}_sum", SP) == 0.25
    assert get("ragmon_generation_latency_seconds_sum", SP) == 1.5
    assert get("ragmon_pipeline_latency_seconds_sum", SP) == 2.0
    assert get("ragmon_retrieved_documents_sum", SP) == 2
    assert get(sc.M_RETRIEVAL_LATENCY_P95, SP) == 0.25
    assert get(sc.M_PIPELINE_LATENCY_P95, SP) == 2.0
    assert get(f"{sc.M_CONTEXTS_SOURCE}_total", {**SP, "source": sc.CONTEXTS_RETRIEVAL}) == 1
    assert traffic == [("svc", "p")]
    assert get(f"{sc.M_TRACES_INCOMPLETE}_total", {**SP, "reason": "timeout"}) is None
    recorder.record(latency_view(_trace("b" * 32, complete=False)), "timeout", duplicate=False)
    tally.flush()
    assert get(f"{sc.M_TRACES_INCOMPLETE}_total", {**SP, "reason": "timeout"}) == 1
    assert get(f"{sc.M_TRACES_RECEIVED}_total", SP) == 2


def test_a_duplicate_is_counted_and_records_no_latency():
    recorder, metrics, tally, traffic = _recorder()
    assert recorder.record(latency_view(_trace()), "root", duplicate=True) is None
    tally.flush()
    get = metrics.registry.get_sample_value
    assert get(f"{sc.M_TRACES_RECEIVED}_total", SP) == 1
    assert get(f"{sc.M_DEDUP_HITS}_total", SP) == 1
    assert get(f"{sc.M_TRACES_SKIPPED}_total", {**SP, "reason": sc.SKIP_DUPLICATE}) == 1
    assert get(f"{sc.M_RETRIEVAL_LATENCY}_count", SP) is None
    assert traffic == []


def test_an_implausible_latency_is_counted_not_observed():
    recorder, metrics, tally, _ = _recorder(max_s=10.0)
    recorder.record(latency_view(_trace(retrieval_latency_s=-1.0, pipeline_latency_s=5e9)), "root",
                    duplicate=False)
    tally.flush()
    get = metrics.registry.get_sample_value
    assert get(f"{sc.M_DROPPED}_total", {"reason": sc.DROP_INVALID_TIMESTAMP}) == 2
    assert get(f"{sc.M_RETRIEVAL_LATENCY}_count", SP) is None
    assert get("ragmon_pipeline_latency_seconds_count", SP) is None
    assert get("ragmon_retrieved_documents_count", SP) == 1  # retrieval ran: its documents count
    assert get("ragmon_generation_latency_seconds_count", SP) == 1


def test_a_hand_made_trace_without_a_contexts_source_is_not_counted_as_one():
    recorder, metrics, tally, _ = _recorder()
    recorder.record(latency_view(_trace(attributes={})), "root", duplicate=False)
    tally.flush()
    samples = [s for f in metrics.registry.collect() if f.name == sc.M_CONTEXTS_SOURCE for s in f.samples]
    assert samples == []


def test_not_sampled_is_counted_on_the_traces_series():
    recorder, metrics, tally, _ = _recorder()
    series = recorder.record(latency_view(_trace()), "root", duplicate=False)
    assert series is not None
    recorder.not_sampled(series)
    tally.flush()
    assert metrics.registry.get_sample_value(f"{sc.M_TRACES_SKIPPED}_total",
                                             {**SP, "reason": sc.SKIP_NOT_SAMPLED}) == 1


def test_latency_view_reads_the_full_traces_fields():
    trace = _trace(error_type="boom", attributes={sc.RAGMON_NOT_RAG: True, sc.RAGMON_FEEDBACK: "negative",
                                                  sc.LLM_PROMPT_TEMPLATE_VERSION: "v2"})
    view = latency_view(trace)
    assert (view.trace_id, view.service, view.pipeline, view.complete) == (trace.trace_id, "svc", "p", True)
    assert view.not_rag and view.has_error and view.feedback == "negative" and view.prompt_version == "v2"
    assert view.document_count == 2 and view.top_retrieval_score == 0.9
    assert view.fraction == -1.0  # not hashed: the sampler hashes the id itself
