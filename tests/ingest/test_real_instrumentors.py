"""Traces from the real framework instrumentors — OpenInference's and OpenLLMetry's LangChain
instrumentation — around a real LangChain (LCEL) RAG chain. The retriever is an in-memory
``BaseRetriever`` and the model LangChain's own ``FakeListChatModel``: no network, but every
span and attribute comes from the instrumentation code users run in production."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document as LcDocument
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import Runnable, RunnableLambda, RunnablePassthrough

from ragmon.doc_ids import source_chunk_id
from ragmon.ingest.extract import ExtractSettings, build_rag_trace, content_id
from ragmon.types import RagTrace
from tests.ingest.otel_helpers import SpanFactory

QUESTION = "How do I reset my password?"
ANSWER = "Use the reset link on the account page within 24 hours."
KB = [
    LcDocument(page_content="Passwords are reset from the account page.", metadata={"source": "a.md", "id": "kb-1"}),
    LcDocument(page_content="Reset links expire after 24 hours.", metadata={"source": "b.md"}),
]


class KnowledgeBase(BaseRetriever):
    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[LcDocument]:
        return list(KB)


class FailingKnowledgeBase(BaseRetriever):
    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[LcDocument]:
        raise TimeoutError("vector store timed out")


def rag_chain(retriever: BaseRetriever) -> Runnable[Any, str]:
    prompt = ChatPromptTemplate.from_messages([("system", "Answer from the context.\n{context}"),
                                               ("human", "{question}")])
    join = RunnableLambda(lambda docs: "\n".join(d.page_content for d in docs))
    model = FakeListChatModel(responses=[ANSWER])
    return {"context": retriever | join, "question": RunnablePassthrough()} | prompt | model | StrOutputParser()


@pytest.fixture(scope="module", params=["openinference", "openllmetry"])
def instrumented_module(request: pytest.FixtureRequest) -> Iterator[tuple[str, SpanFactory]]:
    # Once per module and family: OpenLLMetry's instrumentor cannot be instrumented again in
    # the same process after uninstrument() (it keeps module-level state).
    factory = SpanFactory("lc-app")
    if request.param == "openinference":
        from openinference.instrumentation.langchain import LangChainInstrumentor

        instrumentor: Any = LangChainInstrumentor()
    else:
        from opentelemetry.instrumentation.langchain import LangchainInstrumentor

        instrumentor = LangchainInstrumentor()
    instrumentor.instrument(tracer_provider=factory.provider)
    try:
        yield request.param, factory
    finally:
        instrumentor.uninstrument()


@pytest.fixture
def instrumented(instrumented_module: tuple[str, SpanFactory]) -> tuple[str, SpanFactory]:
    instrumented_module[1].clear()
    return instrumented_module


def _trace(factory: SpanFactory, settings: ExtractSettings | None = None) -> RagTrace:
    records = factory.records()
    assert len({r.trace_id for r in records}) == 1
    return build_rag_trace(records, complete=True, settings=settings)


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_langchain_pipeline_named_by_configuration(instrumented: tuple[str, SpanFactory]) -> None:
    _family, factory = instrumented
    rag_chain(KnowledgeBase()).invoke(QUESTION)
    renamed = _trace(factory, ExtractSettings(pipeline_rename={"Runnable(Sequence|Parallel)": "support-\\1"}))
    assert renamed.pipeline == "support-Sequence"
    # the store's ids only when the deployment says so (--doc-id-keys id): else a content hash
    only_ids = _trace(factory, ExtractSettings(doc_id_keys=("id",)))
    assert [d.id for d in only_ids.documents] == ["kb-1", content_id(KB[1].page_content)]


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_langchain_rag_chain(instrumented: tuple[str, SpanFactory]) -> None:
    _family, factory = instrumented
    assert rag_chain(KnowledgeBase()).invoke(QUESTION) == ANSWER
    t = _trace(factory)
    assert (t.question, t.answer) == (QUESTION, ANSWER)
    # document ids: the store's id from the metadata, else the source file named in the metadata
    # (source#<hash8> of the text, as ragmon's SDK writes it), never a bare content hash here
    assert [(d.id, d.content, d.rank) for d in t.documents] == [
        ("kb-1", KB[0].page_content, 0), (source_chunk_id("b.md", KB[1].page_content), KB[1].page_content, 1)]
    assert t.documents[1].id == "b.md#" + content_id(KB[1].page_content)[:8]
    assert t.documents[1].metadata == {"source": "b.md"}
    assert t.pipeline == "RunnableSequence"  # every LCEL chain of the app: rename it (below)
    assert t.retrieval_latency_s is not None and t.generation_latency_s is not None
    assert t.pipeline_latency_s is not None and t.pipeline_latency_s >= t.generation_latency_s
    assert t.complete and t.content_sampled and t.error_type is None
    assert t.service == "lc-app"


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_langchain_retriever_failure(instrumented: tuple[str, SpanFactory]) -> None:
    _family, factory = instrumented
    with pytest.raises(TimeoutError):
        rag_chain(FailingKnowledgeBase()).invoke(QUESTION)
    t = _trace(factory)
    assert t.error_type == "TimeoutError"
    assert t.question == QUESTION
    assert t.documents == () and t.answer is None
