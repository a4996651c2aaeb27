"""Where the benchmark data and the generated eval sets live."""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


def benchdata_dir() -> Path:
    """The shared benchmark data (``RAGMON_BENCHDATA``, default ``../shared/benchdata``)."""
    return Path(os.environ.get("RAGMON_BENCHDATA") or REPO_ROOT.parent / "shared" / "benchdata")


def cache_dir() -> Path:
    """Generated golden sets and run files (``RAGMON_BENCH_CACHE``, default ``.cache/bench``)."""
    path = Path(os.environ.get("RAGMON_BENCH_CACHE") or REPO_ROOT / ".cache" / "bench")
    path.mkdir(parents=True, exist_ok=True)
    return path


def scifact_dir() -> Path:
    return benchdata_dir() / "retrieval" / "scifact"


def hotpotqa_file() -> Path:
    return benchdata_dir() / "retrieval" / "hotpotqa_dev_103.json"
