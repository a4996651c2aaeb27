"""A changed fact: a claim that restates a context sentence with one slot — a number, a name, a
month or a unit — different, while no context sentence says what the claim says.

Embeddings cannot see these edits ("The Team plan costs $49" and "The Business plan costs $49" are
neighbours in MiniLM space), so this is an explicit check. It needs *alignment*: the claim's other
content words must be in the evidence sentence, so a paraphrase, a list or a claim that merely
mentions another name is not a conflict. And it needs *absence of support*: when any context
sentence holds the claim's slot value together with most of its words, the claim is supported,
whatever its closest sentence says. Pure; no model.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from ..text import stem, words
from .claims import TextFacts

ALIGNED_SHARE: Final = 0.7  # of the claim's content words (slot words aside) near it (closest sentences)
ALIGNED_BEST_SHARE: Final = 0.4  # ... and in the evidence sentence itself
MIN_SHARED: Final = 2  # and at least this many of them
NAME_ALIGNED_SHARE: Final = 0.8  # a name swap needs this much of the claim's other words in the sentence
MAX_NAME_WORDS: Final = 3  # a swapped name may be a few words ("Equal Employment Opportunity")
AGREEING_SHARE: Final = 0.6  # a sentence holding the slot value and this share of the claim agrees with it

MONTHS: Final = ("january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
                 "november", "december")
_UNIT_FAMILIES: Final = (
    ("second", "minute", "hour", "day", "week", "month", "year", "decade", "century"),
    ("millimeter", "centimeter", "meter", "kilometer", "inch", "foot", "feet", "yard", "mile"),
    ("milligram", "gram", "kilogram", "ounce", "pound", "ton", "tonne"),
    ("milliliter", "liter", "teaspoon", "tablespoon", "cup", "pint", "quart", "gallon"),
    ("dollar", "euro", "pound sterling", "yen", "cent"),
    ("fahrenheit", "celsius"),
)
# "Egyptian television" for "CBC television" is a description, not another name
_DEMONYM: Final = re.compile(r"(?:ian|ean|ese|ish|ans)$")
_UNIT_FAMILY: Final = {u: i for i, family in enumerate(_UNIT_FAMILIES) for u in family}


@dataclass(frozen=True, slots=True)
class Slots:
    """The fact slots of one sentence: stems of names, numbers, months and units (unit -> family)."""

    tokens: frozenset[str]
    numbers: frozenset[str]
    names: frozenset[str]
    months: frozenset[str]
    units: frozenset[str]


def _unit(word: str) -> str | None:
    low = word.lower()
    for candidate in (low, low[:-1] if low.endswith("s") else low, low[:-2] if low.endswith("es") else low):
        if candidate in _UNIT_FAMILY:
            return candidate
    return None


def slots(text: str, f: TextFacts) -> Slots:
    ws = words(text)
    months = frozenset(w.lower() for w in ws if w.lower() in MONTHS and w[:1].isupper())
    units = frozenset(u for u in (_unit(w) for w in ws) if u is not None)
    names = frozenset(f.entities) - frozenset(stem(m) for m in months)
    return Slots(f.tokens, f.numbers, names, months, units)


def _surface(text: str, stems: Sequence[str]) -> str:
    """The first word of ``text`` whose stem is one of ``stems``, as written."""
    wanted = set(stems)
    for w in words(text):
        if stem(re.sub(r"['’]s$", "", w).lower()) in wanted:
            return re.sub(r"['’]s$", "", w)
    return sorted(wanted)[0] if wanted else ""


def conflict(claim: str, c: Slots, evidence: str, e: Slots, sentences: Sequence[Slots],
             window: frozenset[str] = frozenset(), known: frozenset[str] | None = None) -> str | None:
    """``reason`` of a changed fact between ``claim`` and its evidence sentence, or None.

    ``window``: the tokens of the claim's closest context sentences (a long claim combines
    neighbouring sentences: its other words may come from them); ``known``: every token of the
    contexts — a swapped name must be one the sources hold (a name they do not hold at all is the
    evidence checks' "name not in contexts", and a paraphrase such as "Nigerian" for "Nigeria"
    must not read as a swap);
    ``sentences``: every context sentence's slots (one that agrees with the claim voids the conflict).
    """
    near = window | e.tokens
    slot_tokens = c.names | c.numbers | {stem(m) for m in c.months} | {stem(u) for u in c.units}
    rest = c.tokens - slot_tokens
    shared = rest & e.tokens
    if (len(shared) < MIN_SHARED or len(shared) < ALIGNED_BEST_SHARE * len(rest)
            or len(rest & near) < ALIGNED_SHARE * len(rest)):
        return None  # not about the same thing: nothing to contradict
    # one kind of slot differs (a claim combining far-apart facts differs in more), with at most a
    # multi-word name's worth of values, and the evidence sentence has a value of that kind in its place
    diffs = {
        "number": (c.numbers - e.numbers, e.numbers - c.numbers),
        "date": (c.months - e.months, e.months - c.months),
        "unit": (c.units - e.units, e.units - c.units),
        "name": (c.names - e.tokens, e.names - c.tokens),
    }
    changed = [kind for kind, (said, _) in diffs.items() if said]
    if len(changed) != 1:
        return None
    kind = changed[0]
    said_set, source_set = diffs[kind]
    if len(said_set) > (MAX_NAME_WORDS if kind == "name" else 1) or not source_set:
        return None
    if kind == "name" and ((known is not None and not said_set <= known)
                           or len(shared) < NAME_ALIGNED_SHARE * len(rest)):
        # a name is swapped only in a claim that restates its sentence nearly word for word:
        # paraphrases name things freely ("the Nigerian army" for a sentence about Bauchi)
        return None
    said_value = sorted(said_set)[0]
    if kind == "unit":
        same_family = sorted(v for v in source_set if _UNIT_FAMILY[v] == _UNIT_FAMILY[said_value])
        if not same_family:
            return None
        said, source = said_value, same_family[0]
    elif kind == "date":
        said, source = said_value.capitalize(), sorted(source_set)[0].capitalize()
    elif kind == "name":
        said, source = _surface(claim, sorted(said_set)), _surface(evidence, sorted(source_set))
        if (len(said) < 2 or len(source) < 2 or _DEMONYM.search(said) is not None
                or _DEMONYM.search(source) is not None or not _same_place(claim, said, evidence, source)):
            return None
    else:
        said, source = said_value, sorted(source_set)[0]
    if _agreed(kind, said_set, c, sentences):
        return None
    return f"number {said} ≠ {source}" if kind == "number" else f"{kind}: {said} ≠ {source}"


def _neighbours(text: str, word: str) -> tuple[str, str] | None:
    """The words right before and after ``word``'s first occurrence in ``text`` (lower case)."""
    ws = [re.sub(r"['’]s$", "", w).lower() for w in words(text)]
    target = word.lower()
    if target not in ws:
        return None
    i = ws.index(target)
    return (ws[i - 1] if i > 0 else "", ws[i + 1] if i + 1 < len(ws) else "")


def _same_place(claim: str, said: str, evidence: str, source: str) -> bool:
    """The claim's name stands where the evidence has the other one: a shared word right before or
    right after it ("in the *Pro* plan" / "in the *Enterprise* plan"). A name the claim merely adds
    ("Finn was put on probation" against "... the Jackson County office") is not a swap."""
    a, b = _neighbours(claim, said), _neighbours(evidence, source)
    if a is None or b is None:
        return False
    return (a[0] != "" and a[0] == b[0]) or (a[1] != "" and a[1] == b[1])


def _agreed(kind: str, said: frozenset[str], c: Slots, sentences: Sequence[Slots]) -> bool:
    """Some context sentence holds the claim's changed value in the claim's own setting: with one of
    its names (numbers and dates, when the claim names something), or with most of its other words.
    "Team at $19 and Business at $49" is placed by the Business sentence; "Team costs $49" is not."""
    rest = c.tokens - c.names - c.numbers
    for s in sentences:
        holds = {"number": said <= s.numbers, "date": said <= s.months, "unit": said <= s.units,
                 "name": said <= s.tokens}[kind]
        if not holds:
            continue
        if kind in ("number", "date") and c.names:
            if c.names & s.tokens:
                return True
            continue
        if not rest or len(rest & s.tokens) >= AGREEING_SHARE * len(rest):
            return True
    return False
