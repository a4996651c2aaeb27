"""The LLM judge: RAGAS metrics from any OpenAI-compatible chat API (httpx stays in here).

Two modes share prompts, parsing and formulas:

* ``compact`` (default): ONE chat call per trace returns the answer's claims with verdicts,
  a relevance verdict per context and a few generated questions; answer relevancy then
  comes from the agent's embedding model, so it costs no further LLM call.
* ``parity``: RAGAS's own recipe — statement extraction, then NLI verdicts; N question
  generations; one call per context — for numbers comparable with RAGAS.

Offline evaluation (``score_for_eval``, the ``EvalJudge`` protocol) adds context recall, answer
correctness, abstention and citation metrics: in compact mode still ONE chat call, with a
separate evaluation variant of the compact prompt (``prompts.compact_eval_messages``; the online
prompt is untouched); in parity mode RAGAS's extra calls.

Cost and failure control, in the order a trace meets them: content-hash cache -> token
budget (``JudgeBudgetExceeded``: the agent skips the trace) -> input cut to the per-trace
token budget -> per request: circuit breaker -> client-side rpm/tpm limiter -> bounded
concurrency -> HTTP with retries (exponential backoff + jitter, ``Retry-After`` honoured)
on 429/5xx/timeouts -> ``response_format`` json_schema, falling back to json_object and
then plain text when the server rejects it -> tolerant parsing -> one repair attempt.

Every request is counted in ``ragmon_judge_requests_total{judge="llm",outcome}`` with one of
ok, retry (a failed attempt that will be retried), timeout, http_error, rate_limited,
invalid_reply, circuit_open. The API key is sent as a header and never logged or put in
an error message.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import random
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar
from urllib.parse import urlsplit

import httpx
import numpy as np

from .. import semconv as sc
from ..errors import (
    JudgeCircuitOpenError,
    JudgeError,
    JudgeHTTPError,
    JudgeRateLimitedError,
    JudgeReplyError,
    JudgeTimeoutError,
)
from ..export.metrics import AgentMetrics
from ..types import RagTrace, Scores
from . import abstention, citations, formulas
from . import prompts as p
from .budget import Reservation, TokenBudget
from .cache import TtlCache, content_key
from .judge import EvalRequest
from .resilience import Backoff, CircuitBreaker, RateLimiter, parse_retry_after
from .verdicts import (
    CONTEXT_VERDICT_SCHEMA,
    CORRECTNESS_SCHEMA,
    NLI_SCHEMA,
    QUESTION_SCHEMA,
    STATEMENTS_SCHEMA,
    CompactVerdict,
    VerdictError,
    compact_eval_schema,
    compact_schema,
    extract_json,
    parse_compact,
    parse_compact_eval,
    parse_context_verdict,
    parse_correctness,
    parse_nli,
    parse_question,
    parse_statements,
)

log = logging.getLogger(__name__)

T = TypeVar("T")
MODES = ("compact", "parity")
OUTCOME_OK = "ok"
OUTCOME_RETRY = "retry"
# response_format levels, tried in this order; a server that rejects one gets the next
FORMAT_JSON_SCHEMA, FORMAT_JSON_OBJECT, FORMAT_NONE = "json_schema", "json_object", "none"
_FORMAT_FALLBACK = {FORMAT_JSON_SCHEMA: FORMAT_JSON_OBJECT, FORMAT_JSON_OBJECT: FORMAT_NONE}
_COMPLETION_ESTIMATE = 300  # tokens a judge reply usually takes, for budget reservations


class SupportsEmbed(Protocol):
    def embed(self, texts: Sequence[str]) -> np.ndarray: ...


@dataclass
class _Usage:
    """Tokens and calls spent on one trace."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    calls: int = 0
    estimated: bool = False  # some reply had no ``usage``

    @property
    def total(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True)
class _EvalTask:
    """What one ``score_for_eval`` call asks beyond the online metrics."""

    request: EvalRequest
    cmap: citations.CitationMap | None
    abstention: abstention.AbstentionCheck

    @property
    def reference_text(self) -> str | None:
        """The reference when it has something to judge (a blank reference is not computable)."""
        ref = self.request.reference
        return ref if ref is not None and p.reference_sentences(ref) else None

    @property
    def pairs(self) -> list[tuple[int, int]]:
        return self.cmap.pairs() if self.cmap is not None else []

    def claim_text(self, index: int) -> str:
        assert self.cmap is not None
        return self.cmap.claims[index].text

    def extra_tokens(self, mode: str) -> int:
        """Input tokens the reference and the cited claims add (for the budget)."""
        ref = p.estimate_tokens(self.request.reference or "")
        cites = sum(p.estimate_tokens(self.claim_text(i)) + 4 for i, _ in self.pairs)
        if mode == "compact":
            return ref + cites + (150 if ref or cites else 0)
        return 3 * ref + cites + 450 * (2 + len({c for _, c in self.pairs}))


class _FormatRejected(Exception):
    """The server answered 400/422 to a request carrying ``response_format``."""


class LlmJudge:
    """Scores traces with an LLM behind ``POST {base_url}/chat/completions``."""

    name = "llm"
    # every request has a timeout, retries and Retry-After waits are capped, the rate limiter
    # never waits for more than a bucket: the agent need not (and must not) cut a trace short
    bounds_own_duration = True

    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        api_key: str | None = None,
        mode: str = "compact",
        metrics: AgentMetrics | None = None,
        embedder: SupportsEmbed | None = None,
        embedding_model: str | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        rng: random.Random | None = None,
        timeout_s: float = 60.0,
        max_retries: int = 4,
        backoff_base_s: float = 0.5,
        backoff_max_s: float = 30.0,
        requests_per_minute: int = 0,
        tokens_per_minute: int = 0,
        budget_tokens_per_minute: int = 0,
        budget_tokens_per_day: int = 0,
        cache_ttl_s: float = 3600.0,
        cache_size: int = 10_000,
        max_input_tokens: int = 6_000,
        max_completion_tokens: int = 1_024,
        circuit_failures: int = 5,
        circuit_reset_s: float = 30.0,
        concurrency: int = 4,
        parity_questions: int = 3,
        temperature: float = 0.0,
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        self.model = model
        self.mode = mode
        self.embedding_model = embedding_model
        self.max_input_tokens = max_input_tokens
        self.max_completion_tokens = max_completion_tokens
        self.max_retries = max_retries
        self.timeout_s = timeout_s
        self.parity_questions = parity_questions
        self.temperature = temperature
        self.response_format = FORMAT_JSON_SCHEMA
        self._metrics = metrics
        self._api_key = api_key  # kept only to scrub it from server error messages
        self._embedder = embedder
        self._clock = clock
        self._sleep = sleep
        headers = {"User-Agent": "ragmon-llm-judge"}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
            if (urlsplit(base_url).hostname or "").endswith(".azure.com"):
                headers["api-key"] = api_key  # Azure OpenAI's own header
        self._client = httpx.AsyncClient(
            base_url=base_url.rstrip("/") + "/",
            headers=headers,
            timeout=httpx.Timeout(timeout_s),
            transport=transport,
            limits=httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency),
        )
        self._semaphore = asyncio.Semaphore(concurrency)
        self._backoff = Backoff(backoff_base_s, backoff_max_s, rng=rng)
        self._circuit = CircuitBreaker(circuit_failures, circuit_reset_s, clock=clock, on_change=self._circuit_changed)
        self._limiter = RateLimiter(requests_per_minute, tokens_per_minute, clock=clock, sleep=sleep)
        self._budget = TokenBudget(
            budget_tokens_per_minute, budget_tokens_per_day, clock=wall_clock, on_remaining=self._budget_changed
        )
        self._cache: TtlCache[Scores] = TtlCache(cache_size, cache_ttl_s, clock=clock)
        self._pending: dict[str, asyncio.Future[Scores]] = {}  # single flight for identical content
        if metrics is not None:
            metrics.judge_circuit_open.labels(self.name).set(0)

    def __repr__(self) -> str:  # never shows the key
        return f"LlmJudge(base_url={str(self._client.base_url)!r}, model={self.model!r}, mode={self.mode!r})"

    @property
    def circuit_state(self) -> str:
        return self._circuit.state

    async def aclose(self) -> None:
        await self._client.aclose()

    # --- the Judge protocol ------------------------------------------------------------------
    async def score(self, trace: RagTrace) -> Scores:
        question, answer, contexts = trace.question or "", trace.answer or "", trace.contexts
        key = content_key(mode=self.mode, model=self.model, question=question, contexts=contexts, answer=answer)
        return await self._cached(key, lambda: self._score_uncached(question, contexts, answer))

    async def score_for_eval(self, trace: RagTrace, request: EvalRequest) -> Scores:
        """``score`` plus the offline metrics ``request`` enables (the ``EvalJudge`` protocol).

        Compact mode: still ONE chat call per trace, with the evaluation variant of the compact
        prompt (reference claims and citation verdicts are asked for only when needed). Parity
        mode: RAGAS's extra calls (reference attribution, reference statements + TP/FP/FN
        classification, one NLI call per cited context). With a citation pattern, the markers are
        removed from the answer before any claim is judged.
        """
        question, answer, contexts = trace.question or "", trace.answer or "", trace.contexts
        cmap = None
        if request.citation_pattern is not None:
            cmap = citations.parse_citations(answer, trace.documents, request.citation_pattern)
        task = _EvalTask(request, cmap, abstention.check(trace.answer))
        judged = cmap.stripped_answer if cmap is not None and cmap.markers else answer
        extra = {
            "reference": request.reference,
            "citation_pattern": request.citation_pattern,
            "expect_abstention": request.expect_abstention,
            "document_ids": [d.id for d in trace.documents if d.content] if cmap is not None else None,
            "raw_answer": answer,
        }
        key = content_key(
            mode=self.mode, model=self.model, question=question, contexts=contexts, answer=judged, extra=extra
        )
        return await self._cached(key, lambda: self._score_uncached(question, contexts, judged, task))

    async def _cached(self, key: str, compute: Callable[[], Awaitable[Scores]]) -> Scores:
        """The content-hash cache with single flight for identical content around ``compute``."""
        if not self._cache.enabled:
            return await compute()
        cached = self._cache.get(key)
        if cached is None and key in self._pending:  # the same content is being judged right now
            cached = await asyncio.shield(self._pending[key])
        if cached is not None:
            if self._metrics is not None:
                self._metrics.judge_cache_hits.labels(self.name).inc()
            return dataclasses.replace(
                cached, prompt_tokens=0, completion_tokens=0, details={**cached.details, "cached": True}
            )
        future: asyncio.Future[Scores] = asyncio.get_running_loop().create_future()
        future.add_done_callback(lambda f: f.cancelled() or f.exception())  # no "never retrieved" warnings
        self._pending[key] = future
        try:
            scores = await compute()
        except BaseException as exc:
            future.set_exception(exc if isinstance(exc, Exception) else JudgeError("judging was cancelled"))
            raise
        else:
            future.set_result(scores)
            self._cache.put(key, scores)
            return scores
        finally:
            del self._pending[key]

    async def _score_uncached(
        self, question: str, contexts: list[str], answer: str, task: _EvalTask | None = None
    ) -> Scores:
        max_input, extra_tokens = self.max_input_tokens, 0
        if task is not None:  # the reference and the cited claims share the per-trace input budget
            extra_tokens = task.extra_tokens(self.mode)
            max_input = max(self.max_input_tokens // 4, self.max_input_tokens - extra_tokens)
        inp = p.fit_to_budget(question, contexts, answer, max_input)
        reservation: Reservation | None = None
        if self._budget.enabled:
            # may raise JudgeBudgetExceeded
            reservation = self._budget.reserve(self._estimate_trace_tokens(inp) + extra_tokens)
        if inp.truncated and self._metrics is not None:
            self._metrics.judge_input_truncated.labels(self.name).inc()

        usage = _Usage()
        try:
            if task is not None:
                scores = await self._score_eval(inp, task, usage)
            elif self.mode == "compact":
                scores = await self._score_compact(inp, usage)
            else:
                scores = await self._score_parity(inp, usage)
        except JudgeError:
            raise
        except Exception as exc:  # a bug must still end as an accounted failure, not a crash
            log.exception("internal error in the LLM judge")
            raise JudgeError(f"internal error in the LLM judge: {type(exc).__name__}") from exc
        finally:  # (ragmon_judge_duration_seconds is observed by the agent around score())
            if reservation is not None:
                self._budget.settle(reservation, usage.total)

        scores = dataclasses.replace(
            scores,
            prompt_tokens=usage.prompt_tokens,
            completion_tokens=usage.completion_tokens,
            details={
                **scores.details, "mode": self.mode, "calls": usage.calls, "truncated": inp.truncated,
                "usage_estimated": usage.estimated,
            },
        )
        return scores

    # --- compact mode ------------------------------------------------------------------------
    async def _score_compact(self, inp: p.JudgeInput, usage: _Usage) -> Scores:
        n = len(inp.contexts)
        verdict = await self._json_call(
            p.compact_messages(inp), "rag_judgement", compact_schema(n), lambda o: parse_compact(o, n), usage
        )
        return await self._compact_scores(inp, verdict, usage)

    async def _compact_scores(self, inp: p.JudgeInput, verdict: CompactVerdict, usage: _Usage) -> Scores:
        n = len(inp.contexts)
        claim_verdicts = [v for _, v in verdict.claims]
        relevancy = await self._answer_relevancy(inp.question, verdict.questions, verdict.noncommittal, usage)
        return Scores(
            {
                sc.METRIC_FAITHFULNESS: formulas.faithfulness(claim_verdicts) if n else None,
                sc.METRIC_ANSWER_RELEVANCY: relevancy,
                sc.METRIC_CONTEXT_PRECISION: formulas.context_precision(verdict.context_relevant),
            },
            judge=self.name,
            details={
                "claims": [{"claim": c, "supported": v} for c, v in verdict.claims],
                "context_relevant": list(verdict.context_relevant),
                "generated_questions": list(verdict.questions),
                "noncommittal": verdict.noncommittal,
            },
        )

    # --- RAGAS-parity mode -------------------------------------------------------------------
    async def _score_parity(self, inp: p.JudgeInput, usage: _Usage) -> Scores:
        return (await self._parity(inp, usage))[0]

    async def _parity(self, inp: p.JudgeInput, usage: _Usage) -> tuple[Scores, tuple[str, ...]]:
        """Parity-mode scores and the answer's statements (offline evaluation reuses them)."""

        async def claims() -> tuple[tuple[str, ...], tuple[bool, ...]]:
            statements = await self._json_call(
                p.statements_messages(inp.question, inp.answer), "statements", STATEMENTS_SCHEMA,
                parse_statements, usage,
            )
            if not statements or not inp.contexts:
                return statements, ()
            verdicts = await self._json_call(
                p.nli_messages(inp.contexts, statements), "nli_verdicts", NLI_SCHEMA,
                lambda o: parse_nli(o, len(statements)), usage,
            )
            return statements, verdicts

        async def question() -> tuple[str, bool]:
            return await self._json_call(
                p.question_messages(inp.answer), "generated_question", QUESTION_SCHEMA, parse_question, usage,
                temperature=0.7 if self.parity_questions > 1 else None,  # RAGAS samples N different questions
            )

        async def context(ctx: str) -> bool:
            return await self._json_call(
                p.context_verdict_messages(inp.question, ctx, inp.answer), "context_verdict",
                CONTEXT_VERDICT_SCHEMA, parse_context_verdict, usage,
            )

        try:
            async with asyncio.TaskGroup() as group:  # one failure cancels the sibling calls
                claims_task = group.create_task(claims())
                question_tasks = [group.create_task(question()) for _ in range(self.parity_questions)]
                context_tasks = [group.create_task(context(c)) for c in inp.contexts]
        except BaseExceptionGroup as group_error:
            raise _first_judge_error(group_error) from None

        statements, nli = claims_task.result()
        generated = [t.result() for t in question_tasks]
        noncommittal = any(nc for _, nc in generated)
        relevancy = await self._answer_relevancy(inp.question, [q for q, _ in generated if q], noncommittal, usage)
        relevant = [t.result() for t in context_tasks]
        return Scores(
            {
                sc.METRIC_FAITHFULNESS: formulas.faithfulness(nli) if inp.contexts else None,
                sc.METRIC_ANSWER_RELEVANCY: relevancy,
                sc.METRIC_CONTEXT_PRECISION: formulas.context_precision(relevant),
            },
            judge=self.name,
            details={
                "claims": [{"claim": s, "supported": v} for s, v in zip(statements, nli, strict=False)],
                "context_relevant": relevant,
                "generated_questions": [q for q, _ in generated],
                "noncommittal": noncommittal,
            },
        ), statements

    # --- offline evaluation: reference-based, abstention and citation metrics ----------------
    async def _score_eval(self, inp: p.JudgeInput, task: _EvalTask, usage: _Usage) -> Scores:
        if self.mode == "compact":
            base, extra = await self._compact_eval(inp, task, usage)
        else:
            base, extra = await self._parity_eval(inp, task, usage)
        values: dict[str, float | None] = {**base.values, **extra.values}
        details: dict[str, Any] = {**base.details, **extra.details}
        noncommittal = bool(base.details.get("noncommittal"))
        abstained = task.abstention.abstained or noncommittal
        details["abstained"] = abstained
        if task.abstention.phrase:
            details["abstention_phrase"] = task.abstention.phrase
        elif noncommittal:
            details["abstention_phrase"] = "judged noncommittal"
        if task.request.expect_abstention:
            values[sc.METRIC_ABSTENTION] = formulas.abstention(abstained)
        return Scores(values, judge=self.name, details=details)

    async def _compact_eval(self, inp: p.JudgeInput, task: _EvalTask, usage: _Usage) -> tuple[Scores, Scores]:
        """ONE chat call: the compact verdict plus reference claims and citation verdicts."""
        n = len(inp.contexts)
        reference = task.reference_text
        n_refs = len(p.reference_sentences(reference)) if reference is not None else None
        pairs = task.pairs
        named = [(task.claim_text(i), ctx + 1) for i, ctx in pairs]
        verdict = await self._json_call(
            p.compact_eval_messages(inp, reference, named), "rag_evaluation",
            compact_eval_schema(n, reference is not None, len(pairs)),
            lambda o: parse_compact_eval(o, n, n_refs, len(pairs)), usage,
        )
        base = await self._compact_scores(inp, verdict.base, usage)
        values: dict[str, float | None] = {}
        details: dict[str, Any] = {}
        if task.request.reference is not None:
            if reference is None:
                values[sc.METRIC_CONTEXT_RECALL] = values[sc.METRIC_ANSWER_CORRECTNESS] = None
                details["reference_reason"] = "the reference answer has no claims"
            else:
                attributed = [a and n > 0 for _, a, _ in verdict.reference_claims]
                tp = sum(verdict.in_reference)
                fp = len(verdict.in_reference) - tp
                fn = sum(1 for _, _, in_answer in verdict.reference_claims if not in_answer)
                similarity = await self._similarity(inp.answer, reference, usage)
                values[sc.METRIC_CONTEXT_RECALL] = formulas.context_recall(attributed)
                values[sc.METRIC_ANSWER_CORRECTNESS] = formulas.answer_correctness(tp, fp, fn, similarity)
                details["reference_claims"] = [
                    {"claim": c, "attributed": a, "in_answer": ia}
                    for (c, _, ia), a in zip(verdict.reference_claims, attributed, strict=True)
                ]
                details["answer_correctness_counts"] = {"tp": tp, "fp": fp, "fn": fn}
                details["answer_reference_similarity"] = round(similarity, 3)
                details["claims_in_reference"] = list(verdict.in_reference)
        if task.cmap is not None:
            supported = dict(zip(pairs, verdict.citation_supported, strict=True))
            values.update(self._citation_values(task.cmap, supported, details))
        return base, Scores(values, judge=self.name, details=details)

    async def _parity_eval(self, inp: p.JudgeInput, task: _EvalTask, usage: _Usage) -> tuple[Scores, Scores]:
        """RAGAS-like extra calls: reference attribution (context recall), reference statements
        and TP/FP/FN classification (answer correctness), one NLI call per cited context."""
        base, statements = await self._parity(inp, usage)
        reference = task.reference_text
        values: dict[str, float | None] = {}
        details: dict[str, Any] = {}

        async def recall() -> tuple[bool, ...]:
            assert reference is not None
            sentences = p.reference_sentences(reference)
            if not inp.contexts:
                return tuple(False for _ in sentences)
            return await self._json_call(
                p.context_recall_messages(inp.contexts, sentences), "context_recall", NLI_SCHEMA,
                lambda o: parse_nli(o, len(sentences)), usage,
            )

        async def correctness() -> tuple[int, int, int, float]:
            assert reference is not None
            ref_statements = await self._json_call(
                p.statements_messages(inp.question, reference), "statements", STATEMENTS_SCHEMA,
                parse_statements, usage,
            )
            if statements and ref_statements:
                in_ref, in_ans = await self._json_call(
                    p.correctness_messages(inp.question, statements, ref_statements), "answer_correctness",
                    CORRECTNESS_SCHEMA, lambda o: parse_correctness(o, len(statements), len(ref_statements)),
                    usage,
                )
            else:
                in_ref, in_ans = tuple(False for _ in statements), tuple(False for _ in ref_statements)
            similarity = await self._similarity(inp.answer, reference, usage)
            tp = sum(in_ref)
            return tp, len(in_ref) - tp, sum(1 for v in in_ans if not v), similarity

        async def cited(ctx: int, claim_indexes: list[int]) -> dict[tuple[int, int], bool]:
            assert task.cmap is not None
            texts = [task.claim_text(i) for i in claim_indexes]
            verdicts = await self._json_call(
                p.nli_messages([inp.contexts[ctx]], texts), "nli_verdicts", NLI_SCHEMA,
                lambda o: parse_nli(o, len(texts)), usage,
            )
            return {(i, ctx): v for i, v in zip(claim_indexes, verdicts, strict=True)}

        by_context: dict[int, list[int]] = {}
        for claim_index, ctx in task.pairs:
            by_context.setdefault(ctx, []).append(claim_index)
        try:
            async with asyncio.TaskGroup() as group:
                recall_task = group.create_task(recall()) if reference is not None else None
                correctness_task = group.create_task(correctness()) if reference is not None else None
                cite_tasks = [group.create_task(cited(ctx, ids)) for ctx, ids in by_context.items()]
        except BaseExceptionGroup as group_error:
            raise _first_judge_error(group_error) from None

        if task.request.reference is not None:
            if recall_task is None or correctness_task is None:
                values[sc.METRIC_CONTEXT_RECALL] = values[sc.METRIC_ANSWER_CORRECTNESS] = None
                details["reference_reason"] = "the reference answer has no claims"
            else:
                attributed = recall_task.result()
                tp, fp, fn, similarity = correctness_task.result()
                values[sc.METRIC_CONTEXT_RECALL] = formulas.context_recall(attributed)
                values[sc.METRIC_ANSWER_CORRECTNESS] = formulas.answer_correctness(tp, fp, fn, similarity)
                details["reference_claims"] = [
                    {"claim": c, "attributed": a}
                    for c, a in zip(p.reference_sentences(reference or ""), attributed, strict=True)
                ]
                details["answer_correctness_counts"] = {"tp": tp, "fp": fp, "fn": fn}
                details["answer_reference_similarity"] = round(similarity, 3)
        if task.cmap is not None:
            supported: dict[tuple[int, int], bool] = {}
            for t in cite_tasks:
                supported.update(t.result())
            values.update(self._citation_values(task.cmap, supported, details))
        return base, Scores(values, judge=self.name, details=details)

    @staticmethod
    def _citation_values(
        cmap: citations.CitationMap, supported: dict[tuple[int, int], bool], details: dict[str, Any]
    ) -> dict[str, float | None]:
        result = citations.combine(cmap, supported)
        details.update(citations.details(cmap, supported, result))
        cited_correct = [ok for ok, c in zip(result.correct, result.cited, strict=True) if c]
        return {
            sc.METRIC_CITATION_PRESENCE: formulas.citation_presence(result.n_claims, sum(result.cited)),
            sc.METRIC_CITATION_CORRECTNESS: formulas.citation_correctness(cited_correct),
            sc.METRIC_CITATION_COVERAGE: formulas.citation_coverage(result.n_claims, sum(result.correct)),
        }

    async def _similarity(self, answer: str, reference: str, usage: _Usage) -> float:
        """Cosine of the answer's and the reference's embeddings (answer correctness's semantic part)."""
        if not answer.strip() or not reference.strip():
            return 0.0
        vectors = await self._embed([answer, reference], usage)
        return formulas.cosine(vectors[0], vectors[1])

    # --- answer relevancy: embeddings, no LLM call -------------------------------------------
    async def _answer_relevancy(
        self, question: str, generated: Sequence[str], noncommittal: bool, usage: _Usage
    ) -> float | None:
        if noncommittal:
            return 0.0
        if not question.strip() or not generated:
            return None
        vectors = await self._embed([question, *generated], usage)
        return formulas.answer_relevancy(vectors[0], vectors[1:], noncommittal)

    async def _embed(self, texts: list[str], usage: _Usage) -> np.ndarray:
        if self.embedding_model:
            return await self._embed_http(texts, usage)
        if self._embedder is None:
            from .embedder import shared_embedder

            self._embedder = await asyncio.to_thread(shared_embedder)
        embedder = self._embedder
        return await asyncio.to_thread(embedder.embed, texts)

    async def _embed_http(self, texts: list[str], usage: _Usage) -> np.ndarray:
        body = {"model": self.embedding_model, "input": texts}
        response = await self._post("embeddings", body, sum(p.estimate_tokens(t) for t in texts))
        try:
            data = response.json()["data"]
            rows = sorted(data, key=lambda d: d.get("index", 0))
            vectors = np.array([row["embedding"] for row in rows], dtype=np.float32)
            if vectors.shape[0] != len(texts):
                raise ValueError("wrong number of embeddings")
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            self._outcome(sc.FAIL_INVALID_REPLY)
            raise JudgeReplyError("the embeddings endpoint returned an unusable body") from exc
        self._outcome(OUTCOME_OK)
        prompt_tokens = _usage_int(response, "prompt_tokens")
        self._add_tokens(usage, prompt_tokens if prompt_tokens is not None else body_tokens(texts), 0,
                         estimated=prompt_tokens is None)
        return vectors

    # --- one JSON-returning chat call, with the repair attempt -------------------------------
    async def _json_call(
        self, messages: list[p.Message], schema_name: str, schema: Mapping[str, Any],
        parse: Callable[[dict[str, Any]], T], usage: _Usage, temperature: float | None = None,
    ) -> T:
        content = await self._chat(messages, schema_name, schema, usage, temperature)
        try:
            result = parse(extract_json(content))
        except VerdictError as first_error:
            self._outcome(sc.FAIL_INVALID_REPLY)
            log.debug("judge reply unusable (%s); one repair attempt", first_error)
            repair = p.repair_messages(messages, content, str(first_error))
            content = await self._chat(repair, schema_name, schema, usage, temperature)
            try:
                result = parse(extract_json(content))
            except VerdictError as second_error:
                self._outcome(sc.FAIL_INVALID_REPLY)
                raise JudgeReplyError(
                    f"judge reply still invalid after one repair attempt: {second_error}"
                ) from second_error
        self._outcome(OUTCOME_OK)
        return result

    async def _chat(
        self, messages: list[p.Message], schema_name: str, schema: Mapping[str, Any], usage: _Usage,
        temperature: float | None,
    ) -> str:
        estimate = p.estimate_message_tokens(messages)
        while True:
            body: dict[str, Any] = {
                "model": self.model,
                "messages": messages,
                "temperature": self.temperature if temperature is None else temperature,
                "max_tokens": self.max_completion_tokens,
            }
            if self.response_format == FORMAT_JSON_SCHEMA:
                body["response_format"] = {
                    "type": "json_schema", "json_schema": {"name": schema_name, "schema": schema, "strict": True},
                }
            elif self.response_format == FORMAT_JSON_OBJECT:
                # "schema" is ignored by most servers; llama.cpp servers turn it into a grammar
                body["response_format"] = {"type": "json_object", "schema": schema}
            try:
                response = await self._post(
                    "chat/completions", body, estimate + self.max_completion_tokens,
                    format_fallback=self.response_format != FORMAT_NONE,
                )
            except _FormatRejected:
                rejected = body.get("response_format", {}).get("type", FORMAT_NONE)
                if self.response_format == rejected:  # concurrent calls may have downgraded already
                    self.response_format = _FORMAT_FALLBACK.get(rejected, FORMAT_NONE)
                    log.info("judge endpoint rejected response_format %s; using %s from now on",
                             rejected, self.response_format)
                continue
            return self._read_completion(response, messages, usage)

    def _read_completion(self, response: httpx.Response, messages: list[p.Message], usage: _Usage) -> str:
        try:
            data = response.json()
            message = data["choices"][0]["message"]
            content = message.get("content") or ""
            if not isinstance(content, str):
                raise TypeError("content is not a string")
        except (ValueError, KeyError, IndexError, TypeError, AttributeError) as exc:
            self._outcome(sc.FAIL_INVALID_REPLY)
            raise JudgeReplyError("the judge endpoint returned a body that is not a chat completion") from exc
        prompt_tokens = _usage_int(response, "prompt_tokens", data)
        completion_tokens = _usage_int(response, "completion_tokens", data)
        estimated = prompt_tokens is None or completion_tokens is None
        self._add_tokens(
            usage,
            prompt_tokens if prompt_tokens is not None else p.estimate_message_tokens(messages),
            completion_tokens if completion_tokens is not None else p.estimate_tokens(content),
            estimated=estimated,
        )
        return content

    # --- HTTP with circuit breaker, rate limits, concurrency bound and retries ---------------
    async def _post(
        self, path: str, body: Mapping[str, Any], tokens: int, *, format_fallback: bool = False
    ) -> httpx.Response:
        attempt = 0
        while True:
            if not self._circuit.allow():
                self._outcome(sc.FAIL_CIRCUIT_OPEN)
                raise JudgeCircuitOpenError(
                    f"judge endpoint considered down after repeated failures; retrying in "
                    f"{self._circuit.reset_s:g}s (circuit breaker open)"
                )
            retry_after: float | None = None
            failure: JudgeError
            try:
                await self._limiter.acquire(tokens)
                async with self._semaphore:
                    response = await self._client.post(path, json=body)
            except asyncio.CancelledError:
                self._circuit.release()  # a cancelled half-open trial must not wedge the breaker
                raise
            except httpx.TimeoutException:
                self._circuit.record_failure()
                failure = JudgeTimeoutError(f"judge request timed out after {self.timeout_s:g}s")
            except httpx.HTTPError as exc:
                self._circuit.record_failure()
                failure = JudgeHTTPError(f"judge request failed: {type(exc).__name__}", status=None)
            else:
                status = response.status_code
                if 200 <= status < 300:
                    self._circuit.record_success()
                    return response
                # llama-cpp-python answers an unsupported response_format with a 500 naming it
                if format_fallback and status in (400, 422, 500) and _mentions_format(response, strict=status == 500):
                    self._circuit.release()
                    self._outcome(sc.FAIL_HTTP)
                    raise _FormatRejected()
                if status == 429:
                    self._circuit.release()  # alive, just busy: not a reason to open the circuit
                    retry_after = _retry_after(response)
                    failure = JudgeRateLimitedError("judge endpoint rate-limited the request (HTTP 429)")
                elif status >= 500:
                    self._circuit.record_failure()
                    retry_after = _retry_after(response)
                    failure = JudgeHTTPError(f"judge endpoint answered HTTP {status}", status=status)
                else:
                    self._circuit.release()
                    message = _error_message(response)
                    if self._api_key:  # a proxy may echo the key back in its error message
                        message = message.replace(self._api_key, "***")
                    failure = JudgeHTTPError(f"judge endpoint answered HTTP {status}: {message}", status=status)
            if failure.retriable and attempt < self.max_retries:
                self._outcome(OUTCOME_RETRY)
                delay = self._backoff.delay(attempt, retry_after)
                log.debug("judge request failed (%s); retry %d in %.2fs", failure.reason, attempt + 1, delay)
                attempt += 1
                await self._sleep(delay)
                continue
            self._outcome(failure.reason)
            raise failure

    # --- accounting ----------------------------------------------------------------------------
    def _estimate_trace_tokens(self, inp: p.JudgeInput) -> int:
        """Tokens one trace will probably cost, for the budget reservation."""
        q, a = p.estimate_tokens(inp.question), p.estimate_tokens(inp.answer)
        ctx = [p.estimate_tokens(c) for c in inp.contexts]
        overhead = 350  # instructions and JSON framing per call
        if self.mode == "compact":
            return q + a + sum(ctx) + overhead + _COMPLETION_ESTIMATE
        calls = 2 + self.parity_questions + len(ctx)
        prompt = (q + a) + (sum(ctx) + a) + self.parity_questions * a + sum(q + a + c for c in ctx)
        return prompt + calls * (overhead + 100)

    def _add_tokens(self, usage: _Usage, prompt_tokens: int, completion_tokens: int, *, estimated: bool) -> None:
        usage.prompt_tokens += prompt_tokens
        usage.completion_tokens += completion_tokens
        usage.calls += 1
        usage.estimated = usage.estimated or estimated
        if self._metrics is not None:
            self._metrics.judge_tokens.labels(self.name, "prompt").inc(prompt_tokens)
            self._metrics.judge_tokens.labels(self.name, "completion").inc(completion_tokens)

    def _outcome(self, outcome: str) -> None:
        if self._metrics is not None:
            self._metrics.judge_requests.labels(self.name, outcome).inc()

    def _circuit_changed(self, state: str) -> None:
        if state == "open":
            log.warning("LLM judge circuit breaker opened: endpoint failing; traces fail fast as circuit_open")
        else:
            log.info("LLM judge circuit breaker %s", state)
        if self._metrics is not None:
            self._metrics.judge_circuit_open.labels(self.name).set(1 if state == "open" else 0)

    def _budget_changed(self, window: str, remaining: int) -> None:
        if self._metrics is not None:
            self._metrics.judge_budget_remaining.labels(window).set(remaining)


def body_tokens(texts: Sequence[str]) -> int:
    return sum(p.estimate_tokens(t) for t in texts)


def _usage_int(response: httpx.Response, key: str, data: Any = None) -> int | None:
    if data is None:
        try:
            data = response.json()
        except ValueError:
            return None
    usage = data.get("usage") if isinstance(data, dict) else None
    value = usage.get(key) if isinstance(usage, dict) else None
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) and value >= 0 else None


def _retry_after(response: httpx.Response) -> float | None:
    return parse_retry_after(response.headers.get("retry-after"))


def _error_message(response: httpx.Response) -> str:
    """The server's error message (OpenAI shape), short; never echoes request headers."""
    try:
        error = response.json().get("error")
        message = error.get("message") if isinstance(error, dict) else error
    except (ValueError, AttributeError):
        message = response.text
    return str(message or "")[:200]


def _mentions_format(response: httpx.Response, strict: bool = False) -> bool:
    text = response.text.lower()
    if strict:
        return "response_format" in text
    return not text.strip() or any(word in text for word in ("response_format", "json_schema", "schema", "json"))


def _first_judge_error(group: BaseExceptionGroup[Any]) -> BaseException:
    for exc in group.exceptions:
        if isinstance(exc, BaseExceptionGroup):
            return _first_judge_error(exc)
        if isinstance(exc, JudgeError):
            return exc
    first = group.exceptions[0]
    if isinstance(first, Exception):
        return JudgeError(f"internal error in the LLM judge: {type(first).__name__}")
    return first
