"""``ragmon eval --app bench.retrievers.scifact_app:rag``: BM25 over BEIR SciFact (5,183
abstracts), top 100 (``RAGMON_BENCH_K``). The index is built on import (about 2 s)."""

from __future__ import annotations

from .app import default_k, make_app
from .bm25 import Bm25Index
from .datasets import load_scifact_corpus

INDEX = Bm25Index(load_scifact_corpus())
rag = make_app(INDEX.search, k=default_k(100), name="scifact_bm25")
