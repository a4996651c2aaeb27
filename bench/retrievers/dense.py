"""Exact dense retrieval with ragmon's offline embedder (all-MiniLM-L6-v2, int8 ONNX).

Documents are embedded as "title. text" (MiniLM reads the first 128 word pieces); the score
is the cosine of unit vectors, so an exact search is one matrix-vector product.

Embedding a corpus is the slow part (about a minute for HotpotQA's 1,021 paragraphs on two
cores), so with ``cache_dir`` the vectors are kept in ``<cache_dir>/dense-<sha256>.npy``, keyed by
the model file's checksum and the exact texts; ``from_cache`` says whether they came from there
(``refresh=True`` embeds anyway and rewrites the file).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ragmon.scoring.embedder import Embedder, file_sha256

from .bm25 import Doc


def embed_text(doc: Doc) -> str:
    return f"{doc.title}. {doc.text}" if doc.title else doc.text


class DenseIndex:
    def __init__(self, docs: Sequence[Doc], *, threads: int = 2, batch_size: int = 32,
                 cache_dir: Path | None = None, refresh: bool = False) -> None:
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
        top = np.argpartition(-scores, k - 1)[:k]
        order = sorted(top.tolist(), key=lambda i: (-float(scores[i]), i))
        return [(self.docs[i], float(scores[i])) for i in order]
