"""``RagSpan``: one pipeline / retriever / generator span and what it records.

Used by the decorators and by ``ragmon.span()``. Attributes are collected in a dict and set in
one call when the span ends (one lock round-trip in the OpenTelemetry SDK instead of dozens).
Every method swallows its own failures (counted and logged once by ``_runtime.internal_error``):
a bug or a strange value in here must never reach the application.

Content (question, document text and metadata, answer) is attached only when the trace id is
inside the content rate (``ragmon.sampling.in_sample``); ids, scores, counts and timings always
are. ``ragmon.pipeline`` is the name of the *outermost* enclosing pipeline, so every span of a
trace carries the same pipeline label, nested pipelines included.
"""

from __future__ import annotations

import threading
import traceback
from collections.abc import Iterable, Mapping, Sequence
from contextvars import ContextVar
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Status, StatusCode

from .. import semconv as sc
from ..sampling import in_sample
from . import _runtime
from .attributes import user_attributes
from .content import answer_text, apply_policy, chunk_text, question_text
from .documents import metadata_json, to_records

EXCEPTION_STACKTRACE = "exception.stacktrace"  # OTel semantic convention, written by record_exception
KIND_BY_STAGE: Mapping[str, str] = {
    sc.STAGE_PIPELINE: sc.KIND_CHAIN,
    sc.STAGE_RETRIEVER: sc.KIND_RETRIEVER,
    sc.STAGE_GENERATOR: sc.KIND_LLM,
}


class _Pipeline:
    """The outermost pipeline of the current trace: its name, span and content decision."""

    __slots__ = ("generators", "name", "rag_span", "retrievers", "sampled", "trace_id")

    def __init__(self, name: str, rag_span: RagSpan, trace_id: int, sampled: bool) -> None:
        self.name = name
        self.rag_span = rag_span
        self.trace_id = trace_id
        self.sampled = sampled
        # retriever / generator spans started inside it (written on the pipeline span at its end)
        self.retrievers = 0
        self.generators = 0


_PIPELINE: ContextVar[_Pipeline | None] = ContextVar("ragmon_pipeline", default=None)
_CURRENT: ContextVar[RagSpan | None] = ContextVar("ragmon_current_span", default=None)

_DOC_KEYS: list[tuple[str, str, str, str]] = []


_DOC_KEYS_LOCK = threading.Lock()


def _doc_keys(index: int) -> tuple[str, str, str, str]:
    """Attribute names for document ``index``, built once per index rather than once per call."""
    if index < len(_DOC_KEYS):
        return _DOC_KEYS[index]
    with _DOC_KEYS_LOCK:  # two threads growing the list at once would misalign it
        while len(_DOC_KEYS) <= index:
            i = len(_DOC_KEYS)
            _DOC_KEYS.append((
                sc.retrieval_document_attr(i, sc.DOCUMENT_ID),
                sc.retrieval_document_attr(i, sc.DOCUMENT_CONTENT),
                sc.retrieval_document_attr(i, sc.DOCUMENT_SCORE),
                sc.retrieval_document_attr(i, sc.DOCUMENT_METADATA),
            ))
    return _DOC_KEYS[index]


def static_attributes(stage: str, user_attrs: Mapping[str, Any]) -> dict[str, Any]:
    """Attributes fixed at decoration time: kind, stage and the user's attributes."""
    attrs = user_attributes(user_attrs)
    attrs[sc.SPAN_KIND] = KIND_BY_STAGE[stage]
    attrs[sc.RAGMON_STAGE] = stage
    return attrs


def current_pipeline() -> _Pipeline | None:
    return _PIPELINE.get()


def current_rag_span() -> RagSpan | None:
    return _CURRENT.get()


def start(stage: str, name: str, attrs: Mapping[str, Any]) -> RagSpan | None:
    """Start a span (not yet current: call ``activate``). None when the SDK is disabled or failed."""
    runtime = _runtime.RUNTIME
    settings = runtime.settings
    if not settings.enabled:
        return None
    try:
        pipe = _PIPELINE.get()
        if pipe is not None:
            attrs = {**attrs, sc.RAGMON_PIPELINE: pipe.name}
        elif stage == sc.STAGE_PIPELINE:
            attrs = {**attrs, sc.RAGMON_PIPELINE: name}
        span = runtime.tracer().start_span(name, attributes=attrs)
        if pipe is not None and span.get_span_context().trace_id == pipe.trace_id:
            if stage == sc.STAGE_RETRIEVER:
                pipe.retrievers += 1
            elif stage == sc.STAGE_GENERATOR:
                pipe.generators += 1
        return RagSpan(span, stage, name, settings, runtime.field_cap, pipe)
    except Exception as exc:
        _runtime.internal_error("span_start", exc)
        return None


class RagSpan:
    """Handle to one ragmon span. Every method is safe to call in any state (no-op when ended,
    not recording, or when the SDK is disabled) and never raises."""

    __slots__ = (
        "_attrs", "_cap", "_chunk_chars", "_chunks", "_doc_id_keys", "_ended", "_explicit_answer", "_explicit_docs",
        "_max_docs", "_name", "_pipeline", "_recording", "_redact", "_redacted", "_sampled", "_span",
        "_stage", "_stream_seen", "_tokens", "_truncated",
    )

    def __init__(self, span: Any, stage: str, name: str, settings: _runtime.SdkSettings, cap: int,
                 pipe: _Pipeline | None) -> None:
        self._span = span
        self._stage = stage
        self._name = name
        self._attrs: dict[str, Any] = {}
        self._truncated: list[str] = []
        self._redacted = False
        self._ended = False
        self._explicit_answer = False
        self._explicit_docs = False
        self._tokens: list[tuple[Any, Any]] = []
        self._chunks: list[Any] = []
        self._chunk_chars = 0
        self._stream_seen = 0
        self._redact = settings.redact
        self._cap = cap
        self._max_docs = settings.max_documents
        self._doc_id_keys = settings.doc_id_keys
        self._recording = span.is_recording()
        self._pipeline = pipe
        trace_id = span.get_span_context().trace_id
        if pipe is not None and pipe.trace_id == trace_id:
            self._sampled = pipe.sampled  # one decision per trace
        else:
            self._sampled = in_sample(trace_id, settings.content_rate)
        if pipe is None and stage == sc.STAGE_PIPELINE:
            self._pipeline = _Pipeline(name, self, trace_id, self._sampled)

    # --- public API ------------------------------------------------------------------------
    @property
    def stage(self) -> str:
        return self._stage

    @property
    def content_sampled(self) -> bool:
        """Whether text (question, contexts, answer) is attached to this trace."""
        return self._sampled

    @property
    def trace_id(self) -> str:
        """The trace id as 32 lowercase hex characters (for ``record_feedback`` later)."""
        return format(self._span.get_span_context().trace_id, "032x")

    @property
    def otel_span(self) -> Any:
        """The underlying OpenTelemetry span."""
        return self._span

    def set_question(self, question: Any) -> None:
        """Record the question (``input.value``); a str, or an object holding one."""
        if not self._recording or self._ended or not self._sampled:
            return
        try:
            text = question_text(question)
            if text is not None:
                self._put_text(sc.INPUT_VALUE, text)
        except Exception as exc:
            _runtime.internal_error("question_capture", exc)

    def set_answer(self, answer: Any) -> None:
        """Record the answer (``output.value``): a str or an object holding one."""
        self._explicit_answer = True
        self._record_answer(answer)

    def set_documents(self, documents: Iterable[Any]) -> None:
        """Record retrieved documents in rank order (any shape ``ragmon.sdk.documents`` reads)."""
        self._explicit_docs = True
        self._record_documents(documents, None)

    def set_attributes(self, **attrs: Any) -> None:
        """User attributes: ``model``, ``prompt_version``, ``session_id``, ``user_id``, ``tags``,
        ``metadata``, dotted OpenTelemetry names, or other keys (into ``metadata``)."""
        if not self._recording or self._ended:
            return
        try:
            self._attrs.update(user_attributes(attrs))
        except Exception as exc:
            _runtime.internal_error("user_attributes", exc)

    def set_feedback(self, value: str | float) -> None:
        if self._recording and not self._ended:
            self._attrs[sc.RAGMON_FEEDBACK] = value

    # --- lifecycle (used by the decorators and the context manager) --------------------------
    def activate(self) -> None:
        """Make this span current (OpenTelemetry context, ragmon pipeline, current RagSpan)."""
        tokens = self._tokens
        try:
            tokens.append((None, otel_context.attach(trace.set_span_in_context(self._span))))
            tokens.append((_CURRENT, _CURRENT.set(self)))
            if self._pipeline is not None and self._pipeline.rag_span is self:
                tokens.append((_PIPELINE, _PIPELINE.set(self._pipeline)))
        except Exception as exc:
            _runtime.internal_error("context_attach", exc)

    def deactivate(self) -> None:
        """Undo ``activate`` in reverse order; each step on its own so one failure cannot leave
        the OpenTelemetry context attached."""
        tokens, self._tokens = self._tokens, []
        for var, token in reversed(tokens):
            try:
                if var is None:
                    otel_context.detach(token)
                else:
                    var.reset(token)
            except Exception as exc:
                _runtime.internal_error("context_detach", exc)

    def add_chunk(self, item: Any) -> None:
        """One streamed item: a document for a retriever, a piece of the answer otherwise."""
        try:
            if self._stage == sc.STAGE_RETRIEVER:
                self._stream_seen += 1
                if len(self._chunks) < self._max_docs:
                    self._chunks.append(item)
            elif self._sampled and self._recording and self._chunk_chars <= self._cap:
                text = chunk_text(item)
                if text:
                    self._chunks.append(text)
                    self._chunk_chars += len(text)
        except Exception as exc:
            _runtime.internal_error("stream_capture", exc)

    def finish(self, exc: BaseException | None = None, result: Any = None, *, has_result: bool = False,
               streamed: bool = False) -> None:
        """Record the outcome, end the span and leave its context. Idempotent; never raises."""
        if self._ended:
            return
        try:
            if self._recording:
                if has_result:
                    self._capture_result(result)
                if streamed:
                    self._capture_stream()
                self._finalize(exc)
        except Exception as error:
            _runtime.internal_error("span_finish", error)
        finally:
            self._ended = True
            try:
                self._span.end()
            except Exception as error:
                _runtime.internal_error("span_end", error)
            if self._tokens:
                self.deactivate()

    # --- internals -----------------------------------------------------------------------------
    def _capture_result(self, result: Any) -> None:
        if self._stage == sc.STAGE_RETRIEVER:
            if not self._explicit_docs:
                self._record_documents(result, None)
        elif not self._explicit_answer:
            self._record_answer(result)

    def _capture_stream(self) -> None:
        if self._stage == sc.STAGE_RETRIEVER:
            if not self._explicit_docs:
                self._record_documents(self._chunks, self._stream_seen)
        elif not self._explicit_answer and self._chunks:
            self._record_answer("".join(self._chunks))

    def _finalize(self, exc: BaseException | None) -> None:
        attrs = self._attrs
        attrs[sc.RAGMON_CONTENT_SAMPLED] = self._sampled
        attrs[sc.RAGMON_REDACTED] = self._redacted
        pipe = self._pipeline
        if pipe is not None and pipe.rag_span is self:  # the pipeline's own span: what it made
            attrs[sc.RAGMON_RETRIEVER_SPANS] = pipe.retrievers
            attrs[sc.RAGMON_GENERATOR_SPANS] = pipe.generators
        if self._truncated:
            attrs[sc.RAGMON_TRUNCATED_FIELDS] = tuple(self._truncated)
        if exc is not None:
            error_type = type(exc).__qualname__
            attrs[sc.ERROR_TYPE] = error_type
        self._span.set_attributes(attrs)
        if exc is not None:
            message = str(exc)
            if self._redact is None:
                self._span.record_exception(exc)
            else:  # exception messages and stack traces can quote user text too
                message = self._redact_text(sc.EXCEPTION_MESSAGE, message)
                stack = self._redact_text(EXCEPTION_STACKTRACE, "".join(
                    traceback.format_exception(type(exc), exc, exc.__traceback__)))
                self._span.record_exception(exc, attributes={sc.EXCEPTION_MESSAGE: message,
                                                             EXCEPTION_STACKTRACE: stack})
            self._span.set_status(Status(StatusCode.ERROR, f"{error_type}: {message}"))

    def _redact_text(self, field: str, text: str) -> str:
        out, _, _ = apply_policy(field, text, self._redact, self._cap)
        return out if out is not None else ""

    def _record_answer(self, answer: Any) -> None:
        if not self._recording or self._ended or not self._sampled:
            return
        try:
            text = answer_text(answer)
            if text is not None:
                self._put_text(sc.OUTPUT_VALUE, text)
        except Exception as exc:
            _runtime.internal_error("answer_capture", exc)

    def _record_documents(self, documents: Any, seen_override: int | None) -> None:
        if not self._recording or self._ended:
            return
        try:
            if documents is None:
                return
            if not isinstance(documents, Sequence) or isinstance(documents, str | bytes):
                # An iterator would be consumed under the application's feet: leave it alone.
                _runtime.internal_error("documents_shape", None,
                                        f"retriever returned {type(documents).__qualname__}, not a sequence")
                return
            attrs = self._attrs
            for key in [k for k in attrs if k.startswith(sc.RETRIEVAL_DOCUMENTS_PREFIX)]:
                del attrs[key]  # set_documents called again: the new list replaces the old one
            records, seen, failed = to_records(documents, self._max_docs, self._doc_id_keys)
            if seen_override is not None:
                seen = seen_override
            attrs[sc.RAGMON_DOCUMENT_COUNT] = seen
            if failed:
                _runtime.internal_error("document_adapter", None, f"{failed} unreadable document(s) skipped",
                                        count=failed)
            if len(records) + failed < seen and sc.RETRIEVAL_DOCUMENTS_PREFIX not in self._truncated:
                self._truncated.append(sc.RETRIEVAL_DOCUMENTS_PREFIX)  # more than max_documents
            sampled = self._sampled
            for index, record in enumerate(records):
                id_key, content_key, score_key, meta_key = _doc_keys(index)
                attrs[id_key] = record.id
                if record.score is not None:
                    attrs[score_key] = record.score
                if sampled:
                    if record.content is not None:
                        self._put_text(content_key, record.content)
                    if record.metadata:
                        meta = metadata_json(record.metadata)
                        if meta is not None:
                            self._put_text(meta_key, meta)
        except Exception as exc:
            _runtime.internal_error("documents_capture", exc)

    def _put_text(self, field: str, text: str) -> None:
        if self._redact is None and len(text) <= self._cap:  # the common case, kept cheap
            self._attrs[field] = text
            return
        out, redacted, truncated = apply_policy(field, text, self._redact, self._cap)
        if redacted:
            self._redacted = True
        if truncated:
            self._truncated.append(field)
        if out is None:
            self._attrs.pop(field, None)
        else:
            self._attrs[field] = out
