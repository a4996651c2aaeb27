"""Corpus input and chunking: real files, the embedding model's real tokenizer."""

from __future__ import annotations

import bisect
import gzip
import hashlib
import itertools
import json
import re
from pathlib import Path

import pytest

from ragmon.datasets.chunking import (
    Chunk,
    ChunkingConfig,
    DocTokens,
    chunk_corpus,
    count_tokens,
    parse_chunk_id,
    tokenize_corpus,
)
from ragmon.datasets.corpus import CorpusDoc, load_corpus
from ragmon.errors import EvalInputError

from .conftest import DOCS, write_jsonl

LONG = CorpusDoc("long", "Long", " ".join(f"Sentence number {i} talks about kettles and descaling." for i in range(60)))
_RUN_ON = " ".join(f"clause {i} of a run-on sentence about limescale and kettles" for i in range(14))
# headings, one-line paragraphs, a long paragraph of short sentences, one sentence longer than most sizes
MANUAL = CorpusDoc("manual.md", "Northwind Kettle Manual: Safety, Care and Warranty", "\n".join([
    "Read this manual before first use. Keep it with the kettle!",
    "",
    "# Safety",
    "",
    "Never immerse the base in water. Do not fill above the MAX mark. Unplug the kettle before cleaning it. "
    "Children must not use the kettle without supervision. The lid must be closed while boiling; an open lid "
    "stops the automatic switch-off. Place the kettle on a flat, dry surface. Why? Steam burns.",
    "",
    "The cord is 75 cm long.",
    "",
    "## Cord storage",
    "",
    f"Wind the cord around the base. {_RUN_ON}. Then stand the kettle upright.",
    "",
    "# Care",
    "",
    "Descale once a month (more often with hard water). Use citric acid, never vinegar. Rinse twice.",
    "",
    "Short line.",
    "",
    "Wipe the outside with a damp cloth. Dry it well. Store the kettle empty.",
    "",
    "# Warranty",
    "",
    "Three years, on the heating element and the switch. Keep the receipt.\n",
]))
SENTENCE_START = re.compile(r"(?:^|[.!?][\"')\]]*\s+|\n\s*\n)$")  # what precedes a sentence start
HEADING = re.compile(r"^#{1,6}[ \t]", re.MULTILINE)


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


# --- overlap 0 is pinned: golden sets name chunk ids, which must not move -------------------------
def _pinned_corpus() -> list[CorpusDoc]:
    return [MANUAL, LONG, *(CorpusDoc(name, name.upper(), text) for name, text in DOCS.items())]


def test_overlap_0_output_is_pinned() -> None:
    """Every mode with overlap 0, with and without the title, hashed over (id, tokens, content): the
    output before overlap in the content-aware modes and title counting existed."""
    docs = tokenize_corpus(_pinned_corpus())
    digest, count = hashlib.sha256(), 0
    for mode in ("fixed", "paragraph", "section"):
        for size in (1, 2, 5, 8, 16, 24, 40, 64, 128, 512):
            for title in (True, False):
                for c in chunk_corpus(docs, ChunkingConfig(size, 0, mode, title)):
                    digest.update(f"{c.id}\t{c.tokens}\t{c.content}\n".encode())
                    count += 1
    assert count == 16084
    assert digest.hexdigest() == "2914985df9c9fb01a4f9f3b5c19893c3bba6aaf0119f825aeb2ac9326412c10c"
    # and one configuration in the clear
    assert [c.id for c in chunk_corpus([MANUAL], ChunkingConfig(24, 0, "section"))] == [
        "manual.md#0-59", "manual.md#61-135", "manual.md#136-227", "manual.md#228-309", "manual.md#310-393",
        "manual.md#395-442", "manual.md#443-536", "manual.md#537-628", "manual.md#629-720", "manual.md#721-809",
        "manual.md#809-906", "manual.md#907-1000", "manual.md#1001-1094", "manual.md#1095-1187",
        "manual.md#1188-1259", "manual.md#1260-1290", "manual.md#1292-1382", "manual.md#1383-1482",
        "manual.md#1484-1565"]


# --- overlap in the content-aware modes -----------------------------------------------------------
def _check_chunks(item: DocTokens, chunks: list[Chunk], config: ChunkingConfig) -> None:
    """The invariants of every content-aware chunking, overlap or not."""
    doc = item.doc
    starts = item.starts
    budget = config.size - (chunks[0].title_tokens if chunks and config.count_title else 0)
    for c in chunks:
        assert parse_chunk_id(c.id) == (doc.id, c.start, c.end) and doc.text[c.start:c.end] == c.text
        # the span's word pieces in the document's tokenization (a window may start inside a word, whose
        # pieces re-tokenize differently on their own)
        assert bisect.bisect_left(starts, c.end) - bisect.bisect_left(starts, c.start) == c.tokens
        assert c.tokens <= budget <= config.size
        assert count_tokens(c.title) == c.title_tokens
        if config.count_title:
            assert c.tokens + c.title_tokens <= config.size
        if config.mode == "section":  # a heading only ever opens a chunk
            assert all(m.start() == 0 for m in HEADING.finditer(c.text)), c.text
    # coverage: every token of the document is in a chunk
    covered = {i for c in chunks for i in range(bisect.bisect_left(starts, c.start), bisect.bisect_left(starts, c.end))}
    assert covered == set(range(len(starts)))
    for a, b in itertools.pairwise(chunks):
        assert a.start < b.start and a.end < b.end  # each chunk brings something new
        if b.start >= a.end:
            continue
        shared = doc.text[b.start:a.end]
        shared_tokens = bisect.bisect_left(starts, a.end) - bisect.bisect_left(starts, b.start)
        assert 0 < shared_tokens <= config.overlap
        whole = SENTENCE_START.search(doc.text[:b.start]) and (
            shared.rstrip("\"')]")[-1:] in (".", "!", "?") or doc.text[a.end:a.end + 2] == "\n\n"
            or a.end == len(doc.text.rstrip()))
        if not whole:  # windows of one sentence longer than the budget: token overlap, as in fixed mode
            assert a.tokens == budget and shared_tokens == min(config.overlap, budget - 1), shared
            assert not re.search(r"[.!?]\s|\n\n", shared)
            continue
        if config.mode == "section":  # whole sentences, never carried across a heading
            assert not HEADING.search(shared[1:])  # never carried across a heading


@pytest.mark.parametrize("mode", ["paragraph", "section"])
@pytest.mark.parametrize("size, overlap", [(8, 4), (12, 5), (24, 12), (40, 16), (40, 39), (64, 32), (128, 64),
                                           (512, 256), (24, 23)])
@pytest.mark.parametrize("count_title", [False, True])
def test_content_aware_overlap_invariants(mode: str, size: int, overlap: int, count_title: bool,
                                          corpus_dir: Path) -> None:
    docs = tokenize_corpus([MANUAL, LONG, *load_corpus(corpus_dir)])
    config = ChunkingConfig(size, overlap, mode, count_title=count_title)
    for item in docs:
        chunks = chunk_corpus([item], config)
        _check_chunks(item, chunks, config)
        assert chunks == chunk_corpus([item.doc], config)  # stable, and the same from raw documents


def test_overlap_carries_the_trailing_whole_sentences() -> None:
    # LONG: 60 sentences of 12 word pieces. Size 40 packs 3; with overlap 20 each chunk starts with the
    # previous chunk's last sentence (12 <= 20, two would be 24) and adds two new ones (36 <= 40).
    chunks = chunk_corpus([LONG], ChunkingConfig(40, 20, "paragraph", title_prefix=False))
    assert count_tokens("Sentence number 12 talks about kettles and descaling.") == 12
    sentences = [s + "." for s in LONG.text.rstrip(".").split(". ")]
    assert chunks[0].text == " ".join(sentences[:3])
    for i, chunk in enumerate(chunks[1:], start=1):
        assert chunk.text == " ".join(sentences[2 * i:2 * i + 3])
    assert chunks[-1].text.endswith("Sentence number 59 talks about kettles and descaling.")
    # a larger overlap carries more whole sentences; a smaller one than a sentence carries none
    two = chunk_corpus([LONG], ChunkingConfig(40, 24, "paragraph", title_prefix=False))
    assert two[1].text == " ".join(sentences[1:4]) and two[2].text == " ".join(sentences[2:5])
    none = chunk_corpus([LONG], ChunkingConfig(40, 10, "paragraph", title_prefix=False))
    assert [c.id for c in none] == [c.id for c in chunk_corpus([LONG], ChunkingConfig(40, 0, "paragraph"))]


def test_carried_part_shrinks_to_fit_the_size() -> None:
    short = ["Cats purr.", "Dogs bark.", "Birds sing."]
    long = "Kettles heat water quickly because the heating element sits under a thin steel plate inside."
    doc = CorpusDoc("d", "", " ".join([*short, long]))
    counts = [count_tokens(t) for t in [*short, long]]
    size = counts[1] + counts[2] + counts[3] - 1  # carrying "Dogs bark. Birds sing." would not fit
    overlap = counts[1] + counts[2]  # ... though it is within the overlap
    assert sum(counts[:3]) <= size < sum(counts)
    chunks = chunk_corpus([doc], ChunkingConfig(size, overlap, "paragraph"))
    assert [c.text for c in chunks] == [" ".join(short), f"Birds sing. {long}"]
    roomier = chunk_corpus([doc], ChunkingConfig(size + 1, overlap, "paragraph"))
    assert roomier[1].text == f"Dogs bark. Birds sing. {long}"


def test_section_mode_overlap_stays_in_its_section(corpus_dir: Path) -> None:
    refunds = next(d for d in load_corpus(corpus_dir) if d.id == "refunds.md")
    chunks = chunk_corpus([refunds], ChunkingConfig(30, 20, "section"))
    exceptions = refunds.text.index("## Exceptions")
    assert any(c.start == exceptions for c in chunks)  # the section's first chunk starts at its heading
    assert all(c.end <= exceptions or c.start >= exceptions for c in chunks)
    paragraph = chunk_corpus([refunds], ChunkingConfig(30, 20, "paragraph"))
    assert any(c.start < exceptions < c.end for c in paragraph)  # paragraph mode may cross it


# --- the title's tokens ---------------------------------------------------------------------------
def test_counted_title_shrinks_the_span_budget() -> None:
    title_tokens = count_tokens(MANUAL.title)
    assert title_tokens == 11
    for mode in ("fixed", "paragraph", "section"):
        counted = chunk_corpus([MANUAL], ChunkingConfig(32, 8, mode, count_title=True))
        assert all(c.title == MANUAL.title and c.title_tokens == title_tokens for c in counted)
        assert max(c.tokens for c in counted) <= 32 - title_tokens
        assert max(count_tokens(c.content) for c in counted) <= 32
        plain = chunk_corpus([MANUAL], ChunkingConfig(32, 8, mode))
        assert max(count_tokens(c.content) for c in plain) > 32  # what counting fixes
        assert len(counted) > len(plain)
    fixed = chunk_corpus([MANUAL], ChunkingConfig(32, 8, count_title=True))
    assert all(c.tokens == 32 - title_tokens for c in fixed[:-1])  # windows of the budget, 8 apart less
    # counting changes nothing without a title, or without the prefix
    untitled = CorpusDoc("u", "", MANUAL.text)
    assert chunk_corpus([untitled], ChunkingConfig(32, 8, "section", count_title=True)) == \
        chunk_corpus([untitled], ChunkingConfig(32, 8, "section"))
    assert chunk_corpus([MANUAL], ChunkingConfig(32, 8, "paragraph", title_prefix=False, count_title=True)) == \
        chunk_corpus([MANUAL], ChunkingConfig(32, 8, "paragraph", title_prefix=False))


def test_huge_title_is_cut_at_a_word_to_half_the_size() -> None:
    words = " ".join(f"descaling{i}, kettle" for i in range(200))
    doc = CorpusDoc("h", f"The {words}", MANUAL.text)
    assert count_tokens(doc.title) > 1000
    for size, overlap in ((16, 8), (17, 16), (64, 0), (3, 2)):
        for mode in ("fixed", "paragraph", "section"):
            config = ChunkingConfig(size, overlap, mode, count_title=True)
            chunks = chunk_corpus([doc], config)
            title = chunks[0].title
            assert doc.title.startswith(title) and 0 < len(title) < len(doc.title)
            assert doc.title[len(title)] in " ,#0123456789" or title[-1] == ","  # cut after a whole word
            assert count_tokens(title) == chunks[0].title_tokens <= size // 2
            assert all(c.tokens + c.title_tokens <= size for c in chunks)
            if mode == "fixed":  # windows of the whole budget
                assert all(c.tokens == size - chunks[0].title_tokens for c in chunks[:-1])
            else:
                _check_chunks(tokenize_corpus([doc])[0], chunks, config)
    # not counted: the whole title is prefixed, the spans ignore it
    plain = chunk_corpus([doc], ChunkingConfig(16, 8, "paragraph"))
    assert all(c.title == doc.title for c in plain)
    same_text = chunk_corpus([MANUAL], ChunkingConfig(16, 8, "paragraph"))
    assert [(c.start, c.end) for c in plain] == [(c.start, c.end) for c in same_text]


def test_title_of_one_huge_word_is_dropped_when_counted() -> None:
    doc = CorpusDoc("w", "Northwindkettlesdescalingwarrantyleipzigrefunds", "Short text here. And more.")
    assert count_tokens(doc.title) > 4
    chunks = chunk_corpus([doc], ChunkingConfig(8, 2, "paragraph", count_title=True))
    assert chunks and all(c.title == "" and c.title_tokens == 0 and c.content == c.text for c in chunks)
    assert chunk_corpus([doc], ChunkingConfig(8, 2, "paragraph"))[0].title == doc.title  # not counted: kept
    # size 1: half of it is 0 tokens, so no title at all; every chunk is one token
    ones = chunk_corpus([MANUAL], ChunkingConfig(1, 0, "section", count_title=True))
    assert all(c.title == "" and c.tokens == 1 for c in ones)


@pytest.mark.parametrize("mode", ["fixed", "paragraph", "section"])
@pytest.mark.parametrize("size, overlap", [(1, 0), (2, 1), (3, 1), (3, 2), (4, 3)])
def test_tiny_sizes(mode: str, size: int, overlap: int) -> None:
    for count_title in (False, True):
        config = ChunkingConfig(size, overlap, mode, count_title=count_title)
        for item in tokenize_corpus([MANUAL, LONG]):
            chunks = chunk_corpus([item], config)
            assert chunks and all(1 <= c.tokens <= size for c in chunks)
            if mode != "fixed":
                _check_chunks(item, chunks, config)


def test_from_fraction_passes_the_mode_and_title_options() -> None:
    config = ChunkingConfig.from_fraction(256, 0.5, mode="section", count_title=True)
    assert (config.size, config.overlap, config.mode, config.count_title) == (256, 128, "section", True)


@pytest.mark.parametrize("mode", ["paragraph", "section"])
@pytest.mark.parametrize("size, overlap", [(12, 0), (24, 0), (24, 8), (40, 0)])
def test_closing_quotes_and_brackets_after_a_sentence_end_stay_in_a_chunk(mode: str, size: int,
                                                                           overlap: int) -> None:
    # a chunk boundary right after `stop."` once lost the quote: it fell between two chunks
    text = " ".join(f'Rule {i} said "stop." Then (see note {i}.) the line moved [fig. {i}.] on.' for i in range(12))
    item = tokenize_corpus([CorpusDoc("quotes", "", text)])[0]
    config = ChunkingConfig(size, overlap, mode, False)
    chunks = chunk_corpus([item], config)
    _check_chunks(item, chunks, config)
    covered = {i for c in chunks for i in range(c.start, c.end)}
    assert all(i in covered for i, ch in enumerate(text) if not ch.isspace())
