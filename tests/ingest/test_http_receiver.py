"""The OTLP/HTTP receiver over real HTTP: the real OTLPSpanExporter and raw httpx requests.
Every bad input gets its spec-conformant status and body, is counted and logged once, and
the receiver keeps serving."""

from __future__ import annotations

import asyncio
import gzip
import json
import logging
from collections.abc import AsyncIterator, Callable, Hashable, Sequence
from dataclasses import dataclass

import httpx
import pytest
from google.rpc import status_pb2
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from opentelemetry.sdk.trace.export import SpanExportResult
from prometheus_client import CollectorRegistry

from ragmon import semconv as sc
from ragmon.config import load_agent_config
from ragmon.export.metrics import AgentMetrics
from ragmon.ingest.receivers.http_receiver import OtlpHttpReceiver
from ragmon.ingest.receivers.settings import HttpReceiverSettings
from ragmon.types import SpanRecord
from tests.helpers.eventually import eventually
from tests.ingest.otel_helpers import SpanFactory, to_otlp_json

PROTO = {"content-type": "application/x-protobuf"}
JSON = {"content-type": "application/json"}


class MemorySink:
    """A real SpanSink that keeps what it is given; back-pressure is switchable."""

    latency_only = None  # every span decoded in full (SpanSink.latency_only)

    def __init__(self) -> None:
        self.submissions: list[tuple[list[SpanRecord], Hashable | None]] = []
        self.busy = False

    @property
    def spans(self) -> list[SpanRecord]:
        return [s for batch, _ in self.submissions for s in batch]

    def submit(self, spans: Sequence[SpanRecord], token: Hashable | None = None) -> None:
        self.submissions.append((list(spans), token))

    def backpressure(self) -> bool:
        return self.busy

    def admit(self, spans: Sequence[SpanRecord]) -> bool:
        return True

    async def flush_where(self, predicate: Callable[[Hashable], bool], timeout_s: float) -> None:
        return None


@dataclass
class Running:
    receiver: OtlpHttpReceiver
    sink: MemorySink
    metrics: AgentMetrics
    url: str
    client: httpx.AsyncClient

    def requests(self, outcome: str) -> float:
        return self.metrics.registry.get_sample_value(
            f"{sc.M_REQUESTS_RECEIVED}_total", {"source": "http", "outcome": outcome}) or 0.0

    def dropped(self, reason: str) -> float:
        return self.metrics.registry.get_sample_value(f"{sc.M_DROPPED}_total", {"reason": reason}) or 0.0

    def spans_received(self) -> float:
        return self.metrics.registry.get_sample_value(f"{sc.M_SPANS_RECEIVED}_total", {"source": "http"}) or 0.0


async def _start(max_body: int = 1 << 20) -> Running:
    config = load_agent_config({"receiver_port": 0, "receiver_max_body_bytes": max_body}, environ={})
    metrics = AgentMetrics(CollectorRegistry())
    receiver = OtlpHttpReceiver(config.section(HttpReceiverSettings), metrics)
    sink = MemorySink()
    await receiver.start(sink)
    url = f"http://127.0.0.1:{receiver.port}/v1/traces"
    return Running(receiver, sink, metrics, url, httpx.AsyncClient(timeout=10))


@pytest.fixture
async def running() -> AsyncIterator[Running]:
    r = await _start()
    try:
        yield r
    finally:
        await r.client.aclose()
        await r.receiver.stop()


def _factory_with_trace() -> SpanFactory:
    f = SpanFactory()
    with f.tracer.start_as_current_span("rag", attributes={"input.value": "q?"}), \
            f.tracer.start_as_current_span("search", attributes={"openinference.span.kind": "RETRIEVER"}):
        pass
    return f


def _export_with_sdk(url: str, f: SpanFactory,
                     compression: Compression = Compression.NoCompression) -> SpanExportResult:
    exporter = OTLPSpanExporter(endpoint=url, compression=compression, timeout=5)
    try:
        return exporter.export(f.finished())
    finally:
        exporter.shutdown()


async def _good_request_still_works(r: Running) -> None:
    before = len(r.sink.spans)
    body = _factory_with_trace().request().SerializeToString()
    response = await r.client.post(r.url, content=body, headers=PROTO)
    assert response.status_code == 200
    assert len(r.sink.spans) == before + 2


@pytest.mark.parametrize("compression", [Compression.NoCompression, Compression.Gzip])
async def test_real_exporter_delivers_spans(running: Running, compression: Compression) -> None:
    f = _factory_with_trace()
    result = await asyncio.to_thread(_export_with_sdk, running.url, f, compression)
    assert result is SpanExportResult.SUCCESS
    names = sorted(s.name for s in running.sink.spans)
    assert names == ["rag", "search"]
    assert running.sink.submissions[0][1] is None  # HTTP deliveries carry no token
    expected_trace = format(f.finished()[0].context.trace_id, "032x")
    assert {s.trace_id for s in running.sink.spans} == {expected_trace}
    assert running.spans_received() == 2
    assert running.requests(sc.OUTCOME_OK) == 1


async def test_protobuf_response_is_an_export_response(running: Running) -> None:
    body = _factory_with_trace().request().SerializeToString()
    response = await running.client.post(running.url, content=body, headers=PROTO)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/x-protobuf")
    parsed = ExportTraceServiceResponse.FromString(response.content)
    assert not parsed.HasField("partial_success")


async def test_json_request_gets_json_response(running: Running) -> None:
    body = to_otlp_json(_factory_with_trace().request())
    response = await running.client.post(running.url, content=body,
                                         headers={"content-type": "application/json; charset=utf-8"})
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/json")
    assert response.json() == {}
    assert len(running.sink.spans) == 2


async def test_partial_success_for_malformed_spans(running: Running) -> None:
    request = _factory_with_trace().request()
    spans = request.resource_spans[0].scope_spans[0].spans
    bad = spans.add()
    bad.CopyFrom(spans[0])
    bad.span_id = b"\x01\x02"
    response = await running.client.post(running.url, content=request.SerializeToString(), headers=PROTO)
    assert response.status_code == 200
    parsed = ExportTraceServiceResponse.FromString(response.content)
    assert parsed.partial_success.rejected_spans == 1
    assert "span_id must be 8" in parsed.partial_success.error_message
    assert len(running.sink.spans) == 2
    assert running.dropped(sc.DROP_MALFORMED_SPAN) == 1
    assert running.requests(sc.OUTCOME_PARTIAL) == 1

    json_body = json.loads(to_otlp_json(request))
    response = await running.client.post(running.url, json=json_body)
    assert response.status_code == 200
    assert response.json()["partialSuccess"]["rejectedSpans"] == "1"  # int64 as string in OTLP/JSON


BAD_INPUTS = [
    # (description, headers, body, expected status, dropped reason)
    ("garbage protobuf", PROTO, b"\xff\xff\xff\xffnot protobuf", 400, sc.DROP_MALFORMED_BODY),
    ("truncated protobuf", PROTO, None, 400, sc.DROP_MALFORMED_BODY),
    ("garbage json", JSON, b"{\"resourceSpans\": [", 400, sc.DROP_MALFORMED_BODY),
    ("corrupt gzip", {**PROTO, "content-encoding": "gzip"}, b"\x1f\x8bnot really", 400, sc.DROP_MALFORMED_BODY),
    ("wrong content type", {"content-type": "text/plain"}, b"hello", 415, sc.DROP_UNSUPPORTED_MEDIA),
    ("no content type", {}, b"hello", 415, sc.DROP_UNSUPPORTED_MEDIA),
    ("unknown encoding", {**PROTO, "content-encoding": "br"}, b"x", 415, sc.DROP_UNSUPPORTED_MEDIA),
    ("too large", PROTO, b"\x00" * ((1 << 20) + 1), 413, sc.DROP_BODY_TOO_LARGE),
    ("zip bomb", {**PROTO, "content-encoding": "gzip"}, gzip.compress(b"\x00" * (8 << 20)), 413,
     sc.DROP_BODY_TOO_LARGE),
]


@pytest.mark.parametrize(("what", "headers", "body", "status", "reason"), BAD_INPUTS, ids=[b[0] for b in BAD_INPUTS])
async def test_bad_input_gets_status_body_count_and_service_goes_on(
    running: Running, what: str, headers: dict[str, str], body: bytes | None, status: int, reason: str,
) -> None:
    if body is None:
        full = _factory_with_trace().request().SerializeToString()
        body = full[: len(full) // 2]
    response = await running.client.post(running.url, content=body, headers=headers)
    assert response.status_code == status, what
    is_proto = headers.get("content-type") == PROTO["content-type"]
    if is_proto:
        assert response.headers["content-type"].startswith("application/x-protobuf")
        rpc = status_pb2.Status.FromString(response.content)
        rpc_code, message = rpc.code, rpc.message
    else:
        assert response.headers["content-type"].startswith("application/json")
        rpc_code, message = response.json()["code"], response.json()["message"]
    assert rpc_code in (3, 8) and message
    assert running.dropped(reason) == 1
    assert running.requests(sc.OUTCOME_REJECTED) == 1
    assert running.sink.spans == []
    await _good_request_still_works(running)
    assert running.requests(sc.OUTCOME_OK) == 1


async def test_body_without_content_length_is_bounded() -> None:
    r = await _start(max_body=64 * 1024)
    try:
        async def chunks() -> AsyncIterator[bytes]:
            for _ in range(10):
                yield b"\x00" * 16 * 1024

        response = await r.client.post(r.url, content=chunks(), headers=PROTO)  # chunked transfer
        assert response.status_code == 413
        assert r.dropped(sc.DROP_BODY_TOO_LARGE) == 1
        await _good_request_still_works(r)
    finally:
        await r.client.aclose()
        await r.receiver.stop()


async def test_wrong_method_is_405(running: Running) -> None:
    for method in ("GET", "PUT", "DELETE"):
        response = await running.client.request(method, running.url)
        assert response.status_code == 405
        assert response.headers["allow"] == "POST"
    assert running.requests(sc.OUTCOME_REJECTED) == 3
    await _good_request_still_works(running)


async def test_other_paths_are_404(running: Running) -> None:
    response = await running.client.post(running.url.replace("/v1/traces", "/v1/metrics"), content=b"", headers=PROTO)
    assert response.status_code == 404


async def test_backpressure_answers_503_with_retry_after(running: Running) -> None:
    running.sink.busy = True
    body = _factory_with_trace().request().SerializeToString()
    response = await running.client.post(running.url, content=body, headers=PROTO)
    assert response.status_code == 503
    assert int(response.headers["retry-after"]) >= 1
    assert status_pb2.Status.FromString(response.content).code == 14  # UNAVAILABLE
    assert running.sink.spans == []
    assert running.requests(sc.OUTCOME_THROTTLED) == 1
    running.sink.busy = False
    await _good_request_still_works(running)


async def test_each_kind_of_bad_input_is_logged_once(running: Running, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="ragmon.ingest.receivers.http_receiver")
    for _ in range(3):
        await running.client.post(running.url, content=b"\xff\xff", headers=PROTO)
        await running.client.post(running.url, content=b"x", headers={"content-type": "text/html"})
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 2
    assert any("malformed_body" in r.getMessage() for r in warnings)
    assert any("unsupported_media_type" in r.getMessage() for r in warnings)
    assert running.dropped(sc.DROP_MALFORMED_BODY) == 3


async def test_stop_finishes_in_flight_requests_then_refuses() -> None:
    r = await _start()
    body = _factory_with_trace().request().SerializeToString()
    release = asyncio.Event()

    async def slow_body() -> AsyncIterator[bytes]:
        yield body[:10]
        await release.wait()
        yield body[10:]

    in_flight = asyncio.create_task(r.client.post(r.url, content=slow_body(), headers=PROTO))
    # the handler has started and waits for the rest of the body (white-box: the receiver's count)
    await eventually(lambda: r.receiver._in_flight == 1, timeout_s=10, what="the request in progress")
    stopping = asyncio.create_task(r.receiver.stop())
    await eventually(lambda: _refuses_connections(r.receiver.port), timeout_s=10, what="the listener closed")
    assert not r.receiver.ready()
    assert not stopping.done()  # stop() waits for the request in progress
    release.set()
    response = await in_flight
    await stopping
    assert response.status_code == 200
    assert len(r.sink.spans) == 2
    with pytest.raises(httpx.ConnectError):
        await r.client.post(r.url, content=body, headers=PROTO)
    await r.receiver.stop()  # idempotent
    await r.client.aclose()


async def _refuses_connections(port: int) -> bool:
    try:
        _reader, writer = await asyncio.open_connection("127.0.0.1", port)
    except ConnectionRefusedError:
        return True
    writer.close()
    await writer.wait_closed()
    return False


async def test_ready_and_port(running: Running) -> None:
    assert running.receiver.ready()
    assert running.receiver.port > 0
    assert running.receiver.name == "http"
    running.receiver.release(("anything",))  # HTTP has nothing to release


async def test_port_in_use_is_a_clear_configuration_error(running: Running) -> None:
    from ragmon.errors import ConfigError

    config = load_agent_config({"receiver_port": running.receiver.port}, environ={})
    second = OtlpHttpReceiver(config.section(HttpReceiverSettings), AgentMetrics(CollectorRegistry()))
    with pytest.raises(ConfigError) as info:
        await second.start(MemorySink())
    assert "RAGMON_RECEIVER_PORT" in str(info.value) and str(running.receiver.port) in str(info.value)
    assert not second.ready()
    await second.stop()  # harmless after a failed start
    await _good_request_still_works(running)


async def test_client_that_disconnects_mid_body_is_counted(running: Running) -> None:
    port = running.receiver.port
    _reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"POST /v1/traces HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-protobuf\r\n"
                 b"Content-Length: 1000\r\n\r\n" + b"\x0a" * 10)
    await writer.drain()
    writer.close()
    await writer.wait_closed()
    # the server notices the closed connection asynchronously
    assert await eventually(lambda: running.dropped(sc.DROP_MALFORMED_BODY), timeout_s=10,
                            what="the broken upload counted") == 1
    assert running.requests(sc.OUTCOME_REJECTED) == 1
    await _good_request_still_works(running)


async def test_broken_chunked_framing_is_a_bad_request(running: Running) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", running.receiver.port)
    writer.write(b"POST /v1/traces HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-protobuf\r\n"
                 b"Transfer-Encoding: chunked\r\n\r\nzz\r\nnot a chunk\r\n0\r\n\r\n")
    await writer.drain()
    status_line = await asyncio.wait_for(reader.readline(), 10)
    writer.close()
    assert status_line.split()[1] == b"400"
    await _good_request_still_works(running)


async def test_bodies_in_progress_are_bounded_with_a_retryable_503() -> None:
    r = await _start(max_body=64 * 1024)  # budget: 4 x 64 KiB of bodies in progress
    held = []
    try:
        for _ in range(4):  # four uploads of 64 KiB that sent all but their last byte
            reader, writer = await asyncio.open_connection("127.0.0.1", r.receiver.port)
            writer.write(b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\n"
                         b"Content-Length: 65536\r\n\r\n" + b"\x00" * 65535)
            await writer.drain()
            held.append((reader, writer))
        # the bytes that arrived are reserved (white-box: the receiver's body budget)
        await eventually(lambda: r.receiver._budget.used == r.receiver._budget.limit - 4, timeout_s=10,
                         what="the body budget full")
        body = _factory_with_trace().request().SerializeToString()
        busy = await r.client.post(r.url, content=body, headers=PROTO)
        assert busy.status_code == 503 and int(busy.headers["retry-after"]) >= 1
        assert r.requests(sc.OUTCOME_THROTTLED) == 1
        for reader, writer in held:  # the uploads finish (garbage: 400) and give their bytes back
            writer.write(b"\x00")
            await writer.drain()
            assert (await asyncio.wait_for(reader.readline(), 10)).split()[1] == b"400"
            writer.close()
        await _good_request_still_works(r)
    finally:
        await r.client.aclose()
        await r.receiver.stop()


async def test_internal_error_is_a_500_with_a_status_and_service_goes_on(
        running: Running, monkeypatch: pytest.MonkeyPatch) -> None:
    import ragmon.ingest.receivers.base as receive_path  # the decoding both receivers share

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("injected fault")

    monkeypatch.setattr(receive_path, "decode_export_request", broken)
    body = _factory_with_trace().request().SerializeToString()
    response = await running.client.post(running.url, content=body, headers=PROTO)
    assert response.status_code == 500
    assert status_pb2.Status.FromString(response.content).code == 13  # INTERNAL
    assert running.requests(sc.OUTCOME_REJECTED) == 1
    monkeypatch.undo()
    await _good_request_still_works(running)
