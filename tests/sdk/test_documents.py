"""Document adapters: every shape RAG code returns, read through small look-alike classes that
use the real attribute names of those libraries (no dependency on the libraries themselves)."""

from __future__ import annotations

import json
from typing import Any

import pytest

import ragmon
from ragmon import semconv as sc
from ragmon.sdk import _runtime
from ragmon.sdk.documents import DocRecord, UnsupportedDocument, content_hash, to_record, to_records

from .conftest import Spans


# --- look-alikes -------------------------------------------------------------------------------------
class LCDocument:
    """langchain_core.documents.Document: page_content, metadata, optional id."""

    def __init__(self, page_content: str, metadata: dict[str, Any] | None = None, id: str | None = None) -> None:
        self.page_content = page_content
        self.metadata = metadata or {}
        self.id = id
        self.type = "Document"


class LITextNode:
    """llama_index.core.schema.TextNode: node_id / id_, text, get_content(), metadata."""

    def __init__(self, id_: str, text: str, metadata: dict[str, Any] | None = None) -> None:
        self.id_ = id_
        self.text = text
        self.metadata = metadata or {}

    @property
    def node_id(self) -> str:
        return self.id_

    def get_content(self, metadata_mode: str = "none") -> str:
        return self.text


class LINodeWithScore:
    """llama_index.core.schema.NodeWithScore: node + score."""

    def __init__(self, node: LITextNode, score: float | None = None) -> None:
        self.node = node
        self.score = score


class HaystackDocument:
    """haystack.Document: id, content, score, meta."""

    def __init__(self, id: str, content: str, score: float | None, meta: dict[str, Any]) -> None:
        self.id = id
        self.content = content
        self.score = score
        self.meta = meta


class QdrantScoredPoint:
    """qdrant_client.models.ScoredPoint: id, score, payload (text inside the payload)."""

    def __init__(self, id: int, score: float, payload: dict[str, Any]) -> None:
        self.id = id
        self.score = score
        self.payload = payload
        self.version = 3


class Plain:
    def __init__(self, **kwargs: Any) -> None:
        self.__dict__.update(kwargs)


class Float32:
    """A numpy-like scalar: not a float, but has __float__."""

    def __init__(self, value: float) -> None:
        self.value = value

    def __float__(self) -> float:
        return self.value


# --- shapes ------------------------------------------------------------------------------------------
def test_plain_string_gets_a_stable_content_hash() -> None:
    rec = to_record("Paris is the capital of France.")
    assert rec == DocRecord(content_hash("Paris is the capital of France."), "Paris is the capital of France.",
                            None, None)
    assert len(rec.id) == 16 and all(c in "0123456789abcdef" for c in rec.id)
    assert to_record("Paris is the capital of France.").id == rec.id
    assert to_record("Berlin").id != rec.id


@pytest.mark.parametrize(
    ("item", "expected"),
    [
        ({"id": 7, "content": "c", "score": 0.5}, ("7", "c", 0.5, None)),
        ({"doc_id": "a", "text": "t", "similarity": 0.25}, ("a", "t", 0.25, None)),
        ({"_id": "es1", "_score": 3.5, "_source": {"body": "hit text", "lang": "en"}},
         ("es1", "hit text", 3.5, {"lang": "en"})),
        ({"id": "p1", "score": 0.8, "metadata": {"text": "pinecone text", "url": "u"}},
         ("p1", "pinecone text", 0.8, {"url": "u"})),
        ({"page_content": "pc", "metadata": {"source": "a.pdf", "page": 3}},
         ("a.pdf#" + content_hash("pc")[:8], "pc", None, {"source": "a.pdf", "page": 3})),
        ({"document": "chroma doc", "distance": 0.12, "id": "c1"}, ("c1", "chroma doc", None, {"distance": 0.12})),
        ({"text": "no id here", "relevance_score": 0.7, "lang": "fr"},
         (content_hash("no id here"), "no id here", 0.7, {"lang": "fr"})),
        ({"id": "only-id"}, ("only-id", None, None, None)),
    ],
)
def test_dict_shapes(item: dict[str, Any], expected: tuple[Any, ...]) -> None:
    rec = to_record(item)
    assert (rec.id, rec.content, rec.score, rec.metadata) == expected


def test_distance_is_not_reported_as_a_score() -> None:
    rec = to_record({"id": "x", "text": "t", "distance": 0.9})
    assert rec.score is None and rec.metadata == {"distance": 0.9}


def test_langchain_document() -> None:
    with_id = to_record(LCDocument("lc text", {"source": "kb/a.md"}, id="lc-1"))
    assert (with_id.id, with_id.content, with_id.score) == ("lc-1", "lc text", None)
    assert with_id.metadata == {"source": "kb/a.md"}
    meta_id = to_record(LCDocument("lc text", {"doc_id": "m-9", "source": "kb/a.md"}))
    assert meta_id.id == "m-9"
    by_source = [to_record(LCDocument(text, {"source": "kb/a.md"})) for text in ("chunk one", "chunk two")]
    assert by_source[0].id.startswith("kb/a.md#") and by_source[0].id != by_source[1].id
    bare = to_record(LCDocument("lc text"))
    assert bare.id == content_hash("lc text") and bare.metadata is None
    reranked = to_record(LCDocument("r", {"relevance_score": 0.93, "id": "r1"}))
    assert reranked.score == pytest.approx(0.93)


def test_langchain_with_score_tuple() -> None:
    rec = to_record((LCDocument("scored", id="s1"), 0.42))
    assert (rec.id, rec.content, rec.score) == ("s1", "scored", 0.42)
    assert to_record(("plain text", Float32(0.5))).score == 0.5


def test_llamaindex_node_with_score_and_bare_node() -> None:
    rec = to_record(LINodeWithScore(LITextNode("node-1", "li text", {"file_name": "f.txt"}), 0.77))
    assert (rec.id, rec.content, rec.score, rec.metadata) == ("node-1", "li text", 0.77, {"file_name": "f.txt"})
    bare = to_record(LITextNode("node-2", "bare"))
    assert (bare.id, bare.content, bare.score) == ("node-2", "bare", None)
    unscored = to_record(LINodeWithScore(LITextNode("node-3", "x"), None))
    assert unscored.score is None


def test_objects_with_id_text_content() -> None:
    hay = to_record(HaystackDocument("h1", "haystack text", 0.3, {"source": "wiki"}))
    assert (hay.id, hay.content, hay.score, hay.metadata) == ("h1", "haystack text", 0.3, {"source": "wiki"})
    qd = to_record(QdrantScoredPoint(42, 0.61, {"page_content": "qdrant text", "tenant": "t1"}))
    assert (qd.id, qd.content, qd.score, qd.metadata) == ("42", "qdrant text", 0.61, {"tenant": "t1"})
    generic = to_record(Plain(id="g1", text="generic"))
    assert (generic.id, generic.content) == ("g1", "generic")
    content_only = to_record(Plain(content="only content"))
    assert content_only.id == content_hash("only content")


def test_scores_are_finite_floats_or_none() -> None:
    assert to_record({"id": "a", "text": "t", "score": float("nan")}).score is None
    assert to_record({"id": "a", "text": "t", "score": "0.5"}).score is None  # a string is not a score
    assert to_record({"id": "a", "text": "t", "score": True}).score is None
    assert isinstance(to_record({"id": "a", "text": "t", "score": 1}).score, float)


def test_unreadable_items() -> None:
    with pytest.raises(UnsupportedDocument):
        to_record(None)
    with pytest.raises(UnsupportedDocument):
        to_record({"unrelated": 1})
    with pytest.raises(UnsupportedDocument):
        to_record(Plain(unrelated=1))
    records, seen, failed = to_records(["a", None, {"x": 1}, "b"], limit=10)
    assert [r.content for r in records] == ["a", "b"] and (seen, failed) == (4, 2)
    records, seen, failed = to_records([str(i) for i in range(10)], limit=3)
    assert [r.content for r in records] == ["0", "1", "2"] and (seen, failed) == (10, 0)


# --- on spans ------------------------------------------------------------------------------------------
def test_every_shape_on_one_retriever_span(spans: Spans) -> None:
    results = [
        "raw string",
        {"id": "d", "text": "dict text", "score": 0.9, "metadata": {"k": "v"}},
        LCDocument("lc", {"source": "s.md"}, id="lc"),
        (LCDocument("tuple doc", id="tup"), 0.5),
        LINodeWithScore(LITextNode("n1", "node text"), 0.4),
        HaystackDocument("h", "hay", 0.3, {}),
        QdrantScoredPoint(5, 0.2, {"text": "payload text"}),
        Plain(id="o", content="object content"),
    ]

    @ragmon.retriever
    def search(query: str) -> list[Any]:
        return results

    search("q")
    a = spans.one("search").attributes
    ids = [a[sc.retrieval_document_attr(i, sc.DOCUMENT_ID)] for i in range(len(results))]
    assert ids == [content_hash("raw string"), "d", "lc", "tup", "n1", "h", "5", "o"]
    contents = [a[sc.retrieval_document_attr(i, sc.DOCUMENT_CONTENT)] for i in range(len(results))]
    assert contents == ["raw string", "dict text", "lc", "tuple doc", "node text", "hay", "payload text",
                        "object content"]
    assert sc.retrieval_document_attr(0, sc.DOCUMENT_SCORE) not in a
    assert a[sc.retrieval_document_attr(3, sc.DOCUMENT_SCORE)] == 0.5
    assert json.loads(a[sc.retrieval_document_attr(1, sc.DOCUMENT_METADATA)]) == {"k": "v"}
    assert json.loads(a[sc.retrieval_document_attr(2, sc.DOCUMENT_METADATA)]) == {"source": "s.md"}
    assert a[sc.RAGMON_DOCUMENT_COUNT] == len(results)


def test_failing_adapter_never_reaches_the_app(spans: Spans) -> None:
    class Exploding:
        @property
        def page_content(self) -> str:
            raise RuntimeError("lazy loader failed")

    before = _runtime.internal_error_counts().get("document_adapter", 0)

    @ragmon.retriever
    def search(query: str) -> list[Any]:
        return ["good", Exploding(), "also good"]

    result = search("q")
    assert len(result) == 3  # the user's value, untouched
    a = spans.one("search").attributes
    assert a[sc.RAGMON_DOCUMENT_COUNT] == 3
    assert [a[sc.retrieval_document_attr(i, sc.DOCUMENT_CONTENT)] for i in range(2)] == ["good", "also good"]
    assert sc.retrieval_document_attr(2, sc.DOCUMENT_ID) not in a
    assert _runtime.internal_error_counts()["document_adapter"] == before + 1


def test_iterator_result_is_not_consumed(spans: Spans) -> None:
    @ragmon.retriever
    def search(query: str) -> Any:
        return iter(["a", "b"])

    assert list(search("q")) == ["a", "b"]  # still all there for the caller
    assert sc.RAGMON_DOCUMENT_COUNT not in spans.one("search").attributes
