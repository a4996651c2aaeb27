"""Recognising an answer that declines to answer ("I don't know", "the context does not say").

Shared by both judges for the offline ``abstention`` metric of ``no_answer`` questions, and
recorded for every evaluated answer (an app that declines a question it could have answered is
worth knowing about too). English only. Pure and synchronous.

An answer abstains when it is empty, or when its first sentence declines, or when more than
half of its sentences do: "I don't know. The documents only cover pricing." abstains, while
"Paris is the capital. The context does not give its population." answers (it states a fact
first). A refusal wrapped around an invented answer in one sentence ("I'm not sure, but it was
1998") is a known blind spot; the LLM judge also reads its ``noncommittal`` verdict.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..text import split_sentences

_SUBJECT = r"(?:the\s+|these\s+|this\s+|provided\s+|given\s+|retrieved\s+|available\s+)*" \
           r"(?:provided\s+|given\s+|retrieved\s+)?" \
           r"(?:context|contexts|documents?|passages?|sources?|texts?|information|excerpts?|articles?|" \
           r"search results|knowledge base|data|materials?)"
_REFUSAL_PATTERNS = (
    r"\bi\s+(?:do\s*n[o']t|don['’]t|dont)\s+know\b",
    r"\bi(?:\s+am|['’]m)\s+(?:not\s+sure|unsure|not\s+certain|unable|not\s+able)\b",
    r"\b(?:i|we)\s+(?:cannot|can\s*not|can['’]t|could\s*n[o']t|could\s+not|am\s+unable\s+to|are\s+unable\s+to)\s+"
    r"(?:answer|find|determine|tell|say|provide|confirm|locate|help)\b",
    r"\b(?:cannot|can['’]t|can\s*not)\s+be\s+(?:answered|determined)\b",
    r"\b(?:cannot|can['’]t|can\s*not|unable\s+to)\s+answer\s+(?:this|that|the|your)\s+question\b",
    r"\b(?:i|we)\s+(?:do\s*n[o']t|don['’]t)\s+have\s+(?:enough\s+|sufficient\s+|any\s+)?"
    r"(?:information|data|details|knowledge|access)\b",
    _SUBJECT + r"\s+(?:does|do|did)\s*(?:n[o']t|not)\s+(?:contain|mention|include|provide|say|specify|state|"
    r"give|cover|address|offer|discuss|describe|indicate|answer)\b",
    _SUBJECT + r"\s+(?:is|are)\s+(?:silent|insufficient|not\s+sufficient)\b",
    r"\b(?:there\s+is|there['’]s|i\s+(?:have|found)|with)\s+no\s+(?:relevant\s+|specific\s+|such\s+)?"
    r"(?:information|mention|data|details|record|answer|evidence)\b",
    r"^\s*no\s+(?:relevant\s+|specific\s+)?(?:information|answer|data)\b",
    r"\b(?:not\s+enough|insufficient|no\s+sufficient)\s+(?:information|context|data|evidence|details)\b",
    r"\b(?:is|are|was|were)\s+not\s+(?:mentioned|stated|specified|provided|given|available|found|covered|"
    r"included|addressed|discussed)\s+(?:in|by|within)\b",
    r"\b(?:could|can)\s*(?:n[o']t|not)\s+(?:find|locate)\b",
    r"\bunable\s+to\s+(?:find|locate|answer|determine|provide)\b",
    r"\b(?:beyond|outside)\s+(?:the\s+scope|my\s+knowledge)\b",
    r"\bno\s+way\s+to\s+(?:know|tell|determine)\b",
)
_REFUSAL = re.compile("|".join(f"(?:{p})" for p in _REFUSAL_PATTERNS), re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class AbstentionCheck:
    """Whether an answer declines, and the phrase that says so (for details)."""

    abstained: bool
    phrase: str | None = None  # the refusal words found, or "empty answer"


def refusal_phrase(text: str) -> str | None:
    """The first refusal phrase in ``text`` ("I don't know", "the context does not mention"), or None."""
    match = _REFUSAL.search(text.replace("’", "'"))
    return " ".join(match.group(0).split()) if match else None


def check(answer: str | None) -> AbstentionCheck:
    """Does ``answer`` decline to answer? Empty answers do (they invent nothing)."""
    if answer is None or not answer.strip():
        return AbstentionCheck(True, "empty answer")
    sentences = split_sentences(answer) or [answer]
    phrases = [refusal_phrase(s) for s in sentences]
    refusing = [ph for ph in phrases if ph]
    if not refusing:
        return AbstentionCheck(False)
    if phrases[0] or 2 * len(refusing) > len(sentences):
        return AbstentionCheck(True, refusing[0])
    return AbstentionCheck(False, refusing[0])


def is_abstention(answer: str | None) -> bool:
    """True when ``answer`` declines to answer (see the module doc)."""
    return check(answer).abstained


__all__ = ["AbstentionCheck", "check", "is_abstention", "refusal_phrase"]
