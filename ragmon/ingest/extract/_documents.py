"""Document readers: the retrieved documents a span carries, in whichever convention.

* OpenInference flattened attributes ``retrieval.documents.{i}.document.{id,content,score,metadata}``
  (and a reranker's ``reranker.output_documents.{i}...``);
* OTel GenAI ``gen_ai.retrieval.documents`` (JSON; often ids and scores only);
* OpenLLMetry ``db.query.result`` events (vector-DB instrumentations) and the JSON documents in
  ``traceloop.entity.output`` / ``output.value`` (LangChain, LlamaIndex, plain strings, ...).

A document without an id of its own takes one from its metadata (``id``, ``doc_id``, ...,
``source`` -> ``source#<hash8>``; the configurable ``keys``), else the content hash: the rule of
:mod:`ragmon.doc_ids`, the same as ragmon's SDK.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ... import semconv as sc
from ...doc_ids import METADATA_ID_KEYS, content_id, metadata_id
from ...types import AttrValue, Document, SpanRecord
from ._values import (
    MAX_DEPTH,
    indexed_fields,
    item_at,
    maybe_json,
    to_float,
    to_id,
    to_metadata,
    to_str,
    unwrap_serialized,
)

_CONTENT_KEYS = ("page_content", "pageContent", "content", "text", "document", "chunk", "body")
_ID_KEYS = ("id", "doc_id", "document_id", "id_", "node_id", "chunk_id", "_id")  # the object's own id
_SCORE_KEYS = ("score", "relevance_score", "similarity", "_score")
_DOC_LIST_KEYS = ("documents", "docs", "outputs", "output", "result", "results", "nodes",
                  "source_nodes", "context", "contexts")


Keys = Sequence[str]


def span_documents(span: SpanRecord, keys: Keys = METADATA_ID_KEYS) -> list[Document]:
    attrs = span.attributes
    docs = _flattened_documents(attrs, sc.RETRIEVAL_DOCUMENTS_PREFIX, keys)
    if docs:
        return docs
    docs = documents_from_json(attrs.get(sc.GEN_AI_RETRIEVAL_DOCUMENTS), keys)
    if docs:
        return docs
    docs = _event_documents(span, keys)
    if docs:
        return docs
    for key in (sc.TRACELOOP_ENTITY_OUTPUT, sc.OUTPUT_VALUE):
        docs = documents_from_json(attrs.get(key), keys)
        if docs:
            return docs
    return []


def reranker_documents(span: SpanRecord, keys: Keys = METADATA_ID_KEYS) -> list[Document]:
    return (_flattened_documents(span.attributes, sc.RERANKER_OUTPUT_DOCUMENTS_PREFIX, keys)
            or span_documents(span, keys))


def _flattened_documents(attrs: Mapping[str, AttrValue], prefix: str, keys: Keys) -> list[Document]:
    """``{prefix}.{i}.document.{id,content,score,metadata}`` -> documents by index."""
    fields = indexed_fields(attrs, prefix + ".", "document.")
    docs: list[Document] = []
    for index in sorted(fields):
        f = fields[index]
        content = to_str(f.get(sc.DOCUMENT_CONTENT))
        metadata = to_metadata(f.get(sc.DOCUMENT_METADATA))
        # OpenInference's LangChain instrumentor leaves document.id out; the store's id (or the
        # source file) is often in the metadata, as ragmon's SDK adapters also read it
        doc_id = (to_id(f.get(sc.DOCUMENT_ID)) or metadata_id(metadata, content, keys)
                  or (content_id(content) if content else None))
        if doc_id is None:
            continue
        docs.append(Document(id=doc_id, content=content, score=to_float(f.get(sc.DOCUMENT_SCORE)),
                             rank=len(docs), metadata=metadata))
    return docs


def _event_documents(span: SpanRecord, keys: Keys) -> list[Document]:
    """OpenLLMetry vector-DB instrumentations: one ``db.query.result`` event per result."""
    docs: list[Document] = []
    for event in span.events:
        if event.name != sc.DB_QUERY_RESULT_EVENT:
            continue
        a = event.attributes
        ids, contents = a.get(sc.DB_QUERY_RESULT_ID), a.get(sc.DB_QUERY_RESULT_DOCUMENT)
        scores, distances = a.get(sc.DB_QUERY_RESULT_SCORE), a.get(sc.DB_QUERY_RESULT_DISTANCE)
        metas = a.get(sc.DB_QUERY_RESULT_METADATA)
        if isinstance(ids, list) or isinstance(contents, list):  # one event with parallel arrays
            n = max(len(ids) if isinstance(ids, list) else 0, len(contents) if isinstance(contents, list) else 0)
            rows = [tuple(item_at(v, i) for v in (ids, contents, scores, distances, metas)) for i in range(n)]
        else:
            rows = [(ids, contents, scores, distances, metas)]
        for doc_id_raw, content_raw, score_raw, distance_raw, meta_raw in rows:
            content = to_str(content_raw)
            metadata = dict(to_metadata(meta_raw) or {})
            doc_id = (to_id(doc_id_raw) or metadata_id(metadata, content, keys)
                      or (content_id(content) if content else None))
            if doc_id is None:
                continue
            distance = to_float(distance_raw)
            if distance is not None:
                metadata["distance"] = distance  # a distance is not a similarity score: kept apart
            docs.append(Document(id=doc_id, content=content, score=to_float(score_raw), rank=len(docs),
                                 metadata=metadata or None))
    return docs


def documents_from_json(value: AttrValue, keys: Keys = METADATA_ID_KEYS) -> list[Document]:
    """A list of documents in any of the JSON shapes frameworks produce (see module doc)."""
    parsed = maybe_json(value)
    items = _find_document_list(parsed, 0)
    docs: list[Document] = []
    for item in items or []:
        doc = _document_from_obj(item, len(docs), keys)
        if doc is not None:
            docs.append(doc)
    return docs


def _find_document_list(value: Any, depth: int) -> list[Any] | None:
    if depth > MAX_DEPTH:
        return None
    value = maybe_json(value)
    if isinstance(value, list):
        if value and all(isinstance(v, list) for v in value) and len(value) == 1:
            return _find_document_list(value[0], depth + 1)  # [[docs]] from batch APIs
        if any(_looks_like_document(v) for v in value):
            return value
        return None
    if isinstance(value, dict):
        for key in _DOC_LIST_KEYS:
            if key in value:
                found = _find_document_list(value[key], depth + 1)
                if found:
                    return found
    return None


def _looks_like_document(value: Any) -> bool:
    value = maybe_json(value)
    if isinstance(value, str):
        return bool(value.strip())  # a retriever that returns plain strings
    if isinstance(value, dict):
        value = unwrap_serialized(value)
        keys = set(value)
        return bool(keys & set(_CONTENT_KEYS) or keys & set(_ID_KEYS) or "node" in keys)
    if isinstance(value, list | tuple) and len(value) == 2 and isinstance(value[1], int | float):
        return _looks_like_document(value[0])  # (doc, score) pairs
    return False


def _document_from_obj(item: Any, rank: int, keys: Keys) -> Document | None:
    item = maybe_json(item)
    score: float | None = None
    if isinstance(item, list | tuple) and len(item) == 2 and isinstance(item[1], int | float):
        item, score = maybe_json(item[0]), to_float(item[1])
    if isinstance(item, str):
        return Document(id=content_id(item), content=item, score=score, rank=rank) if item else None
    if not isinstance(item, dict):
        return None
    obj = unwrap_serialized(item)
    node = obj.get("node")
    if isinstance(node, dict):  # LlamaIndex NodeWithScore
        score = to_float(obj.get("score")) if score is None else score
        obj = node
    metadata = to_metadata(obj.get("metadata"))
    content = None
    for key in _CONTENT_KEYS:
        content = to_str(obj.get(key))
        if content:
            break
    doc_id = _first_id(obj) or metadata_id(metadata, content, keys)
    if score is None:
        for source in (obj, metadata or {}):
            for key in _SCORE_KEYS:
                score = to_float(source.get(key))
                if score is not None:
                    break
            if score is not None:
                break
    if doc_id is None:
        if not content:
            return None
        doc_id = content_id(content)
    return Document(id=doc_id, content=content or None, score=score, rank=rank, metadata=metadata)


def _first_id(source: Mapping[str, Any] | None) -> str | None:
    for key in _ID_KEYS:
        doc_id = to_id(source.get(key)) if source else None
        if doc_id:
            return doc_id
    return None


def dedupe_and_rank(docs: list[Document]) -> list[Document]:
    seen: set[str] = set()
    out: list[Document] = []
    for doc in docs:
        if doc.id in seen:
            continue
        seen.add(doc.id)
        out.append(Document(id=doc.id, content=doc.content, score=doc.score, rank=len(out),
                            metadata=doc.metadata))
    return out


def with_content(doc: Document, content: str | None) -> Document:
    if not content:
        return doc
    return Document(id=doc.id, content=content, score=doc.score, rank=doc.rank, metadata=doc.metadata)
