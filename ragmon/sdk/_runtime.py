"""Process-wide SDK state: settings, the tracer ragmon's spans use, and internal-error accounting.

Decorated functions read this state at *call* time, so ``@ragmon.retriever`` may run at import
time, before ``ragmon.init()``. Until ``init()`` runs, ragmon's spans go to whatever global
TracerProvider OpenTelemetry has (a no-op one when nobody configured OpenTelemetry).

Rule of the house: the SDK never raises into the host app. Every internal failure goes through
:func:`internal_error`, which counts it by kind and logs the first occurrence of each kind.
"""

from __future__ import annotations

import logging
import os
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from opentelemetry import trace

from .. import env
from .._log import LogOnce
from .._version import __version__
from ..doc_ids import METADATA_ID_KEYS

logger = logging.getLogger("ragmon.sdk")
_log_once = LogOnce(logger)

TRACER_NAME = "ragmon"

# --- environment variables (explicit init() argument > env var > default) ----------------------
# (the names and their meaning live in ragmon/env.py)
ENV_ENABLED = env.SDK_ENABLED
ENV_EXPORTER = env.SDK_EXPORTER
ENV_CONTENT_RATE = env.SDK_CONTENT_RATE
ENV_MAX_FIELD_CHARS = env.SDK_MAX_FIELD_CHARS
ENV_MAX_DOCUMENTS = env.SDK_MAX_DOCUMENTS
ENV_DOC_ID_KEYS = env.DOC_ID_KEYS

DEFAULT_MAX_FIELD_CHARS = 16_384
DEFAULT_MAX_DOCUMENTS = 128
MIN_FIELD_CHARS = 64  # room for the truncation marker plus some text
ATTRIBUTES_PER_DOCUMENT = 4  # id, content, score, metadata
ATTRIBUTE_HEADROOM = 64  # kind, stage, pipeline, question, answer, user attributes, ...

RedactHook = Callable[[str, str], "str | None"]


@dataclass(frozen=True, slots=True)
class SdkSettings:
    enabled: bool = True
    content_rate: float = 1.0
    max_field_chars: int = DEFAULT_MAX_FIELD_CHARS
    max_documents: int = DEFAULT_MAX_DOCUMENTS
    redact: RedactHook | None = None
    doc_id_keys: tuple[str, ...] = METADATA_ID_KEYS

    @property
    def attribute_limit(self) -> int:
        """Attribute-count limit that lets a span carry ``max_documents`` documents in full."""
        return self.max_documents * ATTRIBUTES_PER_DOCUMENT + ATTRIBUTE_HEADROOM


# --- internal errors -----------------------------------------------------------------------------
_error_counts: Counter[str] = Counter()
_error_lock = threading.Lock()


def internal_error(kind: str, exc: BaseException | None = None, detail: str = "", count: int = 1) -> None:
    """Count an SDK-internal failure and log its first occurrence. Never raises."""
    try:
        with _error_lock:
            _error_counts[kind] += count
        message = "ragmon SDK: %s failed%s; the application is unaffected"
        if exc is not None:
            _log_once.warning(kind, message + ": %r", kind, f" ({detail})" if detail else "", exc)
        else:
            _log_once.warning(kind, message, kind, f" ({detail})" if detail else "")
    except Exception:  # logging itself failed: nothing else we can do
        pass


def internal_error_counts() -> dict[str, int]:
    """Internal failures by kind since the process started (for diagnostics and tests)."""
    with _error_lock:
        return dict(_error_counts)


# --- env parsing: a bad value is logged and the default used (an env typo must not crash an app) --
def _env_float(name: str, default: float, lo: float, hi: float) -> float:
    raw = os.environ.get(name)
    if raw is None or not raw.strip():
        return default
    try:
        value = float(raw)
        if not lo <= value <= hi:
            raise ValueError(f"must be in [{lo}, {hi}]")
        return value
    except ValueError as exc:
        _log_once.warning(f"env:{name}", "ragmon SDK: ignoring %s=%r (%s); using %s", name, raw, exc, default)
        return default


def _env_int(name: str, default: int, lo: int) -> int:
    raw = os.environ.get(name)
    if raw is None or not raw.strip():
        return default
    try:
        value = int(raw)
        if value < lo:
            raise ValueError(f"must be >= {lo}")
        return value
    except ValueError as exc:
        _log_once.warning(f"env:{name}", "ragmon SDK: ignoring %s=%r (%s); using %s", name, raw, exc, default)
        return default


def _env_keys(name: str, default: tuple[str, ...]) -> tuple[str, ...]:
    raw = os.environ.get(name)
    if raw is None or not raw.strip():
        return default
    keys = tuple(part.strip() for part in raw.split(",") if part.strip())
    if not keys:
        _log_once.warning(f"env:{name}", "ragmon SDK: ignoring %s=%r (no key named); using %s", name, raw, default)
        return default
    return keys


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None or not raw.strip():
        return default
    try:
        return env.parse_bool(raw)
    except ValueError:
        _log_once.warning(f"env:{name}", "ragmon SDK: ignoring %s=%r (expected true/false)", name, raw)
        return default


def settings_from_env() -> SdkSettings:
    return SdkSettings(
        enabled=env_bool(ENV_ENABLED, True),
        content_rate=_env_float(ENV_CONTENT_RATE, 1.0, 0.0, 1.0),
        max_field_chars=_env_int(ENV_MAX_FIELD_CHARS, DEFAULT_MAX_FIELD_CHARS, MIN_FIELD_CHARS),
        max_documents=_env_int(ENV_MAX_DOCUMENTS, DEFAULT_MAX_DOCUMENTS, 1),
        doc_id_keys=_env_keys(ENV_DOC_ID_KEYS, METADATA_ID_KEYS),
    )


# --- the tracer -----------------------------------------------------------------------------------
def raise_attribute_limit(tracer: Any, settings: SdkSettings, provider: Any = None) -> Any:
    """Give ragmon's own tracer an attribute-count limit that holds ``max_documents`` documents.

    The OpenTelemetry SDK keeps at most 128 attributes per span by default, which silently drops
    documents from a retriever span with ~30 results. Span limits live on the SDK ``Tracer``, and
    ragmon's tracer (instrumentation scope ``ragmon``) only ever creates ragmon's spans, so we raise
    the count limit there and nowhere else: the application's other spans keep their limits. The
    value-length limit is left as configured (ragmon cuts text itself, with a marker, below it).
    Works for any SDK TracerProvider, ragmon's or the user's; for other providers it is a no-op.
    """
    try:
        from opentelemetry.sdk.trace import SpanLimits
        from opentelemetry.sdk.trace import Tracer as SdkTracer

        if not isinstance(tracer, SdkTracer):
            return tracer
        current = tracer._span_limits
        wanted = settings.attribute_limit
        if current.max_span_attributes is not None and current.max_span_attributes < wanted:
            tracer._span_limits = SpanLimits(
                max_span_attributes=wanted,
                max_attributes=max(current.max_attributes or 0, wanted),
                max_events=current.max_events if current.max_events is not None else SpanLimits.UNSET,
                max_links=current.max_links if current.max_links is not None else SpanLimits.UNSET,
                max_event_attributes=_or_unset(current.max_event_attributes),
                max_link_attributes=_or_unset(current.max_link_attributes),
                max_attribute_length=_or_unset(current.max_attribute_length),
                max_span_attribute_length=_or_unset(current.max_span_attribute_length),
            )
    except Exception as exc:
        internal_error("span_limits", exc)
    return tracer


def _or_unset(value: int | None) -> int:
    from opentelemetry.sdk.trace import SpanLimits

    return SpanLimits.UNSET if value is None else value


def value_length_limit(tracer: Any) -> int | None:
    """The tracer's per-attribute value-length limit, when it has one."""
    limits = getattr(tracer, "_span_limits", None)
    return getattr(limits, "max_span_attribute_length", None) if limits is not None else None


class _Runtime:
    """Mutable process state behind a lock; reads on the hot path are plain attribute loads."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.settings = settings_from_env()
        self.initialized = False
        self._tracer: Any = None  # set by init(); None -> follow the global provider
        self._global_provider: Any = None  # provider the cached global tracer came from
        self._global_tracer: Any = None
        self.field_cap = self.settings.max_field_chars

    def tracer(self) -> Any:
        if self._tracer is not None:
            return self._tracer
        provider = trace.get_tracer_provider()
        if provider is not self._global_provider:
            with self.lock:
                tracer = provider.get_tracer(TRACER_NAME, __version__)
                self._global_tracer = raise_attribute_limit(tracer, self.settings)
                self._global_provider = provider
                self.field_cap = _effective_cap(self.settings, self._global_tracer)
        return self._global_tracer

    def configure(self, settings: SdkSettings, tracer: Any) -> None:
        with self.lock:
            self.settings = settings
            self._tracer = tracer
            self._global_provider = None
            self._global_tracer = None
            self.initialized = tracer is not None
            self.field_cap = _effective_cap(settings, tracer) if tracer is not None else settings.max_field_chars

    def reset(self) -> None:
        """Back to the state of a fresh import (settings from env, global tracer)."""
        self.configure(settings_from_env(), None)


def _effective_cap(settings: SdkSettings, tracer: Any) -> int:
    # Cut text ourselves (with a visible marker) before the SDK would cut it silently.
    limit = value_length_limit(tracer)
    if limit is not None and limit < settings.max_field_chars:
        return max(1, limit)
    return settings.max_field_chars


RUNTIME = _Runtime()


def with_overrides(base: SdkSettings, **changes: Any) -> SdkSettings:
    return replace(base, **{k: v for k, v in changes.items() if v is not None})
