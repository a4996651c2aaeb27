"""Where the benchmark data and the generated eval sets live."""

from __future__ import annotations

import os
from pathlib import Path

from bench._benchdata import benchdata_file, require

REPO_ROOT = Path(__file__).resolve().parents[2]
SCIFACT = ("retrieval/scifact/corpus.jsonl.gz", "retrieval/scifact/queries.test.jsonl",
           "retrieval/scifact/qrels.test.tsv")
HOTPOTQA = "retrieval/hotpotqa_dev_103.json"


def cache_dir() -> Path:
    """Generated golden sets and run files (``RAGMON_BENCH_CACHE``, default ``.cache/bench``)."""
    path = Path(os.environ.get("RAGMON_BENCH_CACHE") or REPO_ROOT / ".cache" / "bench")
    path.mkdir(parents=True, exist_ok=True)
    return path


def scifact_dir() -> Path:
    """BEIR SciFact test (bench data, ``bench/_benchdata.py``), checked to be there."""
    return require(*SCIFACT) / "retrieval" / "scifact"


def hotpotqa_file() -> Path:
    return benchdata_file(HOTPOTQA)
