"""BM25 over (id, title, text) documents with ``bm25s``: moved to :mod:`ragmon.datasets.retrievers`
(``ragmon chunking`` uses it at runtime); re-exported here for the benchmarks."""

from __future__ import annotations

from ragmon.datasets.retrievers import K1, STEMMER, STOPWORDS, TOKEN_PATTERN, B, Bm25Index, Doc

__all__ = ["K1", "STEMMER", "STOPWORDS", "TOKEN_PATTERN", "B", "Bm25Index", "Doc"]
