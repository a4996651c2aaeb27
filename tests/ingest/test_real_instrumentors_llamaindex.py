"""Traces from the real LlamaIndex instrumentors — OpenInference's
(``openinference-instrumentation-llama-index``) and OpenLLMetry's
(``opentelemetry-instrumentation-llamaindex``) — around a real LlamaIndex ``VectorStoreIndex``
query engine. Offline: the embedding model is a keyword-count ``BaseEmbedding`` and the LLM a
``CustomLLM`` that returns a fixed answer; every span and attribute comes from the
instrumentation code users run in production.

Also the traces LlamaIndex makes while *building* the index (text splitting, embedding batches):
they are not RAG requests and must never be judged or counted as traffic (``not_rag``)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from llama_index.core import Settings, VectorStoreIndex
from llama_index.core.base.llms.types import CompletionResponse, CompletionResponseGen, LLMMetadata
from llama_index.core.embeddings import BaseEmbedding
from llama_index.core.llms import CustomLLM
from llama_index.core.llms.callbacks import llm_completion_callback
from llama_index.core.schema import Document as LiDocument
from llama_index.core.schema import TextNode
from prometheus_client import CollectorRegistry

from ragmon import semconv as sc
from ragmon.agent import Agent
from ragmon.config import load_agent_config
from ragmon.ingest.extract import ExtractSettings, build_rag_trace
from ragmon.testing import InMemorySource, StaticJudge
from ragmon.types import RagTrace, SpanRecord
from tests.ingest.otel_helpers import SpanFactory

# openinference-instrumentation-llama-index 4.x serialises the LLM's metadata with pydantic's
# deprecated ``.json()``; under filterwarnings=error the warning aborts its span handler and the
# LLM span silently goes missing. Not ours to fix: ignored here, only for this message.
pytestmark = pytest.mark.filterwarnings("ignore:The `json` method is deprecated:DeprecationWarning")

QUESTION = "How do I reset my password?"
ANSWER = "Use the reset link on the account page within 24 hours."
TEXTS = {"kb-1": "Passwords are reset from the account page.",
         "kb-2": "Reset links expire after 24 hours.",
         "kb-3": "Billing questions go to finance."}
VOCABULARY = ("password", "reset", "account", "link", "expire", "hour", "billing")


class KeywordEmbedding(BaseEmbedding):
    """Keyword counts over a tiny vocabulary: distinct, deterministic similarities offline."""

    def _vector(self, text: str) -> list[float]:
        lowered = text.lower()
        return [float(lowered.count(word)) + 1e-3 for word in VOCABULARY]

    def _get_query_embedding(self, query: str) -> list[float]:
        return self._vector(query)

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._vector(query)

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._vector(text)


class FixedLLM(CustomLLM):
    """A completion model that always answers ANSWER (no network)."""

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(model_name="fixed-llm", is_chat_model=False)

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        return CompletionResponse(text=ANSWER)

    @llm_completion_callback()
    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponseGen:
        yield CompletionResponse(text=ANSWER, delta=ANSWER)


@pytest.fixture(scope="module", params=["openinference", "openllmetry"])
def instrumented_module(request: pytest.FixtureRequest) -> Iterator[tuple[str, SpanFactory]]:
    factory = SpanFactory("li-app")
    if request.param == "openinference":
        from openinference.instrumentation.llama_index import LlamaIndexInstrumentor

        instrumentor: Any = LlamaIndexInstrumentor()
    else:
        from opentelemetry.instrumentation.llamaindex import LlamaIndexInstrumentor as OpenLLMetryInstrumentor

        instrumentor = OpenLLMetryInstrumentor()
    instrumentor.instrument(tracer_provider=factory.provider)
    # models made after instrument(): OpenInference's span handler drops spans of earlier ones
    Settings.llm = FixedLLM()
    Settings.embed_model = KeywordEmbedding(model_name="keywords")
    Settings.tokenizer = str.split  # the default tokenizer downloads tiktoken's table: stay offline
    try:
        yield request.param, factory
    finally:
        instrumentor.uninstrument()


@pytest.fixture
def instrumented(instrumented_module: tuple[str, SpanFactory]) -> tuple[str, SpanFactory]:
    instrumented_module[1].clear()
    return instrumented_module


def _index() -> VectorStoreIndex:
    nodes = [TextNode(id_=doc_id, text=text, metadata={"source": f"{doc_id}.md"}) for doc_id, text in TEXTS.items()]
    return VectorStoreIndex(nodes=nodes)


def _by_trace(records: Sequence[SpanRecord]) -> dict[str, list[SpanRecord]]:
    out: dict[str, list[SpanRecord]] = {}
    for record in records:
        out.setdefault(record.trace_id, []).append(record)
    return out


def _query_trace(factory: SpanFactory, settings: ExtractSettings | None = None) -> RagTrace:
    index = _index()
    factory.clear()  # index building is tested on its own below
    response = index.as_query_engine(similarity_top_k=2).query(QUESTION)
    assert str(response) == ANSWER
    traces = _by_trace(factory.records())
    assert len(traces) == 1
    return build_rag_trace(next(iter(traces.values())), complete=True, settings=settings)


def test_llamaindex_query_engine(instrumented: tuple[str, SpanFactory]) -> None:
    family, factory = instrumented
    t = _query_trace(factory)
    assert (t.question, t.answer) == (QUESTION, ANSWER)
    # the two best nodes, in rank order, with their node ids and the vector store's scores
    assert [(d.id, d.content) for d in t.documents] == [("kb-1", TEXTS["kb-1"]), ("kb-2", TEXTS["kb-2"])]
    if family == "openinference":  # OpenLLMetry's retriever output carries the scores as well
        assert t.documents[0].score is not None and t.documents[1].score is not None
    scores = [d.score for d in t.documents]
    assert all(s is not None for s in scores) and scores[0] > scores[1]  # type: ignore[operator]
    assert t.retrieval_latency_s is not None and t.generation_latency_s is not None
    assert t.pipeline_latency_s is not None and t.pipeline_latency_s >= t.retrieval_latency_s
    assert t.complete and t.content_sampled and t.error_type is None
    assert t.attributes[sc.RAGMON_CONTEXTS_SOURCE] == sc.CONTEXTS_RETRIEVAL
    assert sc.RAGMON_NOT_RAG not in t.attributes
    # the root span is a framework method shared by every query engine of the app ...
    assert t.pipeline == {"openinference": "RetrieverQueryEngine.query",
                          "openllmetry": "RetrieverQueryEngine.workflow"}[family]


def test_llamaindex_pipeline_renamed_by_a_rule(instrumented: tuple[str, SpanFactory]) -> None:
    _family, factory = instrumented
    # ... so the deployment names it (--pipeline-rename 'RetrieverQueryEngine\..*=docs-qa')
    settings = ExtractSettings(pipeline_rename={r"RetrieverQueryEngine\..*": "docs-qa"})
    assert _query_trace(factory, settings).pipeline == "docs-qa"


def test_llamaindex_index_building_is_not_rag(instrumented: tuple[str, SpanFactory]) -> None:
    _family, factory = instrumented
    documents = [LiDocument(text=text, id_=doc_id, metadata={"source": f"{doc_id}.md"})
                 for doc_id, text in TEXTS.items()]
    VectorStoreIndex.from_documents(documents)  # splitting and embedding batches, no query
    traces = _by_trace(factory.records())
    assert len(traces) >= 2  # at least the splitter's and the embedding batch's
    for spans in traces.values():
        t = build_rag_trace(spans, complete=True)
        assert t.attributes.get(sc.RAGMON_NOT_RAG) is True, (t.pipeline, t.question)
        assert t.documents == () and t.retrieval_latency_s is None and t.generation_latency_s is None


async def test_agent_judges_the_query_and_skips_index_building_as_not_rag(
    instrumented: tuple[str, SpanFactory],
) -> None:
    """End to end through the agent: the index-building traces are accounted (received =
    scored + skipped + failed) but only under pipeline="_not_rag", never judged, no latency."""
    _family, factory = instrumented
    documents = [LiDocument(text=text, id_=doc_id) for doc_id, text in TEXTS.items()]
    index = VectorStoreIndex.from_documents(documents)
    build_records = factory.records()
    factory.clear()
    index.as_query_engine(similarity_top_k=2).query(QUESTION)
    query_records = factory.records()
    n_build = len(_by_trace(build_records))

    registry = CollectorRegistry()
    source = InMemorySource()
    judge = StaticJudge({sc.METRIC_FAITHFULNESS: 1.0, sc.METRIC_ANSWER_RELEVANCY: 1.0,
                         sc.METRIC_CONTEXT_PRECISION: 1.0})
    config = load_agent_config({"metrics_port": 0, "pipeline_rename": r"RetrieverQueryEngine\..*=docs-qa"},
                               environ={})
    async with Agent(config, registry=registry, judge=judge, source=source) as agent:
        source.push(build_records)
        source.push(query_records)
        assert await agent.wait_idle(20)
        await asyncio.sleep(0)

    def value(name: str, **labels: str) -> float:
        return registry.get_sample_value(name, {"service": "li-app", **labels}) or 0.0

    received = f"{sc.M_TRACES_RECEIVED}_total"
    skipped = f"{sc.M_TRACES_SKIPPED}_total"
    assert value(received, pipeline="docs-qa") == 1
    assert value(f"{sc.M_TRACES_SCORED}_total", pipeline="docs-qa", judge=judge.name) == 1
    assert value(received, pipeline=sc.NOT_RAG_PIPELINE_LABEL) == n_build
    assert value(skipped, pipeline=sc.NOT_RAG_PIPELINE_LABEL, reason=sc.SKIP_NOT_RAG) == n_build
    assert value(f"{sc.M_PIPELINE_LATENCY}_count", pipeline=sc.NOT_RAG_PIPELINE_LABEL) == 0
    assert value(f"{sc.M_PIPELINE_LATENCY}_count", pipeline="docs-qa") == 1
    assert value(f"{sc.M_CONTEXTS_SOURCE}_total", pipeline="docs-qa", source=sc.CONTEXTS_RETRIEVAL) == 1
    assert len(judge.seen) == 1
    # the accounting identity over everything that entered
    total = sum(s.value for m in registry.collect() if m.name == sc.M_TRACES_RECEIVED
                for s in m.samples if s.name.endswith("_total"))
    parts = sum(s.value for m in registry.collect()
                if m.name in (sc.M_TRACES_SCORED, sc.M_TRACES_SKIPPED, sc.M_TRACES_FAILED)
                for s in m.samples if s.name.endswith("_total"))
    assert total == parts == n_build + 1
