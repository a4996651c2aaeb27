"""One document-id rule for SDK and agent (``ragmon.doc_ids``).

A document that comes without an id of its own takes one from its metadata (``id``, ``doc_id``,
... then ``source`` -> ``source#<hash8>``), else a content hash. The SDK writes that id on its
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
import ragmon.config
import ragmon.errors
from ragmon import doc_ids
from ragmon import semconv as sc
from ragmon.ingest import extract
from ragmon.ingest.decode.otlp import decode_export_request
from ragmon.ingest.extract import ExtractSettings, build_rag_trace
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


# --- ids from metadata (issue 13, item 4) --------------------------------------------------------
META_DOCS = [  # (metadata, text, expected id)
    ({"id": "kb-1", "source": "a.md"}, "Passwords are reset from the account page.", "kb-1"),
    ({"doc_id": 42}, "Reset links expire after 24 hours.", "42"),
    ({"source": "b.md", "page": 3}, "Billing questions go to finance.", None),  # source#<hash8>
    ({"page": 4}, "No id anywhere in this one.", None),  # content hash
]


def _expected_meta_ids() -> list[str]:
    return [expected or (doc_ids.source_chunk_id(meta["source"], text) if "source" in meta
                         else doc_ids.content_id(text)) for meta, text, expected in META_DOCS]


def test_metadata_rule_is_pinned() -> None:
    assert doc_ids.METADATA_ID_KEYS == ("id", "doc_id", "document_id", "chunk_id", "_id", "node_id", "source#")
    text = "Paris is the capital of France."
    assert doc_ids.metadata_id({"source": "a.pdf", "id": " kb-9 "}, text) == "kb-9"
    assert doc_ids.metadata_id({"source": "a.pdf"}, text) == doc_ids.source_chunk_id("a.pdf", text)
    assert doc_ids.metadata_id({"id": "", "doc_id": None, "chunk_id": True, "_id": [1]}, text) is None
    assert doc_ids.metadata_id({"url": "https://x/y"}, text, keys=("url#",)) == "https://x/y#" + doc_ids.content_id(
        text)[:8]
    assert doc_ids.metadata_id({"uuid": "u-1"}, text, keys=("uuid",)) == "u-1"
    assert doc_ids.metadata_id(None, text) is None


def test_sdk_and_extractor_agree_on_metadata_ids(collector: tuple[str, list[Any]]) -> None:
    """The SDK (LangChain-like documents with metadata, content sent) and the extractor reading the
    same documents as OpenInference, OpenLLMetry JSON and db.query.result events give equal ids."""
    endpoint, received = collector

    @ragmon.retriever(name="kb-search")
    def search(query: str) -> list[dict[str, Any]]:
        return [{"content": text, "metadata": dict(meta)} for meta, text, _ in META_DOCS]

    ragmon.init(service_name="ids", endpoint=endpoint, set_global=False)
    search("how?")
    assert ragmon.shutdown() is True
    spans = []
    for _, headers, body in received:
        spans.extend(decode_export_request(body, content_type=headers["content-type"]).spans)
    sdk = [d.id for d in build_rag_trace(spans, complete=True).documents]
    assert sdk == _expected_meta_ids() == [documents.to_record(
        {"content": text, "metadata": meta}).id for meta, text, _ in META_DOCS]

    oi: dict[str, Any] = {sc.SPAN_KIND: sc.KIND_RETRIEVER}
    for i, (meta, text, _) in enumerate(META_DOCS):
        oi[f"{sc.RETRIEVAL_DOCUMENTS_PREFIX}.{i}.{sc.DOCUMENT_CONTENT}"] = text
        oi[f"{sc.RETRIEVAL_DOCUMENTS_PREFIX}.{i}.{sc.DOCUMENT_METADATA}"] = json.dumps(meta)
    assert _extracted_ids(**oi) == sdk
    assert _extracted_ids(**{
        sc.GEN_AI_OPERATION_NAME: sc.OPENLLMETRY_OP_VECTOR_DB_RETRIEVE,
        sc.TRACELOOP_ENTITY_OUTPUT: json.dumps([{"page_content": t, "metadata": m} for m, t, _ in META_DOCS]),
    }) == sdk
    factory = SpanFactory("ids")
    span = factory.tracer.start_span("chroma.query", attributes={sc.GEN_AI_OPERATION_NAME: "retrieval"})
    for meta, text, _ in META_DOCS:
        span.add_event(sc.DB_QUERY_RESULT_EVENT, {sc.DB_QUERY_RESULT_DOCUMENT: text,
                                                  sc.DB_QUERY_RESULT_METADATA: json.dumps(meta)})
    span.end()
    events = [d.id for d in build_rag_trace(factory.records(), complete=True).documents]
    assert events == sdk


def test_extractor_keys_are_configurable() -> None:
    factory = SpanFactory("ids")
    attrs: dict[str, Any] = {sc.SPAN_KIND: sc.KIND_RETRIEVER}
    for i, (meta, text, _) in enumerate(META_DOCS):
        attrs[f"{sc.RETRIEVAL_DOCUMENTS_PREFIX}.{i}.{sc.DOCUMENT_CONTENT}"] = text
        attrs[f"{sc.RETRIEVAL_DOCUMENTS_PREFIX}.{i}.{sc.DOCUMENT_METADATA}"] = json.dumps({**meta, "page": i})
    factory.tracer.start_span("retrieve", attributes=attrs).end()
    spans = factory.records()
    only_page = build_rag_trace(spans, complete=True, settings=ExtractSettings(doc_id_keys=("page#",)))
    assert [d.id for d in only_page.documents] == [doc_ids.source_chunk_id(i, t) for i, (_, t, _) in
                                                   enumerate(META_DOCS)]
    none = build_rag_trace(spans, complete=True, settings=ExtractSettings(doc_id_keys=()))
    assert [d.id for d in none.documents] == [doc_ids.content_id(t) for _, t, _ in META_DOCS]
    config = ragmon.config.load_agent_config({"doc_id_keys": "uuid,url#"}, environ={})
    assert config.doc_id_keys == ("uuid", "url#")


@pytest.mark.parametrize("how", ["argument", "environment"])
def test_sdk_keys_are_configurable_like_the_agents(
    collector: tuple[str, list[Any]], monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    """``RAGMON_DOC_ID_KEYS`` (or ``init(doc_id_keys=...)``) changes the SDK's rule exactly as the
    agent's setting of the same name changes the extractor's: both sides give a document one id."""
    endpoint, received = collector
    docs = [({"uuid": "u-7", "id": "kb-1"}, "Passwords are reset from the account page."),
            ({"url": "https://kb/x", "id": "kb-2"}, "Reset links expire after 24 hours."),
            ({"id": "kb-3"}, "Billing questions go to finance.")]

    @ragmon.retriever(name="kb-search")
    def search(query: str) -> list[dict[str, Any]]:
        return [{"content": text, "metadata": dict(meta)} for meta, text in docs]

    keys = "uuid,url#"
    if how == "environment":
        monkeypatch.setenv("RAGMON_DOC_ID_KEYS", keys)
        ragmon.init(service_name="ids", endpoint=endpoint, set_global=False)
    else:
        monkeypatch.setenv("RAGMON_DOC_ID_KEYS", "id")  # the explicit argument wins over the environment
        ragmon.init(service_name="ids", endpoint=endpoint, set_global=False, doc_id_keys=keys.split(","))
    search("how?")
    assert ragmon.shutdown() is True
    spans = []
    for _, headers, body in received:
        spans.extend(decode_export_request(body, content_type=headers["content-type"]).spans)
    sdk = [d.id for d in build_rag_trace(spans, complete=True).documents]
    assert sdk == ["u-7", doc_ids.source_chunk_id("https://kb/x", docs[1][1]), doc_ids.content_id(docs[2][1])]

    config = ragmon.config.load_agent_config({}, environ={"RAGMON_DOC_ID_KEYS": keys})
    factory = SpanFactory("ids")
    attrs: dict[str, Any] = {sc.SPAN_KIND: sc.KIND_RETRIEVER}
    for i, (meta, text) in enumerate(docs):
        attrs[f"{sc.RETRIEVAL_DOCUMENTS_PREFIX}.{i}.{sc.DOCUMENT_CONTENT}"] = text
        attrs[f"{sc.RETRIEVAL_DOCUMENTS_PREFIX}.{i}.{sc.DOCUMENT_METADATA}"] = json.dumps(meta)
    factory.tracer.start_span("retrieve", attributes=attrs).end()
    agent = build_rag_trace(factory.records(), complete=True,
                            settings=ExtractSettings(doc_id_keys=config.doc_id_keys))
    assert [d.id for d in agent.documents] == sdk


@pytest.mark.parametrize("bad", ["id", [], ["id", ""], [3]])
def test_sdk_rejects_bad_doc_id_keys(bad: Any) -> None:
    with pytest.raises(ragmon.errors.ConfigError, match="doc_id_keys"):
        ragmon.init(service_name="ids", exporter="none", set_global=False, doc_id_keys=bad)


def test_sdk_ignores_an_empty_doc_id_keys_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    from ragmon.sdk import _runtime

    monkeypatch.setenv("RAGMON_DOC_ID_KEYS", " , ")
    assert _runtime.settings_from_env().doc_id_keys == doc_ids.METADATA_ID_KEYS
