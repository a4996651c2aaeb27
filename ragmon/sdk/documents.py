"""Turn whatever a retriever returns into (id, content, score, metadata) records.

Duck-typed, with no import of the libraries whose shapes we read:

* ``str`` (and ``bytes``): the text itself.
* ``dict``: ``id``/``doc_id``/``document_id``/``chunk_id``/``_id``/``node_id``;
  ``content``/``text``/``page_content``/``document``/``chunk``/``body``;
  ``score``/``similarity``/``relevance_score``/``_score``; ``metadata``/``meta``. Other keys
  become metadata. Pinecone-style matches with the text inside ``metadata`` and
  Elasticsearch-style hits with ``_source`` are read too. ``distance`` is *not* a score
  (lower is better), so it is kept in metadata rather than mislabelled.
* LangChain ``Document``: ``page_content``, ``metadata``, optional ``id``.
* LlamaIndex ``NodeWithScore`` (``.node`` + ``.score``) and bare nodes
  (``node_id``, ``get_content()``/``text``, ``metadata``).
* Haystack-like / Qdrant-like objects: ``id``, ``content``/``text``, ``score``, ``meta``/``payload``.
* ``(doc, score)`` tuples of any of the above with a numeric score.

The id comes from the document when it has one (its own id, else an id-like metadata key, else
``source#<hash>`` so chunks of one file stay distinct), and otherwise is a stable content hash.
The whole rule (metadata keys included) lives in :mod:`ragmon.doc_ids`, shared with the agent's
extractor.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..doc_ids import METADATA_ID_KEYS, content_id, metadata_id

ID_KEYS = ("id", "doc_id", "document_id", "chunk_id", "_id", "node_id")
CONTENT_KEYS = ("content", "text", "page_content", "document", "chunk", "body")
SCORE_KEYS = ("score", "similarity", "relevance_score", "_score")
METADATA_KEYS = ("metadata", "meta", "payload", "_source")
_KNOWN_KEYS = frozenset((*ID_KEYS, *CONTENT_KEYS, *SCORE_KEYS))


class UnsupportedDocument(TypeError):
    """A retriever result item we cannot read as a document."""


@dataclass(frozen=True, slots=True)
class DocRecord:
    id: str
    content: str | None
    score: float | None
    metadata: Mapping[str, Any] | None


content_hash = content_id
"""Stable id for a document without one (:func:`ragmon.doc_ids.content_id`)."""


def to_record(item: Any, keys: Sequence[str] = METADATA_ID_KEYS) -> DocRecord:
    """Read one retriever result item; ``keys``: the metadata keys that name a document
    (:data:`ragmon.doc_ids.METADATA_ID_KEYS`, or the user's ``RAGMON_DOC_ID_KEYS``). Raises
    :class:`UnsupportedDocument` (or whatever a misbehaving property raises); callers skip such
    items and count them."""
    if isinstance(item, str):
        return DocRecord(content_id(item), item, None, None)
    if type(item) is dict:  # the most common shape: skip the isinstance chain
        return _from_mapping(item, keys)
    if isinstance(item, bytes | bytearray):
        text = bytes(item).decode("utf-8", "replace")
        return DocRecord(content_id(text), text, None, None)
    if isinstance(item, tuple) and len(item) == 2 and _is_number(item[1]):
        inner = to_record(item[0], keys)
        return DocRecord(inner.id, inner.content, _score(item[1]), inner.metadata)
    if isinstance(item, Mapping):
        return _from_mapping(item, keys)
    if item is None:
        raise UnsupportedDocument("None is not a document")
    return _from_object(item, keys)


def to_records(
    items: Iterable[Any], limit: int, keys: Sequence[str] = METADATA_ID_KEYS
) -> tuple[list[DocRecord], int, int]:
    """Read up to ``limit`` items: (records, items seen, items that could not be read)."""
    records: list[DocRecord] = []
    seen = failed = 0
    for item in items:
        seen += 1
        if len(records) >= limit:
            continue  # keep counting: the true count is reported
        try:
            records.append(to_record(item, keys))
        except Exception:
            failed += 1
    return records, seen, failed


def metadata_json(metadata: Mapping[str, Any] | None) -> str | None:
    """OpenInference carries document metadata as a JSON string."""
    if not metadata:
        return None
    try:
        return json.dumps(metadata, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return json.dumps({str(k): str(v) for k, v in metadata.items()}, ensure_ascii=False)


# --- shapes ------------------------------------------------------------------------------------
def _from_mapping(item: Mapping[str, Any], keys: Sequence[str]) -> DocRecord:
    doc_id = _first(item, ID_KEYS)
    content = _text(_first(item, CONTENT_KEYS))
    score = _score(_first(item, SCORE_KEYS))
    metadata = _mapping(_first(item, METADATA_KEYS))
    if metadata is None:
        extra = {str(k): v for k, v in item.items() if k not in _KNOWN_KEYS}
        metadata = extra or None
    if content is None and metadata is not None:
        # Pinecone matches / Elasticsearch hits: the text sits inside the metadata/_source.
        content = _text(_first(metadata, CONTENT_KEYS))
        if content is not None:
            metadata = {k: v for k, v in metadata.items() if k not in CONTENT_KEYS} or None
    if score is None and metadata is not None:
        score = _score(_first(metadata, SCORE_KEYS))
    if doc_id is None and content is None:
        raise UnsupportedDocument("mapping has neither an id nor a text key")
    return DocRecord(_resolve_id(doc_id, content, metadata, keys), content, score, metadata)


def _from_object(item: Any, keys: Sequence[str]) -> DocRecord:
    node = getattr(item, "node", None)
    if node is not None and not isinstance(node, str | bytes | Mapping):
        # LlamaIndex NodeWithScore: the score sits beside the node.
        inner = _from_object(node, keys)
        score = _score(getattr(item, "score", None))
        return DocRecord(inner.id, inner.content, score if score is not None else inner.score, inner.metadata)

    content = _text(getattr(item, "page_content", None))  # LangChain
    if content is None:
        get_content = getattr(item, "get_content", None)  # LlamaIndex nodes
        if callable(get_content):
            content = _text(get_content())
    if content is None:
        content = _text(getattr(item, "text", None))
    if content is None:
        content = _text(getattr(item, "content", None))

    doc_id = getattr(item, "node_id", None)
    if doc_id is None:
        doc_id = getattr(item, "id", None)
    if doc_id is None:
        doc_id = getattr(item, "id_", None)

    metadata = None
    for key in METADATA_KEYS:
        metadata = _mapping(getattr(item, key, None))
        if metadata is not None:
            break
    if content is None and metadata is not None:  # Qdrant points: text in the payload
        content = _text(_first(metadata, CONTENT_KEYS))
        if content is not None:
            metadata = {k: v for k, v in metadata.items() if k not in CONTENT_KEYS} or None
    score = _score(getattr(item, "score", None))
    if score is None and metadata is not None:
        score = _score(_first(metadata, SCORE_KEYS))
    if doc_id is None and content is None:
        raise UnsupportedDocument(f"cannot read a document from {type(item).__qualname__}")
    return DocRecord(_resolve_id(doc_id, content, metadata, keys), content, score, metadata)


def _resolve_id(doc_id: Any, content: str | None, metadata: Mapping[str, Any] | None, keys: Sequence[str]) -> str:
    if doc_id is not None and doc_id != "":
        return str(doc_id)
    return metadata_id(metadata, content, keys) or content_id(content or "")


def _first(mapping: Mapping[str, Any], keys: tuple[str, ...]) -> Any:
    for key in keys:
        value = mapping.get(key)
        if value is not None:
            return value
    return None


def _text(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, bytes | bytearray):
        return bytes(value).decode("utf-8", "replace")
    return None


def _mapping(value: Any) -> Mapping[str, Any] | None:
    if value is None:
        return None
    return value if isinstance(value, Mapping) and value else None


def _is_number(value: Any) -> bool:
    if isinstance(value, bool | str | bytes):
        return False
    if isinstance(value, int | float):
        return True
    return hasattr(value, "__float__") and not isinstance(value, Mapping)  # numpy scalars


def _score(value: Any) -> float | None:
    if type(value) is float:
        return value if math.isfinite(value) else None
    if value is None or not _is_number(value):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None
