"""Which candidates ``ragmon dataset label --mode judge`` offers first: the ones whose labels help a
``ragmon calibrate --fit`` most.

A fit learns where the judge's cut belongs and how to weigh its evidence; a trace the judge scored
0.02 or 0.98 teaches it little, one near the threshold a lot. So candidates are ordered by how
close the judge's score is to the threshold (the metric nearest its cut decides), and strata —
(pipeline, verdict) — take turns, so that every pipeline and both kinds of verdict are labelled
early instead of the one that happens to sit near 0.5. Every ``SPREAD_EVERY``-th pick within a
stratum is its next candidate in score order across the whole range instead (a fit that never sees
a clear case cannot learn the slope: docs/judges.md has the learning curve that chose this).
Candidates without scores come last, in file order. Deterministic: ties are broken by id.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any, Final, TypeVar

__all__ = ["SPREAD_EVERY", "fit_order", "uncertainty"]

T = TypeVar("T")
SPREAD_EVERY: Final = 3  # every third pick of a stratum spreads over the score range
_NO_SCORE: Final = 2.0


def uncertainty(scores: Mapping[str, Any], threshold: float = 0.5) -> float:
    """Distance of the score nearest the threshold (0 = on the cut); 2.0 when there is no score."""
    values = [float(v) for v in scores.values() if isinstance(v, int | float) and not isinstance(v, bool)]
    return min((abs(v - threshold) for v in values), default=_NO_SCORE)


def _tie(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def fit_order(candidates: Sequence[T], *, scores_of: Any, stratum_of: Any, id_of: Any,
              threshold: float = 0.5, spread_every: int = SPREAD_EVERY) -> list[T]:
    """``candidates`` reordered for labelling (see the module doc); the accessors read a candidate's
    scores (a mapping metric -> score), its stratum (any hashable) and its id. ``spread_every`` 0:
    nearest the threshold only."""
    strata: dict[Any, list[T]] = defaultdict(list)
    unscored: list[T] = []
    for c in candidates:
        if uncertainty(scores_of(c), threshold) >= _NO_SCORE:
            unscored.append(c)
        else:
            strata[stratum_of(c)].append(c)
    queues: dict[Any, tuple[list[T], list[T]]] = {}
    for key, members in strata.items():
        near = sorted(members, key=lambda c: (uncertainty(scores_of(c), threshold), _tie(str(id_of(c)))))
        spread = _spread(members, scores_of, id_of)
        queues[key] = (near, spread)
    out: list[T] = []
    taken: set[int] = set()
    picks = dict.fromkeys(queues, 0)
    keys = sorted(queues, key=str)
    while len(out) < len(candidates) - len(unscored):
        for key in keys:
            near, spread = queues[key]
            queue = spread if spread_every and picks[key] % spread_every == spread_every - 1 else near
            while queue and id(queue[0]) in taken:
                queue.pop(0)
            if not queue:  # the other queue may still hold some
                queue = near if queue is spread else spread
                while queue and id(queue[0]) in taken:
                    queue.pop(0)
            if queue:
                c = queue.pop(0)
                taken.add(id(c))
                out.append(c)
                picks[key] += 1
    return out + unscored


def _spread(members: list[T], scores_of: Any, id_of: Any) -> list[T]:
    """Members in an order that covers the score range: by mean score, then taken from alternate ends
    and the middle outwards (low, high, middle, ...) by bisecting the sorted list."""
    def mean(c: T) -> float:
        values = [float(v) for v in scores_of(c).values() if isinstance(v, int | float) and not isinstance(v, bool)]
        return sum(values) / len(values)

    ordered = sorted(members, key=lambda c: (mean(c), _tie(str(id_of(c)))))
    out: list[T] = []
    seen: set[int] = set()
    spans = [(0, len(ordered) - 1)]
    if ordered:
        for i in (0, len(ordered) - 1):
            if i not in seen:
                seen.add(i)
                out.append(ordered[i])
    while spans:
        nxt = []
        for lo, hi in spans:
            if hi - lo < 2:
                continue
            mid = (lo + hi) // 2
            if mid not in seen:
                seen.add(mid)
                out.append(ordered[mid])
            nxt += [(lo, mid), (mid, hi)]
        spans = nxt
    out += [c for i, c in enumerate(ordered) if i not in seen]
    return out
