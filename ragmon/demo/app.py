"""The demo's RAG app: a support bot for "Brightdesk", instrumented with ragmon's SDK.

Other tests and tools can use it to make real traffic with a known failure::

    import ragmon
    from ragmon.demo.app import DemoRag
    from ragmon.demo.failures import FailureKind

    ragmon.init(service_name="my-test", endpoint="http://127.0.0.1:4318/v1/traces")
    rag = DemoRag(seed=1)
    good = rag.ask(rag.questions[0].question)                       # healthy
    bad = rag.ask(rag.questions[0].question, FailureKind.CONTRADICTION)
    bad.trace_id      # 32 hex chars of the OTel trace this request produced (None without a tracer)
    bad.answer        # the answer with one fact changed; bad.contradiction says which
    rag.ask_random()  # a random bundled question, healthy
    DemoRag(contradiction_changes=("number",))  # contradictions that change a number when the answer has one

``ask`` runs one request through three decorated functions — ``support_bot``
(``@ragmon.pipeline``) calling ``search`` (``@ragmon.retriever``, BM25 over the bundled
corpus, 3 articles) and ``answer`` (``@ragmon.generator``, a deterministic template) — so
the spans carry the question, the retrieved articles (id, content, score, rank) and the
answer. The failure kinds and what each one does are listed in ``ragmon.demo.failures``.
``retriever=`` swaps the search index (``ragmon.demo.releases`` builds a worse one);
``simulate_latency=False`` skips the sleeps (the simulated vector-store round trip and the
slow-retrieval delay) for fast tests; ``instrument=False`` leaves the SDK out altogether
(labelled offline data for a judge: ``failure`` is the label). ``DemoRag`` is thread-safe: the runner calls ``ask``
from a thread pool.
"""

from __future__ import annotations

import contextvars
import random
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from opentelemetry import trace as otel_trace

import ragmon

from .corpus import Corpus, KbQuestion, load_corpus
from .failures import (
    CHANGE_KINDS,
    Contradiction,
    FailureKind,
    base_retrieval_delay,
    contradict,
    off_topic_article,
    slow_retrieval_delay,
)
from .generator import TemplateGenerator
from .retriever import Bm25Retriever, Hit
from .text import sentences

PIPELINE_NAME = "support_bot"  # the name of the decorated pipeline function (the agent's pipeline label)


@dataclass(slots=True)
class DemoAnswer:
    """What one request did; ``failure`` is what was injected, not what a judge found."""

    question: str
    failure: FailureKind
    answer: str = ""
    hits: list[Hit] = field(default_factory=list)
    trace_id: str | None = None
    retrieval_s: float = 0.0
    contradiction: Contradiction | None = None
    off_topic_document: str | None = None

    @property
    def document_ids(self) -> list[str]:
        return [h.document.id for h in self.hits]


@dataclass(slots=True)
class _Plan:
    """How the current request misbehaves; handed to the decorated stages through a
    context variable so that their arguments (and so their spans) stay those of a real app."""

    rng: random.Random
    result: DemoAnswer


_current: contextvars.ContextVar[_Plan] = contextvars.ContextVar("ragmon_demo_plan")


class DemoRag:
    def __init__(
        self,
        corpus: Corpus | None = None,
        *,
        seed: int = 0,
        k: int = 3,
        simulate_latency: bool = True,
        instrument: bool = True,
        contradiction_changes: Sequence[str] = CHANGE_KINDS,
        retriever: Bm25Retriever | None = None,
    ) -> None:
        self.corpus = corpus or load_corpus()
        self.retriever = retriever or Bm25Retriever(self.corpus)
        self.generator = TemplateGenerator()
        self.k = k
        self.simulate_latency = simulate_latency
        unknown = set(contradiction_changes) - set(CHANGE_KINDS)
        if unknown or not contradiction_changes:
            raise ValueError(f"contradiction_changes must be a non-empty subset of {CHANGE_KINDS}")
        self.contradiction_changes = tuple(contradiction_changes)
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        # Decorate here, not at import, so importing this module never needs the SDK.
        search, answer, pipeline = self._make_search(), self._make_answer(), self._make_pipeline()
        if instrument:
            search, answer, pipeline = ragmon.retriever(search), ragmon.generator(answer), ragmon.pipeline(pipeline)
        self._search, self._answer, self._pipeline = search, answer, pipeline

    @property
    def questions(self) -> tuple[KbQuestion, ...]:
        return self.corpus.questions

    # ------------------------------------------------------------------ public
    def ask(
        self, question: str, failure: FailureKind | str = FailureKind.HEALTHY, *, seed: int | None = None
    ) -> DemoAnswer:
        """Run one request end to end with the given injected failure."""
        kind = FailureKind(failure)
        if seed is None:
            with self._lock:
                seed = self._rng.getrandbits(64)
        plan = _Plan(rng=random.Random(seed), result=DemoAnswer(question=question, failure=kind))
        token = _current.set(plan)
        try:
            plan.result.answer = self._pipeline(question)
        finally:
            _current.reset(token)
        return plan.result

    def ask_random(
        self, failure: FailureKind | str = FailureKind.HEALTHY, *, seed: int | None = None
    ) -> DemoAnswer:
        with self._lock:
            question = self._rng.choice(self.corpus.questions).question
        return self.ask(question, failure, seed=seed)

    # ------------------------------------------------------------------ the three stages
    def _make_pipeline(self) -> Callable[[str], str]:
        def support_bot(question: str) -> str:
            plan = _current.get()
            context = otel_trace.get_current_span().get_span_context()
            if context.is_valid:
                plan.result.trace_id = format(context.trace_id, "032x")
            docs = self._search(question)
            return str(self._answer(question, docs))

        return support_bot

    def _make_search(self) -> Callable[[str], list[dict[str, object]]]:
        def search(query: str) -> list[dict[str, object]]:
            plan = _current.get()
            started = time.perf_counter()
            if self.simulate_latency:
                delay = base_retrieval_delay(plan.rng)
                if plan.result.failure is FailureKind.SLOW_RETRIEVAL:
                    delay += slow_retrieval_delay(plan.rng)
                time.sleep(delay)
            if plan.result.failure is FailureKind.RETRIEVAL_MISS:
                hits = self.retriever.search_off_topic(query, plan.rng, self.k)
            else:
                hits = self.retriever.search(query, self.k)
            plan.result.hits = hits
            plan.result.retrieval_s = time.perf_counter() - started
            return [h.as_dict() for h in hits]

        return search

    def _make_answer(self) -> Callable[[str, list[dict[str, object]]], str]:
        def answer(query: str, documents: list[dict[str, object]]) -> str:
            plan = _current.get()
            contexts = [str(d["content"]) for d in documents]
            text = self.generator.answer(query, contexts)
            kind = plan.result.failure
            if kind is FailureKind.CONTRADICTION:
                plan.result.contradiction = contradict(text, plan.rng, self.contradiction_changes)
                text = plan.result.contradiction.text
            elif kind is FailureKind.OFF_TOPIC:
                article = off_topic_article(self.corpus, [h.document.topic for h in plan.result.hits], plan.rng)
                plan.result.off_topic_document = article.id
                text = " ".join(sentences(article.text)[: self.generator.max_sentences])
            return text

        return answer
