"""Retrieval metrics of one question against its gold documents: pure, synchronous, no I/O.

Inputs
    ``retrieved``: document ids in rank order (rank 1 first), as the retriever reported them.
    ``gold``: gold document id -> relevance grade (0-3). A document is *relevant* when its grade
    is > 0; grade 0 means "judged, not relevant" (it never counts as a hit and adds no gain).

Conventions (the ones trec_eval, pytrec_eval and ranx use; ``tests/evaluation`` checks every
metric against ``pytrec_eval`` to 1e-9):

* **Duplicates.** A run gives each document one rank, so ``retrieved`` is first de-duplicated
  keeping the *first* occurrence: ``["a", "b", "a", "c"]`` is ranked as ``["a", "b", "c"]``.
  A gold document retrieved twice counts once, and ``k`` counts distinct documents.
* **Ranks are given.** Ties in retrieval scores are the caller's business: the order of
  ``retrieved`` is the ranking (trec_eval breaks score ties by document id, descending).
* **Cut-offs.** ``k`` may exceed the list length: missing ranks are simply not retrieved.

With ``R`` = the set of relevant gold ids, ``d_1..d_n`` the de-duplicated ranking and
``rel(d) = 1 if d in R else 0``:

* ``hit@k       = 1 if any(rel(d_i) for i <= k) else 0``                  (trec_eval ``success_k``)
* ``recall@k    = |{d_i : i <= k} ∩ R| / |R|``                            (``recall_k``)
* ``precision@k = |{d_i : i <= k} ∩ R| / k`` — divided by ``k`` even when fewer than ``k``
  documents were returned (the trec_eval ``P_k`` convention)
* ``mrr         = 1 / min{i : rel(d_i)}`` over the *whole* list, 0 when no relevant document is
  returned (``recip_rank``; averaged over questions it is the mean reciprocal rank)
* ``ap          = Σ_i rel(d_i) · precision@i / |R|`` over the whole list (``map`` averages it over
  questions; ``ragmon calibrate`` reports it for the judge's ordering of a trace's contexts)
* ``ndcg@k      = DCG@k / IDCG@k`` with ``DCG@k = Σ_{i<=k} grade(d_i) / log2(i + 1)`` and
  ``IDCG@k`` the same sum over the gold grades sorted descending (truncated at ``k``); 0 when
  ``IDCG@k`` is 0 (``ndcg_cut_k``). Negative grades are treated as 0.

Multi-hop rows carry ``hops``: one frozenset of acceptable ids per hop.

* ``two_hop_recall@k = 1 if every hop has at least one of its ids among d_1..d_k else 0``
* :func:`classify_hop_miss` names what is missing at ``k``: ``hop1_miss`` (first hop only),
  ``hop2_miss`` (a later hop only), ``both_miss``, or None when nothing is missing.

Not computable (None) — the one rule for a ranking with nothing relevant, in ``ragmon eval`` and
``ragmon calibrate`` alike: it has no hit, recall, precision, AP, MRR or NDCG, and it is left out
of every mean (never averaged as 0, never NaN). :func:`retrieval_metrics` returns None for every
gold-based metric when the row has no relevant gold document (``no_answer`` rows, or gold that is
all grade 0) — a 0 there would drag the averages down for questions that have nothing to find;
calibration's MAP/MRR/NDCG count only traces with a relevant context (and say how many), and
``ragmon chunking`` grades only questions with a relevant gold document in the corpus. The
single-list functions below, pinned to trec_eval by the tests, return trec_eval's 0.0 for such a
list: call them behind that check. Two-hop metrics are None when ``hops`` holds an empty hop.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Final

from .types import QUESTION_TYPES

DEFAULT_KS: Final = (1, 3, 5, 10)

HOP1_MISS: Final = "hop1_miss"
HOP2_MISS: Final = "hop2_miss"
BOTH_MISS: Final = "both_miss"
MISS_CLASSES: Final = (HOP1_MISS, HOP2_MISS, BOTH_MISS)

# The metric each question type is judged by; "{k}" is the report's primary cut-off.
_PRIMARY_METRIC: Final[Mapping[str, str | None]] = {
    "factoid": "mrr",
    "summary": "recall@{k}",
    "multi_hop": "two_hop_recall@{k}",
    "no_answer": None,
}


def dedupe(retrieved: Iterable[str]) -> tuple[str, ...]:
    """The ranking with repeated ids removed, keeping each id's first (best) rank."""
    return tuple(dict.fromkeys(retrieved))


def _check_k(k: int) -> None:
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")


def _relevant(gold: Mapping[str, int]) -> frozenset[str]:
    return frozenset(doc for doc, grade in gold.items() if grade > 0)


def _hits_in_top(retrieved: Sequence[str], gold: Mapping[str, int], k: int) -> int:
    _check_k(k)
    relevant = _relevant(gold)
    return sum(1 for doc in dedupe(retrieved)[:k] if doc in relevant)


def hit_at(retrieved: Sequence[str], gold: Mapping[str, int], k: int) -> float:
    """1.0 when a relevant document is among the first ``k`` distinct ids, else 0.0."""
    return 1.0 if _hits_in_top(retrieved, gold, k) else 0.0


def recall_at(retrieved: Sequence[str], gold: Mapping[str, int], k: int) -> float | None:
    """Share of the relevant gold documents among the first ``k`` distinct ids; None without any."""
    n_relevant = len(_relevant(gold))
    if n_relevant == 0:
        _check_k(k)
        return None
    return _hits_in_top(retrieved, gold, k) / n_relevant


def precision_at(retrieved: Sequence[str], gold: Mapping[str, int], k: int) -> float:
    """Relevant documents among the first ``k`` distinct ids, divided by ``k`` (trec_eval ``P_k``)."""
    return _hits_in_top(retrieved, gold, k) / k


def reciprocal_rank(retrieved: Sequence[str], gold: Mapping[str, int]) -> float:
    """1 / rank of the first relevant document over the whole de-duplicated list; 0.0 if none."""
    relevant = _relevant(gold)
    for rank, doc in enumerate(dedupe(retrieved), start=1):
        if doc in relevant:
            return 1.0 / rank
    return 0.0


def average_precision(retrieved: Sequence[str], gold: Mapping[str, int]) -> float:
    """Precision at each relevant rank, summed over the whole list and divided by the number of
    relevant gold documents (trec_eval ``map`` for one question); 0.0 if none is relevant."""
    relevant = _relevant(gold)
    if not relevant:
        return 0.0
    hits = 0
    total = 0.0
    for rank, doc in enumerate(dedupe(retrieved), start=1):
        if doc in relevant:
            hits += 1
            total += hits / rank
    return total / len(relevant)


def _dcg(gains: Iterable[float]) -> float:
    return sum(gain / math.log2(rank + 1) for rank, gain in enumerate(gains, start=1))


def ndcg_at(retrieved: Sequence[str], gold: Mapping[str, int], k: int) -> float:
    """Normalised DCG at ``k``: gain = grade, discount log2(rank + 1); 0.0 when the ideal DCG is 0."""
    _check_k(k)
    ideal = _dcg(sorted((max(grade, 0) for grade in gold.values()), reverse=True)[:k])
    if ideal <= 0.0:
        return 0.0
    return _dcg(max(gold.get(doc, 0), 0) for doc in dedupe(retrieved)[:k]) / ideal


def _missed_hops(retrieved: Sequence[str], hops: Sequence[frozenset[str]], k: int) -> list[bool] | None:
    _check_k(k)
    if not hops or any(not hop for hop in hops):
        return None
    top = frozenset(dedupe(retrieved)[:k])
    return [top.isdisjoint(hop) for hop in hops]


def two_hop_recall_at(retrieved: Sequence[str], hops: Sequence[frozenset[str]], k: int) -> float | None:
    """1.0 when every hop has an acceptable document among the first ``k`` distinct ids, else 0.0.

    None when there are no hops or a hop has no acceptable id (not computable).
    """
    missed = _missed_hops(retrieved, hops, k)
    if missed is None:
        return None
    return 0.0 if any(missed) else 1.0


def classify_hop_miss(retrieved: Sequence[str], hops: Sequence[frozenset[str]], k: int) -> str | None:
    """``hop1_miss`` | ``hop2_miss`` | ``both_miss`` at cut-off ``k``; None when no hop is missed.

    Defined for two hops; with more, every hop after the first counts as "hop 2" (``hop2_miss``
    when any later hop is missed). None as well when the hops are not computable.
    """
    missed = _missed_hops(retrieved, hops, k)
    if missed is None:
        return None
    first, later = missed[0], any(missed[1:])
    if first and later:
        return BOTH_MISS
    if first:
        return HOP1_MISS
    if later:
        return HOP2_MISS
    return None


def retrieval_metrics(
    retrieved: Sequence[str],
    gold: Mapping[str, int],
    ks: Sequence[int] = DEFAULT_KS,
    hops: Sequence[frozenset[str]] = (),
) -> dict[str, float | None]:
    """Every retrieval metric of one question, keyed by its report name.

    Keys: ``hit@k``, ``recall@k``, ``precision@k``, ``ndcg@k`` for each ``k`` in ``ks``, ``mrr``,
    and ``two_hop_recall@k`` for each ``k`` when ``hops`` is given. Gold-based values are None
    when ``gold`` has no relevant (grade > 0) document; two-hop values are None when a hop is
    empty (see the module docstring).
    """
    for k in ks:
        _check_k(k)
    ranking = dedupe(retrieved)
    out: dict[str, float | None] = {}
    computable = bool(_relevant(gold))
    for k in ks:
        out[f"hit@{k}"] = hit_at(ranking, gold, k) if computable else None
        out[f"recall@{k}"] = recall_at(ranking, gold, k) if computable else None
        out[f"precision@{k}"] = precision_at(ranking, gold, k) if computable else None
        out[f"ndcg@{k}"] = ndcg_at(ranking, gold, k) if computable else None
    out["mrr"] = reciprocal_rank(ranking, gold) if computable else None
    if hops:
        for k in ks:
            out[f"two_hop_recall@{k}"] = two_hop_recall_at(ranking, hops, k)
    return out


def primary_metric(question_type: str, k: int = 5) -> str | None:
    """The report's primary retrieval metric for a question type.

    factoid -> ``mrr``; summary -> ``recall@{k}``; multi_hop -> ``two_hop_recall@{k}``;
    no_answer -> None (nothing to retrieve). An unknown type raises ValueError.
    """
    _check_k(k)
    try:
        template = _PRIMARY_METRIC[question_type]
    except KeyError:
        raise ValueError(f"unknown question_type {question_type!r}; expected one of {QUESTION_TYPES}") from None
    return None if template is None else template.format(k=k)
