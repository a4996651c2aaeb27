"""The premise a claim is read against: its best context sentences, in source order.

One function for training and inference, so the reader is trained on exactly the windows it will
see. Sentences are ranked by the rarity-weighted share of the claim's content words they hold
(a rare shared word — a name, a number — counts more than "make"); of the best ``k``, a sentence
that holds none of the claim's words the better ones lack is left out (it costs the reader tokens and
gives it nothing to check the claim against); the rest are kept in the order the sources give them,
each cut to a word budget, so truncation never drops the best one.
``copies`` says whether a claim is a verbatim copy of a context sentence (not worth reading).
Pure and I/O-free.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from ..local.claims import rarity
from ..text import NEGATIONS, content_tokens, split_sentences

# A word (decimals and apostrophes inside it) or any other single character; of those characters only
# the punctuation in _IGNORED is dropped, so "$", "%", "-" and "/" stay and must match too.
_TOKEN = re.compile(r"\w+(?:[.,]\d+)*(?:['’]\w+)?|\S")
_IGNORED = frozenset(".,;:!?\"'“”‘’()[]{}…*`")
WINDOW_SENTENCES = 3  # sentences per premise window at most
MAX_SENTENCE_WORDS = 48  # a longer sentence is cut around its best-matching part
MAX_CLAIM_WORDS = 40


@dataclass(frozen=True, slots=True)
class Window:
    """A claim's premise: the chosen sentences (source order) and the best one (the evidence)."""

    sentences: tuple[str, ...]
    best: str  # the sentence sharing the most with the claim: the evidence a verdict names
    overlap: float  # rarity-weighted share of the claim's content words in the window

    @property
    def text(self) -> str:
        return " ".join(self.sentences)


def context_sentences(contexts: Sequence[str]) -> list[str]:
    """Every context's sentences, flattened in source order (empty ones dropped)."""
    out: list[str] = []
    for context in contexts:
        out.extend(s for s in split_sentences(context) if s.strip())
    return out


def _cut(sentence: str, claim_words: set[str], max_words: int) -> str:
    words = sentence.split()
    if len(words) <= max_words:
        return sentence
    # keep the stretch of max_words words holding most of the claim's words
    hits = [1 if set(content_tokens(w)) & claim_words else 0 for w in words]
    best, best_at, run = -1, 0, sum(hits[:max_words])
    for start in range(0, len(words) - max_words + 1):
        if start:
            run += hits[start + max_words - 1] - hits[start - 1]
        if run > best:
            best, best_at = run, start
    return " ".join(words[best_at:best_at + max_words])


def sentence_words(sentences: Sequence[str]) -> list[frozenset[str]]:
    """Each sentence's content words: computed once per trace when many claims read the same sentences."""
    return [frozenset(content_tokens(s)) for s in sentences]


def claim_window(claim: str, sentences: Sequence[str], k: int = WINDOW_SENTENCES,
                 words: Sequence[frozenset[str]] | None = None, prune: bool = True) -> Window:
    """The ``k`` sentences of ``sentences`` that share most with ``claim``, in source order (``words``:
    their ``sentence_words``, when already known); with ``prune`` (the reader's use), those below the
    best that add none of the claim's words are left out."""
    claim_words = set(content_tokens(claim))
    if not sentences:
        return Window((), "", 0.0)
    words = words if words is not None else sentence_words(sentences)
    weight = {w: rarity(w) for w in claim_words}
    # fsum: a correctly rounded sum, the same in every process whatever order the set iterates in
    # (a plain sum's last bits follow the string hash seed and broke ties between equal sentences)
    total = math.fsum(weight.values()) or 1.0
    scores = []
    for i, held in enumerate(words):
        scores.append((math.fsum(weight[w] for w in claim_words & held) / total, -i))
    order = sorted(range(len(sentences)), key=lambda i: scores[i], reverse=True)
    kept: list[int] = []
    covered: set[str] = set()
    for i in order[:k]:
        new = (claim_words & words[i]) - covered
        if prune and kept and not new:
            continue
        kept.append(i)
        covered |= new
    chosen = sorted(kept)
    return Window(
        sentences=tuple(_cut(sentences[i], claim_words, MAX_SENTENCE_WORDS) for i in chosen),
        best=sentences[order[0]],
        overlap=math.fsum(weight[w] for w in covered) / total,
    )


def short_claim(claim: str) -> str:
    """The claim as the reader sees it (very long claims cut to a word budget)."""
    words = claim.split()
    return claim if len(words) <= MAX_CLAIM_WORDS else " ".join(words[:MAX_CLAIM_WORDS])


def copy_key(text: str) -> str:
    """``text`` as a verbatim copy is compared: lower case, one space between tokens, sentence punctuation
    and quotes dropped, every word, digit and other symbol kept (padded with spaces, so that a containment
    test matches whole tokens only)."""
    tokens = [t.lower().replace("’", "'") for t in _TOKEN.findall(text) if t not in _IGNORED]
    return f" {' '.join(tokens)} " if tokens else ""


def copies(claim: str, sentence_keys: Sequence[str]) -> bool:
    """Whether ``claim`` (already without its attribution and citation markers) is a verbatim copy of
    one context sentence, or of a contiguous part of one whose other words hold no negation
    (``sentence_keys``: their ``copy_key``): every token the same, in the same order, so it says what
    that sentence says. "Prices will rise" cut from "The firm did not say prices will rise" is read."""
    key = copy_key(claim)
    if not key:
        return False
    for sentence in sentence_keys:
        if key in sentence and (sentence == key or not set(sentence.replace(key, " ", 1).split()) & NEGATIONS):
            return True
    return False
