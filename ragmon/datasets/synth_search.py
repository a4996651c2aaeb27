"""Finding the other chunks a synthetic question is built against (split out of :mod:`.synth`).

Adversarial: :class:`Neighbours` (nearest chunks of other documents in MiniLM space, over a
bounded pool), :func:`pick_distractors` (up to two that share the target's content terms but do not
hold its fact) and :func:`distractor_terms` (their words the question uses). Multi-hop:
:func:`build_entity_index` (rare entities shared by a few documents) and :func:`entities`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

import numpy as np

from ..scoring import claims
from .chunking import Chunk
from .synth_parse import content_words

__all__ = ["Neighbours", "build_entity_index", "distractor_terms", "entities", "pick_distractors"]

_ENTITY_SKIP = frozenset({"we", "our", "the", "this", "these", "however", "here", "there", "both"})


class Neighbours:
    """Nearest chunks of other documents in MiniLM space, over a bounded pool."""

    def __init__(self, chunks: Sequence[Chunk], pool: list[int], vectors: np.ndarray,
                 embed: Callable[[Sequence[str]], Awaitable[np.ndarray]]) -> None:
        self._chunks = chunks
        self._pool = pool
        self._position = {c: i for i, c in enumerate(pool)}
        self._vectors = vectors
        self._embed = embed

    def nearest(self, index: int, k: int = 10) -> list[int]:
        position = self._position.get(index)
        vector = self._vectors[position] if position is not None else None
        if vector is None:  # a target outside the pool: compare with its own text's words only
            return []
        scores = self._vectors @ vector
        order = np.argsort(-scores)
        doc = self._chunks[index].doc_id
        out = []
        for p in order.tolist():
            j = self._pool[p]
            if self._chunks[j].doc_id != doc:
                out.append(j)
            if len(out) == k:
                break
        return out


def entities(text: str) -> set[str]:
    return {e for e in claims.entities(text) if len(e) > 2 and e not in _ENTITY_SKIP}


def build_entity_index(chunks: Sequence[Chunk]) -> dict[str, list[int]]:
    """Entity -> chunks mentioning it, for entities in 2..(1 % of the documents, at least 5) documents."""
    index: dict[str, list[int]] = {}
    for i, chunk in enumerate(chunks):
        for entity in entities(chunk.text):
            index.setdefault(entity, []).append(i)
    docs = len({c.doc_id for c in chunks})
    limit = max(5, docs // 100)
    out = {}
    for entity, members in index.items():
        n_docs = len({chunks[i].doc_id for i in members})
        if 2 <= n_docs <= limit:
            out[entity] = members
    return out


def pick_distractors(chunks: Sequence[Chunk], index: int, fact: str, neighbours: Neighbours) -> list[Chunk]:
    """Up to two of the target's nearest chunks that share >= 2 of its content words but do not hold
    the fact (less than half of the fact's content words occur in them)."""
    target = chunks[index]
    fact_words = content_words(fact)
    picked = []
    for j in neighbours.nearest(index):
        other = chunks[j]
        words = content_words(other.text)
        shared = content_words(target.text) & words
        holds_fact = fact_words and len(fact_words & words) / len(fact_words) >= 0.5
        if len(shared) >= 2 and not holds_fact:
            picked.append(other)
        if len(picked) == 2:
            break
    return picked


def distractor_terms(question: str, target: Chunk, picked: Sequence[Chunk]) -> list[str]:
    """The distractors' content words that the question uses, sorted."""
    distractor_words = set().union(*(content_words(c.text) for c in picked)) - content_words(target.text)
    return sorted(content_words(question) & (distractor_words | set().union(
        *(content_words(c.text) for c in picked))))
