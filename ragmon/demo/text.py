"""Tokenising and sentence splitting shared by the demo's retriever and generator.

These belong to the demo *app* (Brightdesk's search and answer writer, standing in for a user's
RAG application, which brings its own text handling), not to ragmon: the judge reads the app's
answers with ``ragmon.scoring.text``, the one splitter ragmon itself uses. Using that splitter here
would change the demo's retrieval scores and answers (it cuts "added in 12 US states." before the
number), so the demo keeps its own.
"""

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
