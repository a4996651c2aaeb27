"""Group spans by trace id into ``RagTrace``s. Synchronous, I/O-free and bounded.

When is a trace complete?
    When its root span (no parent) arrives — or its *local* root, a span with a remote
    parent, once the trace holds the RAG pipeline span (see ``_is_root``; the upstream
    caller's spans often go to another backend). Spans of one trace may still come after the
    root: another process's spans in a distributed trace, or Kafka messages without
    trace-id keys spread over partitions. Two mechanisms cover that:

    * ``root_grace_s`` (default 0): after the root arrives the trace stays open this long
      and takes late children in. 0 closes on the root at once, which is right for ragmon's
      own SDK (a BatchSpanProcessor exports children before or with their root) and keeps
      latency metrics prompt; deployments with cross-process traces or unkeyed Kafka topics
      can set e.g. 1-2 s. ``expire()`` closes traces whose grace ran out.
    * A bounded memory of recently closed trace ids: a span of a trace already closed is
      counted as ``late_span`` and dropped, rather than opening a second, partial trace with
      the same id (which would be judged and counted twice).

    * The pipeline span of ragmon's SDK says how many retriever and generator spans it made
      (``ragmon.spans.retriever`` / ``ragmon.spans.generator``). A trace is written in parts when
      its spans end in different export intervals, and parts may arrive in any order (a
      Collector sends its queue in parallel): when the root comes before all of them, the trace
      stays open until they are in, or until ``trace_timeout_s`` passes without new spans; then it
      closes as ``missing_spans``, incomplete (the agent counts it and does not judge it, so no
      trace is judged as if it had no documents when its retrieval span is merely late).
      Third-party instrumentation without the counts closes on its root as before.

    Without a root a trace closes after ``trace_timeout_s`` without new spans (``timeout``,
    ``complete=False``), or early when ``max_open_traces`` or ``max_buffered_bytes`` (optional,
    approximate bytes of span data held) is reached (``evicted``, the least recently active
    one goes first; counted as ``open_traces_limit``).

Cost: ``add`` is O(1) amortised; ``expire`` is O(expired): open traces sit in an insertion
ordered dict re-ordered on activity, so the stalest is always first. The same holds for the
grace queue (constant grace, so deadlines are in insertion order). ``close_where`` scans the
open traces; it is meant for rare events such as a Kafka partition revocation.

Spans read for latency only (``extract.LightSpan``: a trace outside the judging sample) are
held like any other; a trace made of them alone closes with its ``LatencyTrace``
(``extract.latency_trace``) and builds its ``RagTrace`` only when asked (``closed_trace.py``).
A trace with any fully decoded span, or whose latency-only fields depend on its text
(``latency_trace`` returns None), is built in full at once. ``path_counts`` counts both kinds
(``light`` / ``full`` traces, ``light_spans``). What a closed trace holds, how its ``RagTrace`` is
built and how its text is bounded (``max_text_chars``) is ``closed_trace.py``'s.

``add_spans`` adds a submission's spans in order; a trace that comes whole in it (its spans
together, the first root last, nothing open or recently closed under its id, no grace, room to
spare) is closed at once without an open-trace entry, with the same result ``add`` one by one
would give (tests/ingest/test_assembler_whole.py compares both, case by case).

Every closed trace carries the delivery tokens of the submissions that contributed spans, so
the agent can release (commit) a delivery once all its traces are accounted for. A delivery
whose spans were all dropped (late, duplicate) touches no open trace: ``holds_token`` tells.
"""

from __future__ import annotations

import collections
import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from typing import NamedTuple

from .. import semconv as sc
from .closed_trace import (
    REASON_EVICTED,
    REASON_FLUSH,
    REASON_MISSING,
    REASON_ROOT,
    REASON_TIMEOUT,
    AnySpan,
    ClosedTrace,
    FullBuild,
)
from .extract import ExtractSettings, LightSpan, latency_trace

__all__ = ["AddedSpans", "TraceAssembler", "notable_spans"]

log = logging.getLogger(__name__)



class AddedSpans(NamedTuple):
    """What ``TraceAssembler.add_spans`` did: the traces it closed, the ids of the traces the spans
    went to (each once), and each span ``add`` raised on, with the error."""

    closed: list[ClosedTrace]
    touched: list[str]
    failed: list[tuple[AnySpan, Exception]]


def notable_spans(spans: Sequence[AnySpan]) -> bool:
    """Whether any span needs the agent's per-span look (dropped attributes, a feedback value, an
    app version): most batches have none, and this loop is compiled."""
    for span in spans:
        if (span.dropped_attributes_count or sc.RAGMON_FEEDBACK in span.attributes
                or sc.SERVICE_VERSION in span.resource):
            return True
    return False


class _OpenTrace:
    __slots__ = ("expected", "generators", "has_pipeline", "last_activity", "light", "retrievers", "root_seen",
                 "size", "span_ids", "spans", "tokens")

    def __init__(self) -> None:
        self.spans: list[AnySpan] = []
        self.span_ids: set[str] = set()
        self.tokens: set[Hashable] = set()
        self.last_activity = 0.0
        self.root_seen = False
        self.light = True  # every span a LightSpan so far
        self.has_pipeline = False  # holds a span that marks the RAG request (see _marks_pipeline)
        self.size = 0  # approximate bytes held (see _approx_size)
        self.retrievers = 0  # spans of the SDK's retriever / generator stage held
        self.generators = 0
        self.expected: tuple[int, int] | None = None  # what the root's counts announce (see _expected_counts)

    def missing(self) -> bool:
        """Whether the root announced retriever or generator spans that are not in yet."""
        expected = self.expected
        return expected is not None and (self.retrievers < expected[0] or self.generators < expected[1])


class TraceAssembler:
    def __init__(
        self,
        *,
        trace_timeout_s: float,
        max_open_traces: int,
        max_spans_per_trace: int,
        clock: Callable[[], float] = time.monotonic,
        root_grace_s: float = 0.0,
        closed_ids_size: int | None = None,
        max_buffered_bytes: int | None = None,
        max_text_chars: int | None = None,
        extract_settings: ExtractSettings | None = None,
    ) -> None:
        if trace_timeout_s <= 0 or max_open_traces < 1 or max_spans_per_trace < 1 or root_grace_s < 0:
            raise ValueError("trace_timeout_s > 0, max_open_traces >= 1, max_spans_per_trace >= 1, "
                             "root_grace_s >= 0 required")
        self._timeout = trace_timeout_s
        self._max_open = max_open_traces
        self._max_spans = max_spans_per_trace
        self._clock = clock
        self._grace = root_grace_s
        self._open: OrderedDict[str, _OpenTrace] = OrderedDict()  # least recently active first
        self._grace_deadlines: OrderedDict[str, float] = OrderedDict()  # roots seen, in arrival order
        self._closed_ids: OrderedDict[str, None] = OrderedDict()  # bounded memory for late spans
        self._closed_ids_size = max_open_traces if closed_ids_size is None else closed_ids_size
        # Span count alone does not bound memory: retriever spans carry 5-50 KB of document
        # text. Over this many (approximate) bytes the least recently active traces are evicted.
        self._max_bytes = max_buffered_bytes
        self._buffered = 0
        self._extract = extract_settings  # pipeline naming, document-id keys (None: defaults)
        self._full_build = FullBuild(extract_settings, max_text_chars)
        self.drop_counts: collections.Counter[str] = collections.Counter()
        # traces closed read for latency only ("light") or built in full ("full"), and the light
        # spans of the former; traces closed whole as they came (add_spans: "whole_traces"): what
        # the fast path took (tests and benchmarks read it)
        self._light = self._light_spans = self._full = self._whole = 0  # (see path_counts)

    @property
    def open_count(self) -> int:
        return len(self._open)

    @property
    def path_counts(self) -> collections.Counter[str]:
        """Traces closed read for latency only (``light``) or built in full (``full``), the light
        spans of the former, and the traces ``add_spans`` closed whole (``whole_traces``); zero
        counts left out. (Kept as ints: one is added per trace.)"""
        return +collections.Counter({"light": self._light, "light_spans": self._light_spans, "full": self._full,
                                     "whole_traces": self._whole})

    @property
    def buffered_bytes(self) -> int:
        """Approximate bytes of span data held by open traces."""
        return self._buffered

    def is_open(self, trace_id: str) -> bool:
        """Whether spans of ``trace_id`` are being assembled (added by the agent's token bookkeeping)."""
        return trace_id in self._open

    def holds_token(self, token: Hashable) -> bool:
        """Whether any open trace holds ``token`` (O(open); for rare checks)."""
        return any(token in entry.tokens for entry in self._open.values())

    def add(self, span: AnySpan, token: Hashable | None = None) -> list[ClosedTrace]:
        """Add one span; return the traces this closes (its own on a root, an evicted one)."""
        trace_id = span.trace_id
        now = self._clock()
        entry = self._open.get(trace_id)
        closed: list[ClosedTrace] = []
        if entry is None:
            if trace_id in self._closed_ids:
                self.drop_counts[sc.DROP_LATE_SPAN] += 1
                return closed
            if len(self._open) >= self._max_open:
                oldest_id = next(iter(self._open))
                self.drop_counts[sc.DROP_OPEN_TRACES_FULL] += 1
                closed.append(self._close(oldest_id, REASON_EVICTED))
            entry = self._open[trace_id] = _OpenTrace()
        else:
            self._open.move_to_end(trace_id)
        entry.last_activity = now
        if token is not None:
            entry.tokens.add(token)

        if span.span_id in entry.span_ids:
            self.drop_counts[sc.DROP_DUPLICATE_SPAN] += 1
            return closed
        if len(entry.spans) >= self._max_spans and span.parent_span_id is not None:
            # The root is always kept: it makes the trace complete and names the pipeline.
            self.drop_counts[sc.DROP_SPANS_PER_TRACE] += 1
            return closed
        entry.spans.append(span)
        entry.span_ids.add(span.span_id)
        light = type(span) is LightSpan
        if entry.light and not light:
            entry.light = False
        if span.attributes:
            if not entry.has_pipeline:
                entry.has_pipeline = _marks_pipeline(span)
            stage = span.attributes.get(sc.RAGMON_STAGE)
            if stage == sc.STAGE_RETRIEVER:
                entry.retrievers += 1
            elif stage == sc.STAGE_GENERATOR:
                entry.generators += 1
        if self._max_bytes is not None:
            size = span.size if light else _approx_size(span)  # type: ignore[union-attr]
            entry.size += size
            self._buffered += size
        if (span.parent_span_id is None or _is_root(span, entry)) and not entry.root_seen:
            entry.root_seen = True
            entry.expected = _expected_counts(span)
            if self._grace > 0:
                self._grace_deadlines[trace_id] = now + self._grace
            elif not entry.missing():
                closed.append(self._close(trace_id, REASON_ROOT))
        elif entry.expected is not None and self._grace <= 0 and not entry.missing():
            closed.append(self._close(trace_id, REASON_ROOT))  # the last announced span came after the root
        if self._max_bytes is not None:
            while self._buffered > self._max_bytes and self._open:
                self.drop_counts[sc.DROP_OPEN_TRACES_FULL] += 1
                closed.append(self._close(next(iter(self._open)), REASON_EVICTED))
        return closed

    def add_spans(self, spans: Sequence[AnySpan], token: Hashable | None = None) -> AddedSpans:
        """``add`` for each span in order, with what the caller needs afterwards: the traces
        closed, the ids of the traces the spans went to, and the spans ``add`` raised on.

        A trace whose spans all come here together (one message holds it whole: ragmon's SDK,
        Kafka keyed by trace id) is closed at once, without the open-trace bookkeeping, when
        adding its spans one by one could do nothing else (``_close_whole``)."""
        closed: list[ClosedTrace] = []
        touched: list[str] = []
        failed: list[tuple[AnySpan, Exception]] = []
        count = len(spans)
        i = 0
        while i < count:
            trace_id = spans[i].trace_id
            j = i + 1
            while j < count and spans[j].trace_id == trace_id:
                j += 1
            whole = self._close_whole(spans, i, j, trace_id, token)
            if whole is not None:
                closed.append(whole)
                touched.append(trace_id)
            else:
                added = False
                for k in range(i, j):
                    try:
                        found = self.add(spans[k], token)
                    except Exception as exc:  # noqa: BLE001  # the caller counts and logs it; the rest go on
                        failed.append((spans[k], exc))
                        continue
                    added = True
                    if found:
                        closed.extend(found)
                if added:
                    touched.append(trace_id)
            i = j
        if len(touched) > 1:
            touched = list(dict.fromkeys(touched))  # a trace's spans may come in several runs
        return AddedSpans(closed, touched, failed)

    def _close_whole(self, spans: Sequence[AnySpan], start: int, end: int, trace_id: str,
                     token: Hashable | None) -> ClosedTrace | None:
        """Close the trace of ``spans[start:end]`` (all of one trace) if ``add`` one by one would
        open it, keep every span, and close it on the last one with nothing else happening (no
        eviction, no grace, no late or duplicate span, the first root last); else None, and
        nothing changed. The same ``ClosedTrace`` as ``add`` would give."""
        if (self._grace > 0 or trace_id in self._open or trace_id in self._closed_ids
                or len(self._open) >= self._max_open or end - start > self._max_spans):
            return None
        held = 0
        has_pipeline = False
        seen: set[str] = set()
        retrievers = generators = 0
        for k in range(start, end):
            span = spans[k]
            if type(span) is not LightSpan or span.span_id in seen:
                return None
            seen.add(span.span_id)
            held += span.size
            if span.attributes:
                if not has_pipeline:
                    has_pipeline = _light_marks_pipeline(span)
                stage = span.attributes.get(sc.RAGMON_STAGE)
                if stage == sc.STAGE_RETRIEVER:
                    retrievers += 1
                elif stage == sc.STAGE_GENERATOR:
                    generators += 1
            # add()'s root test: the first root closes the trace, so it must be the last span
            is_root = span.parent_span_id is None or (span.parent_is_remote and has_pipeline)
            if is_root != (k == end - 1):
                return None
            if is_root:
                expected = _expected_counts(span)
                if expected is not None and (retrievers < expected[0] or generators < expected[1]):
                    return None  # a part is still to come: add() keeps it open
        if self._max_bytes is not None and self._buffered + held > self._max_bytes:
            return None  # add() would evict on the way
        self._remember_closed(trace_id)
        self._whole += 1
        tokens: frozenset[Hashable] = frozenset() if token is None else frozenset((token,))
        return self._closed_trace(trace_id, list(spans[start:end]), tokens, True, REASON_ROOT, True)

    def expire(self) -> list[ClosedTrace]:
        """Close traces whose root grace ran out, then those idle longer than the timeout."""
        now = self._clock()
        closed: list[ClosedTrace] = []
        while self._grace_deadlines:
            trace_id, deadline = next(iter(self._grace_deadlines.items()))
            if deadline > now:
                break
            closed.append(self._close(trace_id, REASON_ROOT))
        while self._open:
            trace_id, entry = next(iter(self._open.items()))
            if now - entry.last_activity < self._timeout:
                break
            closed.append(self._close(trace_id, REASON_TIMEOUT))
        return closed

    def close_where(self, predicate: Callable[[Hashable], bool]) -> list[ClosedTrace]:
        """Close every open trace holding a token that matches ``predicate`` (reason flush)."""
        matching = [tid for tid, entry in self._open.items() if any(predicate(t) for t in entry.tokens)]
        return [self._close(tid, REASON_FLUSH) for tid in matching]

    def close_all(self) -> list[ClosedTrace]:
        """Close everything still open (shutdown), reason flush."""
        return [self._close(tid, REASON_FLUSH) for tid in list(self._open)]

    def _close(self, trace_id: str, reason: str) -> ClosedTrace:
        entry = self._open.pop(trace_id)
        self._buffered -= entry.size
        self._grace_deadlines.pop(trace_id, None)
        self._remember_closed(trace_id)
        complete = entry.root_seen
        if complete and entry.missing():
            complete = False
            if reason in (REASON_TIMEOUT, REASON_ROOT):
                reason = REASON_MISSING
        return self._closed_trace(trace_id, entry.spans, frozenset(entry.tokens), complete, reason, entry.light)

    def drop_where(self, predicate: Callable[[Hashable], bool]) -> list[str]:
        """Forget, without closing, every open trace whose delivery tokens all match ``predicate``
        (a Kafka partition handed to another agent: its next owner re-reads these traces' messages
        and assembles them whole). Not counted, not remembered as closed. Returns their ids."""
        dropped = [tid for tid, entry in self._open.items()
                   if entry.tokens and all(predicate(t) for t in entry.tokens)]
        for trace_id in dropped:
            entry = self._open.pop(trace_id)
            self._buffered -= entry.size
            self._grace_deadlines.pop(trace_id, None)
        return dropped

    def _remember_closed(self, trace_id: str) -> None:
        self._closed_ids[trace_id] = None
        if len(self._closed_ids) > self._closed_ids_size:
            self._closed_ids.popitem(last=False)

    def _closed_trace(self, trace_id: str, spans: list[AnySpan], tokens: frozenset[Hashable], complete: bool,
                      reason: str, light: bool) -> ClosedTrace:
        if light:
            latency = None
            try:
                latency = latency_trace(trace_id, spans, complete=complete,  # type: ignore[arg-type]
                                        settings=self._extract)
            except Exception:  # the full extraction decides (and keeps what is certain)
                log.debug("latency-only view of trace %s failed; extracting in full", trace_id, exc_info=True)
            if latency is not None:
                self._light += 1
                self._light_spans += len(spans)
                return ClosedTrace(tokens=tokens, reason=reason, trace_id=trace_id, latency=latency, spans=spans,
                                   full=self._full_build, complete=complete)
        self._full += 1
        trace, truncated = self._full_build.build(trace_id, spans, complete)
        return ClosedTrace(trace=trace, tokens=tokens, reason=reason, complete=complete, text_truncated=truncated)


def _marks_pipeline(span: AnySpan) -> bool:
    attrs = span.attributes
    return (attrs.get(sc.RAGMON_STAGE) == sc.STAGE_PIPELINE
            or attrs.get(sc.TRACELOOP_SPAN_KIND) == sc.TRACELOOP_KIND_WORKFLOW)


def _light_marks_pipeline(span: LightSpan) -> bool:
    """``_marks_pipeline`` of a light span (its attributes a dict: compiled lookups)."""
    attrs = span.attributes
    return (attrs.get(sc.RAGMON_STAGE) == sc.STAGE_PIPELINE
            or attrs.get(sc.TRACELOOP_SPAN_KIND) == sc.TRACELOOP_KIND_WORKFLOW)


def _expected_counts(span: AnySpan) -> tuple[int, int] | None:
    """The retriever and generator spans a root announces (ragmon's SDK), or None."""
    attrs = span.attributes
    retrievers = attrs.get(sc.RAGMON_RETRIEVER_SPANS)
    generators = attrs.get(sc.RAGMON_GENERATOR_SPANS)
    if type(retrievers) is not int or type(generators) is not int:
        return None
    return max(0, min(retrievers, 10_000)), max(0, min(generators, 10_000))


def _is_root(span: AnySpan, entry: _OpenTrace) -> bool:
    """The trace's root, or the *local* root of this service's part of a distributed trace:
    a span whose parent is in another process (OTLP span flags) once the trace holds the RAG
    pipeline span. Without that, an app called through an instrumented gateway (whose spans
    go elsewhere) would wait for a root that never comes and time out as incomplete. A
    retriever *service*'s entry span also has a remote parent but holds no pipeline span,
    so it does not close the caller's trace."""
    if span.parent_span_id is None:
        return True
    return span.parent_is_remote and entry.has_pipeline


def _approx_size(span: AnySpan) -> int:
    """Rough bytes a span holds: its strings plus a fixed overhead (resource is shared); a light
    span holds its share of its message."""
    if isinstance(span, LightSpan):
        return span.size
    size = 300 + len(span.name)
    for key, value in span.attributes.items():
        size += len(key) + _value_size(value, 0)
    for event in span.events:
        size += 100 + len(event.name)
        for key, value in event.attributes.items():
            size += len(key) + _value_size(value, 0)
    return size


def _value_size(value: object, depth: int) -> int:
    if isinstance(value, str | bytes):
        return 50 + len(value)
    if depth < 4 and isinstance(value, list):
        return 60 + sum(8 + _value_size(item, depth + 1) for item in value)
    if depth < 4 and isinstance(value, dict):
        return 60 + sum(len(str(k)) + 8 + _value_size(v, depth + 1) for k, v in value.items())
    return 24
