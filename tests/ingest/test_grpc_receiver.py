"""The OTLP/gRPC receiver over real gRPC: the OpenTelemetry SDK's own gRPC exporter (gzip on) end
to end through the agent, and raw gRPC calls for what an exporter never sends (malformed
messages, oversize messages, missing tokens). Back-pressure is answered UNAVAILABLE with a
RetryInfo, which the real exporter honours by retrying."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Hashable, Sequence

import grpc
import pytest
from google.rpc import error_details_pb2
from grpc import Compression
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from prometheus_client import CollectorRegistry

from ragmon import semconv as sc
from ragmon.config import load_agent_config
from ragmon.errors import ConfigError
from ragmon.export.metrics import AgentMetrics
from ragmon.ingest.composite_source import CompositeSource
from ragmon.ingest.receivers.grpc_receiver import EXPORT_METHOD, SERVICE_NAME, OtlpGrpcReceiver
from ragmon.ingest.receivers.http_receiver import OtlpHttpReceiver
from ragmon.ingest.receivers.settings import GrpcReceiverSettings, HttpReceiverSettings
from ragmon.types import SpanRecord
from tests.agent.conftest import ScriptedJudge, running_agent
from tests.helpers.traffic import OtlpTraffic, healthy
from tests.ingest.otel_helpers import SpanFactory

EXPORT_PATH = f"/{SERVICE_NAME}/{EXPORT_METHOD}"


class Sink:
    """A real SpanSink keeping what it is given; back-pressure and admission are switchable."""

    latency_only = None  # every span decoded in full (SpanSink.latency_only)

    def __init__(self) -> None:
        self.spans: list[SpanRecord] = []
        self.busy = False
        self.admitting = True

    def submit(self, spans: Sequence[SpanRecord], token: Hashable | None = None) -> None:
        self.spans.extend(spans)

    def backpressure(self) -> bool:
        return self.busy

    def admit(self, spans: Sequence[SpanRecord]) -> bool:
        return self.admitting

    async def flush_where(self, predicate: object, timeout_s: float) -> None:
        return None


class Running:
    def __init__(self, receiver: OtlpGrpcReceiver, sink: Sink, metrics: AgentMetrics) -> None:
        self.receiver, self.sink, self.metrics = receiver, sink, metrics
        self.target = f"127.0.0.1:{receiver.port}"

    def value(self, name: str, **labels: str) -> float:
        return self.metrics.registry.get_sample_value(name, labels) or 0.0

    def requests(self, outcome: str) -> float:
        return self.value(f"{sc.M_REQUESTS_RECEIVED}_total", source="grpc", outcome=outcome)

    def dropped(self, reason: str) -> float:
        return self.value(f"{sc.M_DROPPED}_total", reason=reason)


def _settings(**overrides: object) -> GrpcReceiverSettings:
    config = load_agent_config({"receiver_port": 0, "receiver_grpc_port": 0, "receiver_max_body_bytes": 1 << 20,
                                **overrides}, environ={})
    return config.section(GrpcReceiverSettings)


@pytest.fixture
async def running() -> AsyncIterator[Running]:
    metrics = AgentMetrics(CollectorRegistry())
    receiver = OtlpGrpcReceiver(_settings(), metrics)
    sink = Sink()
    await receiver.start(sink)
    try:
        yield Running(receiver, sink, metrics)
    finally:
        await receiver.stop()


def _trace_request() -> bytes:
    f = SpanFactory()
    with f.tracer.start_as_current_span("rag", attributes={"input.value": "q?"}), \
            f.tracer.start_as_current_span("search", attributes={"openinference.span.kind": "RETRIEVER"}):
        pass
    return f.request().SerializeToString()


async def _call(target: str, body: bytes, metadata: tuple[tuple[str, str], ...] = ()) -> bytes:
    async with grpc.aio.insecure_channel(target) as channel:
        export = channel.unary_unary(EXPORT_PATH)  # raw bytes in and out
        result: bytes = await export(body, metadata=metadata, timeout=10)
        return result


def _grpc_traffic(target: str, compression: Compression) -> OtlpTraffic:
    """tests.helpers.traffic's RAG requests, exported by the SDK's gRPC exporter instead of HTTP."""
    traffic = OtlpTraffic.__new__(OtlpTraffic)
    traffic.provider = TracerProvider(resource=Resource.create({"service.name": "test-svc"}))
    traffic.exporter = OTLPSpanExporter(endpoint=target, insecure=True, compression=compression, timeout=10)
    traffic.provider.add_span_processor(SimpleSpanProcessor(traffic.exporter))
    traffic.tracer = traffic.provider.get_tracer("tests.traffic")
    traffic.trace_ids = []
    return traffic


async def test_sdk_grpc_exporter_with_gzip_end_to_end_through_the_agent() -> None:
    async with running_agent(ScriptedJudge(), receiver_grpc_port=0) as agent:
        assert agent.receiver_grpc_port and agent.receiver_port and agent.receiver_grpc_port != agent.receiver_port
        traffic = _grpc_traffic(f"127.0.0.1:{agent.receiver_grpc_port}", Compression.Gzip)
        try:
            for i in range(3):
                await asyncio.to_thread(traffic.send, healthy(i))
        finally:
            await asyncio.to_thread(traffic.close)
        assert await agent.wait_idle(20)
        registry = agent.metrics.registry
        assert registry.get_sample_value(f"{sc.M_TRACES_SCORED}_total",
                                         {"service": "test-svc", "pipeline": "support", "judge": "scripted"}) == 3
        assert registry.get_sample_value(f"{sc.M_SPANS_RECEIVED}_total", {"source": "grpc"}) == 9
        assert registry.get_sample_value(f"{sc.M_REQUESTS_RECEIVED}_total",
                                         {"source": "grpc", "outcome": sc.OUTCOME_OK}) == 9
        assert registry.get_sample_value(f"{sc.M_SPANS_RECEIVED}_total", {"source": "http"}) is None
        ready, detail = agent._readiness()
        assert ready and detail["source"] == "http+grpc"


async def test_malformed_message_is_invalid_argument_counted_and_the_receiver_goes_on(running: Running) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await _call(running.target, b"\x0a\xff\xff\xff\xff\x0f")
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert running.dropped(sc.DROP_MALFORMED_BODY) == 1
    assert running.requests(sc.OUTCOME_REJECTED) == 1
    response = ExportTraceServiceResponse.FromString(await _call(running.target, _trace_request()))
    assert not response.HasField("partial_success")
    assert len(running.sink.spans) == 2 and running.requests(sc.OUTCOME_OK) == 1


async def test_internal_error_is_internal_counted_and_the_receiver_goes_on(
        running: Running, monkeypatch: pytest.MonkeyPatch) -> None:
    import ragmon.ingest.receivers.base as receive_path  # the decoding both receivers share

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("injected fault")

    monkeypatch.setattr(receive_path, "decode_export_request", broken)
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await _call(running.target, _trace_request())
    assert err.value.code() == grpc.StatusCode.INTERNAL
    assert running.requests(sc.OUTCOME_REJECTED) == 1 and not running.sink.spans
    monkeypatch.undo()
    await _call(running.target, _trace_request())
    assert len(running.sink.spans) == 2 and running.requests(sc.OUTCOME_OK) == 1


async def test_rejected_spans_are_reported_as_partial_success(running: Running) -> None:
    f = SpanFactory()
    with f.tracer.start_as_current_span("rag"):
        pass
    request = f.request()
    bad = request.resource_spans[0].scope_spans[0].spans.add()
    bad.CopyFrom(request.resource_spans[0].scope_spans[0].spans[0])
    bad.trace_id = b"\x00" * 16
    response = ExportTraceServiceResponse.FromString(await _call(running.target, request.SerializeToString()))
    assert response.partial_success.rejected_spans == 1
    assert "trace_id" in response.partial_success.error_message
    assert running.dropped(sc.DROP_MALFORMED_SPAN) == 1
    assert running.requests(sc.OUTCOME_PARTIAL) == 1 and len(running.sink.spans) == 1


@pytest.mark.parametrize("cause", ["backpressure", "admission"])
async def test_backpressure_is_unavailable_with_retry_info(running: Running, cause: str) -> None:
    if cause == "backpressure":
        running.sink.busy = True
    else:
        running.sink.admitting = False
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await _call(running.target, _trace_request())
    assert err.value.code() == grpc.StatusCode.UNAVAILABLE
    trailing = dict(err.value.trailing_metadata() or ())
    info = error_details_pb2.RetryInfo.FromString(trailing["google.rpc.retryinfo-bin"])
    assert info.retry_delay.seconds >= 1
    assert running.sink.spans == [] and running.requests(sc.OUTCOME_THROTTLED) == 1


async def test_the_sdk_exporter_retries_after_backpressure_and_nothing_is_lost(running: Running) -> None:
    running.sink.busy = True
    f = SpanFactory()
    with f.tracer.start_as_current_span("rag"):
        pass
    exporter = OTLPSpanExporter(endpoint=running.target, insecure=True, compression=Compression.Gzip, timeout=10)
    released = threading.Timer(0.3, lambda: setattr(running.sink, "busy", False))
    released.start()
    try:
        result = await asyncio.to_thread(exporter.export, f.finished())
    finally:
        released.cancel()
        await asyncio.to_thread(exporter.shutdown)
    assert result is SpanExportResult.SUCCESS
    assert len(running.sink.spans) == 1
    assert running.requests(sc.OUTCOME_THROTTLED) >= 1 and running.requests(sc.OUTCOME_OK) == 1


async def test_message_over_the_body_limit_is_resource_exhausted() -> None:
    metrics = AgentMetrics(CollectorRegistry())
    receiver = OtlpGrpcReceiver(_settings(receiver_max_body_bytes=1024), metrics)
    sink = Sink()
    await receiver.start(sink)
    try:
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await _call(f"127.0.0.1:{receiver.port}", b"\x0a" + b"\x00" * 4096)
        assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert sink.spans == []
    finally:
        await receiver.stop()


async def test_bearer_token_is_required_when_configured() -> None:
    metrics = AgentMetrics(CollectorRegistry())
    receiver = OtlpGrpcReceiver(_settings(receiver_bearer_token="s3cret"), metrics)
    sink = Sink()
    await receiver.start(sink)
    target = f"127.0.0.1:{receiver.port}"
    try:
        for metadata in ((), (("authorization", "Bearer wrong"),)):
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await _call(target, _trace_request(), metadata)
            assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED
        await _call(target, _trace_request(), (("authorization", "Bearer s3cret"),))
        assert len(sink.spans) == 2
        assert metrics.registry.get_sample_value(f"{sc.M_AUTH_FAILURES}_total",
                                                 {"endpoint": sc.ENDPOINT_RECEIVER, "reason": "token"}) == 2
        assert metrics.registry.get_sample_value(
            f"{sc.M_REQUESTS_RECEIVED}_total", {"source": "grpc", "outcome": sc.OUTCOME_UNAUTHORIZED}) == 2
    finally:
        await receiver.stop()


async def test_busy_grpc_port_fails_fast_and_leaves_nothing_listening(running: Running) -> None:
    metrics = AgentMetrics(CollectorRegistry())
    config = load_agent_config({"receiver_port": 0, "receiver_grpc_port": running.receiver.port}, environ={})
    http = OtlpHttpReceiver(config.section(HttpReceiverSettings), metrics)
    both = CompositeSource([http, OtlpGrpcReceiver(config.section(GrpcReceiverSettings), metrics)])
    with pytest.raises(ConfigError, match="OTLP/gRPC"):
        await both.start(Sink())
    assert not http.ready() and not both.ready()


def test_grpc_port_settings_are_validated() -> None:
    assert load_agent_config({}, environ={}).receiver_grpc_port is None  # off unless asked for
    assert load_agent_config({}, environ={"RAGMON_RECEIVER_GRPC_PORT": "4317"}).receiver_grpc_port == 4317
    assert load_agent_config({}, environ={"RAGMON_RECEIVER_GRPC_PORT": "off"}).receiver_grpc_port is None
    with pytest.raises(ConfigError, match="same port"):
        load_agent_config({"receiver_grpc_port": 4318}, environ={})
    with pytest.raises(ConfigError, match="--source http"):
        load_agent_config({"receiver_grpc_port": 4317, "source": "kafka"}, environ={})
    with pytest.raises(ConfigError, match="insecure-allow-unauthenticated-bind"):
        load_agent_config({"receiver_grpc_port": 4317, "receiver_host": "0.0.0.0"}, environ={})
