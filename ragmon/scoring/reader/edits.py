"""One-edit contradictions made from *training* sentences: the reader learns that one changed
negation, number, name or month turns a supported claim into a contradicted one.

Each edit takes an entailed (premise, hypothesis) pair and changes the hypothesis so the premise
contradicts it. Negations are also added to *both* sides (the pair stays entailed) so the word
"not" alone predicts nothing. Deterministic: choices come from a hash of the pair's key.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator

MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December")
_AUX = re.compile(r"\b(is|are|was|were|can|will|has|have|had|should|could|would|did|does|do)\s+(?!not\b|n't)(?=[a-z])")
_NEGATED = re.compile(r"\b(is|are|was|were|has|have|had|should|could|would|did|does|do|will) not\s+|\bcannot\s+")
_NUMBER = re.compile(r"(?<![\w.,])\d+(?:\.\d+)?(?![\w,]?\d)")
_NAME = re.compile(r"(?<=[a-z,] )([A-Z][a-z]{2,}(?: [A-Z][a-z]{2,})?)")
_MONTH = re.compile(r"\b(" + "|".join(MONTHS) + r")\b")


def _pick(key: str, n: int) -> int:
    return int(hashlib.sha256(key.encode()).hexdigest()[:8], 16) % n


def negate(text: str, key: str) -> str | None:
    """The text with one auxiliary verb negated ('is' -> 'is not'), or None if it has none."""
    spots = list(_AUX.finditer(text))
    if not spots:
        return None
    m = spots[_pick(key, len(spots))]
    verb = m.group(1)
    return text[:m.start(1)] + ("cannot" if verb == "can" else f"{verb} not") + text[m.end(1):]


def unnegate(text: str) -> str | None:
    """The text with its first negated auxiliary made positive, or None."""
    m = _NEGATED.search(text)
    if not m:
        return None
    repl = "can " if m.group(0).startswith("cannot") else f"{m.group(1)} "
    return text[:m.start()] + repl + text[m.end():]


def change_number(text: str, premise: str, key: str) -> str | None:
    spots = [m for m in _NUMBER.finditer(text) if m.group(0) in premise]
    if not spots:
        return None
    m = spots[_pick(key, len(spots))]
    value = float(m.group(0))
    for step in (1 + _pick(key + "n", 9), 2, 10):
        new = value + step if "." not in m.group(0) else round(value * (1 + step / 10), 2)
        new_text = str(int(new)) if "." not in m.group(0) else str(new)
        if new_text not in premise:
            return text[:m.start()] + new_text + text[m.end():]
    return None


def swap_name(text: str, premise: str, key: str) -> str | None:
    """A name of the hypothesis swapped for another name the premise holds."""
    names: list[str] = [n for n in dict.fromkeys(_NAME.findall(premise)) if n not in MONTHS]
    spots = [m for m in _NAME.finditer(text) if m.group(1) in premise and m.group(1) not in MONTHS]
    if not spots:
        return None
    m = spots[_pick(key, len(spots))]
    others: list[str] = [n for n in names if n not in text and n.split()[0] != m.group(1).split()[0]]
    if not others:
        return None
    return text[:m.start(1)] + others[_pick(key + "o", len(others))] + text[m.end(1):]


def change_month(text: str, premise: str, key: str) -> str | None:
    m = _MONTH.search(text)
    if not m:
        return None
    choices = [x for x in MONTHS if x != m.group(1) and x not in premise]
    return text[:m.start(1)] + choices[_pick(key, len(choices))] + text[m.end(1):] if choices else None


def contradictions(premise: str, hypothesis: str, key: str) -> Iterator[tuple[str, str]]:
    """(kind, edited hypothesis) for every edit that applies to an entailed pair."""
    for kind, edited in (
        ("negation", negate(hypothesis, key) or unnegate(hypothesis)),
        ("number", change_number(hypothesis, premise, key)),
        ("name", swap_name(hypothesis, premise, key)),
        ("month", change_month(hypothesis, premise, key)),
    ):
        if edited and edited != hypothesis:
            yield kind, edited


def both_negated(premise: str, hypothesis: str, key: str) -> tuple[str, str] | None:
    """The same negation added to premise and hypothesis where both hold the same auxiliary
    phrase: still entailed, and it carries a 'not'."""
    for m in _AUX.finditer(hypothesis):
        phrase = hypothesis[m.start():m.end() + 12].split()[:2]
        if len(phrase) < 2:
            continue
        needle = " ".join(phrase)
        at = premise.find(needle)
        if at >= 0:
            verb = phrase[0]
            neg = "cannot" if verb == "can" else f"{verb} not"
            return (premise[:at] + neg + premise[at + len(verb):],
                    hypothesis[:m.start(1)] + neg + hypothesis[m.end(1):])
    return None
