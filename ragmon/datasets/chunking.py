"""Chunking by tokens of the embedding model's tokenizer (all-MiniLM-L6-v2's WordPiece).

Modes (``ChunkingConfig.mode``):

* ``fixed``: windows of ``size`` tokens, each starting ``size - overlap`` tokens after the last;
  the last window ends at the document's end (it may be shorter).
* ``paragraph``: whole paragraphs (split at blank lines), packed greedily into chunks of at most
  ``size`` tokens. A paragraph longer than ``size`` is split at sentence ends, and a sentence
  longer than ``size`` into fixed windows (``overlap`` tokens apart, as in ``fixed`` mode).
* ``section``: as ``paragraph``, but a chunk never crosses a Markdown heading (``#`` .. ``######``
  at the start of a line): each section is packed on its own, its heading in its first chunk.

**Overlap in the content-aware modes.** A new chunk starts with the trailing whole sentences of
the previous chunk (same section in ``section`` mode), as many as fit in ``overlap`` tokens, then
packs on as above. A sentence is never cut for the overlap: when the previous chunk's last
sentence is longer than ``overlap`` (or the chunk ends inside a windowed over-long sentence),
nothing is carried, so ``overlap`` is an upper bound here, not the exact count it is in ``fixed``
mode. The carried part shrinks (whole sentences dropped from its front) until the chunk's first
new unit fits ``size``; each chunk holds at least one unit that the previous one did not. With
``overlap`` 0 the output is exactly that of the modes without overlap support.

A chunk is a character span of its document, so its id is stable and maps back to the document:
``<doc id>#<start>-<end>`` (character offsets into the document's text, end exclusive;
:func:`parse_chunk_id`); with overlap, neighbouring spans simply intersect. The same text span
gets the same id under every configuration that produces it.

**Title prefix.** With ``title_prefix`` the document's title is put in front of the chunk text
that is indexed and shown to an LLM (``Chunk.content``). By default (``count_title=False``) the
title does not count towards ``size``: ``size`` bounds the span, and the span — hence the id —
does not depend on the title, so golden sets whose gold ids name chunks keep matching. With
``count_title=True`` the title's tokens do count: each document's spans get a budget of
``size - title tokens``, so ``Chunk.content`` is at most ``size`` tokens (what the model reads).
The counted title is capped at ``size // 2`` tokens: a longer title is cut after its last whole
word within the cap (dropped when its first word alone is over it, e.g. with ``size`` 1), so a
huge title never leaves a budget under half the size; ``overlap`` is capped at the budget minus
one. Counting is opt-in because it moves the spans (and ids) of every titled document.

Token counts come from the tokenizer the local embedder uses (shipped inside ragmon), without
truncation and without [CLS]/[SEP]: a 256-token chunk is 256 word pieces, of which MiniLM itself
reads the first 128 (its training length) — so sizes above 128 only pay off with BM25 or a
longer-context embedding model.
"""

from __future__ import annotations

import bisect
import itertools
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any, Final

from .corpus import CorpusDoc

__all__ = [
    "MODES",
    "Chunk",
    "ChunkingConfig",
    "DocTokens",
    "chunk_corpus",
    "chunk_document",
    "parse_chunk_id",
    "spans_overlap",
    "tokenize_corpus",
]

MODE_FIXED: Final = "fixed"
MODE_PARAGRAPH: Final = "paragraph"
MODE_SECTION: Final = "section"
MODES: Final = (MODE_FIXED, MODE_PARAGRAPH, MODE_SECTION)

_CHUNK_ID = re.compile(r"^(?P<doc>.+)#(?P<start>\d+)-(?P<end>\d+)$")
_PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n\s*")
# the closing quotes/brackets after a sentence end belong to the sentence (group "keep"): only the
# whitespace separates, so no character falls between two chunks
_SENTENCE_END = re.compile(r"(?<=[.!?])(?P<keep>[\"')\]]*)\s+")
_HEADING_LINE = re.compile(r"^#{1,6}[ \t]", re.MULTILINE)

Span = tuple[int, int]  # [start, end) in tokens


@dataclass(frozen=True, slots=True)
class ChunkingConfig:
    """``size`` tokens per chunk at most; ``overlap`` tokens shared by neighbours (exactly in fixed
    mode, at most — whole sentences — in the content-aware modes); ``count_title``: the prefixed
    title counts towards ``size``."""

    size: int
    overlap: int = 0
    mode: str = MODE_FIXED
    title_prefix: bool = True
    count_title: bool = False

    def __post_init__(self) -> None:
        if self.size < 1:
            raise ValueError(f"chunk size must be >= 1 token, got {self.size}")
        if not 0 <= self.overlap < self.size:
            raise ValueError(f"overlap must be in [0, size) = [0, {self.size}), got {self.overlap}")
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}; got {self.mode!r}")

    @classmethod
    def from_fraction(cls, size: int, overlap: float, **kw: Any) -> ChunkingConfig:
        """``overlap`` below 1 is a fraction of ``size`` (0.5 -> half), otherwise a token count."""
        tokens = round(overlap * size) if 0 <= overlap < 1 else int(overlap)
        return cls(size=size, overlap=min(tokens, size - 1), **kw)


@dataclass(frozen=True, slots=True)
class Chunk:
    """A character span ``[start, end)`` of document ``doc_id``."""

    id: str
    doc_id: str
    text: str
    start: int
    end: int
    tokens: int  # of the span (``text``), the title not included
    title: str = ""
    title_tokens: int = 0  # of ``title`` as prefixed

    @property
    def content(self) -> str:
        """What is indexed, embedded and shown: the title (when prefixed) and the text."""
        return f"{self.title}\n{self.text}" if self.title else self.text


@dataclass(frozen=True, slots=True)
class DocTokens:
    """A document with the character offsets of its word pieces (computed once, reused by every config),
    and its title's word ends: ``(tokens up to and including the word, character end of the word)``."""

    doc: CorpusDoc
    offsets: tuple[tuple[int, int], ...]
    title_words: tuple[tuple[int, int], ...] = ()

    @property
    def starts(self) -> list[int]:
        return [start for start, _ in self.offsets]


def parse_chunk_id(chunk_id: str) -> tuple[str, int, int] | None:
    """``"doc#12-80"`` -> ``("doc", 12, 80)``; None for an id that names a whole document."""
    match = _CHUNK_ID.match(chunk_id)
    if match is None:
        return None
    return match["doc"], int(match["start"]), int(match["end"])


def spans_overlap(a: tuple[int, int], b: tuple[int, int]) -> bool:
    return a[0] < b[1] and b[0] < a[1]


# --- tokenizer ------------------------------------------------------------------------------------
_tokenizer_lock = threading.Lock()


@lru_cache(maxsize=1)
def _tokenizer() -> Any:
    from tokenizers import Tokenizer

    text = resources.files("ragmon.scoring.local").joinpath("assets/minilm-tokenizer.json").read_text(encoding="utf-8")
    tokenizer = Tokenizer.from_str(text)
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return tokenizer


def tokenize_corpus(docs: Sequence[CorpusDoc], batch_size: int = 256) -> list[DocTokens]:
    """Each document's word-piece character offsets (Rust tokenizer, batched)."""
    tokenizer = _tokenizer()
    out: list[DocTokens] = []
    for start in range(0, len(docs), batch_size):
        batch = docs[start : start + batch_size]
        with _tokenizer_lock:
            encodings = tokenizer.encode_batch([d.text for d in batch], add_special_tokens=False)
            titles = tokenizer.encode_batch([d.title for d in batch], add_special_tokens=False)
        for doc, enc, title in zip(batch, encodings, titles, strict=True):
            offsets = tuple((int(a), int(b)) for a, b in enc.offsets if b > a)
            out.append(DocTokens(doc, offsets, _word_ends(title.offsets, title.word_ids)))
    return out


def _word_ends(offsets: Sequence[tuple[int, int]], word_ids: Sequence[int | None]) -> tuple[tuple[int, int], ...]:
    """``(tokens so far, character end)`` after each word (pre-token: a run of letters/digits or one
    punctuation mark) — the places where a title can be cut and re-tokenize to the same pieces."""
    ends: list[tuple[int, int]] = []
    count = 0
    for i, ((a, b), word) in enumerate(zip(offsets, word_ids, strict=True)):
        if b <= a:
            continue
        count += 1
        if i + 1 == len(offsets) or word_ids[i + 1] != word:
            ends.append((count, int(b)))
    return tuple(ends)


def count_tokens(text: str) -> int:
    with _tokenizer_lock:
        return len(_tokenizer().encode(text, add_special_tokens=False).ids)


# --- chunking ---------------------------------------------------------------------------------------
def chunk_corpus(docs: Sequence[CorpusDoc] | Sequence[DocTokens], config: ChunkingConfig) -> list[Chunk]:
    """Chunks of every document, in corpus order."""
    tokenized = [d for d in docs if isinstance(d, DocTokens)]
    if len(tokenized) != len(docs):
        tokenized = tokenize_corpus([d for d in docs if isinstance(d, CorpusDoc)])
    chunks: list[Chunk] = []
    for item in tokenized:
        chunks.extend(chunk_document(item, config))
    return chunks


def chunk_document(item: DocTokens, config: ChunkingConfig) -> list[Chunk]:
    doc, offsets = item.doc, item.offsets
    if not offsets:
        return []
    title, title_tokens = _title(item, config)
    size = config.size - title_tokens if config.count_title else config.size  # >= ceil(size / 2)
    overlap = min(config.overlap, size - 1)
    if config.mode == MODE_FIXED:
        ranges = _windows(0, len(offsets), size, overlap)
    else:
        starts = item.starts
        groups = _sections(doc.text) if config.mode == MODE_SECTION else [(0, len(doc.text))]
        ranges = []
        for group in groups:
            atoms, sentences = _units(doc.text, group, starts, size, overlap)
            ranges.extend(_pack(atoms, size, overlap, sentences))
    chunks = []
    for a, b in ranges:
        start, end = offsets[a][0], offsets[b - 1][1]
        chunks.append(Chunk(f"{doc.id}#{start}-{end}", doc.id, doc.text[start:end], start, end, b - a, title,
                            title_tokens))
    return chunks


def _title(item: DocTokens, config: ChunkingConfig) -> tuple[str, int]:
    """The title as prefixed, and its tokens; cut to ``size // 2`` tokens (whole words) when counted."""
    title = item.doc.title
    if not config.title_prefix or not title:
        return "", 0
    words = item.title_words or _word_ends_of(title)
    tokens = words[-1][0] if words else 0
    if not config.count_title or tokens <= config.size // 2:
        return title, tokens
    cut = [w for w in words if w[0] <= config.size // 2]
    if not cut:
        return "", 0
    tokens, end = cut[-1]
    return title[:end], tokens


def _word_ends_of(text: str) -> tuple[tuple[int, int], ...]:
    with _tokenizer_lock:
        enc = _tokenizer().encode(text, add_special_tokens=False)
    return _word_ends(enc.offsets, enc.word_ids)


def _windows(a: int, b: int, size: int, overlap: int) -> list[tuple[int, int]]:
    """Token windows over [a, b): ``size`` long, ``size - overlap`` apart, the last one ending at b."""
    step = size - overlap
    out = []
    start = a
    while True:
        end = min(start + size, b)
        out.append((start, end))
        if end >= b:
            return out
        start += step


def _sections(text: str) -> list[tuple[int, int]]:
    """Character spans of Markdown sections (the text before the first heading is one too)."""
    cuts = sorted({0, *(m.start() for m in _HEADING_LINE.finditer(text)), len(text)})
    return [(a, b) for a, b in itertools.pairwise(cuts) if text[a:b].strip()]


def _split(text: str, span: tuple[int, int], pattern: re.Pattern[str]) -> list[tuple[int, int]]:
    a, b = span
    pieces, start = [], a
    keeps = "keep" in pattern.groupindex
    for match in pattern.finditer(text, a, b):
        end = match.end("keep") if keeps else match.start()
        if end > start:
            pieces.append((start, end))
        start = match.end()
    if start < b:
        pieces.append((start, b))
    return pieces


def _token_range(starts: list[int], span: tuple[int, int]) -> tuple[int, int]:
    return bisect.bisect_left(starts, span[0]), bisect.bisect_left(starts, span[1])


def _units(text: str, group: Span, starts: list[int], size: int, overlap: int) -> tuple[list[Span], list[Span]]:
    """The group's atoms — token ranges of at most ``size`` tokens that never cut a paragraph, or a
    sentence when avoidable — and, when ``overlap`` is used, the token ranges of all its sentences."""
    atoms: list[Span] = []
    sentences: list[Span] = []
    for paragraph in _split(text, group, _PARAGRAPH_BREAK):
        a, b = _token_range(starts, paragraph)
        if b <= a:
            continue
        whole = b - a <= size
        if whole:
            atoms.append((a, b))
            if not overlap:
                continue
        for sentence in _split(text, paragraph, _SENTENCE_END):
            sa, sb = _token_range(starts, sentence)
            if sb <= sa:
                continue
            sentences.append((sa, sb))
            if whole:
                continue
            if sb - sa <= size:
                atoms.append((sa, sb))
            else:
                atoms.extend(_windows(sa, sb, size, overlap))
    return atoms, sentences


def _pack(atoms: Sequence[Span], size: int, overlap: int = 0, sentences: Sequence[Span] = ()) -> list[Span]:
    """Consecutive atoms joined while the chunk stays within ``size`` tokens; with ``overlap``, a new
    chunk first takes the previous chunk's trailing whole sentences (:func:`_carry`)."""
    out: list[Span] = []
    ends = [end for _, end in sentences]
    for a, b in atoms:
        if out and b - out[-1][0] <= size:
            out[-1] = (out[-1][0], b)
            continue
        start = a
        if out and overlap and a >= out[-1][1]:  # (windows of one long sentence overlap already)
            start = _carry(sentences, ends, out[-1], b, size, overlap, a)
        out.append((start, b))
    return out


def _carry(sentences: Sequence[Span], ends: Sequence[int], previous: Span, end: int, size: int, overlap: int,
           default: int) -> int:
    """Start of the longest run of whole sentences that ends where ``previous`` ends, starts after its
    start, spans at most ``overlap`` tokens and lets the new chunk end at ``end`` within ``size``."""
    first, last = previous
    i = bisect.bisect_left(ends, last)
    if i == len(ends) or ends[i] != last:  # the previous chunk ends inside a sentence
        return default
    start = default
    while i >= 0:
        s = sentences[i][0]
        if s <= first or last - s > overlap or end - s > size:
            break
        start = s
        i -= 1
    return start
