"""init()/shutdown(): exporters, providers, co-existence, kill switch, failure containment,
and real OTLP/HTTP bytes to a real HTTP server."""

from __future__ import annotations

import gzip
import sys
import types
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    ConsoleSpanExporter,
    SimpleSpanProcessor,
    SpanExporter,
    SpanExportResult,
)
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import ragmon
from ragmon import semconv as sc
from ragmon.errors import ConfigError
from ragmon.sdk import _runtime, setup
from tests.helpers.net import free_port


@ragmon.retriever
def search(query: str) -> list[dict[str, Any]]:
    return [{"id": f"doc-{i}", "text": f"text {i}", "score": 0.5} for i in range(40)]


@ragmon.generator
def generate(query: str, docs: Sequence[Any]) -> str:
    return "answer"


@ragmon.pipeline(name="qa")
def rag(query: str) -> str:
    return generate(query, search(query))


def names(exporter: InMemorySpanExporter) -> list[str]:
    return sorted(s.name for s in exporter.get_finished_spans())


def user_provider() -> tuple[TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({sc.SERVICE_NAME: "user-app"}), shutdown_on_exit=False)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


# --- co-existence ----------------------------------------------------------------------------------
def test_joins_the_applications_global_provider(fresh_global_otel: None) -> None:
    provider, user_spans = user_provider()
    trace.set_tracer_provider(provider)
    ours = InMemorySpanExporter()
    assert ragmon.init(service_name="ignored", exporter="none", span_processor=SimpleSpanProcessor(ours)) is provider
    assert trace.get_tracer_provider() is provider  # not replaced

    app_tracer = trace.get_tracer("app")
    with app_tracer.start_as_current_span("GET /health"):
        pass
    with app_tracer.start_as_current_span("GET /ask") as http_span:
        assert rag("q") == "answer"
        http_span.set_attributes({f"app.attr.{i}": i for i in range(200)})
    with app_tracer.start_as_current_span("GET /metrics"):
        pass

    # the application's exporter sees everything; ragmon's only the RAG trace, with its real root
    assert names(user_spans) == sorted(["GET /health", "GET /ask", "qa", "search", "generate", "GET /metrics"])
    assert names(ours) == sorted(["GET /ask", "qa", "search", "generate"])
    by_name = {s.name: s for s in user_spans.get_finished_spans()}
    assert by_name["qa"].parent.span_id == by_name["GET /ask"].context.span_id
    assert by_name["qa"].context.trace_id == by_name["GET /ask"].context.trace_id
    assert by_name["qa"].resource.attributes[sc.SERVICE_NAME] == "user-app"
    # ragmon's spans keep all 40 documents under the application's default limit of 128 ...
    retr = by_name["search"]
    assert retr.dropped_attributes == 0
    assert retr.attributes[sc.retrieval_document_attr(39, sc.DOCUMENT_ID)] == "doc-39"
    # ... while the application's own spans keep the application's limit
    assert by_name["GET /ask"].dropped_attributes > 0


def test_joined_provider_forwards_the_applications_spans_inside_rag_work(fresh_global_otel: None) -> None:
    provider, _ = user_provider()
    trace.set_tracer_provider(provider)
    ours = InMemorySpanExporter()
    ragmon.init(exporter="none", span_processor=SimpleSpanProcessor(ours))
    app_tracer = trace.get_tracer("openai-instrumentation")

    @ragmon.generator
    def llm(query: str) -> str:
        with app_tracer.start_as_current_span("chat gpt-4o"):
            return "answer"

    llm("q")
    with app_tracer.start_as_current_span("unrelated"):
        pass
    assert names(ours) == ["chat gpt-4o", "llm"]
    chat = next(s for s in ours.get_finished_spans() if s.name == "chat gpt-4o")
    assert chat.parent.span_id == next(s for s in ours.get_finished_spans() if s.name == "llm").context.span_id


def test_explicit_provider_is_used_without_touching_the_global(fresh_global_otel: None) -> None:
    provider, user_spans = user_provider()
    assert ragmon.init(exporter="none", tracer_provider=provider) is provider
    assert isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)
    rag("q")
    assert names(user_spans) == sorted(["qa", "search", "generate"])
    assert user_spans.get_finished_spans()[0].dropped_attributes == 0


def test_builds_and_installs_its_own_provider_when_none_is_set(fresh_global_otel: None) -> None:
    ours = InMemorySpanExporter()
    provider = ragmon.init(service_name="support-bot", exporter="none", span_processor=SimpleSpanProcessor(ours))
    assert isinstance(provider, TracerProvider)
    assert trace.get_tracer_provider() is provider
    with trace.get_tracer("app").start_as_current_span("app-span"):
        rag("q")
    # ragmon's own provider exports the application's spans too (one pipeline for the app)
    assert names(ours) == sorted(["app-span", "qa", "search", "generate"])
    root = next(s for s in ours.get_finished_spans() if s.name == "qa")
    assert root.resource.attributes[sc.SERVICE_NAME] == "support-bot"
    assert root.resource.attributes[sc.RAGMON_SDK_VERSION] == ragmon.__version__
    assert root.instrumentation_scope.name == "ragmon"


def test_service_name_from_otel_env(fresh_global_otel: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_SERVICE_NAME", "from-env")
    ours = InMemorySpanExporter()
    ragmon.init(exporter="none", span_processor=SimpleSpanProcessor(ours), set_global=False)
    rag("q")
    assert ours.get_finished_spans()[0].resource.attributes[sc.SERVICE_NAME] == "from-env"


def test_non_sdk_global_provider_gets_a_private_provider(fresh_global_otel: None) -> None:
    trace.set_tracer_provider(trace.NoOpTracerProvider())
    ours = InMemorySpanExporter()
    provider = ragmon.init(exporter="none", span_processor=SimpleSpanProcessor(ours))
    assert isinstance(provider, TracerProvider)
    assert isinstance(trace.get_tracer_provider(), trace.NoOpTracerProvider)
    rag("q")
    assert names(ours) == sorted(["qa", "search", "generate"])


def test_without_init_spans_follow_the_global_provider(fresh_global_otel: None) -> None:
    assert rag("q") == "answer"  # no provider at all: plain calls, nothing recorded
    provider, user_spans = user_provider()
    trace.set_tracer_provider(provider)
    rag("q")
    assert names(user_spans) == sorted(["qa", "search", "generate"])
    assert next(s for s in user_spans.get_finished_spans() if s.name == "search").dropped_attributes == 0


# --- init twice / shutdown ---------------------------------------------------------------------------
def test_init_twice_does_not_double_export_on_a_user_provider(fresh_global_otel: None) -> None:
    provider, _ = user_provider()
    trace.set_tracer_provider(provider)
    first, second, third = InMemorySpanExporter(), InMemorySpanExporter(), InMemorySpanExporter()
    ragmon.init(exporter="none", span_processor=SimpleSpanProcessor(first))
    ragmon.init(exporter="none", span_processor=SimpleSpanProcessor(second))
    ragmon.init(exporter="none", span_processor=SimpleSpanProcessor(third))
    rag("q")
    assert names(first) == names(second) == []
    assert names(third) == sorted(["qa", "search", "generate"])  # once each
    assert len(provider._active_span_processor._span_processors) == 2  # the user's + ragmon's one


def test_init_twice_does_not_double_export_on_its_own_global_provider(fresh_global_otel: None) -> None:
    mem = InMemorySpanExporter()
    p1 = ragmon.init(service_name="a", exporter="none", span_processor=SimpleSpanProcessor(mem))
    p2 = ragmon.init(service_name="a", exporter="none", span_processor=SimpleSpanProcessor(mem))
    assert p1 is p2 is trace.get_tracer_provider()
    rag("q")
    assert names(mem) == sorted(["qa", "search", "generate"])


def test_shutdown_flushes_and_leaves_the_users_provider_running(fresh_global_otel: None) -> None:
    provider, user_spans = user_provider()
    trace.set_tracer_provider(provider)
    ours = InMemorySpanExporter()
    # a batch processor that would not export on its own for an hour
    ragmon.init(exporter="none", span_processor=BatchSpanProcessor(ours, schedule_delay_millis=3_600_000))
    rag("q")
    assert ragmon.shutdown() is True
    assert names(ours) == sorted(["qa", "search", "generate"])
    assert ragmon.shutdown() is True  # idempotent
    rag("q")  # still works after shutdown; the user's provider still exports
    assert len(user_spans.get_finished_spans()) == 6
    assert len(ours.get_finished_spans()) == 3


def test_flush_exports_pending_spans_without_shutting_down(no_global: None) -> None:
    ours = InMemorySpanExporter()
    ragmon.init(exporter="none", span_processor=BatchSpanProcessor(ours, schedule_delay_millis=3_600_000),
                set_global=False)
    rag("q")
    assert ragmon.flush() is True
    assert names(ours) == sorted(["qa", "search", "generate"])
    rag("q")
    assert ragmon.flush() is True
    assert len(ours.get_finished_spans()) == 6


# --- exporter selection ---------------------------------------------------------------------------------
@pytest.fixture
def no_global(fresh_global_otel: None) -> Iterator[None]:
    yield


def test_default_exporter_is_otlp_to_the_local_agent(no_global: None) -> None:
    ragmon.init(service_name="s", set_global=False)
    exporter = setup.active_exporter()
    assert isinstance(exporter, OTLPSpanExporter)
    assert exporter._endpoint == "http://127.0.0.1:4318/v1/traces"


def test_otel_endpoint_env_is_honoured(no_global: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector.internal:4318")
    ragmon.init(set_global=False)
    assert setup.active_exporter()._endpoint == "http://collector.internal:4318/v1/traces"  # type: ignore[union-attr]
    ragmon.init(endpoint="http://127.0.0.1:9999/v1/traces", set_global=False)  # explicit wins
    assert setup.active_exporter()._endpoint == "http://127.0.0.1:9999/v1/traces"  # type: ignore[union-attr]


@pytest.mark.parametrize(("env", "expected"), [("console", ConsoleSpanExporter), ("NONE", type(None)),
                                               ("otlp", OTLPSpanExporter), ("bogus", OTLPSpanExporter)])
def test_exporter_from_env(no_global: None, monkeypatch: pytest.MonkeyPatch, env: str, expected: type) -> None:
    monkeypatch.setenv(_runtime.ENV_EXPORTER, env)
    ragmon.init(set_global=False)
    exporter = setup.active_exporter()
    assert type(exporter) is expected if expected is not OTLPSpanExporter else isinstance(exporter, expected)


def test_explicit_exporter_beats_env(no_global: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(_runtime.ENV_EXPORTER, "console")
    ragmon.init(exporter="none", set_global=False)
    assert setup.active_exporter() is None


def test_bad_explicit_arguments_fail_at_init() -> None:
    with pytest.raises(ConfigError, match="exporter"):
        ragmon.init(exporter="jaeger", set_global=False)
    with pytest.raises(ConfigError, match="content_rate"):
        ragmon.init(content_rate=1.5, exporter="none", set_global=False)
    with pytest.raises(ConfigError, match="max_documents"):
        ragmon.init(max_documents=0, exporter="none", set_global=False)
    with pytest.raises(TypeError, match="Kafka options need exporter='kafka'"):
        ragmon.init(exporter="none", bootstrap_servers="x:9092", set_global=False)


def test_kafka_exporter_is_imported_lazily_with_env_defaults(no_global: None, monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[dict[str, Any]] = []

    class RecordingKafkaExporter(SpanExporter):
        def __init__(self, **kwargs: Any) -> None:
            made.append(kwargs)

        def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    module = types.ModuleType("ragmon.sdk.kafka_exporter")
    module.KafkaSpanExporter = RecordingKafkaExporter  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "ragmon.sdk.kafka_exporter", module)
    monkeypatch.setenv("RAGMON_KAFKA_BOOTSTRAP_SERVERS", "broker-1:9092,broker-2:9092")
    monkeypatch.setenv("RAGMON_KAFKA_TOPICS", "spans_a,spans_b")
    monkeypatch.setenv("RAGMON_KAFKA_SECURITY_PROTOCOL", "sasl_ssl")
    monkeypatch.setenv("RAGMON_KAFKA_SASL_USERNAME", "app")
    monkeypatch.setenv("RAGMON_KAFKA_COMPRESSION", "zstd")
    ragmon.init(exporter="kafka", compression="lz4", set_global=False)
    assert made == [{"bootstrap_servers": "broker-1:9092,broker-2:9092", "topic": "spans_a", "compression": "lz4",
                     "security_protocol": "SASL_SSL", "sasl_plain_username": "app"}]
    monkeypatch.setenv(_runtime.ENV_EXPORTER, "kafka")
    monkeypatch.setenv("RAGMON_KAFKA_TOPIC", "spans_exact")
    ragmon.init(bootstrap_servers="explicit:9092", set_global=False)
    assert made[-1] == {"bootstrap_servers": "explicit:9092", "topic": "spans_exact", "compression": "zstd",
                        "security_protocol": "SASL_SSL", "sasl_plain_username": "app"}


def test_unavailable_exporter_is_survived(no_global: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ragmon.sdk.kafka_exporter", None)  # import fails
    before = _runtime.internal_error_counts().get("exporter_setup", 0)
    mem = InMemorySpanExporter()
    ragmon.init(exporter="kafka", span_processor=SimpleSpanProcessor(mem), set_global=False)
    assert rag("q") == "answer"
    assert names(mem) == sorted(["qa", "search", "generate"])
    assert _runtime.internal_error_counts()["exporter_setup"] == before + 1


def test_real_kafka_exporter_with_an_unreachable_broker_never_blocks_the_app(no_global: None) -> None:
    pytest.importorskip("aiokafka")
    from ragmon.sdk.kafka_exporter import KafkaSpanExporter

    port = free_port()  # nobody listens on it
    ragmon.init(exporter="kafka", bootstrap_servers=f"127.0.0.1:{port}", set_global=False)
    exporter = setup.active_exporter()
    assert isinstance(exporter, KafkaSpanExporter) and exporter.bootstrap_servers == f"127.0.0.1:{port}"
    assert rag("q") == "answer"
    assert ragmon.shutdown(timeout_millis=500) is False  # nothing could be delivered; bounded, not hung
    exporter.shutdown(timeout_millis=100)  # stop its retry loop now rather than in the background


# --- kill switch ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("how", ["env", "arg"])
def test_kill_switch(no_global: None, monkeypatch: pytest.MonkeyPatch, how: str) -> None:
    mem = InMemorySpanExporter()
    if how == "env":
        monkeypatch.setenv(_runtime.ENV_ENABLED, "false")
        result = ragmon.init(exporter="none", span_processor=SimpleSpanProcessor(mem), set_global=False)
    else:
        result = ragmon.init(exporter="none", span_processor=SimpleSpanProcessor(mem), set_global=False,
                             enabled=False)
    assert result is None
    assert rag("q") == "answer"
    with ragmon.span("retriever") as s:
        s.set_documents(["x"])
    assert ragmon.record_feedback("negative") is False
    assert names(mem) == []


# --- the SDK never raises into the app ---------------------------------------------------------------
class RaisingExporter(SpanExporter):
    def __init__(self) -> None:
        self.calls = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.calls += 1
        raise OSError("disk full")


class RaisingProcessor(SpanProcessor):
    def __init__(self, where: str) -> None:
        self.where = where

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        if self.where == "start":
            raise RuntimeError("processor on_start bug")

    def on_end(self, span: ReadableSpan) -> None:
        if self.where == "end":
            raise RuntimeError("processor on_end bug")


def test_failing_exporter_does_not_reach_the_app(no_global: None) -> None:
    exporter = RaisingExporter()
    ragmon.init(exporter="none", span_processor=SimpleSpanProcessor(exporter), set_global=False)
    assert rag("q") == "answer"
    assert exporter.calls == 3


@pytest.mark.parametrize("where", ["start", "end"])
def test_failing_processor_of_ragmon_is_contained(no_global: None, where: str) -> None:
    before = _runtime.internal_error_counts().get("span_processor", 0)
    ragmon.init(exporter="none", span_processor=RaisingProcessor(where), set_global=False)
    assert rag("q") == "answer"
    assert _runtime.internal_error_counts()["span_processor"] == before + 3


@pytest.mark.parametrize("where", ["start", "end"])
def test_failing_processor_of_the_application_is_contained(no_global: None, where: str) -> None:
    provider, _ = user_provider()
    provider.add_span_processor(RaisingProcessor(where))  # not ragmon's: the SDK would propagate it
    ragmon.init(exporter="none", tracer_provider=provider)
    kind = "span_start" if where == "start" else "span_end"
    before = _runtime.internal_error_counts().get(kind, 0)
    assert rag("q") == "answer"
    assert _runtime.internal_error_counts()[kind] == before + 3


def test_user_exception_still_wins_when_the_sdk_fails_too(no_global: None) -> None:
    provider, _ = user_provider()
    provider.add_span_processor(RaisingProcessor("end"))
    ragmon.init(exporter="none", tracer_provider=provider)
    boom = LookupError("no such index")

    @ragmon.retriever
    def broken(query: str) -> list[str]:
        raise boom

    with pytest.raises(LookupError) as info:
        broken("q")
    assert info.value is boom


# --- real OTLP/HTTP ------------------------------------------------------------------------------------
def test_real_otlp_http_export(no_global: None, collector: tuple[str, list[Any]]) -> None:
    endpoint, received = collector
    ragmon.init(service_name="otlp-test", endpoint=endpoint, set_global=False)
    assert rag("What is ragmon?") == "answer"
    assert ragmon.shutdown() is True
    assert received, "the collector got nothing"
    spans: dict[str, Any] = {}
    for path, headers, body in received:
        assert path == "/v1/traces"
        assert headers["content-type"] == "application/x-protobuf"
        if headers.get("content-encoding") == "gzip":
            body = gzip.decompress(body)
        request = ExportTraceServiceRequest.FromString(body)
        for resource_spans in request.resource_spans:
            resource = {kv.key: kv.value.string_value for kv in resource_spans.resource.attributes}
            assert resource[sc.SERVICE_NAME] == "otlp-test"
            for scope_spans in resource_spans.scope_spans:
                assert scope_spans.scope.name == "ragmon"
                for span in scope_spans.spans:
                    spans[span.name] = span
    assert sorted(spans) == sorted(["qa", "search", "generate"])
    retr = spans["search"]
    assert retr.dropped_attributes_count == 0
    attrs = {kv.key: kv.value for kv in retr.attributes}
    assert attrs[sc.SPAN_KIND].string_value == sc.KIND_RETRIEVER
    assert attrs[sc.INPUT_VALUE].string_value == "What is ragmon?"
    assert attrs[sc.RAGMON_DOCUMENT_COUNT].int_value == 40
    assert attrs[sc.retrieval_document_attr(39, sc.DOCUMENT_ID)].string_value == "doc-39"
    assert attrs[sc.retrieval_document_attr(39, sc.DOCUMENT_SCORE)].double_value == 0.5
    assert attrs[sc.RAGMON_CONTENT_SAMPLED].bool_value is True
    assert retr.parent_span_id == spans["qa"].span_id
    assert spans["qa"].parent_span_id == b""
