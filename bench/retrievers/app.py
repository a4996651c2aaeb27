"""Build a ragmon-instrumented RAG entry point around a search function.

The app is what a user would write: ``@ragmon.pipeline`` calling a ``@ragmon.retriever`` that
returns ``{"id", "text", "score"}`` dicts (best first) and a ``@ragmon.generator`` that answers
extractively (the first sentence of the top document: a stand-in for an LLM that costs nothing).

The app measures its own work (search + answer, without ragmon's decorators) so that a benchmark
can subtract it: with ``RAGMON_BENCH_APP_TIMES=FILE`` the totals are written to FILE as JSON
(``{"calls": n, "app_s": seconds, "search_s": seconds}``) when the process exits.
"""

from __future__ import annotations

import atexit
import json
import os
import re
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import ragmon

ENV_K = "RAGMON_BENCH_K"
ENV_APP_TIMES = "RAGMON_BENCH_APP_TIMES"
ENV_REPLAY = "RAGMON_BENCH_REPLAY"  # read by replay_app

Search = Callable[[str, int], Sequence[tuple[Any, float]]]
_SENTENCE = re.compile(r"(?<=[.!?])\s+")


class AppTimer:
    """Thread-safe totals of the app's own work."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.calls = 0
        self.app_s = 0.0
        self.search_s = 0.0

    def add(self, app_s: float, search_s: float) -> None:
        with self._lock:
            self.calls += 1
            self.app_s += app_s
            self.search_s += search_s

    def dump(self, path: str | os.PathLike[str]) -> None:
        with self._lock:
            data = {"calls": self.calls, "app_s": self.app_s, "search_s": self.search_s}
        Path(path).write_text(json.dumps(data), encoding="utf-8")


TIMER = AppTimer()
if os.environ.get(ENV_APP_TIMES):
    atexit.register(TIMER.dump, os.environ[ENV_APP_TIMES])


def default_k(fallback: int) -> int:
    return int(os.environ.get(ENV_K) or fallback)


def first_sentence(text: str) -> str:
    return _SENTENCE.split(text.strip(), maxsplit=1)[0]


def make_app(search_fn: Search, *, k: int, name: str) -> Callable[[str], str]:
    """``rag(question) -> answer``, decorated with ragmon's SDK."""
    search_time = threading.local()

    @ragmon.retriever(name="search")
    def search(query: str) -> list[dict[str, Any]]:
        started = time.perf_counter()
        docs = [{"id": doc.id, "text": doc.content, "score": score} for doc, score in search_fn(query, k)]
        search_time.value = time.perf_counter() - started
        return docs

    @ragmon.generator(name="answer")
    def answer(question: str, docs: list[dict[str, Any]]) -> str:
        started = time.perf_counter()
        text = first_sentence(docs[0]["text"]) if docs else "I don't know."
        search_time.answer = time.perf_counter() - started
        return text

    def rag(question: str) -> str:
        docs = search(question)
        text = answer(question, docs)
        TIMER.add(search_time.value + search_time.answer, search_time.value)
        return text

    rag.__name__ = rag.__qualname__ = name
    return ragmon.pipeline(name=name)(rag)
