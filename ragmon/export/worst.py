"""The N worst recently scored traces, for error analysis at ``/worst``.

Bounded: at most ``size`` entries, each with text cut to ``max_chars``; entries older than
``ttl_s`` fall out so the list stays about *recent* traffic.
"""

from __future__ import annotations

import heapq
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..types import ClaimVerdictDetail


@dataclass(order=True)
class _Entry:
    sort_key: float  # badness (1 - lowest score); the min-heap root is the mildest kept entry
    seq: int
    payload: dict[str, Any] = field(compare=False)
    at: float = field(compare=False, default=0.0)


# Shown with every entry: what the numbers mean (docs/judges.md, "Score scale").
SCORE_SCALE = ("scores are in [0, 1]; below 0.5 means the judge finds a failure more likely than not "
               "(the local judge's scores are probabilities fitted with failures and passes weighed equally)")


def _cut(text: str | None, limit: int) -> str | None:
    if text is None:
        return None
    if limit <= 0:
        return ""
    return text if len(text) <= limit else text[:limit] + "…"


class WorstTraces:
    def __init__(self, size: int, max_chars: int, ttl_s: float = 3600.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._size = size
        self._max_chars = max_chars
        self._ttl_s = ttl_s
        self._clock = clock
        self._heap: list[_Entry] = []
        self._seq = 0
        self._lock = threading.Lock()

    def offer(self, *, trace_id: str, service: str, pipeline: str, scores: dict[str, float],
              verdict: str, reason: str, question: str | None, answer: str | None,
              detail: str | None = None, contradicted: list[ClaimVerdictDetail] | None = None) -> None:
        if self._size <= 0 or not scores:
            return
        badness = 1.0 - min(scores.values())
        payload = {
            "trace_id": trace_id,
            "service": service,
            "pipeline": pipeline,
            "scores": {k: round(v, 4) for k, v in scores.items()},
            "score_scale": SCORE_SCALE,
            "verdict": verdict,
            "reason": reason,
            "detail": _cut(detail, self._max_chars),
            # the claims the contexts say otherwise about, with the deciding sentence (at most 3)
            "contradicted_claims": [
                {k: _cut(v, self._max_chars) if isinstance(v, str) else v for k, v in claim.items()}
                for claim in (contradicted or [])[:3]
            ],
            "question": _cut(question, self._max_chars),
            "answer": _cut(answer, self._max_chars),
            "scored_at_unix": time.time(),
        }
        now = self._clock()
        with self._lock:
            self._expire(now)
            self._seq += 1
            entry = _Entry(badness, self._seq, payload, now)
            if len(self._heap) < self._size:
                heapq.heappush(self._heap, entry)
            elif entry.sort_key > self._heap[0].sort_key:
                heapq.heapreplace(self._heap, entry)

    def _expire(self, now: float) -> None:
        if any(now - e.at > self._ttl_s for e in self._heap):
            self._heap = [e for e in self._heap if now - e.at <= self._ttl_s]
            heapq.heapify(self._heap)

    def snapshot(self) -> list[dict[str, Any]]:
        """Worst first."""
        with self._lock:
            self._expire(self._clock())
            entries = sorted(self._heap, key=lambda e: (-e.sort_key, e.seq))
        return [e.payload for e in entries]
