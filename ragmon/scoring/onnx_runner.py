"""The one way a judge runs an ONNX model on CPU: a verified file, one onnxruntime session, and
padded batches of token ids cut by length. Used by the sentence embedder (``local/embedder.py``)
and the trained reader (``reader/model.py``), so neither keeps its own copy.

A missing or corrupt model file is a ``ModelError`` naming the file at start-up, never a failure
on the first trace.
"""

from __future__ import annotations

import hashlib
import os
import platform
import threading
from collections.abc import Mapping, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ModelError

# One model run costs about as much as this many more tokens in the batch (each run streams all
# the weights once: measured on a 2-core x86 machine, float32 MLAS kernels; on the int8 path a run
# costs ~0.45 ms, about 6 tokens at ~83 us each, close enough to keep one value: the cuts barely
# move between 6 and 10).
RUN_COST_TOKENS = 10


def cpu_model() -> str:
    """The CPU's model name, its vector flags that decide how int8 products are computed, and its
    logical CPUs. The same int8 file scores slightly differently with and without VNNI
    (``reader/seven_bit.py``), so every measured score or cost names the CPU it came from."""
    model, flags = platform.processor() or platform.machine() or "unknown CPU", set()
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            name, _, value = line.partition(":")
            if name.strip() == "model name":
                model = value.strip()
            elif name.strip() == "flags":
                flags = set(value.split())
    except OSError:
        pass  # not Linux: the model name from platform, flags unknown
    wanted = [f for f in ("avx2", "avx512f", "avx512_vnni", "avx_vnni", "amx_int8") if f in flags]
    return f"{model} ({' '.join(wanted) or 'no avx2'}), {os.cpu_count()} logical CPUs"


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


@lru_cache(maxsize=8)
def verified(path: str, expected_sha256: str | None, what: str = "model") -> str:
    """``path`` when it is a file whose sha256 is ``expected_sha256`` (unchecked when None)."""
    p = Path(path)
    if not p.is_file():
        raise ModelError(f"{what} file not found: {p}")
    if expected_sha256:
        actual = file_sha256(p)
        if actual.lower() != expected_sha256.lower():
            raise ModelError(f"checksum mismatch for {p}: expected sha256 {expected_sha256}, got {actual}")
    return path


class OnnxRunner:
    """One CPU onnxruntime session over a model file (or its bytes, e.g. a rewritten graph)."""

    def __init__(self, model: Path | bytes, *, threads: int = 1, name: str = "model",
                 disabled_optimizers: Sequence[str] = ()) -> None:
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        source = model if isinstance(model, bytes) else str(model)
        try:
            self._session = ort.InferenceSession(source, sess_options=options, providers=["CPUExecutionProvider"],
                                                 disabled_optimizers=list(disabled_optimizers))
        except Exception as exc:
            where = name if isinstance(model, bytes) else f"{name} {model}"
            raise ModelError(f"cannot load ONNX {where}: {exc}") from exc
        self.input_names = frozenset(i.name for i in self._session.get_inputs())
        self.lock = threading.Lock()  # sessions are thread-safe; tokenizers are guarded by their users

    def run(self, outputs: Sequence[str], feeds: Mapping[str, np.ndarray]) -> list[Any]:
        """The named outputs for ``feeds`` (inputs the model does not take are left out)."""
        result: list[Any] = self._session.run(list(outputs), {k: v for k, v in feeds.items() if k in self.input_names})
        return result


def padded(batch: Sequence[np.ndarray], type_ids: Sequence[np.ndarray] | None = None
           ) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """BERT-style feeds (``input_ids``, ``attention_mask``, ``token_type_ids``) for token-id rows
    padded with id 0 to the longest, and the rows' lengths."""
    lengths = np.array([len(ids) for ids in batch])
    width = int(lengths.max())
    ids = np.zeros((len(batch), width), dtype=np.int64)  # [PAD] is id 0
    types = np.zeros_like(ids)
    for k, seq in enumerate(batch):
        ids[k, : len(seq)] = seq
        if type_ids is not None:
            types[k, : len(seq)] = type_ids[k]
    mask = (np.arange(width)[None, :] < lengths[:, None]).astype(np.int64)
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}, lengths


def length_buckets(lengths: Sequence[int], max_batch: int, run_cost: int = RUN_COST_TOKENS) -> list[list[int]]:
    """Indexes of ``lengths`` grouped into batches of at most ``max_batch`` that minimise
    ``run_cost`` x batches + padded tokens: sorted by length, then cut where the padding a longer
    neighbour would add costs more than another run (an exact dynamic programme over the cuts)."""
    order = sorted(range(len(lengths)), key=lambda i: (lengths[i], i))
    n = len(order)
    best = [0.0] + [float("inf")] * n  # best[k]: cheapest cover of the k shortest
    cut = [0] * (n + 1)
    for end in range(1, n + 1):
        width = lengths[order[end - 1]]  # the longest of order[start:end]
        for start in range(max(0, end - max(1, max_batch)), end):
            cost = best[start] + run_cost + width * (end - start)
            if cost < best[end]:
                best[end], cut[end] = cost, start
    groups: list[list[int]] = []
    end = n
    while end > 0:
        groups.append(order[cut[end] : end])
        end = cut[end]
    return groups[::-1]
