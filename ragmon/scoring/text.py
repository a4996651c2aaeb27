"""Text primitives every judge and metric reads the same way: sentences, words, stems, stop words.

Pure and deterministic (no model, no I/O). One sentence splitter for the whole project: the local
judge's claims, the LLM judge's prompts and the citation and abstention checks split with
``split_sentences``.
"""

from __future__ import annotations

import re
from functools import lru_cache


def _wordset(text: str) -> frozenset[str]:
    return frozenset(text.split())


# Abbreviations after which a full stop does not end a sentence.
_ABBREVIATIONS = _wordset(
    "mr mrs ms dr prof sr jr st vs etc e.g i.e approx no fig inc ltd co corp dept est jan feb mar "
    "apr jun jul aug sep sept oct nov dec mt ft u.s u.k a.m p.m "
)
_SENT_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9])")
_BULLET = re.compile(r"^\s*(?:[-*•·]+|\(?\d{1,2}[.)]|\(?[a-z][.)])\s+")
_INLINE_NUMBERED = re.compile(r"\s+(?=\d{1,2}\s{1,2}[A-Z])")  # "1 Dump coals. 2  Spread them" lists
_WORD = re.compile(r"[A-Za-z0-9]+(?:[.,][0-9]+)*(?:['’][A-Za-z]+)?")

STOPWORDS = _wordset(
    "a an the and or but if then so of to in on at by for with from as into onto over under about "
    "above below between through during before after up down out off again further once is are "
    "was were be been being am do does did doing have has had having will would shall should can "
    "could may might must it its it's this that these those there here their they them he him his "
    "she her hers we us our you your i me my mine what which who whom whose when where why how "
    "all any both each few more most other some such only own same than too very just also s t "
    "also however therefore thus such because while although though into per via etc e g i ie eg "
    "like one's get gets got use used using make makes made "
)

# Words an answer uses to talk about its sources rather than to state facts ("Based on the
# provided passages, ..."): they are not new information, so they never count as unsupported.
META_WORDS = _wordset(
    "passage passages provided provide provides given based according mention mentions mentioned "
    "discuss discusses discussed highlight highlights highlighted note noted notes state states "
    "stated suggest suggests answer question information context contexts text source sources "
    "following follows step steps overall therefore brief briefly here sure help hope summary "
    "summarize specifically specific also additionally furthermore however important "
)

NEGATIONS = _wordset(
    "not no never none nobody nothing neither nor cannot can't won't don't doesn't didn't isn't "
    "aren't wasn't weren't hasn't haven't hadn't shouldn't wouldn't couldn't mustn't without "
    "unable impossible fail fails failed lack lacks "
)

def split_sentences(text: str | None) -> list[str]:
    """Sentences of ``text``; list items and lines count as sentences of their own."""
    if not text:
        return []
    out: list[str] = []
    for raw_line in re.split(r"\n+", text):
        line = _BULLET.sub("", raw_line).strip()
        if not line:
            continue
        for piece in _INLINE_NUMBERED.split(line):
            out.extend(_split_line(_BULLET.sub("", piece).strip()))
    return [s for s in out if _WORD.search(s)]


def _split_line(line: str) -> list[str]:
    if not line:
        return []
    pieces: list[str] = []
    start = 0
    for match in _SENT_END.finditer(line):
        before = line[start : match.start()].rstrip("\"')]")
        last = before.rsplit(None, 1)[-1].lower().rstrip(".!?") if before.split() else ""
        # "Dr. Smith", "e.g. this", "J. Smith": not a sentence end.
        if last in _ABBREVIATIONS or (len(last) == 1 and last.isalpha()):
            continue
        pieces.append(line[start : match.start()].strip())
        start = match.end()
    pieces.append(line[start:].strip())
    return [p for p in pieces if p]


@lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """A light suffix stripper: enough to match 'grilling'/'grilled'/'grill'."""
    w = word.lower().replace("’", "'")
    if w.endswith("'s"):
        w = w[:-2]
    for suffix, keep in (("ies", "y"), ("sses", "ss"), ("ing", ""), ("edly", ""), ("ed", ""),
                         ("ly", ""), ("es", ""), ("s", "")):
        if w.endswith(suffix) and len(w) - len(suffix) >= 3 and not w.endswith("ss"):
            return w[: -len(suffix)] + keep
    return w


def words(text: str) -> list[str]:
    return _WORD.findall(text)


def content_tokens(text: str) -> list[str]:
    """Stemmed, lowercased words without stopwords and bare punctuation."""
    out = []
    for w in words(text):
        lw = w.lower().replace("’", "'")
        if lw in STOPWORDS or lw in NEGATIONS or lw in META_WORDS:
            continue
        out.append(stem(lw))
    return out
