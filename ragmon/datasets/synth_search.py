"""Finding the other chunks a synthetic question is built against (split out of :mod:`.synth`).

Adversarial: :class:`Neighbours` (nearest chunks of other documents in MiniLM space, over a
bounded pool), :func:`pick_distractors` (up to two that share the target's content terms but do not
hold its fact), :func:`offer_terms` (the distractors' specific words the target lacks: the words
that pull a search away from the target) and :func:`terms_used` (which of them the question uses). Multi-hop:
:func:`build_entity_index` (rare entities shared by a few documents) and :func:`entities`.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence

import numpy as np

from ..scoring.local import claims
from .chunking import Chunk
from .synth_parse import content_words

__all__ = [
    "Neighbours", "TermRarity", "build_entity_index", "entities", "offer_terms", "pick_distractors", "terms_used",
]

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

    async def nearest(self, index: int, k: int = 10) -> list[int]:
        """The ``k`` pool chunks of other documents nearest to chunk ``index`` (embedded on demand
        when it is not in the pool: a target must never go without distractors for that)."""
        position = self._position.get(index)
        if position is not None:
            vector = self._vectors[position]
        else:
            vector = (await self._embed([self._chunks[index].content]))[0]
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


async def pick_distractors(chunks: Sequence[Chunk], index: int, fact: str, neighbours: Neighbours) -> list[Chunk]:
    """Up to two of the target's nearest chunks that share >= 2 of its content words but do not hold
    the fact (less than half of the fact's content words occur in them)."""
    target = chunks[index]
    fact_words = content_words(fact)
    picked = []
    for j in await neighbours.nearest(index):
        other = chunks[j]
        words = content_words(other.text)
        shared = content_words(target.text) & words
        holds_fact = fact_words and len(fact_words & words) / len(fact_words) >= 0.5
        if len(shared) >= 2 and not holds_fact:
            picked.append(other)
        if len(picked) == 2:
            break
    return picked


class TermRarity:
    """Inverse document frequency of content words over the chunks: a rare word ("kinase",
    "Drosophila") is what makes a search pick a chunk; a common one ("effect", "found") is not."""

    def __init__(self, chunks: Sequence[Chunk]) -> None:
        self._df: Counter[str] = Counter()
        for chunk in chunks:
            self._df.update(content_words(chunk.text))
        self._n = max(1, len(chunks))

    def idf(self, stem: str) -> float:
        return math.log((self._n + 1) / (self._df.get(stem, 0) + 1))

    def specific(self, stem: str) -> bool:
        """In at most 1 % of the chunks (at least 2): a word that points a search somewhere."""
        return self._df.get(stem, 0) <= max(2, self._n // 100)


_SURFACE_WORD = re.compile(r"[A-Za-z][A-Za-z0-9-]*[A-Za-z0-9]")


def offer_terms(target: Chunk, fact: str, picked: Sequence[Chunk], rarity: TermRarity, limit: int = 6) -> list[str]:
    """The distractors' specific words (as written; in at most 1 % of the chunks) that neither the
    target nor the fact contains: words in both distractors first, then the rarest; one spelling per
    stem. Common words ("show", "factor") would not pull a search anywhere."""
    own = content_words(target.text) | content_words(fact)
    per_chunk = [content_words(c.text) for c in picked]
    seen: dict[str, str] = {}
    for chunk in picked:
        for word in _SURFACE_WORD.findall(chunk.text):
            stems = content_words(word)
            if len(stems) != 1:
                continue  # a stopword, or a hyphenated compound read as two words
            (stem,) = stems
            if stem not in own and stem not in seen and len(word) > 3 and rarity.specific(stem):
                seen[stem] = word
    ranked = sorted(seen, key=lambda st: (-sum(st in words for words in per_chunk), -rarity.idf(st), st))
    return [seen[st] for st in ranked[:limit]]


def terms_used(question: str, offered: Sequence[str]) -> list[str]:
    """The offered terms (compared by stem) that the question contains."""
    in_question = content_words(question)
    return [term for term in offered if content_words(term) and content_words(term) <= in_question]
