"""``ragmon eval --app bench.retrievers.hotpotqa_dense_app:rag``: MiniLM (ragmon's offline
embedder) exact cosine search over the pooled HotpotQA paragraphs (1,021), top 10
(``RAGMON_BENCH_K``). The paragraphs are embedded on import (2 threads), or read from the
vectors cached in ``.cache/bench`` by an earlier run."""

from __future__ import annotations

from .app import default_k, make_app
from .datasets import hotpotqa_corpus, load_hotpotqa
from .dense import DenseIndex
from .paths import cache_dir

INDEX = DenseIndex(hotpotqa_corpus(load_hotpotqa()), cache_dir=cache_dir())
rag = make_app(INDEX.search, k=default_k(10), name="hotpotqa_dense")
