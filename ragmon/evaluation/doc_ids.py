"""Which id each retrieved document has, in the golden set's namespace.

By default a document's id is ``Document.id``: the id the retriever reported, by the SDK's id
rules (its own id, else an id-like metadata key, else a content hash). When the golden set uses
another id (a source file name, a DOI, ...), ``--doc-id-field FIELD`` takes
``Document.metadata[FIELD]`` instead; a dotted name (``source.doi``) also walks nested objects
when no key with the dots exists. A document without that field (or with a value that is not a
string or number) keeps its own id and is counted, so the report can warn that the mapping is
incomplete rather than silently scoring misses. Pure functions.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..types import RagTrace

__all__ = ["MappedIds", "map_doc_ids", "metadata_id", "retrieved_ids"]


@dataclass(frozen=True, slots=True)
class MappedIds:
    ids: tuple[str, ...]  # rank order, duplicates kept
    unmapped: int = 0  # documents lacking ``doc_id_field``: their own id was used


def map_doc_ids(trace: RagTrace, doc_id_field: str | None) -> MappedIds:
    """The retrieved ids of ``trace`` in rank order, mapped through ``doc_id_field``."""
    docs = sorted(trace.documents, key=lambda d: d.rank)  # stable: equal ranks keep their order
    if not doc_id_field:
        return MappedIds(tuple(d.id for d in docs))
    ids: list[str] = []
    unmapped = 0
    for doc in docs:
        mapped = metadata_id(doc.metadata, doc_id_field)
        if mapped is None:
            unmapped += 1
            mapped = doc.id
        ids.append(mapped)
    return MappedIds(tuple(ids), unmapped)


def retrieved_ids(trace: RagTrace, doc_id_field: str | None) -> tuple[str, ...]:
    """Just the ids of :func:`map_doc_ids` (use that one to also get the unmapped count)."""
    return map_doc_ids(trace, doc_id_field).ids


def metadata_id(metadata: Mapping[str, Any] | None, field: str) -> str | None:
    """``metadata[field]`` as an id string, or None when absent or not an id-like value."""
    if not metadata:
        return None
    if field in metadata:
        return _as_id(metadata[field])
    value: Any = metadata
    for part in field.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return None
        value = value[part]
    return _as_id(value)


def _as_id(value: Any) -> str | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            return None
        return str(int(value)) if value.is_integer() else str(value)
    if isinstance(value, str) and value.strip():
        return value.strip()
    return None
