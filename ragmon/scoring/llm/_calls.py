"""What one trace's judging may call, whatever the mode: JSON chat calls and embeddings, all
counted into the trace's ``Usage``. Modes are written against this, not against HTTP."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import numpy as np

from ..metrics import formulas
from . import prompts as p
from ._chat import ChatClient, Usage

T = TypeVar("T")


class SupportsEmbed(Protocol):
    def embed(self, texts: Sequence[str]) -> np.ndarray: ...


class Embeddings:
    """An embeddings endpoint when ``model`` is set, else the local MiniLM (loaded on first use)."""

    def __init__(self, chat: ChatClient, model: str | None, embedder: SupportsEmbed | None) -> None:
        self._chat = chat
        self._model = model
        self._embedder = embedder

    async def embed(self, texts: list[str], usage: Usage) -> np.ndarray:
        if self._model:
            return await self._chat.embed(self._model, texts, usage)
        if self._embedder is None:
            from ..local.embedder import shared_embedder

            self._embedder = await asyncio.to_thread(shared_embedder)
        embedder = self._embedder
        return await asyncio.to_thread(embedder.embed, texts)


@dataclass(frozen=True, slots=True)
class TraceCalls:
    """The calls of one trace, bound to its ``usage``."""

    chat: ChatClient
    embeddings: Embeddings
    usage: Usage
    parity_questions: int

    async def json(
        self, messages: list[p.Message], schema_name: str, schema: Mapping[str, Any],
        parse: Callable[[dict[str, Any]], T], temperature: float | None = None,
    ) -> T:
        return await self.chat.json_call(messages, schema_name, schema, parse, self.usage, temperature)

    def count_invalid_contradictions(self, invalid: Mapping[str, int]) -> None:
        """Contradiction items dropped from a reply, by reason (``ragmon_judge_invalid_contradictions_total``)."""
        self.chat.count_invalid_contradictions(invalid)

    async def answer_relevancy(self, question: str, generated: Sequence[str], noncommittal: bool) -> float | None:
        """RAGAS answer relevancy from the generated questions' embeddings: no LLM call."""
        if noncommittal:
            return 0.0
        if not question.strip() or not generated:
            return None
        vectors = await self.embeddings.embed([question, *generated], self.usage)
        return formulas.answer_relevancy(vectors[0], vectors[1:], noncommittal)

    async def similarity(self, answer: str, reference: str) -> float:
        """Cosine of the answer's and the reference's embeddings (answer correctness's semantic part)."""
        if not answer.strip() or not reference.strip():
            return 0.0
        vectors = await self.embeddings.embed([answer, reference], self.usage)
        return formulas.cosine(vectors[0], vectors[1])
