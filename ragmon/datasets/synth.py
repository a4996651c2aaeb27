"""Synthetic golden-set rows from a corpus with any OpenAI-compatible LLM.

For each sampled chunk (``factoid``): ask for one specific, self-contained fact and a question
answered by that fact alone -> a row with ``ground_truth_docs`` = the chunk id,
``ground_truth_answer`` = the fact.

``adversarial``: for a target chunk A with its fact and plain question, the chunks B, C nearest to A
in MiniLM space (other documents) that share A's content terms but do not hold the fact (less than
half of the fact's content words occur in them) are the distractors. Their specific words that A and
the fact lack, the six closest in meaning to the plain question, are offered to the LLM, which
rewrites the plain question to use them while it stays answered by the fact alone. The words are
checked in the question (one retry names the missed ones); fewer than ``min_distractor_terms`` ->
``no_distractor_terms``, under half of the plain question's words kept -> ``drifted``. Kept rows get
``difficulty: hard`` and the plain question in ``meta.base_question``.

``multi_hop``: two chunks of different documents that share a rare entity -> a question that needs
both; ``hops`` = ``[[A], [B]]``.

Every question is checked by the rater model: do the fact(s) it was made from answer it
(``answer-check/v1``; a rewrite can drift into asking about its distractor words)? ``not_answered``
drops it. Then it is rated for realism (1-5, few-shot); rows under ``min_realism`` are dropped, then
near-duplicates (MiniLM cosine >= ``dedup_threshold``, or the same words) are dropped. Questions that
name "the passage"/"the text" are dropped before rating. Each row records its provenance in
``meta``: kind, generator model, prompt version, realism score and the rater's model and prompt
version, source document and chunking. Nothing is dropped silently: ``SynthStats.dropped`` counts
every reason.

The LLM transport is the LLM judge's (:mod:`ragmon.scoring.llm`): retries with backoff and
``Retry-After``, circuit breaker, ``response_format`` json_schema -> json_object -> none fallback,
one repair attempt for an unusable reply.

Modules: this one runs the loop and the LLM calls (:class:`Synthesizer`); :mod:`.synth_options`
kinds, drop reasons, options and counts; :mod:`.synth_parse` reply parsing; :mod:`.synth_search`
distractor search and multi-hop pairing; :mod:`.synth_rows` row assembly and provenance.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import random
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import JudgeCircuitOpenError, JudgeError, JudgeReplyError
from ..scoring.llm import ChatClient, JudgeHttp, LlmJudgeSettings
from . import prompts as sp
from .chunking import Chunk, chunk_corpus
from .corpus import CorpusDoc

if TYPE_CHECKING:
    import httpx  # the transport seam's type only: HTTP itself is the LLM judge's client

from .synth_options import (
    ADVERSARIAL,
    DECLINED,
    DRIFTED,
    DUPLICATE,
    FACTOID,
    INVALID_REPLY,
    KINDS,
    LLM_ERROR,
    LOW_REALISM,
    MULTI_HOP,
    NO_DISTRACTOR_TERMS,
    NO_DISTRACTORS,
    NO_PARTNER,
    NOT_ANSWERED,
    SOURCE_REFERENCE,
    Drop,
    SynthOptions,
    SynthResult,
    SynthStats,
    self_judging_warning,
    split_evenly,
)
from .synth_parse import (
    SOURCE_REFERENCE_PATTERN,
    content_words,
    parse_adversarial,
    parse_answered,
    parse_fact,
    parse_multi_hop,
    parse_rating,
    question_key,
)
from .synth_rows import build_row
from .synth_search import (
    Neighbours,
    TermRarity,
    build_entity_index,
    entities,
    offer_terms,
    pick_distractors,
    terms_used,
)

__all__ = [
    "ADVERSARIAL", "FACTOID", "KINDS", "MULTI_HOP", "SynthOptions", "SynthResult", "SynthStats", "Synthesizer",
    "self_judging_warning",
]

log = logging.getLogger("ragmon.datasets.synth")


def _said(question: str) -> dict[str, str]:
    """The model's previous rewrite, as the assistant turn before a retry instruction."""
    return {"role": "assistant", "content": json.dumps({"question": question, "distractor_terms": []})}


class Synthesizer:
    """Generates rows; ``aclose()`` when done. ``embed`` is any ``texts -> unit vectors`` function
    (default: ragmon's offline MiniLM), used for distractors and deduplication."""

    def __init__(
        self, settings: LlmJudgeSettings, options: SynthOptions, *,
        embed: Callable[[Sequence[str]], np.ndarray] | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep, rng: random.Random | None = None,
    ) -> None:
        self.settings = settings
        self.options = options
        self._http = JudgeHttp(settings, None, transport=transport, clock=time.monotonic, sleep=sleep, rng=rng)
        self._chat = ChatClient(self._http, settings, None)
        self._rater = options.rater_model or settings.model
        self._rater_chat = self._chat if self._rater == settings.model else \
            ChatClient(self._http, dataclasses.replace(settings, model=self._rater), None)
        self._embed_fn = embed
        self._rarity: TermRarity | None = None
        self.stats = SynthStats(requested=options.n)

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> Synthesizer:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # --- the run ------------------------------------------------------------------------------------
    async def run(self, docs: Sequence[CorpusDoc],
                  on_row: Callable[[dict[str, Any]], None] | None = None) -> SynthResult:
        opts, stats = self.options, self.stats
        warning = self_judging_warning(self.settings.model, opts.judge_model)
        if warning:
            stats.warnings.append(warning)
            log.warning("%s", warning)
        chunks = [c for c in chunk_corpus(docs, opts.chunking) if c.tokens >= opts.min_chunk_tokens]
        if not chunks:
            stats.stopped = "no chunk of the corpus is long enough"
            return SynthResult([], stats)
        rng = random.Random(opts.seed)
        order = list(range(len(chunks)))
        rng.shuffle(order)
        targets = split_evenly(opts.n, opts.kinds)
        neighbours = await self._distractor_space(chunks, rng) if ADVERSARIAL in opts.kinds else None
        if ADVERSARIAL in opts.kinds:
            self._rarity = await asyncio.to_thread(TermRarity, chunks)
        entity_index = build_entity_index(chunks) if MULTI_HOP in opts.kinds else None
        rows: list[dict[str, Any]] = []
        kept_vectors: list[np.ndarray] = []
        kept_keys: set[str] = set()
        cursor = 0
        max_candidates = opts.n * opts.max_attempts_factor
        batch = max(1, self.settings.concurrency)
        while len(rows) < opts.n and stats.stopped is None:
            wanted = [k for k in opts.kinds if stats.by_kind[k] < targets[k]]
            if not wanted:
                break
            if stats.candidates >= max_candidates:
                stats.stopped = f"gave up after {stats.candidates} candidates"
                break
            if cursor >= len(order):
                stats.stopped = "every eligible chunk was tried"
                break
            jobs = []
            for i in range(batch):
                if cursor >= len(order):
                    break
                kind = wanted[(stats.candidates + i) % len(wanted)]
                jobs.append(self._candidate(kind, chunks, order[cursor], neighbours, entity_index, rng))
                cursor += 1
            stats.candidates += len(jobs)
            results = await asyncio.gather(*jobs, return_exceptions=True)
            ready: list[dict[str, Any]] = []
            for result in results:
                if isinstance(result, Drop):
                    stats.dropped[result.reason] += 1
                elif isinstance(result, JudgeCircuitOpenError):
                    stats.dropped[LLM_ERROR] += 1
                    stats.stopped = "the LLM endpoint is failing (circuit breaker open)"
                elif isinstance(result, BaseException):
                    raise result
                else:
                    ready.append(result)
            if not ready:
                continue
            vectors = await self._embed([r["question"] for r in ready])
            for row, vector in zip(ready, vectors, strict=True):
                kind = row["meta"]["kind"]
                key = question_key(row["question"])
                similar = max((float(vector @ v) for v in kept_vectors), default=0.0)
                if key in kept_keys or similar >= opts.dedup_threshold:
                    stats.dropped[DUPLICATE] += 1
                    continue
                if stats.by_kind[kind] >= targets[kind] or len(rows) >= opts.n:
                    continue  # a batch may overshoot a kind's share: the extra rows are not needed
                kept_vectors.append(vector)
                kept_keys.add(key)
                rows.append(row)
                stats.by_kind[kind] += 1
                stats.written += 1
                if on_row is not None:
                    on_row(row)
        return SynthResult(rows, stats)

    # --- one candidate ---------------------------------------------------------------------------
    async def _candidate(self, kind: str, chunks: Sequence[Chunk], index: int,
                         neighbours: Neighbours | None, entity_index: Mapping[str, list[int]] | None,
                         rng: random.Random) -> dict[str, Any]:
        chunk = chunks[index]
        if kind == MULTI_HOP:
            assert entity_index is not None
            return await self._multi_hop(chunks, index, entity_index, rng)
        fact, question = await self._fact(chunk)
        meta: dict[str, Any] = {"prompt_version": sp.FACT_VERSION}
        difficulty: str | None = None
        if kind == ADVERSARIAL:
            assert neighbours is not None
            question, extra = await self._adversarial(chunks, index, fact, question, neighbours)
            meta = {"prompt_version": sp.ADVERSARIAL_VERSION, "fact_prompt_version": sp.FACT_VERSION, **extra}
            difficulty = "hard"  # checked against its fact in _adversarial, with one retry
        elif not await self._answered(question, [fact]):
            raise Drop(NOT_ANSWERED)
        realism = await self._realism(question)
        return self._row(kind, question, [chunk], fact, meta, realism, difficulty=difficulty)

    async def _call(self, messages: list[Any], name: str, schema: Mapping[str, Any],
                    parse: Callable[[dict[str, Any]], Any], temperature: float) -> Any:
        try:
            return await self._chat.json_call(messages, name, schema, parse, self.stats.usage, temperature)
        except JudgeCircuitOpenError:
            raise
        except JudgeReplyError as exc:
            raise Drop(INVALID_REPLY) from exc
        except JudgeError as exc:
            log.debug("LLM call failed: %s", exc)
            raise Drop(LLM_ERROR) from exc

    async def _fact(self, chunk: Chunk) -> tuple[str, str]:
        result = await self._call(sp.fact_messages(chunk.title, chunk.text), "fact_question", sp.FACT_SCHEMA,
                                  parse_fact, self.options.temperature)
        if result is None:
            raise Drop(DECLINED)
        fact, question = result
        if SOURCE_REFERENCE_PATTERN.search(question):
            raise Drop(SOURCE_REFERENCE)
        return fact, question

    async def _adversarial(self, chunks: Sequence[Chunk], index: int, fact: str, base_question: str,
                           neighbours: Neighbours) -> tuple[str, dict[str, Any]]:
        target, need = chunks[index], self.options.min_distractor_terms
        picked = await pick_distractors(chunks, index, fact, neighbours)
        if not picked:
            raise Drop(NO_DISTRACTORS)
        assert self._rarity is not None
        offered = await self._related_terms(base_question, offer_terms(target, fact, picked, self._rarity, limit=40))
        if len(offered) < need:
            raise Drop(NO_DISTRACTOR_TERMS)
        messages = sp.adversarial_messages(base_question, fact, offered)
        question, used = await self._rewrite(messages, offered)
        if len(used) < need:  # one more try, told which words it missed (small models often skip them)
            messages += [_said(question), sp.adversarial_retry_message(used, offered)]
            question, used = await self._rewrite(messages, offered)
        self._check_rewrite(question, used, base_question, offered)
        if not await self._answered(question, [fact]):
            # one more try, told that the fact no longer answers it (rewrites drift into the distractors)
            messages += [_said(question), sp.adversarial_unanswered_message(offered, need)]
            question, used = await self._rewrite(messages, offered)
            self._check_rewrite(question, used, base_question, offered)
            if not await self._answered(question, [fact]):
                raise Drop(NOT_ANSWERED)
        return question, {"distractors": [c.id for c in picked], "distractor_terms": used,
                          "offered_terms": offered, "base_question": base_question}

    def _check_rewrite(self, question: str, used: list[str], base_question: str, offered: list[str]) -> None:
        if len(used) < self.options.min_distractor_terms:
            log.debug("adversarial rewrite dropped, uses %s of %s: %r", used, offered, question)
            raise Drop(NO_DISTRACTOR_TERMS)
        if SOURCE_REFERENCE_PATTERN.search(question):
            raise Drop(SOURCE_REFERENCE)
        base_words = content_words(base_question)
        if len(base_words & content_words(question)) * 2 < len(base_words):
            log.debug("adversarial rewrite dropped, drifted from %r: %r", base_question, question)
            raise Drop(DRIFTED)

    async def _rewrite(self, messages: list[Any], offered: list[str]) -> tuple[str, list[str]]:
        """The rewritten question and the offered words it really contains (the model's own list is
        not trusted)."""
        result = await self._call(messages, "adversarial_question", sp.ADVERSARIAL_SCHEMA, parse_adversarial,
                                  self.options.temperature)
        if result is None:
            raise Drop(DECLINED)
        question: str = result[0]
        return question, terms_used(question, offered)

    async def _related_terms(self, question: str, candidates: list[str], keep: int = 6) -> list[str]:
        """The candidate words closest in meaning to the question (MiniLM): words a rewrite can use
        naturally, where the rarest words alone (ids, typos) make nonsense questions."""
        if len(candidates) <= keep:
            return candidates
        vectors = await self._embed([question, *candidates])
        closeness = vectors[1:] @ vectors[0]
        return [candidates[i] for i in np.argsort(-closeness, kind="stable")[:keep].tolist()]

    async def _multi_hop(self, chunks: Sequence[Chunk], index: int, entity_index: Mapping[str, list[int]],
                         rng: random.Random) -> dict[str, Any]:
        first = chunks[index]
        partner: Chunk | None = None
        shared = ""
        for entity in sorted(entities(first.text), key=lambda e: (len(entity_index.get(e, ())), e)):
            others = [j for j in entity_index.get(entity, ()) if chunks[j].doc_id != first.doc_id]
            if others:
                partner, shared = chunks[others[rng.randrange(len(others))]], entity
                break
        if partner is None:
            raise Drop(NO_PARTNER)
        result = await self._call(sp.multi_hop_messages(first.content, partner.content, shared), "multi_hop_question",
                                  sp.MULTI_HOP_SCHEMA, parse_multi_hop, self.options.temperature)
        if result is None:
            raise Drop(DECLINED)
        if SOURCE_REFERENCE_PATTERN.search(result["question"]):
            raise Drop(SOURCE_REFERENCE)
        if not await self._answered(result["question"], [result["fact_1"], result["fact_2"]]):
            raise Drop(NOT_ANSWERED)
        realism = await self._realism(result["question"])
        meta = {"prompt_version": sp.MULTI_HOP_VERSION, "bridge": shared,
                "facts": [result["fact_1"], result["fact_2"]]}
        return self._row(MULTI_HOP, result["question"], [first, partner], result["answer"], meta, realism,
                         hops=[[first.id], [partner.id]])

    async def fact_answers(self, question: str, facts: list[str]) -> bool:
        """The rater's answer check: do ``facts`` answer ``question``? Raises :class:`Drop` when the
        rater fails (``invalid_reply``, ``llm_error``)."""
        answered: bool = await self._rate(sp.answer_check_messages(question, facts), "answer_check",
                                          sp.ANSWER_CHECK_SCHEMA, parse_answered)
        return answered

    async def _answered(self, question: str, facts: list[str]) -> bool:
        """The answer check, when turned on (else True)."""
        if not self.options.check_answers:
            return True
        answered = await self.fact_answers(question, facts)
        if not answered:
            log.debug("not answered by its fact(s) %r: %r", facts, question)
        return answered

    async def _realism(self, question: str) -> int | None:
        if self.options.min_realism <= 0:
            return None
        rating: int = await self._rate(sp.realism_messages(question), "realism", sp.REALISM_SCHEMA, parse_rating)
        self.stats.realism[rating] += 1
        if rating < self.options.min_realism:
            raise Drop(LOW_REALISM)
        return rating

    async def _rate(self, messages: list[Any], name: str, schema: Mapping[str, Any],
                    parse: Callable[[dict[str, Any]], Any]) -> Any:
        """One call to the rater model, deterministic (temperature 0)."""
        try:
            return await self._rater_chat.json_call(messages, name, schema, parse, self.stats.usage, 0.0)
        except JudgeCircuitOpenError:
            raise
        except JudgeReplyError as exc:
            raise Drop(INVALID_REPLY) from exc
        except JudgeError as exc:
            raise Drop(LLM_ERROR) from exc

    def _row(self, kind: str, question: str, chunks: Sequence[Chunk], answer: str, meta: dict[str, Any],
             realism: int | None, *, difficulty: str | None = None,
             hops: list[list[str]] | None = None) -> dict[str, Any]:
        return build_row(kind, question, chunks, answer, meta, realism, generator_model=self.settings.model,
                         rater_model=self._rater, chunking=self.options.chunking,
                         answer_checked=self.options.check_answers, difficulty=difficulty, hops=hops)

    # --- embeddings ----------------------------------------------------------------------------------
    async def _embed(self, texts: Sequence[str]) -> np.ndarray:
        if self._embed_fn is None:
            from ..scoring.local.embedder import shared_embedder

            embedder = shared_embedder()
            self._embed_fn = embedder.embed
        fn = self._embed_fn
        return await asyncio.to_thread(fn, list(texts))

    async def _distractor_space(self, chunks: Sequence[Chunk], rng: random.Random) -> Neighbours:
        pool = list(range(len(chunks)))
        if len(pool) > self.options.distractor_pool:
            pool = sorted(random.Random(self.options.seed + 1).sample(pool, self.options.distractor_pool))
        vectors = await self._embed([chunks[i].content for i in pool])
        return Neighbours(chunks, pool, vectors, self._embed)
