"""The document-id rule, one copy shared by the SDK (which writes document ids on retriever
spans) and the agent's extractor (which reads them, and makes one up for documents that come
without). Both must agree, or the same document gets two ids and retrieval metrics, gold ids
and de-duplication stop matching.

Standard library only: the SDK imports this inside the user's process.
"""

from __future__ import annotations

import hashlib

__all__ = ["HASH_CHARS", "SOURCE_HASH_CHARS", "content_id", "source_chunk_id"]

HASH_CHARS = 16
"""Hex characters of sha256 kept in a content id (64 bits: collisions are not a concern)."""
SOURCE_HASH_CHARS = 8
"""Hex characters of the content hash appended to a source name (``a.pdf#1f2e3d4c``)."""


def content_id(content: str) -> str:
    """Stable id for a document that came without one: a sha256 prefix of its text."""
    return hashlib.sha256(content.encode("utf-8", "replace")).hexdigest()[:HASH_CHARS]


def source_chunk_id(source: object, content: str | None) -> str:
    """Id for a chunk that names only its source file: many chunks share one source, and the
    content hash keeps their ids distinct and stable."""
    return f"{source}#{content_id(content or '')[:SOURCE_HASH_CHARS]}"
