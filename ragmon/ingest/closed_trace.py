"""What the assembler hands on: a closed trace, and how its ``RagTrace`` is built. Synchronous,
I/O-free (compiled: ``_native.py``).

A ``ClosedTrace`` carries the delivery tokens of every submission that had spans of it (the agent
releases a delivery once all its traces are accounted for) and why it closed (``REASON_*``). A
trace read for latency only (every span an ``extract.LightSpan``: outside the judging sample)
closes with its ``LatencyTrace`` and builds its ``RagTrace`` only when asked (a priority rule picked
it for the judge: ``ClosedTrace.trace``), by the same ``FullBuild`` as a trace built in full at
once (a light span is completed there: ``LightSpan.to_record``).

Text handed on is bounded too (``max_text_chars``): the judge's memory grows with the text it
reads (a single 6 MB document took the local judge past a 768 MiB container limit), so the
question, the answer and the documents in rank order are cut to that many characters in all
after extraction (which still sees whole spans). ``ClosedTrace.text_truncated`` says whether
that happened; the agent counts it as ``text_truncated`` when it hands the trace to the judge.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Hashable

from .. import semconv as sc
from ..types import Document, RagTrace, SpanRecord
from .extract import ExtractSettings, LatencyTrace, LightSpan, build_rag_trace

__all__ = [
    "REASON_EVICTED",
    "REASON_FLUSH",
    "REASON_MISSING",
    "REASON_ROOT",
    "REASON_TIMEOUT",
    "AnySpan",
    "ClosedTrace",
    "FullBuild",
    "bound_text",
]

log = logging.getLogger(__name__)

REASON_ROOT = "root"
REASON_TIMEOUT = "timeout"
REASON_EVICTED = "evicted"
REASON_FLUSH = "flush"
REASON_MISSING = "missing_spans"  # the root came, but not every span its counts announce


AnySpan = SpanRecord | LightSpan  # a span as the assembler holds it


class ClosedTrace:
    """A closed trace: its ``RagTrace`` (built on first access when ``latency`` is set: from its
    ``spans`` by ``FullBuild``), the delivery ``tokens`` of every submission that had spans of it,
    and why it closed (``reason``: root | timeout | evicted | flush | missing_spans)."""

    __slots__ = ("_full", "_spans", "_trace", "_truncated", "complete", "latency", "reason", "tokens", "trace_id")

    def __init__(self, trace: RagTrace | None = None, tokens: frozenset[Hashable] = frozenset(),
                 reason: str = REASON_FLUSH, *, trace_id: str | None = None, latency: LatencyTrace | None = None,
                 spans: list[AnySpan] | None = None, full: FullBuild | None = None, complete: bool = True,
                 text_truncated: bool = False) -> None:
        if trace is None and (spans is None or full is None):
            raise ValueError("ClosedTrace needs a trace, or its spans and the build that makes it")
        self._trace, self._spans, self._full, self._truncated = trace, spans, full, text_truncated
        self.complete = complete
        self.trace_id: str = trace_id if trace_id is not None else trace.trace_id  # type: ignore[union-attr]
        self.tokens = tokens
        self.reason = reason
        self.latency = latency  # set for a trace read for latency only (all spans LightSpans)

    @property
    def trace(self) -> RagTrace:
        if self._trace is None:
            assert self._full is not None and self._spans is not None
            self._trace, self._truncated = self._full.build(self.trace_id, self._spans, self.complete)
            self._spans = self._full = None
        return self._trace

    @property
    def text_truncated(self) -> bool:
        """Whether the trace's text was cut to ``max_text_chars`` (builds the trace)."""
        self.trace  # noqa: B018  # built on first access
        return self._truncated


class FullBuild:
    """A trace's ``RagTrace`` from its spans: light spans completed (``LightSpan.to_record``), the
    full extraction, the text bound (``max_text_chars``)."""

    def __init__(self, settings: ExtractSettings | None, max_text_chars: int | None) -> None:
        self._settings = settings
        self._max_text = max_text_chars
        self._failed_logged = False

    def build(self, trace_id: str, spans: list[AnySpan], complete: bool) -> tuple[RagTrace, bool]:
        """The ``RagTrace``, and whether its text was cut to ``max_text_chars``."""
        records = [s.to_record() if isinstance(s, LightSpan) else s for s in spans]
        try:
            trace = build_rag_trace(records, complete=complete, settings=self._settings)
        except Exception:  # extraction must never lose a trace; keep what is certain
            if not self._failed_logged:
                self._failed_logged = True
                log.exception("could not extract a RAG trace from trace %s; kept with minimal fields", trace_id)
            first = min(records, key=lambda s: s.start_time_ns)
            return RagTrace(trace_id=trace_id, service=first.service_name or sc.UNKNOWN_LABEL, pipeline=first.name,
                            start_time_ns=first.start_time_ns, complete=complete, span_count=len(records)), False
        bounded = trace if self._max_text is None else bound_text(trace, self._max_text)
        return bounded, bounded is not trace


def bound_text(trace: RagTrace, limit: int) -> RagTrace:
    """``trace`` with question, answer and document contents cut to ``limit`` characters in all:
    the question and the answer first (each to at most half of it), then the documents in rank
    order (a document beyond the budget keeps its id and score, its text becomes empty). Returns
    ``trace`` itself when nothing had to be cut."""
    total = len(trace.question or "") + len(trace.answer or "") + sum(len(d.content or "") for d in trace.documents)
    if total <= limit:
        return trace
    left = limit
    question = _cut(trace.question, min(left, limit // 2))
    left -= len(question or "")
    answer = _cut(trace.answer, min(left, limit // 2))
    left -= len(answer or "")
    documents: list[Document] = []
    for doc in trace.documents:
        content = _cut(doc.content, left)
        left -= len(content or "")
        documents.append(doc if content is doc.content else dataclasses.replace(doc, content=content))
    return dataclasses.replace(trace, question=question, answer=answer, documents=tuple(documents))


def _cut(text: str | None, limit: int) -> str | None:
    if text is None or len(text) <= limit:
        return text
    return text[:max(0, limit)]
