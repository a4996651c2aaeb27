"""The exporter ragmon's spans go to: which one (``otlp``, ``console``, ``none``, ``kafka``), built how.

The OTLP exporter (``AgentSpanExporter``, an ``OTLPSpanExporter``) sends each batch with a short
timeout (``DEFAULT_EXPORT_TIMEOUT_S``) and, when the agent is unreachable or answers an error, logs
**one** line on the ``ragmon.sdk`` logger (and one when it is reachable again) instead of
OpenTelemetry's per-batch retry warnings. Heavy imports (the OTLP exporter, aiokafka) are lazy.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import urllib.parse
from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter

from ..errors import ConfigError
from . import _runtime
from ._kafka_options import kafka_exporter_options

logger = logging.getLogger("ragmon.sdk")

EXPORTERS = ("otlp", "console", "none", "kafka")
DEFAULT_EXPORTER = "otlp"
DEFAULT_OTLP_ENDPOINT = "http://127.0.0.1:4318/v1/traces"
DEFAULT_EXPORT_TIMEOUT_S = 1.0  # per OTLP batch, unless OTEL_EXPORTER_OTLP_(TRACES_)TIMEOUT is set
_OTLP_TIMEOUT_ENVS = ("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "OTEL_EXPORTER_OTLP_TIMEOUT")
_OTLP_ENDPOINT_ENVS = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")


def exporter_name(exporter: str | None) -> str:
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

