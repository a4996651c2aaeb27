r"""Reference retrievers over (id, title, text) documents: BM25 (``bm25s``) and exact dense search
(ragmon's offline MiniLM embedder). ``ragmon chunking`` indexes chunks with them; the evaluation
benchmarks (``bench/retrievers``) import them from here.

**BM25** is the configuration of the Pyserini/Anserini "flat" BEIR baseline: one field (title and
text joined), k1 = 0.9, b = 0.4, Lucene's BM25 variant (``method="lucene"``), and an analyzer close
to Anserini's default English one: lowercase, every run of word characters a token (Lucene's
StandardTokenizer keeps one-character tokens such as the "b" of "vitamin b 12"), Lucene's English
stopword list (``bm25s``'s ``"en"``), Porter stemming (PyStemmer's ``"porter"``, the stemmer
Lucene's PorterStemFilter implements). As Lucene does, only documents that share at least one
term with the query are returned (score > 0); ties are broken by corpus order.

On SciFact the analyzer matters more than anything else: with scikit-learn's default
``\w\w+`` tokens (bm25s's default) Recall@100 drops by about 0.01 (0.9187 with Porter,
0.9127 with Snowball English); with Snowball English and ``\w+`` it is 0.6804 / 0.9220.

**Dense**: documents are embedded as "title. text" (MiniLM reads the first 128 word pieces); the
score is the cosine of unit vectors, so an exact search is one matrix-vector product. Embedding a
corpus is the slow part (about a minute for 1,000 paragraphs on two cores), so with ``cache_dir``
the vectors are kept in ``<cache_dir>/dense-<sha256>.npy``, keyed by the model file's checksum and
the exact texts; ``from_cache`` says whether they came from there (``refresh=True`` embeds anyway).

BM25 needs ``pip install 'ragmon[datasets]'`` (bm25s, PyStemmer).
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from ..errors import EvalInputError

__all__ = [
    "K1",
    "STEMMER",
    "STOPWORDS",
    "TOKEN_PATTERN",
    "B",
    "Bm25Index",
    "DenseIndex",
    "Doc",
    "Retriever",
    "embed_text",
]

K1 = 0.9
B = 0.4
STEMMER = "porter"  # PyStemmer algorithm name
STOPWORDS = "en"  # bm25s's English list: Lucene's 33 English stopwords
TOKEN_PATTERN = r"(?u)\b\w+\b"

logging.getLogger("bm25s").setLevel(logging.WARNING)  # it logs each index build at DEBUG


@dataclass(frozen=True, slots=True)
class Doc:
    id: str
    title: str
    text: str

    @property
    def content(self) -> str:
        return f"{self.title} {self.text}".strip() if self.title else self.text


class Retriever(Protocol):
    docs: list[Doc]
    build_s: float

    def search(self, query: str, k: int) -> list[tuple[Doc, float]]: ...


def _bm25_modules() -> tuple[Any, Any]:
    try:
        import bm25s
        import Stemmer
    except ImportError as exc:
        raise EvalInputError("the BM25 retriever needs bm25s and PyStemmer: pip install 'ragmon[datasets]'") from exc
    return bm25s, Stemmer


class Bm25Index:
    def __init__(self, docs: Sequence[Doc], *, k1: float = K1, b: float = B) -> None:
        started = time.perf_counter()
        bm25s, stemmer_module = _bm25_modules()
        self._bm25s = bm25s
        self.docs = list(docs)
        self._stemmer = stemmer_module.Stemmer(STEMMER)
        tokens = bm25s.tokenize([d.content for d in self.docs], stopwords=STOPWORDS, stemmer=self._stemmer,
                                token_pattern=TOKEN_PATTERN, show_progress=False)
        self._bm25 = bm25s.BM25(k1=k1, b=b, method="lucene")
        self._bm25.index(tokens, show_progress=False)
        self.build_s = time.perf_counter() - started

    def search(self, query: str, k: int) -> list[tuple[Doc, float]]:
        """The top ``k`` documents with a positive score, best first."""
        (tokens,) = self._bm25s.tokenize([query], stopwords=STOPWORDS, stemmer=self._stemmer,
                                         token_pattern=TOKEN_PATTERN, show_progress=False, return_ids=False)
        known = [t for t in tokens if t in self._bm25.vocab_dict]
        if not known:
            return []
        scores = self._bm25.get_scores(known)
        hits = np.flatnonzero(scores > 0)
        if hits.size > k:
            hits = hits[np.argpartition(-scores[hits], k - 1)[:k]]
        order = sorted(hits.tolist(), key=lambda i: (-float(scores[i]), i))
        return [(self.docs[i], float(scores[i])) for i in order]


def embed_text(doc: Doc) -> str:
    return f"{doc.title}. {doc.text}" if doc.title else doc.text


class DenseIndex:
    def __init__(self, docs: Sequence[Doc], *, threads: int = 2, batch_size: int = 32,
                 cache_dir: Path | None = None, refresh: bool = False) -> None:
        from ..scoring.local.embedder import Embedder
        from ..scoring.onnx_runner import file_sha256

        started = time.perf_counter()
        self.docs = list(docs)
        self._embedder = Embedder(threads=threads, batch_size=batch_size)
        texts = [embed_text(d) for d in self.docs]
        cached: Path | None = None
        if cache_dir is not None:
            key = hashlib.sha256(file_sha256(Path(self._embedder.model_path)).encode())
            for text in texts:
                key.update(text.encode("utf-8"))
                key.update(b"\0")
            cached = cache_dir / f"dense-{key.hexdigest()[:16]}.npy"
        self.from_cache = cached is not None and cached.exists() and not refresh
        if cached is not None and self.from_cache:
            self._matrix = np.load(cached)
        else:
            self._matrix = self._embedder.embed(texts)
            if cached is not None:
                cached.parent.mkdir(parents=True, exist_ok=True)
                tmp = cached.with_suffix(".tmp.npy")
                np.save(tmp, self._matrix)
                tmp.replace(cached)
        self.build_s = time.perf_counter() - started

    def search(self, query: str, k: int) -> list[tuple[Doc, float]]:
        """The ``k`` most similar documents, best first (ties by corpus order)."""
        vector = self._embedder.embed([query])[0]
        scores = self._matrix @ vector
        k = min(k, len(self.docs))
        if k < 1:
            return []
        top = np.argpartition(-scores, k - 1)[:k]
        order = sorted(top.tolist(), key=lambda i: (-float(scores[i]), i))
        return [(self.docs[i], float(scores[i])) for i in order]
