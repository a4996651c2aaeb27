"""``ragmon.init()`` and ``ragmon.shutdown()``: where ragmon's spans go.

Which TracerProvider carries ragmon's spans:

1. ``tracer_provider=`` given: that one.
2. Else, the application already set an OpenTelemetry SDK ``TracerProvider`` as the global one:
   ragmon **joins it** instead of replacing it. Its spans then sit inside the application's
   traces (same trace ids, correct parents, visible in the application's own backend, sampled by
   its sampler, resource from its provider), and ragmon adds one span processor that sends
   **only RAG traces** to ragmon's exporter: ragmon's spans (instrumentation scope ``ragmon``)
   and the application's spans of traces that contain one (so the agent sees the real root);
   the application's other traces are not shipped to the ragmon agent.
3. Else, nobody configured OpenTelemetry: ragmon builds its own ``TracerProvider`` (resource
   with ``service.name``) and, with ``set_global=True`` (default), makes it the global one so
   the application's other instrumentation joins the same traces.
4. Else (a global provider that is not the SDK's, e.g. a vendor's): ragmon uses a private
   provider of its own; spans still join the active trace through the OpenTelemetry context.

Call ``ragmon.init()`` *after* the application configured OpenTelemetry (or pass
``set_global=False``): OpenTelemetry lets the global provider be set only once.

In every case ragmon's own tracer gets an attribute-count limit big enough for
``max_documents`` documents (the SDK default of 128 attributes would silently drop documents
from a 30-document retrieval); other tracers keep their limits.

``init()`` may be called again: the previous exporter is flushed and detached first, so spans
are never exported twice. ``shutdown()`` flushes and detaches, within its timeout even when the
backend is down; it never shuts down a provider that belongs to the application. It also runs
at interpreter exit, waiting at most ``EXIT_FLUSH_MILLIS`` (2 s) in all for pending spans: with
the agent down, process exit is delayed by at most that much, never by OpenTelemetry's retry loop.

The OTLP exporter (``AgentSpanExporter``, an ``OTLPSpanExporter``) sends each batch with a short
timeout (``DEFAULT_EXPORT_TIMEOUT_S``, 1 s, unless ``OTEL_EXPORTER_OTLP_(TRACES_)TIMEOUT`` is set)
and, when the agent is unreachable or answers an error, logs **one** line on the ``ragmon.sdk``
logger (and one when it is reachable again) instead of OpenTelemetry's per-batch retry warnings.
"""

from __future__ import annotations

import atexit
import logging
import os
import socket
import threading
import urllib.parse
import weakref
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter

from .. import env
from .. import semconv as sc
from .._version import __version__
from ..errors import ConfigError
from . import _runtime

logger = logging.getLogger("ragmon.sdk")

EXPORTERS = ("otlp", "console", "none", "kafka")
DEFAULT_EXPORTER = "otlp"
DEFAULT_OTLP_ENDPOINT = "http://127.0.0.1:4318/v1/traces"
EXIT_FLUSH_MILLIS = 2_000  # at interpreter exit, wait at most this long in all for pending spans (then give up)
DEFAULT_EXPORT_TIMEOUT_S = 1.0  # per OTLP batch, unless OTEL_EXPORTER_OTLP_(TRACES_)TIMEOUT is set
_OTLP_TIMEOUT_ENVS = ("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "OTEL_EXPORTER_OTLP_TIMEOUT")
_OTLP_ENDPOINT_ENVS = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
ENV_KAFKA_BOOTSTRAP = env.KAFKA_BOOTSTRAP_SERVERS
ENV_KAFKA_TOPIC = env.KAFKA_TOPIC
ENV_KAFKA_TOPICS = env.KAFKA_TOPICS  # the agent's list; the exporter writes to its first topic
DEFAULT_KAFKA_BOOTSTRAP = "127.0.0.1:9092"
# KafkaSpanExporter keyword <- env var (the same variables the agent's Kafka source reads)
KAFKA_ENV_OPTIONS: Mapping[str, str] = env.KAFKA_EXPORTER_OPTIONS


class RagmonSpanProcessor(SpanProcessor):
    """ragmon's one processor per provider: forwards spans to the current exporter pipeline.

    Its delegates are swapped by ``init()``/``shutdown()`` (an SDK provider cannot remove a
    processor), which is what keeps a second ``init()`` from exporting twice. A delegate that
    raises is counted and logged once, never propagated into the application's ``span.end()``.

    With ``only_scope`` set (ragmon joined the application's provider) it forwards only *RAG
    traces*: spans of that instrumentation scope, plus the application's spans of any trace in
    which a ragmon span has started (e.g. the HTTP server span around the pipeline, which is the
    trace's root and lets the agent close the trace at once, or an LLM client span inside the
    generator). The application's other traces are not shipped to the ragmon agent. The set of
    RAG trace ids is bounded (``max_traces``, oldest forgotten first).
    """

    def __init__(self, only_scope: str | None, max_traces: int = 16_384) -> None:
        self._only_scope = only_scope
        self._delegates: tuple[SpanProcessor, ...] = ()
        self._rag_traces: OrderedDict[int, None] = OrderedDict()
        self._max_traces = max_traces
        self._lock = threading.Lock()

    @property
    def delegates(self) -> tuple[SpanProcessor, ...]:
        return self._delegates

    def set_delegates(self, delegates: Sequence[SpanProcessor]) -> None:
        self._delegates = tuple(delegates)

    def _wanted(self, span: ReadableSpan, starting: bool) -> bool:
        if self._only_scope is None:
            return True
        scope = span.instrumentation_scope
        context = span.context
        trace_id = context.trace_id if context is not None else 0
        if scope is not None and scope.name == self._only_scope:
            if starting:
                with self._lock:
                    self._rag_traces[trace_id] = None
                    self._rag_traces.move_to_end(trace_id)
                    if len(self._rag_traces) > self._max_traces:
                        self._rag_traces.popitem(last=False)
            return True
        return trace_id in self._rag_traces

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        delegates = self._delegates
        if delegates and self._wanted(span, starting=True):
            for delegate in delegates:
                try:
                    delegate.on_start(span, parent_context=parent_context)
                except Exception as exc:
                    _runtime.internal_error("span_processor", exc)

    def on_end(self, span: ReadableSpan) -> None:
        delegates = self._delegates
        if delegates and self._wanted(span, starting=False):
            for delegate in delegates:
                try:
                    delegate.on_end(span)
                except Exception as exc:
                    _runtime.internal_error("span_processor", exc)

    def shutdown(self) -> None:
        delegates, self._delegates = self._delegates, ()
        for delegate in delegates:
            try:
                delegate.shutdown()
            except Exception as exc:
                _runtime.internal_error("span_processor_shutdown", exc)

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        ok = True
        for delegate in self._delegates:
            try:
                ok = bool(delegate.force_flush(timeout_millis)) and ok
            except Exception as exc:
                _runtime.internal_error("span_processor_flush", exc)
                ok = False
        return ok


class _State:
    def __init__(self) -> None:
        self.processor: RagmonSpanProcessor | None = None  # the one carrying our delegates now
        self.provider: Any = None  # provider ragmon's spans go to now
        self.exporter: SpanExporter | None = None
        self.user_processor: SpanProcessor | None = None  # init(span_processor=...)
        self.owned_provider: TracerProvider | None = None  # built by ragmon
        self.owned_is_global = False
        self.atexit_registered = False


_STATE = _State()
_PROCESSORS: weakref.WeakKeyDictionary[Any, RagmonSpanProcessor] = weakref.WeakKeyDictionary()


# --- settings -------------------------------------------------------------------------------------
def _settings(content_rate: float | None, redact: Any, max_field_chars: int | None,
              max_documents: int | None, enabled: bool | None) -> _runtime.SdkSettings:
    if content_rate is not None and not (isinstance(content_rate, int | float) and 0.0 <= content_rate <= 1.0):
        raise ConfigError("content_rate", f"must be a number in [0, 1], got {content_rate!r}")
    if max_field_chars is not None and (not isinstance(max_field_chars, int)
                                        or max_field_chars < _runtime.MIN_FIELD_CHARS):
        raise ConfigError("max_field_chars", f"must be an int >= {_runtime.MIN_FIELD_CHARS}, got {max_field_chars!r}")
    if max_documents is not None and (not isinstance(max_documents, int) or max_documents < 1):
        raise ConfigError("max_documents", f"must be an int >= 1, got {max_documents!r}")
    if redact is not None and not callable(redact):
        raise ConfigError("redact", f"must be callable(field_name, text) -> str | None, got {redact!r}")
    base = _runtime.settings_from_env()
    return _runtime.with_overrides(
        base,
        enabled=enabled,
        content_rate=float(content_rate) if content_rate is not None else None,
        max_field_chars=max_field_chars,
        max_documents=max_documents,
        redact=redact,
    )


def _exporter_name(exporter: str | None) -> str:
    if exporter is not None:
        name = str(exporter).strip().lower()
        if name not in EXPORTERS:
            raise ConfigError("exporter", f"must be one of {', '.join(EXPORTERS)}; got {exporter!r}")
        return name
    raw = os.environ.get(_runtime.ENV_EXPORTER, "").strip().lower()
    if not raw:
        return DEFAULT_EXPORTER
    if raw not in EXPORTERS:
        logger.warning("ragmon SDK: ignoring %s=%r (expected one of %s); using %s",
                       _runtime.ENV_EXPORTER, raw, ", ".join(EXPORTERS), DEFAULT_EXPORTER)
        return DEFAULT_EXPORTER
    return raw


def otlp_endpoint(endpoint: str | None) -> str | None:
    """Explicit endpoint > OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT (resolved by the SDK: None) >
    the local agent on 127.0.0.1 (not ``localhost``, which may resolve to IPv6 first)."""
    if endpoint:
        return endpoint
    if any(os.environ.get(name) for name in _OTLP_ENDPOINT_ENVS):
        return None
    return DEFAULT_OTLP_ENDPOINT


def build_exporter(name: str, endpoint: str | None, kafka_options: Mapping[str, Any]) -> SpanExporter | None:
    if name == "none":
        return None
    if name == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        return ConsoleSpanExporter()
    if name == "kafka":
        from .kafka_exporter import KafkaSpanExporter  # lazy: aiokafka only for Kafka users

        exporter: SpanExporter = KafkaSpanExporter(**kafka_exporter_options(kafka_options))
        return exporter
    timeout = None if any(os.environ.get(name) for name in _OTLP_TIMEOUT_ENVS) else DEFAULT_EXPORT_TIMEOUT_S
    return agent_span_exporter(otlp_endpoint(endpoint), timeout)


# --- the OTLP exporter: one clear line when the agent is unreachable --------------------------------
_OTEL_EXPORTER_LOGGER = "opentelemetry.exporter.otlp.proto.http.trace_exporter"
_quiet = threading.local()  # .active while *ragmon's* exporter exports on this thread


class _QuietFilter(logging.Filter):
    """Drops the OpenTelemetry exporter's own records while ragmon's exporter runs on this thread
    (the application's OTLP exporters log on the same logger and keep theirs); keeps the first."""

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(_quiet, "active", False):
            if not getattr(_quiet, "first", ""):  # the first says why (the last only "gave up")
                try:
                    _quiet.first = record.getMessage()
                except Exception:
                    _quiet.first = str(record.msg)
            return False
        return True


_QUIET_FILTER = _QuietFilter()


def _reason(message: str, endpoint: str) -> str:
    """A short reason from OpenTelemetry's log message (urllib3's are very long), else from a
    quick connection probe (OpenTelemetry may only say it gave up)."""
    lowered = message.lower()
    if "code: 404" in lowered:
        return ("HTTP 404: wrong path? the agent receives on /v1/traces; set OTEL_EXPORTER_OTLP_ENDPOINT to the "
                "base URL or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT to the full .../v1/traces URL")
    if "connection refused" in lowered or "failed to establish a new connection" in lowered:
        return "connection refused"
    if "code:" in lowered:
        return message if len(message) <= 160 else message[:157] + "..."
    try:
        url = urllib.parse.urlsplit(endpoint)
        port = url.port or (443 if url.scheme == "https" else 80)
        with socket.create_connection((url.hostname or "127.0.0.1", port), timeout=0.2):
            return "no answer in time"
    except ConnectionRefusedError:
        return "connection refused"
    except OSError as exc:
        return f"unreachable: {exc}"
    except Exception:
        return "export failed"


def agent_span_exporter(endpoint: str | None, timeout: float | None) -> SpanExporter:
    """An ``OTLPSpanExporter`` (subclass) that logs agent trouble once instead of per batch."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace.export import SpanExportResult

    class AgentSpanExporter(OTLPSpanExporter):
        """OTLP/HTTP to the ragmon agent. A failure is logged once on ``ragmon.sdk`` (and once more
        when the agent is reachable again); spans that could not be sent are dropped, as OTel does."""

        def __init__(self) -> None:
            super().__init__(endpoint=endpoint, timeout=timeout)
            self.failing = False
            self.failed_batches = 0
            otel_logger = logging.getLogger(_OTEL_EXPORTER_LOGGER)
            if _QUIET_FILTER not in otel_logger.filters:
                otel_logger.addFilter(_QUIET_FILTER)

        def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
            _quiet.active, _quiet.first = True, ""
            try:
                result = super().export(spans)
            finally:
                _quiet.active = False
            if result is SpanExportResult.SUCCESS:
                if self.failing:
                    self.failing = False
                    logger.warning("ragmon SDK: the ragmon agent at %s is reachable again", self._endpoint)
                return result
            self.failed_batches += 1
            if not self.failing:
                self.failing = True
                logger.warning("ragmon SDK: cannot send spans to the ragmon agent at %s (%s); %d span(s) dropped, "
                               "later ones are dropped silently until it is reachable. Is `ragmon agent` running? "
                               "Set OTEL_EXPORTER_OTLP_TRACES_ENDPOINT for another address.",
                               self._endpoint, _reason(getattr(_quiet, "first", ""), self._endpoint), len(spans))
            return result

    return AgentSpanExporter()


def kafka_exporter_options(explicit: Mapping[str, Any]) -> dict[str, Any]:
    """Explicit ``init(**kafka_options)`` > ``RAGMON_KAFKA_*`` env > the exporter's defaults."""
    options = dict(explicit)
    options.setdefault("bootstrap_servers", os.environ.get(ENV_KAFKA_BOOTSTRAP) or DEFAULT_KAFKA_BOOTSTRAP)
    topic = os.environ.get(ENV_KAFKA_TOPIC) or os.environ.get(ENV_KAFKA_TOPICS, "").split(",")[0].strip()
    if topic:
        options.setdefault("topic", topic)
    for key, variable in KAFKA_ENV_OPTIONS.items():
        value = os.environ.get(variable, "").strip()
        if value:
            options.setdefault(key, value.upper() if key == "security_protocol" else value)
    return options


# --- provider ------------------------------------------------------------------------------------
def _resource(service_name: str | None) -> Resource:
    attrs: dict[str, Any] = {sc.RAGMON_SDK_VERSION: __version__}
    if service_name:
        attrs[sc.SERVICE_NAME] = service_name  # explicit > OTEL_SERVICE_NAME > unknown_service
    return Resource.create(attrs)


def _resolve_provider(tracer_provider: Any, service_name: str | None, set_global: bool) -> tuple[Any, bool]:
    """(provider, owned by ragmon?)."""
    if tracer_provider is not None:
        return tracer_provider, tracer_provider is _STATE.owned_provider
    current = trace.get_tracer_provider()
    if _STATE.owned_provider is not None and current is _STATE.owned_provider:
        if service_name and current.resource.attributes.get(sc.SERVICE_NAME) != service_name:
            logger.warning("ragmon SDK: the global TracerProvider ragmon installed keeps service.name=%r; "
                           "a later init() cannot change it", current.resource.attributes.get(sc.SERVICE_NAME))
        return current, True
    if isinstance(current, TracerProvider):
        if service_name and current.resource.attributes.get(sc.SERVICE_NAME) != service_name:
            logger.info("ragmon SDK: joining the application's TracerProvider; its resource "
                        "(service.name=%r) applies to ragmon's spans", current.resource.attributes.get(sc.SERVICE_NAME))
        return current, False
    provider = TracerProvider(resource=_resource(service_name))
    is_proxy = isinstance(current, trace.ProxyTracerProvider)
    if set_global and is_proxy:
        trace.set_tracer_provider(provider)
        _STATE.owned_is_global = trace.get_tracer_provider() is provider
    else:
        _STATE.owned_is_global = False
        if not is_proxy:
            logger.info("ragmon SDK: the global TracerProvider is not the OpenTelemetry SDK's (%s); "
                        "ragmon uses a private provider", type(current).__name__)
    _STATE.owned_provider = provider
    return provider, True


def _processor_for(provider: Any, owned: bool) -> RagmonSpanProcessor | None:
    processor = _PROCESSORS.get(provider)
    if processor is None:
        add = getattr(provider, "add_span_processor", None)
        if add is None:
            return None
        processor = RagmonSpanProcessor(None if owned else _runtime.TRACER_NAME)
        add(processor)
        _PROCESSORS[provider] = processor
    return processor


# --- public -----------------------------------------------------------------------------------------
def init(
    service_name: str | None = None,
    *,
    exporter: str | None = None,
    endpoint: str | None = None,
    content_rate: float | None = None,
    redact: _runtime.RedactHook | None = None,
    max_field_chars: int | None = None,
    max_documents: int | None = None,
    span_processor: SpanProcessor | None = None,
    tracer_provider: Any = None,
    set_global: bool = True,
    enabled: bool | None = None,
    **kafka_options: Any,
) -> Any:
    """Configure ragmon's SDK; returns the TracerProvider ragmon's spans go to (None when disabled).

    Args:
        service_name: ``service.name`` of the resource ragmon creates (else ``OTEL_SERVICE_NAME``).
        exporter: ``otlp`` (default), ``console``, ``none`` or ``kafka``; env ``RAGMON_SDK_EXPORTER``.
        endpoint: OTLP/HTTP traces URL; else ``OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT``; else
            ``http://127.0.0.1:4318/v1/traces`` (the local ragmon agent). Other ``OTEL_EXPORTER_OTLP_*``
            and ``OTEL_BSP_*`` variables are honoured by the OpenTelemetry SDK itself.
        content_rate: fraction of traces, by trace id, that carry text; env ``RAGMON_SDK_CONTENT_RATE``.
        redact: ``hook(field_name, text) -> str | None`` run on every text field before it is
            attached; ``None`` drops the text; a hook that raises drops it too (fail closed).
        max_field_chars: cap per text field (env ``RAGMON_SDK_MAX_FIELD_CHARS``), cut text is marked.
        max_documents: most documents recorded per retriever span (env ``RAGMON_SDK_MAX_DOCUMENTS``).
        span_processor: an extra processor for ragmon's spans (e.g. a ``SimpleSpanProcessor`` over
            an in-memory exporter in tests); added next to the exporter's, use ``exporter="none"`` alone.
            ``shutdown()`` shuts it down; a later ``init()`` only flushes and detaches it.
        tracer_provider: use this provider instead of the global one (see the module docstring).
        set_global: when ragmon builds its own provider, make it OpenTelemetry's global provider.
        enabled: kill switch (env ``RAGMON_SDK_ENABLED``); False makes every decorator a plain call.
        **kafka_options: passed to ``KafkaSpanExporter`` when ``exporter="kafka"``.

    Bad explicit arguments raise :class:`ragmon.errors.ConfigError` at once; a bad environment
    value is logged and its default used; an exporter that cannot be built is logged and
    ragmon runs without it. Nothing here blocks.
    """
    settings = _settings(content_rate, redact, max_field_chars, max_documents, enabled)
    name = _exporter_name(exporter)
    if kafka_options and name != "kafka":
        raise TypeError(f"init() got unexpected keyword arguments {sorted(kafka_options)} "
                        f"(Kafka options need exporter='kafka')")
    runtime = _runtime.RUNTIME
    with runtime.lock:
        _detach_locked(final=False)
        if not settings.enabled:
            runtime.configure(settings, None)
            logger.info("ragmon SDK disabled (%s); decorators are plain calls", _runtime.ENV_ENABLED)
            return None
        try:
            span_exporter = build_exporter(name, endpoint, kafka_options)
        except Exception as exc:
            _runtime.internal_error("exporter_setup", exc, f"exporter {name!r} unavailable, spans not exported")
            span_exporter = None
        provider, owned = _resolve_provider(tracer_provider, service_name, set_global)
        delegates: list[SpanProcessor] = []
        if span_exporter is not None:
            delegates.append(BatchSpanProcessor(span_exporter))
        if span_processor is not None:
            delegates.append(span_processor)
        processor = _processor_for(provider, owned)
        if processor is not None:
            processor.set_delegates(delegates)
        elif delegates:
            logger.warning("ragmon SDK: %s cannot take span processors; ragmon's exporter is not attached",
                           type(provider).__name__)
        tracer = _runtime.raise_attribute_limit(provider.get_tracer(_runtime.TRACER_NAME, __version__), settings)
        _STATE.processor = processor
        _STATE.provider = provider
        _STATE.exporter = span_exporter
        _STATE.user_processor = span_processor
        runtime.configure(settings, tracer)
        if not _STATE.atexit_registered:
            atexit.register(shutdown, EXIT_FLUSH_MILLIS)
            _STATE.atexit_registered = True
        return provider


def _detach_locked(timeout_millis: int = 30_000, *, final: bool) -> bool:
    """Flush and detach the current delegates, within ``timeout_millis`` in all (at least 0.1 s).
    Processors ragmon built are shut down (which flushes them); a ``span_processor`` the caller
    passed in is only flushed unless ``final`` (``shutdown()``), so a second ``init()`` may be
    handed the same exporter again."""
    ok = True
    processor = _STATE.processor
    if processor is not None:
        delegates = processor.delegates
        processor.set_delegates(())  # stays attached to its provider, empty until the next init()
        to_stop = [d for d in delegates if final or d is not _STATE.user_processor]
        to_flush = [d for d in delegates if d not in to_stop]
        if delegates:
            ok = _finish_within(to_flush, to_stop, max(0.1, timeout_millis / 1000))
    owned = _STATE.owned_provider
    if owned is not None and _STATE.provider is owned and not _STATE.owned_is_global:
        owned.shutdown()  # a private provider of ours (its processor is empty now): nobody else uses it
        _PROCESSORS.pop(owned, None)
        _STATE.owned_provider = None
    _STATE.processor = None
    _STATE.provider = None
    _STATE.exporter = None
    _STATE.user_processor = None
    return ok


def _finish_within(to_flush: Sequence[SpanProcessor], to_stop: Sequence[SpanProcessor], timeout_s: float) -> bool:
    """Flush / shut processors down on a helper thread and wait at most ``timeout_s`` in all: an
    exporter stuck on an unreachable backend must not hold the application's exit hostage (and the
    SDK's ``BatchSpanProcessor.force_flush`` does not honour its timeout)."""
    done = threading.Event()
    results: list[bool] = []

    def run() -> None:
        for delegate in to_flush:
            try:
                results.append(bool(delegate.force_flush(int(timeout_s * 1000))))
            except Exception as exc:
                _runtime.internal_error("span_processor_flush", exc)
                results.append(False)
        for delegate in to_stop:
            try:
                if hasattr(delegate, "force_flush"):
                    results.append(bool(delegate.force_flush(int(timeout_s * 1000))))
                delegate.shutdown()
            except Exception as exc:
                _runtime.internal_error("span_processor_shutdown", exc)
                results.append(False)
        done.set()

    threading.Thread(target=run, name="ragmon-sdk-shutdown", daemon=True).start()
    if done.wait(timeout_s):
        return all(results)
    _runtime.internal_error("exporter_shutdown_timeout", None, f"exporter still busy after {timeout_s:.1f} s; "
                            "unsent spans are abandoned")
    return False


def shutdown(timeout_millis: int = 30_000) -> bool:
    """Flush ragmon's pending spans and detach its exporter. Safe to call twice; never raises.

    Returns False when the flush did not complete in time. The application's own provider
    (if ragmon joined one) is left running.
    """
    runtime = _runtime.RUNTIME
    try:
        with runtime.lock:
            ok = _detach_locked(timeout_millis, final=True)
            runtime.configure(runtime.settings, None)
            return ok
    except Exception as exc:
        _runtime.internal_error("shutdown", exc)
        return False


def flush(timeout_millis: int = 30_000) -> bool:
    """Export ragmon's pending spans now (e.g. before a short-lived job exits). Never raises."""
    try:
        processor = _STATE.processor
        return processor.force_flush(timeout_millis) if processor is not None else True
    except Exception as exc:
        _runtime.internal_error("flush", exc)
        return False


def active_exporter() -> SpanExporter | None:
    """The exporter the last ``init()`` built (None for ``exporter="none"`` or before init)."""
    return _STATE.exporter


def active_provider() -> Any:
    """The TracerProvider ragmon's spans go to since the last ``init()``."""
    return _STATE.provider
