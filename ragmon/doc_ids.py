"""The document-id rule, one copy shared by the SDK (which writes document ids on retriever
spans) and the agent's extractor (which reads them, and makes one up for documents that come
without). Both must agree, or the same document gets two ids and retrieval metrics, gold ids
and de-duplication stop matching.

The rule, in order:

1. the document's own id (``Document.id``, a node id, ``document.id`` on a span);
2. the first of :data:`METADATA_ID_KEYS` found in its metadata (``id``, ``doc_id``, ...); a key
   written with a trailing ``#`` (``source#``) names a *source* that many chunks share (a file, a
   URL), so the id becomes ``<source>#<hash8>`` of the chunk's text (:func:`source_chunk_id`);
3. a content hash of its text (:func:`content_id`).

The key list is configurable: ``RAGMON_DOC_ID_KEYS`` sets it for the agent (``--doc-id-keys``) and
the SDK (``ragmon.init(doc_id_keys=...)``) alike, so both sides keep agreeing.

Standard library only: the SDK imports this inside the user's process.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = [
    "HASH_CHARS",
    "METADATA_ID_KEYS",
    "SOURCE_HASH_CHARS",
    "SOURCE_MARK",
    "content_id",
    "metadata_id",
    "source_chunk_id",
]

HASH_CHARS = 16
"""Hex characters of sha256 kept in a content id (64 bits: collisions are not a concern)."""
SOURCE_HASH_CHARS = 8
"""Hex characters of the content hash appended to a source name (``a.pdf#1f2e3d4c``)."""
SOURCE_MARK = "#"
"""A metadata key written with this suffix names a source shared by chunks (``source#``)."""
METADATA_ID_KEYS: tuple[str, ...] = ("id", "doc_id", "document_id", "chunk_id", "_id", "node_id", "source#")
"""Metadata keys that name a document, in priority order (``source#``: see the module doc)."""


def content_id(content: str) -> str:
    """Stable id for a document that came without one: a sha256 prefix of its text."""
    return hashlib.sha256(content.encode("utf-8", "replace")).hexdigest()[:HASH_CHARS]


def source_chunk_id(source: object, content: str | None) -> str:
    """Id for a chunk that names only its source file: many chunks share one source, and the
    content hash keeps their ids distinct and stable."""
    return f"{source}#{content_id(content or '')[:SOURCE_HASH_CHARS]}"


def metadata_id(
    metadata: Mapping[str, Any] | None, content: str | None, keys: Sequence[str] = METADATA_ID_KEYS
) -> str | None:
    """The id a document's metadata gives it (rule 2 of the module doc), or None.

    A value counts when it is a non-blank string, an integer or a finite number (or any other
    scalar object, such as a UUID); ``None``, booleans, blanks, lists and mappings are skipped.
    """
    if not metadata:
        return None
    for key in keys:
        is_source = key.endswith(SOURCE_MARK) and len(key) > len(SOURCE_MARK)
        name = key[: -len(SOURCE_MARK)] if is_source else key
        value = _id_text(metadata.get(name))
        if value is not None:
            return source_chunk_id(value, content) if is_source else value
    return None


def _id_text(value: Any) -> str | None:
    if value is None or isinstance(value, bool | Mapping | list | tuple | set | bytes | bytearray):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    text = str(value).strip()
    return text or None
