"""Corpus input and chunking: real files, the embedding model's real tokenizer."""

from __future__ import annotations

import gzip
import itertools
import json
from pathlib import Path

import pytest

from ragmon.datasets.chunking import (
    ChunkingConfig,
    chunk_corpus,
    count_tokens,
    parse_chunk_id,
    tokenize_corpus,
)
from ragmon.datasets.corpus import CorpusDoc, load_corpus
from ragmon.errors import EvalInputError

from .conftest import DOCS, write_jsonl

LONG = CorpusDoc("long", "Long", " ".join(f"Sentence number {i} talks about kettles and descaling." for i in range(60)))


def test_directory_corpus_ids_titles(corpus_dir: Path) -> None:
    docs = load_corpus(corpus_dir)
    assert [d.id for d in docs] == ["care/descaling.txt", "refunds.md", "shipping.md", "warranty.txt"]
    by_id = {d.id: d for d in docs}
    assert by_id["refunds.md"].title == "Refunds"  # the first Markdown heading
    assert by_id["warranty.txt"].title == "warranty"  # the file name
    assert by_id["refunds.md"].text == DOCS["refunds.md"]


def test_jsonl_and_gzip_corpus(tmp_path: Path) -> None:
    rows = [{"_id": 7, "title": "T", "text": "seven"}, {"id": "b", "text": "bee"}]
    plain = write_jsonl(tmp_path / "c.jsonl", rows)
    packed = tmp_path / "c.jsonl.gz"
    with gzip.open(packed, "wt", encoding="utf-8") as fh:
        fh.write("\n".join(json.dumps(r) for r in rows) + "\n\n")
    for path in (plain, packed):
        assert load_corpus(path) == [CorpusDoc("7", "T", "seven"), CorpusDoc("b", "", "bee")]


@pytest.mark.parametrize("line, message", [
    ("not json", "line 2: not valid JSON"),
    ('{"title": "x", "text": "y"}', "line 2: 'id' must be"),
    ('{"id": "a", "text": "dup"}', "'a' appears twice"),
    ('{"id": "z", "text": 5}', "'text'"),
])
def test_bad_corpus_lines_name_the_line(tmp_path: Path, line: str, message: str) -> None:
    path = tmp_path / "c.jsonl"
    path.write_text('{"id": "a", "text": "ok"}\n' + line + "\n", encoding="utf-8")
    with pytest.raises(EvalInputError, match=message):
        load_corpus(path)


def test_missing_corpus() -> None:
    with pytest.raises(EvalInputError, match="no such file"):
        load_corpus("/nonexistent/corpus")


@pytest.mark.parametrize("size, overlap", [(16, 0), (16, 8), (32, 5), (7, 6)])
def test_fixed_windows_sizes_overlaps_and_ids_map_back(size: int, overlap: int) -> None:
    (item,) = tokenize_corpus([LONG])
    chunks = chunk_corpus([item], ChunkingConfig(size, overlap, title_prefix=False))
    assert all(c.tokens <= size for c in chunks) and all(c.tokens == size for c in chunks[:-1])
    assert chunks[-1].end == len(LONG.text.rstrip(".")) + 1  # the last window ends at the document's end
    for a, b in itertools.pairwise(chunks):
        starts = [s for s, _ in item.offsets]
        assert starts.index(b.start) - starts.index(a.start) == size - overlap  # the step, in tokens
    for chunk in chunks:
        doc_id, start, end = parse_chunk_id(chunk.id)
        assert (doc_id, start, end) == ("long", chunk.start, chunk.end)
        assert LONG.text[start:end] == chunk.text
        assert count_tokens(chunk.text) == chunk.tokens  # the tokenizer's own count of the span
    # stable: the same configuration gives the same ids again
    assert [c.id for c in chunk_corpus([LONG], ChunkingConfig(size, overlap))] == [c.id for c in chunks]


def test_overlap_fraction() -> None:
    assert ChunkingConfig.from_fraction(256, 0.5).overlap == 128
    assert ChunkingConfig.from_fraction(256, 0.25).overlap == 64
    assert ChunkingConfig.from_fraction(100, 20).overlap == 20
    with pytest.raises(ValueError, match="overlap"):
        ChunkingConfig(10, 10)


def test_paragraph_mode_keeps_paragraphs_whole(corpus_dir: Path) -> None:
    docs = load_corpus(corpus_dir)
    refunds = next(d for d in docs if d.id == "refunds.md")
    paragraphs = [p for p in refunds.text.split("\n\n")]
    chunks = chunk_corpus([refunds], ChunkingConfig(40, 0, "paragraph"))
    for chunk in chunks:
        assert chunk.tokens <= 40
        # every chunk is a run of whole paragraphs
        inner = [p for p in paragraphs if p in chunk.text]
        assert "\n\n".join(inner) == chunk.text
    assert "".join(c.text for c in chunks).replace("\n", "") == "".join(paragraphs).replace("\n", "")


def test_paragraph_mode_splits_long_paragraphs_at_sentences() -> None:
    chunks = chunk_corpus([LONG], ChunkingConfig(30, 0, "paragraph"))
    assert len(chunks) > 1
    assert all(c.text.endswith("descaling.") and c.text.startswith("Sentence") for c in chunks)
    assert all(c.tokens <= 30 for c in chunks)


def test_section_mode_never_crosses_a_heading(corpus_dir: Path) -> None:
    refunds = next(d for d in load_corpus(corpus_dir) if d.id == "refunds.md")
    chunks = chunk_corpus([refunds], ChunkingConfig(500, 0, "section"))
    assert [c.text.splitlines()[0] for c in chunks] == ["# Refunds", "## Exceptions"]
    paragraph = chunk_corpus([refunds], ChunkingConfig(500, 0, "paragraph"))
    assert len(paragraph) == 1  # the same size without sections packs it all


def test_title_prefix_is_in_content_not_in_the_span(corpus_dir: Path) -> None:
    docs = load_corpus(corpus_dir)
    with_title = chunk_corpus(docs, ChunkingConfig(64, 0, title_prefix=True))
    without = chunk_corpus(docs, ChunkingConfig(64, 0, title_prefix=False))
    assert [c.id for c in with_title] == [c.id for c in without]
    warranty = next(c for c in with_title if c.doc_id == "warranty.txt")
    assert warranty.content.startswith("warranty\nEvery Northwind kettle")
    assert next(c for c in without if c.doc_id == "warranty.txt").content.startswith("Every Northwind")


def test_empty_documents_make_no_chunks() -> None:
    assert chunk_corpus([CorpusDoc("e", "t", "   ")], ChunkingConfig(8)) == []
