"""Decorated RAG entry points over a tiny corpus: sync, async, streaming, failing, hanging.

Each question names the documents it retrieves (``"... doc:a doc:b"``), so a test knows which
ids a call must have produced — and can tell whether spans of concurrent calls were mixed.
Special words: ``explode`` raises, ``hang`` blocks until :data:`RELEASE` is set (tests set it
when done, so no thread outlives the test session for long).
"""

from __future__ import annotations

import asyncio
import re
import threading
from collections.abc import AsyncIterator, Iterator
from typing import Any

from opentelemetry import trace as otel_trace

import ragmon

RELEASE = threading.Event()
ACTIVE = 0  # answer_sync calls running now, and the most seen at once
MAX_ACTIVE = 0
_active_lock = threading.Lock()
HANG_LIMIT_S = 30.0  # a hanging call gives up by itself at the latest after this
BARRIER: threading.Barrier | None = None  # set by a test to prove calls overlap

_DOC_RE = re.compile(r"doc:(\w+)")


class AppFailure(RuntimeError):
    pass


def corpus_doc(doc_id: str) -> dict[str, Any]:
    return {"id": doc_id, "text": f"Text of document {doc_id}.", "score": 1.0,
            "metadata": {"source": f"{doc_id}.md", "nested": {"doi": f"10.1/{doc_id}"}}}


@ragmon.retriever(name="search")
def search(query: str) -> list[dict[str, Any]]:
    return [corpus_doc(doc_id) for doc_id in _DOC_RE.findall(query)]


@ragmon.retriever(name="search_async")
async def search_async(query: str) -> list[dict[str, Any]]:
    await asyncio.sleep(0)
    return [corpus_doc(doc_id) for doc_id in _DOC_RE.findall(query)]


@ragmon.generator(name="llm", model="fake-1")
def generate(query: str, docs: list[dict[str, Any]]) -> str:
    return f"answer from {','.join(d['id'] for d in docs) or 'nothing'}"


@ragmon.pipeline(name="sync-rag")
def answer_sync(question: str) -> str:
    global ACTIVE, MAX_ACTIVE
    with _active_lock:
        ACTIVE += 1
        MAX_ACTIVE = max(MAX_ACTIVE, ACTIVE)
    try:
        if BARRIER is not None:
            BARRIER.wait(timeout=10)
        return generate(question, search(question))
    finally:
        with _active_lock:
            ACTIVE -= 1


def reset_counters() -> None:
    global ACTIVE, MAX_ACTIVE, BARRIER
    with _active_lock:
        ACTIVE = MAX_ACTIVE = 0
    BARRIER = None


@ragmon.pipeline(name="async-rag")
async def answer_async(question: str) -> str:
    docs = await search_async(question)
    await asyncio.sleep(0.01)
    return generate(question, docs)


@ragmon.pipeline(name="stream-rag")
def answer_stream(question: str) -> Iterator[str]:
    docs = search(question)
    yield "streamed "
    yield generate(question, docs)


@ragmon.pipeline(name="flaky-rag")
def flaky(question: str) -> str:
    if "explode" in question:
        raise AppFailure(f"cannot answer {question!r}")
    if "hang" in question:
        RELEASE.wait(HANG_LIMIT_S)
    return generate(question, search(question))


@ragmon.pipeline(name="flaky-async-rag")
async def flaky_async(question: str) -> str:
    if "explode" in question:
        raise AppFailure("async failure")
    if "hang" in question:
        await asyncio.sleep(HANG_LIMIT_S)
    return generate(question, await search_async(question))


@ragmon.pipeline(name="otel-rag")
def with_own_otel(question: str) -> str:
    """Also instruments a step with plain OpenTelemetry (the global provider)."""
    with otel_trace.get_tracer("app.own").start_as_current_span("rewrite-query"):
        docs = search(question)
    return generate(question, docs)


def undecorated(question: str) -> str:
    return "an answer nobody traced"


async def async_stream_rag(question: str) -> AsyncIterator[str]:
    """An async generator entry point (decorated below)."""
    docs = await search_async(question)
    yield generate(question, docs)


answer_async_stream = ragmon.pipeline(name="async-stream-rag")(async_stream_rag)


class Bot:
    """For ``module:Bot.ask`` (a dotted attribute)."""

    @staticmethod
    @ragmon.pipeline(name="bot")
    def ask(question: str) -> str:
        return generate(question, search(question))
