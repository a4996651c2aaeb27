"""Reference retrievers, eval-set converters and ragmon-instrumented apps for the evaluation
benchmarks (``bench/eval_scifact.py``, ``bench/eval_hotpotqa.py``, ``bench/eval_overhead.py``).

* :mod:`.bm25` — BM25 (``bm25s``: k1 0.9, b 0.4, title + text, Lucene's English stopwords,
  Porter stemming via PyStemmer), the configuration of the Pyserini "flat" BEIR baseline.
* :mod:`.dense` — exact cosine search over all-MiniLM-L6-v2 (int8 ONNX) sentence vectors from
  ragmon's own offline embedder (:mod:`ragmon.scoring.local.embedder`).
* :mod:`.datasets` — BEIR SciFact and HotpotQA (distractor dev) to ragmon's golden-set JSONL,
  written under ``.cache/bench/`` (git-ignored; generated data is never committed).
* ``*_app`` modules — SDK-decorated entry points for ``ragmon eval --app``; each builds its index
  when imported, so that a question's time is the question's own.

Data: the bench data (``make benchdata``; ``bench/_benchdata.py`` finds it); cache: ``.cache/bench``
(``RAGMON_BENCH_CACHE`` overrides). Needs ``pip install -e '.[bench]'``.
"""
