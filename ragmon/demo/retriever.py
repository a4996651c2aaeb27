"""BM25 retrieval over the bundled corpus (``bm25s``, the project's one BM25 library), plus the
off-topic search the demo uses to simulate a retrieval miss."""

from __future__ import annotations

import logging
import random
from collections.abc import Callable
from dataclasses import dataclass

import bm25s
import numpy as np

from .corpus import Corpus, KbDocument
from .text import content_tokens


@dataclass(frozen=True, slots=True)
class Hit:
    """One retrieved article with its BM25 score and 0-based rank."""

    document: KbDocument
    score: float
    rank: int

    def as_dict(self) -> dict[str, object]:
        """The shape handed to ``@ragmon.retriever`` (its document adapter reads these keys)."""
        return {
            "id": self.document.id,
            "content": self.document.text,
            "score": round(self.score, 4),
            "metadata": {"title": self.document.title, "topic": self.document.topic},
        }


K1 = 1.5
B = 0.75

logging.getLogger("bm25s").setLevel(logging.WARNING)  # it logs each index build at DEBUG


def title_and_text(doc: KbDocument) -> str:
    return f"{doc.title} {doc.text}"


class Bm25Retriever:
    """Okapi BM25 (Robertson's idf, k1 1.5, b 0.75) over what ``indexed`` takes of every article
    (default: title + text).

    Scores are the textbook ones, ``idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * len / avglen))``:
    bm25s leaves out the constant ``(k1 + 1)``, so it is put back: the scores the demo's spans carry
    stay those of earlier releases, which used rank-bm25's ``BM25Okapi`` (equal to 1e-14 on every
    corpus question; its idf floor for words in over half the articles never applies here)."""

    def __init__(self, corpus: Corpus, indexed: Callable[[KbDocument], str] = title_and_text) -> None:
        self._docs = corpus.documents
        self._bm25 = bm25s.BM25(k1=K1, b=B, method="robertson", dtype="float64")
        self._bm25.index([content_tokens(indexed(d)) for d in self._docs], show_progress=False)

    def _scores(self, query: str) -> np.ndarray:
        terms = [t for t in content_tokens(query) if t in self._bm25.vocab_dict]
        if not terms:
            return np.zeros(len(self._docs))
        return np.asarray(self._bm25.get_scores(terms), dtype=float) * (K1 + 1.0)

    def search(self, query: str, k: int = 3) -> list[Hit]:
        """The top ``k`` articles, best first (ties broken by corpus order: deterministic)."""
        scores = self._scores(query)
        order = sorted(range(len(self._docs)), key=lambda i: (-scores[i], i))[:k]
        return [Hit(self._docs[i], float(scores[i]), rank) for rank, i in enumerate(order)]

    def search_off_topic(self, query: str, rng: random.Random, k: int = 3) -> list[Hit]:
        """``k`` articles from topics the query's best match is not about, as a broken
        index or a wrong embedding model would return them (their real, low BM25 scores)."""
        scores = self._scores(query)
        best_topic = self._docs[int(np.argmax(scores))].topic
        pool = [i for i, d in enumerate(self._docs) if d.topic != best_topic and scores[i] <= 0.0]
        if len(pool) < k:  # every article matched a word: fall back to the lowest scores
            pool = sorted(
                (i for i, d in enumerate(self._docs) if d.topic != best_topic), key=lambda i: scores[i]
            )[: max(k, 2 * k)]
        chosen = sorted(rng.sample(pool, k), key=lambda i: (-scores[i], i))
        return [Hit(self._docs[i], float(scores[i]), rank) for rank, i in enumerate(chosen)]
