"""``ragmon eval --app bench.retrievers.hotpotqa_bm25_app:rag``: BM25 over the pooled HotpotQA
paragraphs (1,021), top 10 (``RAGMON_BENCH_K``). The index is built on import."""

from __future__ import annotations

from .app import default_k, make_app
from .bm25 import Bm25Index
from .datasets import hotpotqa_corpus, load_hotpotqa

INDEX = Bm25Index(hotpotqa_corpus(load_hotpotqa()))
rag = make_app(INDEX.search, k=default_k(10), name="hotpotqa_bm25")
