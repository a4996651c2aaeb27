"""Exact dense retrieval with ragmon's offline embedder (all-MiniLM-L6-v2, int8 ONNX): moved to
:mod:`ragmon.datasets.retrievers` (``ragmon chunking --retriever dense`` uses it at runtime);
re-exported here for the benchmarks."""

from __future__ import annotations

from ragmon.datasets.retrievers import DenseIndex, embed_text

__all__ = ["DenseIndex", "embed_text"]
