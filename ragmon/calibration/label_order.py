"""Which candidates ``ragmon dataset label --mode judge`` offers first: the ones whose labels help a
``ragmon calibrate --fit`` most.

A fit learns where the judge's cut belongs and how to weigh its evidence near it; a trace the judge
scored 0.02 or 0.98 teaches it little, one near the threshold a lot. So candidates are ordered by
how close the judge's score is to the threshold (the metric nearest its cut decides), and pipelines
take turns, so that every pipeline is labelled early instead of the one that happens to sit near
0.5. Verdicts are not made to take turns: on the dev sets that forced as many labels from one side
of the cut as from the other and cost balanced accuracy (bench/label_order.py, docs/judges.md).
Candidates without scores come last, in file order. Deterministic: ties are broken by id.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any, Final, TypeVar

__all__ = ["fit_order", "uncertainty"]

T = TypeVar("T")
_NO_SCORE: Final = 2.0


def uncertainty(scores: Mapping[str, Any], threshold: float = 0.5) -> float:
    """Distance of the score nearest the threshold (0 = on the cut); 2.0 when there is no score."""
    values = [float(v) for v in scores.values() if isinstance(v, int | float) and not isinstance(v, bool)]
    return min((abs(v - threshold) for v in values), default=_NO_SCORE)


def fit_order(candidates: Sequence[T], *, scores_of: Callable[[T], Mapping[str, Any]],
              stratum_of: Callable[[T], Hashable], id_of: Callable[[T], str], threshold: float = 0.5) -> list[T]:
    """``candidates`` reordered for labelling: within each stratum (the pipeline) nearest the
    threshold first, strata taking turns; unscored candidates last."""
    strata: dict[Hashable, list[T]] = defaultdict(list)
    unscored: list[T] = []
    for c in candidates:
        if uncertainty(scores_of(c), threshold) >= _NO_SCORE:
            unscored.append(c)
        else:
            strata[stratum_of(c)].append(c)
    queues = [sorted(members, key=lambda c: (uncertainty(scores_of(c), threshold),
                                             hashlib.sha256(id_of(c).encode()).hexdigest()))
              for _, members in sorted(strata.items(), key=lambda kv: str(kv[0]))]
    out: list[T] = []
    for turn in range(max((len(q) for q in queues), default=0)):
        out += [q[turn] for q in queues if turn < len(q)]
    return out + unscored
