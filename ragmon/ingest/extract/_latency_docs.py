"""Documents of the latency-only view (split out of :mod:`._latency`): the spans it reads
(``LatencySpan``), a role's group of spans (``LatencyGroup``), and the retrieved documents with the
rules of the full path's ``_retrieval_documents`` — flattened documents with their own ids read
from the decoder's filing, every other source (ids from metadata or text, JSON, events, several
document-bearing spans in one group) by the full path's own readers, for that span only.
"""

from __future__ import annotations

from collections.abc import Sequence

from ... import semconv as sc
from ...types import AttrValue
from ._documents import reranker_documents, span_documents
from ._span_view import LightSpan as LatencySpan  # concrete (not a Protocol): compiled code reads its fields
from ._trace import best_documents
from ._values import to_float, to_id, to_str
from ._view import Group

__all__ = ["Doc", "LatencyGroup", "documents", "has_text"]

#: what span_documents reads after the flattened documents
_DOCUMENT_KEYS = (sc.GEN_AI_RETRIEVAL_DOCUMENTS, sc.TRACELOOP_ENTITY_OUTPUT, sc.OUTPUT_VALUE)



class LatencyGroup:
    __slots__ = ("head", "members")

    def __init__(self, head: LatencySpan) -> None:
        self.head = head
        self.members: list[LatencySpan] = []


#: A document: its id, its score, and whether it has text — True / False when known, else the
#: ``(span, content key)`` to read that from when asked (``has_text``). A tuple: one per document.
Doc = tuple[str, float | None, bool | tuple[LatencySpan, str]]


def has_text(doc: Doc) -> bool:
    text = doc[2]
    if text is True or text is False:
        return text
    span, key = text
    return to_str(span.value(key)) is not None


def documents(retrievers: list[LatencyGroup], rerankers: list[LatencyGroup], keys: Sequence[str]) -> list[Doc]:
    """``_retrieval_documents``' documents after ``dedupe_and_rank``, as ``Doc``s."""
    found: list[Doc] = []
    for group in retrievers:
        found.extend(_best(group, False, keys))
    for group in rerankers:
        reranked = _best(group, True, keys)
        if reranked:
            found = reranked
    if len(found) < 2 or len({doc[0] for doc in found}) == len(found):
        return found  # (usually no id repeats)
    seen: set[str] = set()
    unique: list[Doc] = []
    for doc in found:
        if doc[0] not in seen:
            seen.add(doc[0])
            unique.append(doc)
    return unique


_RETRIEVAL_PREFIX = sc.RETRIEVAL_DOCUMENTS_PREFIX + "."
_RERANKER_PREFIX = sc.RERANKER_OUTPUT_DOCUMENTS_PREFIX + "."
_FIELD_PREFIX = "document."
_CONTENT_FIELD = sc.DOCUMENT_CONTENT


def _best(group: LatencyGroup, reranker: bool, keys: Sequence[str]) -> list[Doc]:
    """``best_documents``: the member holding the most documents. With one such member that
    is it; with several the full key (texts, scores, the store's own ids) decides, read in full."""
    best: list[Doc] = []
    found = 0
    for span in group.members:
        docs = _span_documents(span, reranker, keys)
        if docs:
            found += 1
            best = docs
    if found < 2:
        return best
    records = [m.to_record() for m in group.members]
    reader = reranker_documents if reranker else span_documents
    chosen, _ = best_documents(Group(records[0], records), lambda r: reader(r, keys))
    return [(d.id, d.score, d.content is not None) for d in chosen]


def _span_documents(span: LatencySpan, reranker: bool, keys: Sequence[str]) -> list[Doc]:
    """``span_documents`` (``reranker_documents``): flattened documents with their own ids are
    read here; any other source (ids from metadata or text, JSON, events) by the full reader."""
    # the reranker's own prefix first, then the retriever's; None: the full reader decides
    docs: list[Doc] | None = _flattened(span, _RERANKER_PREFIX) if reranker else []
    if docs is not None and not docs:
        docs = _flattened(span, _RETRIEVAL_PREFIX)
    if docs:
        return docs
    if docs is not None and not (span.retriever_event or _holds_document_key(span.content)):
        return []
    record = span.to_record()
    full = reranker_documents(record, keys) if reranker else span_documents(record, keys)
    return [(d.id, d.score, d.content is not None) for d in full]


def _holds_document_key(content: dict[str, int]) -> bool:
    return any(key in content for key in _DOCUMENT_KEYS)  # (mypyc makes this a loop)


def _flattened(span: LatencySpan, prefix: str) -> list[Doc] | None:
    """``_documents._flattened_documents`` for documents with ids of their own (None when one
    has none: its id would come from its metadata or text), in index order. The decoder has
    already split the keys as ``indexed_fields`` does (``docs``, ``doc_content``)."""
    fields = span.docs.get(prefix, _NO_FIELDS)
    texts: dict[int, AttrValue] = {}
    content = span.doc_content.get(prefix)
    if content:
        for index, found in content.items():
            if index not in fields:
                return None  # text or metadata but no id
            key = found.get(_CONTENT_FIELD)
            if key is not None:
                texts[index] = key
    docs: list[Doc] = []
    indexes = list(fields)  # filed as they came: usually in index order already
    for i in range(1, len(indexes)):
        if indexes[i - 1] > indexes[i]:
            indexes.sort()
            break
    for index in indexes:
        f = fields[index]
        # to_id / to_float, with their usual cases (a string id, a float score) inline
        value = f.get(sc.DOCUMENT_ID)
        doc_id = (value.strip() or None) if type(value) is str else to_id(value)
        if doc_id is None:
            return None
        value = f.get(sc.DOCUMENT_SCORE)
        # (x - x == 0.0: finite; inf and NaN give NaN)
        score = (value if value - value == 0.0 else None) if type(value) is float else to_float(value)
        key = texts.get(index)
        docs.append((doc_id, score, (span, key) if isinstance(key, str) else False))
    return docs


_NO_FIELDS: dict[int, dict[str, AttrValue]] = {}
