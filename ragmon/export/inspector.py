"""The trace inspector: what the agent extracted from a recently judged trace, and what it concluded.

``GET /traces/{trace_id}`` on the metrics port (``MetricsServer``) and ``ragmon inspect FILE``
(offline) print the same JSON, built by ``inspect_trace``::

    {"trace_id", "service", "pipeline", "question", "answer",
     "contexts": [{"rank", "id", "text", "score", "verdict"}], "contexts_total",
     "scores": {metric: value}, "verdict", "reason", "judge",
     "sources": {"question", "answer", "contexts"}, "redacted", "truncated"}

``sources`` says where each field was read from: ``"<span name>: <attribute>"`` for the question
and the answer (recorded by the extractor, ``ragmon.extract.*_from``), and the contexts' source
(``retrieval``, ``messages``, ...: ``ragmon.contexts.source``). A context's ``verdict`` is the
judge's per-context relevance when it gives one (the LLM judge: true/false; the local judge: a
probability), else null.

Bounded: ``RecentTraces`` keeps the last ``size`` judged traces (oldest evicted first, like
/worst's ring), each text cut to ``max_chars``, at most ``MAX_CONTEXTS`` contexts per trace. The
text shown is the text the agent received, after the SDK's redaction hook (``redacted`` is true
when that hook changed something). Served under /worst's guard (docs/security.md).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from .. import semconv as sc
from ..types import RagTrace, ScoreDetails

__all__ = ["MAX_CONTEXTS", "RecentTraces", "inspect_trace"]

MAX_CONTEXTS = 20  # contexts shown per trace; contexts_total says how many there were
_MAX_SOURCE_CHARS = 200


def _cut(text: str | None, limit: int) -> tuple[str | None, bool]:
    if text is None:
        return None, False
    if len(text) <= limit:
        return text, False
    return (text[:limit] + "…" if limit > 0 else ""), True


def _context_verdicts(details: ScoreDetails, count: int) -> list[bool | float | None]:
    """Per-context verdicts (judged contexts, in order) from a judge's details, else Nones."""
    out: list[bool | float | None] = [None] * count
    # LLM judge: booleans; local judge: probabilities
    given = details.get("context_relevant", details.get("context_relevance", []))
    for i, v in enumerate(given[:count]):
        out[i] = v
    return out


def _source(value: Any) -> str | None:
    return str(value)[:_MAX_SOURCE_CHARS] if value is not None else None


def inspect_trace(trace: RagTrace, *, scores: Mapping[str, float | None] | None = None,
                  verdict: str | None = None, reason: str | None = None, judge: str | None = None,
                  details: ScoreDetails | None = None, max_chars: int = 2000) -> dict[str, Any]:
    """The inspector's JSON-ready view of one trace (pure, bounded)."""
    details = details or ScoreDetails()
    truncated = False
    question, cut_q = _cut(trace.question, max_chars)
    answer, cut_a = _cut(trace.answer, max_chars)
    truncated = cut_q or cut_a
    # the judge sees the documents that carry text, in rank order (RagTrace.contexts)
    judged = [i for i, d in enumerate(trace.documents) if d.content]
    verdicts = _context_verdicts(details, len(judged))
    verdict_of = dict(zip(judged, verdicts, strict=True))
    contexts = []
    for i, doc in enumerate(trace.documents[:MAX_CONTEXTS]):
        text, cut = _cut(doc.content, max_chars)
        truncated = truncated or cut
        contexts.append({"rank": i + 1, "id": doc.id, "text": text, "score": doc.score,
                         "verdict": verdict_of.get(i)})
    attrs = trace.attributes
    return {
        "trace_id": trace.trace_id,
        "service": trace.service,
        "pipeline": trace.pipeline,
        "question": question,
        "answer": answer,
        "contexts": contexts,
        "contexts_total": len(trace.documents),
        "scores": {k: (round(v, 4) if v is not None else None) for k, v in (scores or {}).items()},
        "verdict": verdict,
        "reason": reason,
        "judge": judge,
        "sources": {
            "question": _source(attrs.get(sc.RAGMON_QUESTION_FROM)),
            "answer": _source(attrs.get(sc.RAGMON_ANSWER_FROM)),
            "contexts": _source(attrs.get(sc.RAGMON_CONTEXTS_SOURCE)),
        },
        # each claim's verdict (supported / contradicted / unsupported) with its evidence and reason,
        # and why each declared evaluator passed or failed (bounded where the judge made them)
        "claim_verdicts": list(details.get(sc.DETAIL_CLAIM_VERDICTS, [])),
        "evaluator_reasons": dict(details.get(sc.DETAIL_EVALUATORS, {})),
        "redacted": bool(attrs.get(sc.RAGMON_REDACTED)),
        "truncated": truncated or len(trace.documents) > MAX_CONTEXTS,
    }


class RecentTraces:
    """The last ``size`` judged traces by trace id, for ``GET /traces/{trace_id}``. Thread-safe."""

    def __init__(self, size: int, max_chars: int) -> None:
        self._size = size
        self._max_chars = max_chars
        self._entries: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self._lock = threading.Lock()

    def record(self, trace: RagTrace, *, scores: Mapping[str, float | None], verdict: str, reason: str,
               judge: str, details: ScoreDetails | None = None) -> None:
        if self._size <= 0:
            return
        entry = inspect_trace(trace, scores=scores, verdict=verdict, reason=reason, judge=judge,
                              details=details, max_chars=self._max_chars)
        with self._lock:
            self._entries[trace.trace_id] = entry
            self._entries.move_to_end(trace.trace_id)
            while len(self._entries) > self._size:
                self._entries.popitem(last=False)

    def get(self, trace_id: str) -> dict[str, Any] | None:
        with self._lock:
            return self._entries.get(trace_id.strip().lower())

    def __len__(self) -> int:
        return len(self._entries)
