"""The local judge's embedding pass: MiniLM sentence vectors and token states, through a bounded
sentence cache (retrieved documents recur across requests, and embedding is ~95% of the
judge's time)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .embedder import EMBEDDING_DIM, NO_TOKENS, Embedder, TokenStates

Cached = tuple[np.ndarray, TokenStates]
_ZERO_VEC = np.zeros(EMBEDDING_DIM, dtype=np.float32)
_ZERO_VEC.setflags(write=False)
ZERO: Cached = (_ZERO_VEC, NO_TOKENS)  # a sentence left out: cosine 0 with everything, no tokens


class VectorCache:
    """A bounded LRU of sentence -> (embedding, token states). Bounded by entries and by bytes
    (token states are ~20x a sentence vector)."""

    def __init__(self, size: int, max_bytes: int = 64 << 20) -> None:
        self._size = size
        self._max_bytes = max_bytes
        self._bytes = 0
        self._data: OrderedDict[str, Cached] = OrderedDict()
        self._lock = threading.Lock()

    def get_many(self, texts: Sequence[str]) -> list[Cached | None]:
        if self._size <= 0:
            return [None] * len(texts)
        with self._lock:
            out: list[Cached | None] = []
            for t in texts:
                hit = self._data.get(t)
                if hit is not None:
                    self._data.move_to_end(t)
                out.append(hit)
            return out

    def put_many(self, texts: Sequence[str], vecs: np.ndarray, states: Sequence[TokenStates]) -> None:
        if self._size <= 0:
            return
        with self._lock:
            for t, v, st in zip(texts, vecs, states, strict=True):
                old = self._data.pop(t, None)
                if old is not None:
                    self._bytes -= _nbytes(old)
                entry = (v, st)
                self._data[t] = entry
                self._bytes += _nbytes(entry)
            while self._data and (len(self._data) > self._size or self._bytes > self._max_bytes):
                _, dropped = self._data.popitem(last=False)
                self._bytes -= _nbytes(dropped)


def _nbytes(entry: Cached) -> int:
    vec, st = entry
    return int(vec.nbytes + st.vectors.nbytes + st.ids.nbytes) + 200  # + key and object overhead


_embedders: dict[tuple[str | None, str | None, int, bool], Embedder] = {}
_embedders_lock = threading.Lock()


def embedder_for(model_path: str | None, sha256: str | None, threads: int, int8: bool = True) -> Embedder:
    """One shared embedder per model, thread count and arithmetic (loading it costs seconds)."""
    # Batches are cut by token length (``onnx_runner.length_buckets``); 32 bounds one run's memory.
    key = (model_path, sha256, threads, int8)
    with _embedders_lock:
        if key not in _embedders:
            _embedders[key] = Embedder(model_path, sha256, threads=threads, batch_size=32, int8=int8)
        return _embedders[key]


@dataclass(frozen=True, slots=True)
class Embedded:
    """What one trace's embedding pass produced (vectors are unit-normalised)."""

    question_vecs: np.ndarray  # the question, then its topic-free version when there is one
    claim_vecs: np.ndarray
    sentence_vecs: np.ndarray  # zeros for sentences left out (see analysis.sentences_to_embed)
    answer_vec: np.ndarray | None
    question_tokens: list[TokenStates]
    claim_tokens: list[TokenStates]
    sentence_tokens: list[TokenStates]  # empty for sentences left out


class SentenceEncoder:
    """An ``Embedder`` behind a ``VectorCache``."""

    def __init__(self, embedder: Embedder, cache: VectorCache) -> None:
        self._embedder = embedder
        self.cache = cache

    def encode(self, texts: list[str]) -> tuple[np.ndarray, list[TokenStates]]:
        """Vectors and token states of ``texts``, through the sentence cache."""
        if not texts:
            return np.zeros((0, EMBEDDING_DIM), dtype=np.float32), []
        cached = self.cache.get_many(texts)
        missing = list(dict.fromkeys(t for t, hit in zip(texts, cached, strict=True) if hit is None))
        if missing:
            fresh, fresh_states = self._embedder.embed_with_tokens(missing)
            self.cache.put_many(missing, fresh, fresh_states)
            found = {t: (fresh[i], fresh_states[i]) for i, t in enumerate(missing)}
        else:
            found = {}
        entries = [hit if hit is not None else found[t] for t, hit in zip(texts, cached, strict=True)]
        return (
            np.array([e[0] for e in entries], dtype=np.float32).reshape(len(texts), EMBEDDING_DIM),
            [e[1] for e in entries],
        )

    def kept_hits(self, sentences: Sequence[str], embed_mask: np.ndarray) -> list[Cached | None]:
        """Per context sentence: ZERO where ``embed_mask`` leaves it out — even when an earlier trace cached it,
        so a trace's score never follows the traces before it —, else its cached entry, or None (to embed)."""
        cached = self.cache.get_many(sentences)
        return [hit if keep else ZERO for hit, keep in zip(cached, embed_mask, strict=True)]

    def embed_all(
        self, questions: list[str], claims: list[str], sentences: list[str], answer: str | None,
        embed_mask: np.ndarray,
    ) -> Embedded:
        """One batch for a trace: the uncached context sentences ``embed_mask`` keeps, the
        questions and the claims (cached sentences are not embedded again)."""
        cached = self.kept_hits(sentences, embed_mask)
        missing = [s for s, v in zip(sentences, cached, strict=True) if v is None]
        missing_unique = list(dict.fromkeys(missing))
        batch: list[str] = list(missing_unique)
        q_start = len(batch)
        batch.extend(questions)
        claim_start = len(batch)
        batch.extend(claims)
        vecs, states = self._embedder.embed_with_tokens(batch)
        fresh = vecs[: len(missing_unique)]
        self.cache.put_many(missing_unique, fresh, states[: len(missing_unique)])
        lookup = {s: (fresh[i], states[i]) for i, s in enumerate(missing_unique)}
        entries = [v if v is not None else lookup[s] for s, v in zip(sentences, cached, strict=True)]
        sentence_vecs = np.array([e[0] for e in entries], dtype=np.float32).reshape(len(sentences), EMBEDDING_DIM)
        claim_vecs = vecs[claim_start : claim_start + len(claims)]
        # The answer as a whole: the normalised mean of its claims (embedding the full answer
        # again would cost a third more and MiniLM would cut it at 128 tokens anyway).
        answer_vec: np.ndarray | None = None
        if answer is not None and len(claims):
            mean = claim_vecs.mean(axis=0)
            answer_vec = mean / max(float(np.linalg.norm(mean)), 1e-12)
        return Embedded(
            question_vecs=vecs[q_start:claim_start],
            claim_vecs=claim_vecs,
            sentence_vecs=sentence_vecs,
            answer_vec=answer_vec,
            question_tokens=states[q_start:claim_start],
            claim_tokens=states[claim_start : claim_start + len(claims)],
            sentence_tokens=[e[1] for e in entries],
        )
