"""``--doc-id-field``: ids in rank order, metadata mapping, fallbacks counted."""

from __future__ import annotations

from ragmon.evaluation.doc_ids import map_doc_ids, retrieved_ids
from ragmon.types import Document, RagTrace


def trace(*docs: Document) -> RagTrace:
    return RagTrace(trace_id="0" * 32, service="s", pipeline="p", documents=docs)


def test_rank_order_and_duplicates_kept() -> None:
    t = trace(Document("b", rank=1), Document("a", rank=0), Document("a", rank=2))
    assert retrieved_ids(t, None) == ("a", "b", "a")
    assert map_doc_ids(t, None).unmapped == 0


def test_metadata_field_with_fallback_counted() -> None:
    t = trace(
        Document("c1", rank=0, metadata={"source": "x.md"}),
        Document("c2", rank=1, metadata={"source": 12}),
        Document("c3", rank=2, metadata={"source": 3.0}),
        Document("c4", rank=3, metadata={"source": None}),
        Document("c5", rank=4, metadata={"source": ["not", "an", "id"]}),
        Document("c6", rank=5),
        Document("c7", rank=6, metadata={"source": "  "}),
    )
    mapped = map_doc_ids(t, "source")
    assert mapped.ids == ("x.md", "12", "3", "c4", "c5", "c6", "c7")
    assert mapped.unmapped == 4


def test_dotted_field_walks_nested_metadata_unless_the_key_exists() -> None:
    t = trace(Document("c1", rank=0, metadata={"ref": {"doi": "10.1/x"}}),
              Document("c2", rank=1, metadata={"ref.doi": "flat", "ref": {"doi": "nested"}}),
              Document("c3", rank=2, metadata={"ref": "not-a-dict"}))
    mapped = map_doc_ids(t, "ref.doi")
    assert mapped.ids == ("10.1/x", "flat", "c3")
    assert mapped.unmapped == 1
