"""The shipped reader at run time: ``reader-int8.onnx`` (inside the package, sha256-checked) on
the shared ONNX runner, the MiniLM WordPiece tokenizer in pair mode.

``Reader.read(pairs)`` gives, for each (premise, claim), the probabilities of supported /
unsupported / contradicted. Pairs are tokenized once, run in batches of similar length, and a
premise longer than the budget is cut (the claim never is): the cost grows with claims x window
tokens, never with all context sentences.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import ModelError
from ..onnx_runner import OnnxRunner, file_sha256, length_buckets, padded, verified

MAX_TOKENS = 192  # the length the reader was trained with (train.MAX_LENGTH)
SUPPORTED, UNSUPPORTED, CONTRADICTED = 0, 1, 2
BATCH_SIZE = 16  # pairs a run at most (length_buckets cuts smaller ones where padding would cost more)
MODEL_FILE = "reader-int8.onnx"
# sha256 of the shipped file: written by export.py's run (docs/judges.md#the-reader)
READER_SHA256 = "ed635d12f823ba6c28a76bdc8eb1f8e714656e9eec7ca2e157bd1686a4d41278"


def bundled_path() -> Path:
    return Path(str(resources.files("ragmon.scoring.reader").joinpath("assets", MODEL_FILE)))


def pair_tokenizer() -> Any:
    """The MiniLM WordPiece tokenizer in pair mode, a premise longer than the budget cut (never the claim)."""
    from tokenizers import Tokenizer

    tokenizer_json = resources.files("ragmon.scoring.local").joinpath("assets/minilm-tokenizer.json")
    tokenizer = Tokenizer.from_str(tokenizer_json.read_text(encoding="utf-8"))
    tokenizer.enable_truncation(max_length=MAX_TOKENS, strategy="only_first")
    tokenizer.no_padding()
    return tokenizer


def pair_feeds(tokenizer: Any, pairs: Sequence[tuple[str, str]], batch_size: int
               ) -> Iterator[tuple[list[int], dict[str, np.ndarray], np.ndarray]]:
    """(indexes, feeds, lengths) of ``pairs`` tokenized and run in batches of similar length."""
    encodings = tokenizer.encode_batch([(p or " ", c or " ") for p, c in pairs])
    ids = [np.asarray(e.ids, dtype=np.int64) for e in encodings]
    types = [np.asarray(e.type_ids, dtype=np.int64) for e in encodings]
    for idx in length_buckets([len(x) for x in ids], batch_size):
        feeds, lengths = padded([ids[i] for i in idx], [types[i] for i in idx])
        yield idx, feeds, lengths


class Reader:
    """Premise/claim pairs -> (n, 3) probabilities; thread-safe."""

    def __init__(self, model_path: str | Path | None = None, sha256: str | None = READER_SHA256, *,
                 threads: int = 1, batch_size: int = BATCH_SIZE) -> None:
        path = Path(model_path) if model_path is not None else bundled_path()
        verified(str(path), sha256 or None, "reader model")
        self.path = path
        self.sha256 = sha256 or file_sha256(path)
        # onnxruntime's fused SkipLayerNormalization is slower than its parts here (as for the embedder)
        self._runner = OnnxRunner(path, threads=threads, name="reader model",
                                  disabled_optimizers=["SkipLayerNormFusion"])
        if "token_type_ids" not in self._runner.input_names:
            raise ModelError(f"{path} is not a sentence-pair model (no token_type_ids input)")
        self._tokenizer = pair_tokenizer()
        self._batch_size = batch_size
        self._lock = threading.Lock()
        self.tokens_read = 0  # tokens run through the model: the reader's cost (bench/judge_cost.py)
        self.pairs_read = 0

    def read(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        if not pairs:
            return np.zeros((0, 3), dtype=np.float32)
        with self._lock:
            batches = list(pair_feeds(self._tokenizer, pairs, self._batch_size))
        out = np.zeros((len(pairs), 3), dtype=np.float32)
        self.pairs_read += len(pairs)
        for idx, feeds, lengths in batches:
            (logits,) = self._runner.run(["logits"], feeds)
            z = logits - logits.max(axis=1, keepdims=True)
            p = np.exp(z)
            out[idx] = p / p.sum(axis=1, keepdims=True)
            self.tokens_read += int(lengths.sum())
        return out


_shared: dict[tuple[str | None, str | None], Reader] = {}
_shared_lock = threading.Lock()


def shared_reader(model_path: str | None = None, sha256: str | None = READER_SHA256) -> Reader:
    """One Reader per model per process."""
    key = (model_path, sha256)
    with _shared_lock:
        if key not in _shared:
            _shared[key] = Reader(model_path, sha256)
        return _shared[key]
