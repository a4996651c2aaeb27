"""The manual form, for code that cannot be decorated, and user feedback.

::

    with ragmon.span("retriever", name="search", question=q) as s:
        docs = store.query(q)
        s.set_documents(docs)

    ragmon.record_feedback("negative")                        # inside a pipeline
    ragmon.record_feedback("negative", trace_id=saved_id)     # later, e.g. from a thumbs-down API
"""

from __future__ import annotations

import random
from types import TracebackType
from typing import Any, Literal

from opentelemetry import trace
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

from .. import semconv as sc
from . import _runtime
from .spans import RagSpan, current_pipeline, current_rag_span, start, static_attributes

_KINDS = {
    sc.STAGE_PIPELINE: sc.STAGE_PIPELINE,
    sc.KIND_CHAIN.lower(): sc.STAGE_PIPELINE,
    sc.STAGE_RETRIEVER: sc.STAGE_RETRIEVER,
    sc.STAGE_GENERATOR: sc.STAGE_GENERATOR,
    sc.KIND_LLM.lower(): sc.STAGE_GENERATOR,
}
FEEDBACK_SPAN_NAME = "ragmon.feedback"


def _stage_of(kind: str) -> str:
    stage = _KINDS.get(str(kind).strip().lower())
    if stage is None:
        raise ValueError(f"ragmon.span kind must be one of pipeline, retriever, generator; got {kind!r}")
    return stage


def _inert(stage: str, name: str) -> RagSpan:
    """A RagSpan whose methods do nothing (SDK disabled or failed to start a span)."""
    runtime = _runtime.RUNTIME
    return RagSpan(trace.INVALID_SPAN, stage, name, runtime.settings, runtime.field_cap, None)


class SpanContextManager:
    """Returned by :func:`span`; use with ``with`` or ``async with``."""

    __slots__ = ("_attrs", "_name", "_question", "_rag", "_stage")

    def __init__(self, stage: str, name: str, question: Any, attrs: dict[str, Any]) -> None:
        self._stage = stage
        self._name = name
        self._question = question
        self._attrs = attrs
        self._rag: RagSpan | None = None

    def __enter__(self) -> RagSpan:
        rag = None
        try:
            rag = start(self._stage, self._name, static_attributes(self._stage, self._attrs))
        except Exception as exc:  # e.g. a bad metadata value
            _runtime.internal_error("span_start", exc)
        if rag is None:
            rag = _inert(self._stage, self._name)
        else:
            rag.activate()
            if self._question is not None:
                rag.set_question(self._question)
        self._rag = rag
        return rag

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> Literal[False]:
        if self._rag is not None:
            self._rag.finish(exc)
        return False  # never swallow the application's exception

    async def __aenter__(self) -> RagSpan:
        return self.__enter__()

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> Literal[False]:
        return self.__exit__(exc_type, exc, tb)


def span(kind: str, name: str | None = None, *, question: Any = None, **attrs: Any) -> SpanContextManager:
    """Open a ragmon span by hand: ``kind`` is ``pipeline``, ``retriever`` or ``generator``
    (or the OpenInference ``CHAIN``/``RETRIEVER``/``LLM``). The block's exception, if any, is
    recorded and re-raised unchanged. Keyword attributes as for the decorators."""
    stage = _stage_of(kind)
    return SpanContextManager(stage, name or stage, question, attrs)


def current_span() -> RagSpan:
    """The innermost active ragmon span, or an inert one outside any (safe to call methods on)."""
    rag = current_rag_span()
    return rag if rag is not None else _inert(sc.STAGE_PIPELINE, "none")


def current_trace_id() -> str | None:
    """The current trace id as 32 hex characters (keep it to call ``record_feedback`` later)."""
    ctx = trace.get_current_span().get_span_context()
    return format(ctx.trace_id, "032x") if ctx.is_valid else None


def _feedback_value(value: Any) -> str | float | None:
    if isinstance(value, bool):
        return "positive" if value else "negative"
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str) and value.strip():
        return value.strip().lower()
    return None


def _parse_id(value: str | int, bits: int) -> int:
    number = value if isinstance(value, int) else int(str(value), 16)
    if not 0 < number < (1 << bits):
        raise ValueError(f"not a valid {bits}-bit id: {value!r}")
    return number


def record_feedback(value: str | float | bool, *, trace_id: str | int | None = None,
                    span_id: str | int | None = None, pipeline: str | None = None) -> bool:
    """Attach user feedback (``"positive"``/``"negative"``, a number, or a bool) as ``ragmon.feedback``.

    Without ``trace_id``: on the current pipeline span (the outermost one), else on the current
    ragmon span. With ``trace_id`` (hex or int; e.g. saved from ``current_trace_id()``): a small
    ``ragmon.feedback`` span is emitted into that trace, as a child of ``span_id`` when given.
    The agent uses feedback for priority sampling. Returns True when recorded; never raises.
    """
    if not _runtime.RUNTIME.settings.enabled:
        return False
    try:
        normalized = _feedback_value(value)
        if normalized is None:
            _runtime.internal_error("feedback_value", None, f"unsupported feedback {type(value).__name__}")
            return False
        if trace_id is None:
            pipe = current_pipeline()
            target = pipe.rag_span if pipe is not None else current_rag_span()
            if target is None:
                _runtime.internal_error("feedback_no_span", None, "no active ragmon span and no trace_id")
                return False
            target.set_feedback(normalized)
            return True
        parent = SpanContext(
            trace_id=_parse_id(trace_id, 128),
            span_id=_parse_id(span_id, 64) if span_id is not None else random.getrandbits(64) or 1,
            is_remote=True,
            trace_flags=TraceFlags(TraceFlags.SAMPLED),
        )
        attrs: dict[str, Any] = {sc.RAGMON_FEEDBACK: normalized}
        if pipeline:
            attrs[sc.RAGMON_PIPELINE] = pipeline
        ctx = trace.set_span_in_context(NonRecordingSpan(parent))
        _runtime.RUNTIME.tracer().start_span(FEEDBACK_SPAN_NAME, context=ctx, attributes=attrs).end()
        return True
    except Exception as exc:
        _runtime.internal_error("feedback", exc)
        return False
