"""``ragmon eval --app bench.retrievers.replay_app:rag``: an instant app for measuring the
evaluation's own overhead. It replays retrieval results recorded earlier (``RAGMON_BENCH_REPLAY``:
a JSON file ``{question: [[id, text, score], ...]}``, written by ``bench/eval_overhead.py``), so
its documents, ids and scores are those of a real retriever while its own work is one dict
lookup. Unknown questions get no documents."""

from __future__ import annotations

import json
import os
from typing import Any

from .app import ENV_REPLAY, make_app
from .bm25 import Doc


def _load() -> dict[str, list[tuple[Doc, float]]]:
    path = os.environ.get(ENV_REPLAY)
    if not path:
        raise RuntimeError(f"{ENV_REPLAY} is not set: point it at a replay file (bench/eval_overhead.py writes one)")
    with open(path, encoding="utf-8") as fh:
        raw: dict[str, list[list[Any]]] = json.load(fh)
    return {q: [(Doc(str(i), "", str(text)), float(score)) for i, text, score in hits] for q, hits in raw.items()}


REPLAY = _load()


def _lookup(question: str, k: int) -> list[tuple[Doc, float]]:
    return REPLAY.get(question, [])[:k]


rag = make_app(_lookup, k=1_000_000, name="replay")
