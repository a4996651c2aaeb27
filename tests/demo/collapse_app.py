"""The collapse a user met (issue 26), as an app for ``ragmon eval --app``: the demo bot whose
retriever returns articles on another topic for every question (``ragmon demo``'s injected
``retrieval_miss``), answering faithfully from them."""

from __future__ import annotations

import zlib
from functools import cache

from ragmon.demo.app import DemoRag
from ragmon.demo.failures import FailureKind


@cache
def _bot() -> DemoRag:
    return DemoRag(simulate_latency=False)


def answer(question: str) -> str:
    seed = zlib.crc32(question.encode("utf-8"))
    return _bot().ask(question, FailureKind.RETRIEVAL_MISS, seed=seed).answer
