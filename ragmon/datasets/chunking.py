"""Chunking by tokens of the embedding model's tokenizer (all-MiniLM-L6-v2's WordPiece).

Modes (``ChunkingConfig.mode``):

* ``fixed``: windows of ``size`` tokens, each starting ``size - overlap`` tokens after the last;
  the last window ends at the document's end (it may be shorter).
* ``paragraph``: whole paragraphs (split at blank lines), packed greedily into chunks of at most
  ``size`` tokens. A paragraph longer than ``size`` is split at sentence ends, and a sentence
  longer than ``size`` into fixed windows. ``overlap`` is not used (units are never cut).
* ``section``: as ``paragraph``, but a chunk never crosses a Markdown heading (``#`` .. ``######``
  at the start of a line): each section is packed on its own, its heading in its first chunk.

A chunk is a character span of its document, so its id is stable and maps back to the document:
``<doc id>#<start>-<end>`` (character offsets into the document's text, end exclusive;
:func:`parse_chunk_id`). The same text span gets the same id under every configuration that
produces it. With ``title_prefix`` the document's title is put in front of the chunk text that is
indexed and shown to an LLM (``Chunk.content``); the title does not count towards ``size``.

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
from collections.abc import Iterable, Sequence
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
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+")
_HEADING_LINE = re.compile(r"^#{1,6}[ \t]", re.MULTILINE)


@dataclass(frozen=True, slots=True)
class ChunkingConfig:
    """``size`` tokens per chunk at most; ``overlap`` tokens shared by neighbours (fixed mode)."""

    size: int
    overlap: int = 0
    mode: str = MODE_FIXED
    title_prefix: bool = True

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
    tokens: int
    title: str = ""

    @property
    def content(self) -> str:
        """What is indexed, embedded and shown: the title (when prefixed) and the text."""
        return f"{self.title}\n{self.text}" if self.title else self.text


@dataclass(frozen=True, slots=True)
class DocTokens:
    """A document with the character offsets of its word pieces (computed once, reused by every config)."""

    doc: CorpusDoc
    offsets: tuple[tuple[int, int], ...]

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

    text = resources.files("ragmon.scoring").joinpath("assets/minilm-tokenizer.json").read_text(encoding="utf-8")
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
        for doc, enc in zip(batch, encodings, strict=True):
            out.append(DocTokens(doc, tuple((int(a), int(b)) for a, b in enc.offsets if b > a)))
    return out


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
    if config.mode == MODE_FIXED:
        ranges = _windows(0, len(offsets), config.size, config.overlap)
    else:
        starts = item.starts
        groups = _sections(doc.text) if config.mode == MODE_SECTION else [(0, len(doc.text))]
        ranges = []
        for group in groups:
            atoms = list(_atoms(doc.text, group, starts, config.size))
            ranges.extend(_pack(atoms, config.size))
    title = doc.title if config.title_prefix else ""
    chunks = []
    for a, b in ranges:
        start, end = offsets[a][0], offsets[b - 1][1]
        chunks.append(Chunk(f"{doc.id}#{start}-{end}", doc.id, doc.text[start:end], start, end, b - a, title))
    return chunks


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
    for match in pattern.finditer(text, a, b):
        if match.start() > start:
            pieces.append((start, match.start()))
        start = match.end()
    if start < b:
        pieces.append((start, b))
    return pieces


def _token_range(starts: list[int], span: tuple[int, int]) -> tuple[int, int]:
    return bisect.bisect_left(starts, span[0]), bisect.bisect_left(starts, span[1])


def _atoms(text: str, group: tuple[int, int], starts: list[int], size: int) -> Iterable[tuple[int, int]]:
    """Token ranges of at most ``size`` tokens that never cut a paragraph, sentence (when avoidable)."""
    for paragraph in _split(text, group, _PARAGRAPH_BREAK):
        a, b = _token_range(starts, paragraph)
        if b - a <= size:
            if b > a:
                yield a, b
            continue
        for sentence in _split(text, paragraph, _SENTENCE_END):
            sa, sb = _token_range(starts, sentence)
            if sb - sa <= size:
                if sb > sa:
                    yield sa, sb
            else:
                yield from _windows(sa, sb, size, 0)


def _pack(atoms: Sequence[tuple[int, int]], size: int) -> list[tuple[int, int]]:
    """Consecutive atoms joined while the chunk stays within ``size`` tokens."""
    out: list[tuple[int, int]] = []
    for a, b in atoms:
        if out and b - out[-1][0] <= size:
            out[-1] = (out[-1][0], b)
        else:
            out.append((a, b))
    return out
