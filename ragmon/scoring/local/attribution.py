"""What a claim says about its sources rather than about the world: a leading attribution
("Based on the given passages, ...", "Passage 2 mentions that ...") and citation markers
("(Passage 14)", "[2]").

"Based on the passages, the plan costs $49" claims that the plan costs $49: the attribution must
not exempt it from the contradiction checks, and a citation's number ("Passage 14") is not a
quantity the contexts must hold. What is left after both are removed decides whether the claim is
a meta-statement ("The passages do not mention X", "This can be found in passage 9"). Pure; no model.
"""

from __future__ import annotations

import re
from typing import Final

from .claims import strict_numbers

_SOURCE: Final = r"(?:passages?|contexts?|documents?|sources?|texts?|articles?|information|search results?|data)"
_NUMBERS: Final = r"\d+(?:\s*(?:,|and|&|-|–)\s*\d+)*"
# "Based on the given passages," "According to passage 3 and 4," "From the provided information,"
_LEADING: Final = re.compile(
    r"^\s*(?:based\s+on|according\s+to|as\s+(?:stated|mentioned|described|noted|explained)\s+in|from|per|in)\s+"
    r"(?:the\s+)?(?:(?:given|provided|above|retrieved|available|following)\s+)*" + _SOURCE
    + r"(?:\s+" + _NUMBERS + r")?(?:\s+(?:provided|given|above))?\s*,\s*",
    re.IGNORECASE,
)
# "Passage 2 mentions that" "The passages state that" "Document 3 explains"
_LEADING_VERB: Final = re.compile(
    r"^\s*(?:the\s+)?(?:(?:given|provided|above)\s+)?" + _SOURCE + r"(?:\s+" + _NUMBERS + r")?\s+"
    r"(?:also\s+)?(?:says?|states?|mentions?|notes?|explains?|suggests?|shows?|indicates?|describes?|reports?|"
    r"confirms?|adds?|clarifies|highlights?)(?:\s+that)?\s+",
    re.IGNORECASE,
)
# "(Passage 14)" "(Passages 2 and 3)" "[1]" "[2, 3]" "(source 1)"
_CITATION: Final = re.compile(
    r"\s*(?:\(\s*(?:see\s+)?" + _SOURCE + r"\s*" + _NUMBERS + r"\s*\)|\[\s*" + _NUMBERS + r"\s*\])",
    re.IGNORECASE,
)
# a reference to a source by its number inside the text: "in passage 9", "passage 4's"
_REFERENCE: Final = re.compile(r"\b" + _SOURCE + r"\s+(" + _NUMBERS + r")\b", re.IGNORECASE)


def core(claim: str) -> str:
    """The claim without a leading attribution and without citation markers."""
    text = _CITATION.sub("", claim)
    for pattern in (_LEADING, _LEADING_VERB):
        stripped = pattern.sub("", text, count=1)
        if stripped != text:
            text = stripped[:1].upper() + stripped[1:]
            break
    return text


def citation_numbers(claim: str) -> frozenset[str]:
    """Numbers that name a source ("Passage 14", "[2]") rather than a quantity."""
    found: set[str] = set()
    for m in _CITATION.finditer(claim):
        found |= strict_numbers(re.sub(r"[^\d,&\s-]", " ", m.group(0)))
    for m in _REFERENCE.finditer(claim):
        found |= strict_numbers(m.group(1))
    return frozenset(found)
