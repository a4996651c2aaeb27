"""One document-id rule for SDK and agent (``ragmon.doc_ids``).

A document that comes without an id gets a content hash. The SDK writes that id on its
retriever spans; the agent's extractor makes the same id up for documents that other
instrumentation (OpenInference, OTel GenAI, OpenLLMetry) sent without one. Gold ids in a golden
set, de-duplication and retrieval metrics all depend on the two agreeing for the same text.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest

import ragmon
from ragmon import doc_ids
from ragmon import semconv as sc
from ragmon.ingest import extract
from ragmon.ingest.extract import build_rag_trace
from ragmon.ingest.otlp import decode_export_request
from ragmon.sdk import documents
from tests.ingest.otel_helpers import SpanFactory

TEXTS = [
    "Passwords are reset from the account page.",
    "  Leading and trailing white space is part of the text.  \n",
    "Unicode: café, Straße, 東京, emoji 🚀 — and a tab\there.",
    "x" * 5_000,
]


def test_sdk_and_extractor_import_the_same_rule() -> None:
    assert documents.content_hash is doc_ids.content_id
    assert extract.content_id is doc_ids.content_id


def test_the_rule_is_pinned() -> None:
    # Ids end up in golden sets and dashboards: changing the rule is a breaking change.
    text = "Paris is the capital of France."
    assert doc_ids.content_id(text) == hashlib.sha256(text.encode()).hexdigest()[:16]
    assert doc_ids.source_chunk_id("a.pdf", text) == "a.pdf#" + doc_ids.content_id(text)[:8]
    assert doc_ids.source_chunk_id("a.pdf", None) == "a.pdf#" + doc_ids.content_id("")[:8]


def _sdk_ids(collector: tuple[str, list[Any]]) -> list[str]:
    """Ids the SDK writes for id-less documents, as the agent decodes them from real OTLP bytes."""
    endpoint, received = collector

    @ragmon.retriever(name="kb-search")
    def search(query: str) -> list[str]:
        return list(TEXTS)

    ragmon.init(service_name="ids", endpoint=endpoint, set_global=False, content_rate=0.0)
    search("how?")
    assert ragmon.shutdown() is True
    spans = []
    for _, headers, body in received:
        spans.extend(decode_export_request(body, content_type=headers["content-type"]).spans)
    trace = build_rag_trace(spans, complete=True)
    assert all(d.content is None for d in trace.documents)  # no text sent: the ids came from the SDK
    return [d.id for d in trace.documents]


def _extracted_ids(**attributes: Any) -> list[str]:
    """Ids the extractor makes up for the same texts sent without ids by other instrumentation."""
    factory = SpanFactory("ids")
    span = factory.tracer.start_span("retrieve", attributes=attributes)
    span.end()
    return [d.id for d in build_rag_trace(factory.records(), complete=True).documents]


def _openllmetry_event_ids() -> list[str]:
    factory = SpanFactory("ids")
    span = factory.tracer.start_span("chroma.query", attributes={sc.GEN_AI_OPERATION_NAME: "retrieval"})
    for text in TEXTS:
        span.add_event(sc.DB_QUERY_RESULT_EVENT, {sc.DB_QUERY_RESULT_DOCUMENT: text})
    span.end()
    return [d.id for d in build_rag_trace(factory.records(), complete=True).documents]


@pytest.mark.parametrize("convention", ["openinference", "genai", "openllmetry-json", "openllmetry-events"])
def test_sdk_ids_match_extractor_ids_for_the_same_content(
    collector: tuple[str, list[Any]], convention: str
) -> None:
    sdk = _sdk_ids(collector)
    assert sdk == [documents.to_record(text).id for text in TEXTS]
    assert len(set(sdk)) == len(TEXTS)

    if convention == "openinference":
        attrs: dict[str, Any] = {sc.SPAN_KIND: sc.KIND_RETRIEVER}
        for i, text in enumerate(TEXTS):
            attrs[f"{sc.RETRIEVAL_DOCUMENTS_PREFIX}.{i}.{sc.DOCUMENT_CONTENT}"] = text
        extracted = _extracted_ids(**attrs)
    elif convention == "genai":
        extracted = _extracted_ids(**{
            sc.GEN_AI_OPERATION_NAME: sc.GEN_AI_OP_RETRIEVAL,
            sc.GEN_AI_RETRIEVAL_DOCUMENTS: json.dumps([{"content": text} for text in TEXTS]),
        })
    elif convention == "openllmetry-json":  # LangChain documents: content and metadata, no ids
        extracted = _extracted_ids(**{
            sc.GEN_AI_OPERATION_NAME: sc.OPENLLMETRY_OP_VECTOR_DB_RETRIEVE,
            sc.TRACELOOP_ENTITY_OUTPUT: json.dumps(
                [{"page_content": text, "metadata": {"lang": "en"}} for text in TEXTS]),
        })
    else:
        extracted = _openllmetry_event_ids()
    assert extracted == sdk
