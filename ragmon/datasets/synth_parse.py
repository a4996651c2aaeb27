"""Parsing and checking the LLM's replies for ``ragmon dataset synth`` (split out of :mod:`.synth`).

Each ``parse_*`` turns one JSON reply into a value, ``None`` when the model declined (null fields),
or raises :class:`~ragmon.scoring.llm.verdicts.VerdictError` so the chat client makes its one repair
attempt. ``SOURCE_REFERENCE_PATTERN`` catches questions that name "the passage"/"the text".
"""

from __future__ import annotations

import re
from typing import Any

from ..scoring.llm.verdicts import VerdictError
from ..scoring.text import content_tokens

__all__ = [
    "SOURCE_REFERENCE_PATTERN", "content_words", "parse_adversarial", "parse_answered", "parse_fact",
    "parse_multi_hop", "parse_rating", "question_key",
]

SOURCE_REFERENCE_PATTERN = re.compile(
    r"\b(according to|in|from|within|by) (the|this|that) (passage|text|document|excerpt|article|paragraph)\b"
    r"|\bthe (given|provided|above) (passage|text|document|context)\b"
    r"|\b(target|distractor) (passage|text|document)s?\b|\bthe (passage|excerpt)s?\b", re.IGNORECASE)


def content_words(text: str) -> set[str]:
    return {w for w in content_tokens(text) if len(w) > 2}


def question_key(question: str) -> str:
    return " ".join(re.findall(r"[a-z0-9]+", question.lower()))


def parse_fact(obj: dict[str, Any]) -> tuple[str, str] | None:
    fact, question = obj.get("fact"), obj.get("question")
    if fact is None and question is None:
        return None
    if not isinstance(fact, str) or not isinstance(question, str) or len(fact.strip()) < 8 \
            or len(question.strip()) < 8:
        raise VerdictError("'fact' and 'question' must both be non-empty strings (or both null)")
    return fact.strip(), question.strip()


def parse_adversarial(obj: dict[str, Any]) -> tuple[str, list[str]] | None:
    question, terms = obj.get("question"), obj.get("distractor_terms", [])
    if question is None:
        return None
    if not isinstance(question, str) or len(question.strip()) < 8:
        raise VerdictError("'question' must be a non-empty string (or null)")
    if not isinstance(terms, list):
        terms = []
    return question.strip(), [str(t) for t in terms if isinstance(t, str | int | float)]


def parse_multi_hop(obj: dict[str, Any]) -> dict[str, str] | None:
    if obj.get("question") is None:
        return None
    out = {}
    for key in ("question", "answer", "fact_1", "fact_2"):
        value = obj.get(key)
        if not isinstance(value, str) or not value.strip():
            raise VerdictError(f"{key!r} must be a non-empty string (or every field null)")
        out[key] = value.strip()
    return out


def parse_rating(obj: dict[str, Any]) -> int:
    value = obj.get("rating")
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 5:
        raise VerdictError(f"'rating' must be an integer 1-5, got {value!r}")
    return value


def parse_answered(obj: dict[str, Any]) -> bool:
    value = obj.get("answered")
    if isinstance(value, str) and value.strip().lower() in ("true", "false", "yes", "no"):
        value = value.strip().lower() in ("true", "yes")
    if not isinstance(value, bool):
        raise VerdictError(f"'answered' must be true or false, got {value!r}")
    return value
