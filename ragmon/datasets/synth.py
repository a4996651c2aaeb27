"""Synthetic golden-set rows from a corpus with any OpenAI-compatible LLM.

For each sampled chunk (``factoid``): ask for one specific, self-contained fact and a question
answered by that fact alone -> a row with ``ground_truth_docs`` = the chunk id,
``ground_truth_answer`` = the fact.

``adversarial``: for a target chunk A with its fact, the chunks B, C nearest to A in MiniLM space
(other documents) that share A's content terms but do not hold the fact (less than half of the
fact's content words occur in them) are shown as distractors; the LLM writes a question worded
with their terms and answered only by A -> ``difficulty: hard``. ``multi_hop``: two chunks of
different documents that share a rare entity -> a question that needs both; ``hops`` =
``[[A], [B]]``.

Every question is rated for realism (1-5, few-shot); rows under ``min_realism`` are dropped, then
near-duplicates (MiniLM cosine >= ``dedup_threshold``, or the same words) are dropped. Questions that
name "the passage"/"the text" are dropped before rating. Each row records its provenance in
``meta``: kind, generator model, prompt version, realism score and the rater's model and prompt
version, source document and chunking. Nothing is dropped silently: ``SynthStats.dropped`` counts
every reason.

The LLM transport is the LLM judge's (:mod:`ragmon.scoring.llm`): retries with backoff and
``Retry-After``, circuit breaker, ``response_format`` json_schema -> json_object -> none fallback,
one repair attempt for an unusable reply.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import logging
import random
import re
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import httpx
import numpy as np

from ..errors import JudgeCircuitOpenError, JudgeError, JudgeReplyError
from ..scoring import claims
from ..scoring.llm import LlmJudgeSettings
from ..scoring.llm._chat import ChatClient, Usage
from ..scoring.llm._http import JudgeHttp
from ..scoring.verdicts import VerdictError
from . import prompts as sp
from .chunking import Chunk, ChunkingConfig, chunk_corpus
from .corpus import CorpusDoc

__all__ = ["KINDS", "SynthOptions", "SynthResult", "SynthStats", "Synthesizer", "self_judging_warning"]

log = logging.getLogger("ragmon.datasets.synth")

FACTOID: Final = "factoid"
ADVERSARIAL: Final = "adversarial"
MULTI_HOP: Final = "multi_hop"
KINDS: Final = (FACTOID, ADVERSARIAL, MULTI_HOP)

# drop reasons (bounded)
DECLINED: Final = "declined"  # the model said the chunk has no usable fact (null fields)
INVALID_REPLY: Final = "invalid_reply"  # unusable reply after the one repair attempt (refusals land here)
LLM_ERROR: Final = "llm_error"  # HTTP errors / timeouts after retries
SOURCE_REFERENCE: Final = "source_reference"  # "according to the passage ..."
LOW_REALISM: Final = "low_realism"
DUPLICATE: Final = "duplicate"
NO_DISTRACTORS: Final = "no_distractors"
NO_DISTRACTOR_TERMS: Final = "no_distractor_terms"
NO_PARTNER: Final = "no_partner"

_SOURCE_REFERENCE = re.compile(
    r"\b(according to|in|from|within|by) (the|this|that) (passage|text|document|excerpt|article|paragraph)\b"
    r"|\bthe (given|provided|above) (passage|text|document|context)\b", re.IGNORECASE)
_ENTITY_SKIP = frozenset({"we", "our", "the", "this", "these", "however", "here", "there", "both"})


@dataclass(frozen=True, slots=True)
class SynthOptions:
    n: int
    kinds: tuple[str, ...] = (FACTOID,)
    generator_model: str = ""
    judge_model: str | None = None  # the judge the golden set will be scored with (self-judging check)
    rater_model: str | None = None  # realism rater; default the generator
    min_realism: int = 4  # 0 = keep every rating
    dedup_threshold: float = 0.9
    chunking: ChunkingConfig = field(default_factory=lambda: ChunkingConfig(256, 0, "paragraph"))
    min_chunk_tokens: int = 24
    seed: int = 0
    temperature: float = 0.7
    distractor_pool: int = 3000  # chunks embedded to find adversarial distractors
    max_attempts_factor: int = 4  # give up after n * this many candidates

    def __post_init__(self) -> None:
        if self.n < 1:
            raise ValueError("n must be >= 1")
        if not self.kinds or any(k not in KINDS for k in self.kinds):
            raise ValueError(f"kinds must be a non-empty subset of {', '.join(KINDS)}")
        if not 0 <= self.min_realism <= 5:
            raise ValueError("min_realism must be in 0..5")
        if not 0 < self.dedup_threshold <= 1:
            raise ValueError("dedup_threshold must be in (0, 1]")


@dataclass
class SynthStats:
    requested: int = 0
    candidates: int = 0
    written: int = 0
    by_kind: Counter[str] = field(default_factory=Counter)
    dropped: Counter[str] = field(default_factory=Counter)
    realism: Counter[int] = field(default_factory=Counter)  # every rating given, kept or not
    usage: Usage = field(default_factory=Usage)
    warnings: list[str] = field(default_factory=list)
    stopped: str | None = None  # why the run ended early (circuit open, out of chunks)

    def as_dict(self) -> dict[str, Any]:
        return {
            "requested": self.requested, "candidates": self.candidates, "written": self.written,
            "by_kind": dict(self.by_kind), "dropped": dict(sorted(self.dropped.items())),
            "realism": {str(k): v for k, v in sorted(self.realism.items())},
            "llm_calls": self.usage.calls, "prompt_tokens": self.usage.prompt_tokens,
            "completion_tokens": self.usage.completion_tokens, "tokens_estimated": self.usage.estimated,
            "warnings": list(self.warnings), "stopped": self.stopped,
        }


@dataclass
class SynthResult:
    rows: list[dict[str, Any]]
    stats: SynthStats


class _Drop(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def self_judging_warning(generator_model: str, judge_model: str | None) -> str | None:
    """A warning when the golden set is generated by the model that will judge it."""
    if not judge_model or not generator_model:
        return None
    if _model_key(generator_model) != _model_key(judge_model):
        return None
    return (f"the generator model {generator_model!r} is also the judge model: a judge favours text in its own "
            "style, so scores on this golden set will read high; generate with another model family, or judge "
            "with one")


def _model_key(name: str) -> str:
    return name.strip().lower().rsplit("/", 1)[-1].removesuffix(":latest")


def _content_words(text: str) -> set[str]:
    return {w for w in claims.content_tokens(text) if len(w) > 2}


def _question_key(question: str) -> str:
    return " ".join(re.findall(r"[a-z0-9]+", question.lower()))


def _parse_fact(obj: dict[str, Any]) -> tuple[str, str] | None:
    fact, question = obj.get("fact"), obj.get("question")
    if fact is None and question is None:
        return None
    if not isinstance(fact, str) or not isinstance(question, str) or len(fact.strip()) < 8 \
            or len(question.strip()) < 8:
        raise VerdictError("'fact' and 'question' must both be non-empty strings (or both null)")
    return fact.strip(), question.strip()


def _parse_adversarial(obj: dict[str, Any]) -> tuple[str, list[str]] | None:
    question, terms = obj.get("question"), obj.get("distractor_terms", [])
    if question is None:
        return None
    if not isinstance(question, str) or len(question.strip()) < 8:
        raise VerdictError("'question' must be a non-empty string (or null)")
    if not isinstance(terms, list):
        terms = []
    return question.strip(), [str(t) for t in terms if isinstance(t, str | int | float)]


def _parse_multi_hop(obj: dict[str, Any]) -> dict[str, str] | None:
    if obj.get("question") is None:
        return None
    out = {}
    for key in ("question", "answer", "fact_1", "fact_2"):
        value = obj.get(key)
        if not isinstance(value, str) or not value.strip():
            raise VerdictError(f"{key!r} must be a non-empty string (or every field null)")
        out[key] = value.strip()
    return out


def _parse_rating(obj: dict[str, Any]) -> int:
    value = obj.get("rating")
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 5:
        raise VerdictError(f"'rating' must be an integer 1-5, got {value!r}")
    return value


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
        targets = _split_evenly(opts.n, opts.kinds)
        neighbours = await self._distractor_space(chunks, rng) if ADVERSARIAL in opts.kinds else None
        entity_index = _entity_index(chunks) if MULTI_HOP in opts.kinds else None
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
                if isinstance(result, _Drop):
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
                key = _question_key(row["question"])
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
                         neighbours: _Neighbours | None, entity_index: Mapping[str, list[int]] | None,
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
            question, extra = await self._adversarial(chunks, index, fact, neighbours)
            meta = {"prompt_version": sp.ADVERSARIAL_VERSION, "fact_prompt_version": sp.FACT_VERSION, **extra}
            difficulty = "hard"
        realism = await self._realism(question)
        return self._row(kind, question, [chunk], fact, meta, realism, difficulty=difficulty)

    async def _call(self, messages: list[Any], name: str, schema: Mapping[str, Any],
                    parse: Callable[[dict[str, Any]], Any], temperature: float) -> Any:
        try:
            return await self._chat.json_call(messages, name, schema, parse, self.stats.usage, temperature)
        except JudgeCircuitOpenError:
            raise
        except JudgeReplyError as exc:
            raise _Drop(INVALID_REPLY) from exc
        except JudgeError as exc:
            log.debug("LLM call failed: %s", exc)
            raise _Drop(LLM_ERROR) from exc

    async def _fact(self, chunk: Chunk) -> tuple[str, str]:
        result = await self._call(sp.fact_messages(chunk.title, chunk.text), "fact_question", sp.FACT_SCHEMA,
                                  _parse_fact, self.options.temperature)
        if result is None:
            raise _Drop(DECLINED)
        fact, question = result
        if _SOURCE_REFERENCE.search(question):
            raise _Drop(SOURCE_REFERENCE)
        return fact, question

    async def _adversarial(self, chunks: Sequence[Chunk], index: int, fact: str,
                           neighbours: _Neighbours) -> tuple[str, dict[str, Any]]:
        target = chunks[index]
        fact_words = _content_words(fact)
        picked = []
        for j in neighbours.nearest(index):
            other = chunks[j]
            words = _content_words(other.text)
            shared = _content_words(target.text) & words
            holds_fact = fact_words and len(fact_words & words) / len(fact_words) >= 0.5
            if len(shared) >= 2 and not holds_fact:
                picked.append(other)
            if len(picked) == 2:
                break
        if not picked:
            raise _Drop(NO_DISTRACTORS)
        result = await self._call(sp.adversarial_messages(target.text, fact, [c.text for c in picked]),
                                  "adversarial_question", sp.ADVERSARIAL_SCHEMA, _parse_adversarial,
                                  self.options.temperature)
        if result is None:
            raise _Drop(DECLINED)
        question, _terms = result
        if _SOURCE_REFERENCE.search(question):
            raise _Drop(SOURCE_REFERENCE)
        distractor_words = set().union(*(_content_words(c.text) for c in picked)) - _content_words(target.text)
        used = sorted(_content_words(question) & (distractor_words | set().union(
            *(_content_words(c.text) for c in picked))))
        if not used:
            raise _Drop(NO_DISTRACTOR_TERMS)
        return question, {"distractors": [c.id for c in picked], "distractor_terms": used[:20]}

    async def _multi_hop(self, chunks: Sequence[Chunk], index: int, entity_index: Mapping[str, list[int]],
                         rng: random.Random) -> dict[str, Any]:
        first = chunks[index]
        partner: Chunk | None = None
        shared = ""
        for entity in sorted(_entities(first.text), key=lambda e: (len(entity_index.get(e, ())), e)):
            others = [j for j in entity_index.get(entity, ()) if chunks[j].doc_id != first.doc_id]
            if others:
                partner, shared = chunks[others[rng.randrange(len(others))]], entity
                break
        if partner is None:
            raise _Drop(NO_PARTNER)
        result = await self._call(sp.multi_hop_messages(first.content, partner.content, shared), "multi_hop_question",
                                  sp.MULTI_HOP_SCHEMA, _parse_multi_hop, self.options.temperature)
        if result is None:
            raise _Drop(DECLINED)
        if _SOURCE_REFERENCE.search(result["question"]):
            raise _Drop(SOURCE_REFERENCE)
        realism = await self._realism(result["question"])
        meta = {"prompt_version": sp.MULTI_HOP_VERSION, "bridge": shared,
                "facts": [result["fact_1"], result["fact_2"]]}
        return self._row(MULTI_HOP, result["question"], [first, partner], result["answer"], meta, realism,
                         hops=[[first.id], [partner.id]])

    async def _realism(self, question: str) -> int | None:
        if self.options.min_realism <= 0:
            return None
        try:
            rating: int = await self._rater_chat.json_call(sp.realism_messages(question), "realism",
                                                           sp.REALISM_SCHEMA, _parse_rating, self.stats.usage, 0.0)
        except JudgeCircuitOpenError:
            raise
        except JudgeReplyError as exc:
            raise _Drop(INVALID_REPLY) from exc
        except JudgeError as exc:
            raise _Drop(LLM_ERROR) from exc
        self.stats.realism[rating] += 1
        if rating < self.options.min_realism:
            raise _Drop(LOW_REALISM)
        return rating

    def _row(self, kind: str, question: str, chunks: Sequence[Chunk], answer: str, meta: dict[str, Any],
             realism: int | None, *, difficulty: str | None = None,
             hops: list[list[str]] | None = None) -> dict[str, Any]:
        ids = [c.id for c in chunks]
        digest = hashlib.sha256("\0".join([kind, *ids, question]).encode()).hexdigest()[:12]
        config = self.options.chunking
        row: dict[str, Any] = {
            "id": f"synth-{digest}", "question": question, "ground_truth_docs": ids,
            "ground_truth_answer": answer, "question_type": MULTI_HOP if kind == MULTI_HOP else "factoid",
        }
        if difficulty:
            row["difficulty"] = difficulty
        if hops:
            row["hops"] = hops
        row["meta"] = {
            "source": "synthetic", "kind": kind, "generator_model": self.settings.model, **meta,
            "realism": realism, "realism_model": self._rater if realism is not None else None,
            "realism_prompt_version": sp.REALISM_VERSION if realism is not None else None,
            "source_docs": list(dict.fromkeys(c.doc_id for c in chunks)),
            "chunking": {"size": config.size, "overlap": config.overlap, "mode": config.mode,
                         "title_prefix": config.title_prefix},
        }
        return row

    # --- embeddings ----------------------------------------------------------------------------------
    async def _embed(self, texts: Sequence[str]) -> np.ndarray:
        if self._embed_fn is None:
            from ..scoring.embedder import shared_embedder

            embedder = shared_embedder()
            self._embed_fn = embedder.embed
        fn = self._embed_fn
        return await asyncio.to_thread(fn, list(texts))

    async def _distractor_space(self, chunks: Sequence[Chunk], rng: random.Random) -> _Neighbours:
        pool = list(range(len(chunks)))
        if len(pool) > self.options.distractor_pool:
            pool = sorted(random.Random(self.options.seed + 1).sample(pool, self.options.distractor_pool))
        vectors = await self._embed([chunks[i].content for i in pool])
        return _Neighbours(chunks, pool, vectors, self._embed)


class _Neighbours:
    """Nearest chunks of other documents in MiniLM space, over a bounded pool."""

    def __init__(self, chunks: Sequence[Chunk], pool: list[int], vectors: np.ndarray,
                 embed: Callable[[Sequence[str]], Awaitable[np.ndarray]]) -> None:
        self._chunks = chunks
        self._pool = pool
        self._position = {c: i for i, c in enumerate(pool)}
        self._vectors = vectors
        self._embed = embed

    def nearest(self, index: int, k: int = 10) -> list[int]:
        position = self._position.get(index)
        vector = self._vectors[position] if position is not None else None
        if vector is None:  # a target outside the pool: compare with its own text's words only
            return []
        scores = self._vectors @ vector
        order = np.argsort(-scores)
        doc = self._chunks[index].doc_id
        out = []
        for p in order.tolist():
            j = self._pool[p]
            if self._chunks[j].doc_id != doc:
                out.append(j)
            if len(out) == k:
                break
        return out


def _entities(text: str) -> set[str]:
    return {e for e in claims.entities(text) if len(e) > 2 and e not in _ENTITY_SKIP}


def _entity_index(chunks: Sequence[Chunk]) -> dict[str, list[int]]:
    """Entity -> chunks mentioning it, for entities in 2..(1 % of the documents, at least 5) documents."""
    index: dict[str, list[int]] = {}
    for i, chunk in enumerate(chunks):
        for entity in _entities(chunk.text):
            index.setdefault(entity, []).append(i)
    docs = len({c.doc_id for c in chunks})
    limit = max(5, docs // 100)
    out = {}
    for entity, members in index.items():
        n_docs = len({chunks[i].doc_id for i in members})
        if 2 <= n_docs <= limit:
            out[entity] = members
    return out


def _split_evenly(n: int, kinds: Sequence[str]) -> dict[str, int]:
    base, extra = divmod(n, len(kinds))
    return {k: base + (1 if i < extra else 0) for i, k in enumerate(kinds)}
