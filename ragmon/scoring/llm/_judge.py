"""``LlmJudge``: the ``Judge``/``EvalJudge`` facade that puts cache, budget and input cutting in
front of a mode, over the transport (``_http``, ``_chat``)."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import random
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import httpx

from ... import semconv as sc
from ...errors import JudgeError
from ...types import RagTrace, Scores
from ..identity import JudgeIdentity
from ..judge import Criterion, EvalRequest, JudgeMetrics
from ..metrics import abstention, citations
from . import prompts as p
from ._calls import Embeddings, SupportsEmbed, TraceCalls
from ._chat import ChatClient, Usage
from ._compact import score_compact, score_criteria
from ._eval import EvalTask, score_eval
from ._http import JudgeHttp
from ._parity import score_parity
from ._settings import NAME, LlmJudgeSettings
from .budget import Reservation, TokenBudget
from .cache import TtlCache, content_key

log = logging.getLogger(__name__)

_COMPLETION_ESTIMATE = 300  # tokens a judge reply usually takes, for budget reservations


class LlmJudge:
    """Scores traces with an LLM behind ``POST {base_url}/chat/completions``.

    ``LlmJudge(settings, metrics=..., ...)``, or ``LlmJudge(base_url=..., model=..., ...)`` with
    any ``LlmJudgeSettings`` field as a keyword (overriding ``settings`` when both are given).
    The other keywords are collaborators: metrics, a local embedder, an httpx transport, clocks,
    ``sleep`` and ``rng`` (tests pass in-memory ones).
    """

    name = NAME
    # every request has a timeout, retries and Retry-After waits are capped, the rate limiter
    # never waits for more than a bucket: the agent need not (and must not) cut a trace short
    bounds_own_duration = True

    def __init__(
        self,
        settings: LlmJudgeSettings | None = None,
        *,
        metrics: JudgeMetrics | None = None,
        embedder: SupportsEmbed | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        rng: random.Random | None = None,
        criteria: Sequence[Criterion] = (),
        **overrides: Any,
    ) -> None:
        if settings is None:
            settings = LlmJudgeSettings(**overrides)
        elif overrides:
            settings = dataclasses.replace(settings, **overrides)
        self.settings = settings
        self.model = settings.model
        self.mode = settings.mode
        # user-declared llm evaluators, judged inside the compact call (criteria.py)
        self.criteria: tuple[Criterion, ...] = tuple(criteria)
        self._criteria_key = ({"criteria": [[c.name, c.question, c.pass_when] for c in self.criteria]}
                              if self.criteria else None)
        self._metrics = metrics
        self._http = JudgeHttp(settings, metrics, transport=transport, clock=clock, sleep=sleep, rng=rng)
        self._chat = ChatClient(self._http, settings, metrics)
        self._embeddings = Embeddings(self._chat, settings.embedding_model, embedder)
        self._budget = TokenBudget(
            settings.budget_tokens_per_minute, settings.budget_tokens_per_day, clock=wall_clock,
            on_remaining=self._budget_changed,
        )
        self._cache: TtlCache[Scores] = TtlCache(settings.cache_size, settings.cache_ttl_s, clock=clock)
        self._pending: dict[str, asyncio.Future[Scores]] = {}  # single flight for identical content

    @property
    def identity(self) -> JudgeIdentity:
        """The LLM judge judges with its model; it has no fitted profile."""
        return JudgeIdentity(self.name, str(self.model), sc.PROFILE_NONE)

    def __repr__(self) -> str:  # never shows the key
        return f"LlmJudge(base_url={str(self._http.client.base_url)!r}, model={self.model!r}, mode={self.mode!r})"

    @property
    def circuit_state(self) -> str:
        return self._http.circuit.state

    @property
    def response_format(self) -> str:
        """The ``response_format`` level in use (json_schema, json_object or none)."""
        return self._chat.response_format

    async def aclose(self) -> None:
        await self._http.aclose()

    # --- the Judge protocol ------------------------------------------------------------------
    async def score(self, trace: RagTrace) -> Scores:
        question, answer, contexts = trace.question or "", trace.answer or "", trace.contexts
        key = content_key(mode=self.mode, model=self.model, question=question, contexts=contexts, answer=answer,
                          extra=self._criteria_key)
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
        task = EvalTask(request, cmap, abstention.check(trace.answer))
        judged = cmap.stripped_answer if cmap is not None and cmap.markers else answer
        extra = {
            "reference": request.reference,
            "citation_pattern": request.citation_pattern,
            "expect_abstention": request.expect_abstention,
            "document_ids": [d.id for d in trace.documents if d.content] if cmap is not None else None,
            "raw_answer": answer,
            **(self._criteria_key or {}),
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
        self, question: str, contexts: list[str], answer: str, task: EvalTask | None = None
    ) -> Scores:
        max_input, extra_tokens = self.settings.max_input_tokens, 0
        if task is not None:  # the reference and the cited claims share the per-trace input budget
            extra_tokens = task.extra_tokens(self.mode)
            max_input = max(self.settings.max_input_tokens // 4, self.settings.max_input_tokens - extra_tokens)
        inp = p.fit_to_budget(question, contexts, answer, max_input)
        reservation: Reservation | None = None
        if self._budget.enabled:
            # may raise JudgeBudgetExceeded
            reservation = self._budget.reserve(self._estimate_trace_tokens(inp) + extra_tokens)
        if inp.truncated and self._metrics is not None:
            self._metrics.judge_input_truncated.labels(self.name).inc()

        usage = Usage()
        calls = TraceCalls(self._chat, self._embeddings, usage, self.settings.parity_questions)
        try:
            if task is not None:
                scores = await score_eval(calls, inp, task, self.mode)
            elif self.mode == "compact":
                scores = await score_compact(calls, inp, self.criteria)
            else:
                scores = await score_parity(calls, inp)
            if self.criteria and (task is not None or self.mode != "compact"):
                # parity mode and the evaluation prompt: the criteria in one call of their own
                scores = dataclasses.replace(scores, custom=await score_criteria(calls, inp, self.criteria))
        except JudgeError:
            raise
        except Exception as exc:  # a bug must still end as an accounted failure, not a crash
            log.exception("internal error in the LLM judge")
            raise JudgeError(f"internal error in the LLM judge: {type(exc).__name__}") from exc
        finally:  # (ragmon_judge_duration_seconds is observed by the agent around score())
            if reservation is not None:
                self._budget.settle(reservation, usage.total)

        return dataclasses.replace(
            scores,
            prompt_tokens=usage.prompt_tokens,
            completion_tokens=usage.completion_tokens,
            details={
                **scores.details, "mode": self.mode, "calls": usage.calls, "truncated": inp.truncated,
                "usage_estimated": usage.estimated,
            },
        )

    def _estimate_trace_tokens(self, inp: p.JudgeInput) -> int:
        """Tokens one trace will probably cost, for the budget reservation."""
        q, a = p.estimate_tokens(inp.question), p.estimate_tokens(inp.answer)
        ctx = [p.estimate_tokens(c) for c in inp.contexts]
        overhead = 350  # instructions and JSON framing per call
        if self.mode == "compact":
            return q + a + sum(ctx) + overhead + _COMPLETION_ESTIMATE
        n_questions = self.settings.parity_questions
        calls = 2 + n_questions + len(ctx)
        prompt = (q + a) + (sum(ctx) + a) + n_questions * a + sum(q + a + c for c in ctx)
        return prompt + calls * (overhead + 100)

    def _budget_changed(self, window: str, remaining: int) -> None:
        if self._metrics is not None:
            self._metrics.judge_budget_remaining.labels(window).set(remaining)
