"""Which TracerProvider carries ragmon's spans, and ragmon's one span processor on it.

See :mod:`ragmon.sdk.setup` for the resolution order (explicit provider, join the application's
SDK provider, build one, or a private one next to a foreign global provider).
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter

from .. import semconv as sc
from .._version import __version__
from . import _runtime

logger = logging.getLogger("ragmon.sdk")


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


STATE = _State()
PROCESSORS: weakref.WeakKeyDictionary[Any, RagmonSpanProcessor] = weakref.WeakKeyDictionary()


def _resource(service_name: str | None) -> Resource:
    attrs: dict[str, Any] = {sc.RAGMON_SDK_VERSION: __version__}
    if service_name:
        attrs[sc.SERVICE_NAME] = service_name  # explicit > OTEL_SERVICE_NAME > unknown_service
    return Resource.create(attrs)


def resolve_provider(tracer_provider: Any, service_name: str | None, set_global: bool) -> tuple[Any, bool]:
    """(provider, owned by ragmon?)."""
    if tracer_provider is not None:
        return tracer_provider, tracer_provider is STATE.owned_provider
    current = trace.get_tracer_provider()
    if STATE.owned_provider is not None and current is STATE.owned_provider:
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
        STATE.owned_is_global = trace.get_tracer_provider() is provider
    else:
        STATE.owned_is_global = False
        if not is_proxy:
            logger.info("ragmon SDK: the global TracerProvider is not the OpenTelemetry SDK's (%s); "
                        "ragmon uses a private provider", type(current).__name__)
    STATE.owned_provider = provider
    return provider, True


def processor_for(provider: Any, owned: bool) -> RagmonSpanProcessor | None:
    processor = PROCESSORS.get(provider)
    if processor is None:
        add = getattr(provider, "add_span_processor", None)
        if add is None:
            return None
        processor = RagmonSpanProcessor(None if owned else _runtime.TRACER_NAME)
        add(processor)
        PROCESSORS[provider] = processor
    return processor

