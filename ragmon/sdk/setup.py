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
import threading
from collections.abc import Sequence
from typing import Any

from opentelemetry.sdk.trace import SpanProcessor
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter

from .._version import __version__
from ..errors import ConfigError
from . import _runtime
from ._exporters import (
    DEFAULT_EXPORT_TIMEOUT_S,
    DEFAULT_EXPORTER,
    DEFAULT_OTLP_ENDPOINT,
    EXPORTERS,
    agent_span_exporter,
    build_exporter,
    exporter_name,
    otlp_endpoint,
)
from ._kafka_options import (
    DEFAULT_KAFKA_BOOTSTRAP,
    ENV_KAFKA_BOOTSTRAP,
    ENV_KAFKA_TOPIC,
    ENV_KAFKA_TOPICS,
    KAFKA_ENV_OPTIONS,
    kafka_exporter_options,
)
from ._processor import PROCESSORS, STATE, RagmonSpanProcessor, processor_for, resolve_provider

__all__ = [
    "DEFAULT_EXPORTER",
    "DEFAULT_EXPORT_TIMEOUT_S",
    "DEFAULT_KAFKA_BOOTSTRAP",
    "DEFAULT_OTLP_ENDPOINT",
    "ENV_KAFKA_BOOTSTRAP",
    "ENV_KAFKA_TOPIC",
    "ENV_KAFKA_TOPICS",
    "EXIT_FLUSH_MILLIS",
    "EXPORTERS",
    "KAFKA_ENV_OPTIONS",
    "RagmonSpanProcessor",
    "active_exporter",
    "active_provider",
    "agent_span_exporter",
    "build_exporter",
    "flush",
    "init",
    "kafka_exporter_options",
    "otlp_endpoint",
    "shutdown",
]

logger = logging.getLogger("ragmon.sdk")

EXIT_FLUSH_MILLIS = 2_000  # at interpreter exit, wait at most this long in all for pending spans (then give up)


# --- settings -------------------------------------------------------------------------------------
def _settings(content_rate: float | None, redact: Any, max_field_chars: int | None,
              max_documents: int | None, enabled: bool | None,
              doc_id_keys: Sequence[str] | None = None) -> _runtime.SdkSettings:
    if content_rate is not None and not (isinstance(content_rate, int | float) and 0.0 <= content_rate <= 1.0):
        raise ConfigError("content_rate", f"must be a number in [0, 1], got {content_rate!r}")
    if max_field_chars is not None and (not isinstance(max_field_chars, int)
                                        or max_field_chars < _runtime.MIN_FIELD_CHARS):
        raise ConfigError("max_field_chars", f"must be an int >= {_runtime.MIN_FIELD_CHARS}, got {max_field_chars!r}")
    if max_documents is not None and (not isinstance(max_documents, int) or max_documents < 1):
        raise ConfigError("max_documents", f"must be an int >= 1, got {max_documents!r}")
    if redact is not None and not callable(redact):
        raise ConfigError("redact", f"must be callable(field_name, text) -> str | None, got {redact!r}")
    if doc_id_keys is not None and (isinstance(doc_id_keys, str) or not doc_id_keys
                                    or not all(isinstance(k, str) and k.strip() for k in doc_id_keys)):
        raise ConfigError("doc_id_keys", f"must be a non-empty sequence of metadata key names, got {doc_id_keys!r}")
    base = _runtime.settings_from_env()
    return _runtime.with_overrides(
        base,
        enabled=enabled,
        content_rate=float(content_rate) if content_rate is not None else None,
        max_field_chars=max_field_chars,
        max_documents=max_documents,
        redact=redact,
        doc_id_keys=tuple(k.strip() for k in doc_id_keys) if doc_id_keys is not None else None,
    )



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
    doc_id_keys: Sequence[str] | None = None,
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
        doc_id_keys: metadata keys that name a document that has no id, in order (``"source#"``: a
            source shared by chunks); env ``RAGMON_DOC_ID_KEYS``, the agent's setting of the same name.
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
    settings = _settings(content_rate, redact, max_field_chars, max_documents, enabled, doc_id_keys)
    name = exporter_name(exporter)
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
        provider, owned = resolve_provider(tracer_provider, service_name, set_global)
        delegates: list[SpanProcessor] = []
        if span_exporter is not None:
            delegates.append(BatchSpanProcessor(span_exporter))
        if span_processor is not None:
            delegates.append(span_processor)
        processor = processor_for(provider, owned)
        if processor is not None:
            processor.set_delegates(delegates)
        elif delegates:
            logger.warning("ragmon SDK: %s cannot take span processors; ragmon's exporter is not attached",
                           type(provider).__name__)
        tracer = _runtime.raise_attribute_limit(provider.get_tracer(_runtime.TRACER_NAME, __version__), settings)
        STATE.processor = processor
        STATE.provider = provider
        STATE.exporter = span_exporter
        STATE.user_processor = span_processor
        runtime.configure(settings, tracer)
        if not STATE.atexit_registered:
            atexit.register(shutdown, EXIT_FLUSH_MILLIS)
            STATE.atexit_registered = True
        return provider


def _detach_locked(timeout_millis: int = 30_000, *, final: bool) -> bool:
    """Flush and detach the current delegates, within ``timeout_millis`` in all (at least 0.1 s).
    Processors ragmon built are shut down (which flushes them); a ``span_processor`` the caller
    passed in is only flushed unless ``final`` (``shutdown()``), so a second ``init()`` may be
    handed the same exporter again."""
    ok = True
    processor = STATE.processor
    if processor is not None:
        delegates = processor.delegates
        processor.set_delegates(())  # stays attached to its provider, empty until the next init()
        to_stop = [d for d in delegates if final or d is not STATE.user_processor]
        to_flush = [d for d in delegates if d not in to_stop]
        if delegates:
            ok = _finish_within(to_flush, to_stop, max(0.1, timeout_millis / 1000))
    owned = STATE.owned_provider
    if owned is not None and STATE.provider is owned and not STATE.owned_is_global:
        owned.shutdown()  # a private provider of ours (its processor is empty now): nobody else uses it
        PROCESSORS.pop(owned, None)
        STATE.owned_provider = None
    STATE.processor = None
    STATE.provider = None
    STATE.exporter = None
    STATE.user_processor = None
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
        processor = STATE.processor
        return processor.force_flush(timeout_millis) if processor is not None else True
    except Exception as exc:
        _runtime.internal_error("flush", exc)
        return False


def active_exporter() -> SpanExporter | None:
    """The exporter the last ``init()`` built (None for ``exporter="none"`` or before init)."""
    return STATE.exporter


def active_provider() -> Any:
    """The TracerProvider ragmon's spans go to since the last ``init()``."""
    return STATE.provider
