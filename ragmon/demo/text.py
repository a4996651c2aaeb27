"""Tokenising and sentence splitting shared by the demo's retriever and generator."""

from __future__ import annotations

import re

_TOKEN = re.compile(r"[a-z0-9]+(?:[.'][a-z0-9]+)*")
# "$15", "99.95%", "8:00" stay inside their sentence: split only on ". " before a capital/digit.
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9$])")

STOPWORDS = frozenset(
    {
        "a", "about", "an", "and", "any", "are", "as", "at", "be", "by", "can", "do", "does", "for",
        "from", "get", "how", "i", "if", "in", "is", "it", "its", "my", "of", "on", "or", "our", "the",
        "to", "we", "what", "when", "where", "which", "who", "will", "with", "you", "your", "there",
        "their", "this", "that", "these", "those", "per", "much", "many", "long", "often",
    }
)


def tokens(text: str) -> list[str]:
    """Lower-case word tokens; keeps numbers like 99.95 and 2.0 whole."""
    return _TOKEN.findall(text.lower())


def content_tokens(text: str) -> list[str]:
    return [t for t in tokens(text) if t not in STOPWORDS]


def sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE_END.split(text) if s.strip()]
