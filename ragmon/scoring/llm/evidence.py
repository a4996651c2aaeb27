"""Contradiction evidence that must exist: a ``contradicted`` item of the judge's reply counts only
when the sentence it quotes is found in the contexts the judge was shown.

A model asked to quote "the context sentence that says otherwise" does not always do so: measured
with a 1.5B model, every piece of evidence in 4 contradiction items quoted the answer itself or
paraphrased it ("This sentence directly contradicts the answer"), and each still capped
faithfulness at 0.45. So the quote is looked up, tolerantly:

* **normalised**: Unicode compatibility forms, case, curly and straight quotes, dashes, whitespace
  and punctuation do not matter — both sides become lists of word tokens (``6.2`` and ``1,000``
  stay one token);
* **small edits**: a quote matches a context when at least ``MIN_CONTAINMENT`` of its tokens are
  found in order within one window of that context (token-level fuzzy containment: a dropped,
  added or changed word in a 10-word quote still matches; quotes under 5 tokens must match
  exactly);
* **not the answer**: a quote that matches the claim's own answer sentence (or the claim) at least
  as well as any context is the answer quoted, not a source — this is what tells the context
  sentence of a one-edit change ("costs $19") from the answer's copy of it ("costs $49"), which a
  tolerant match alone cannot;
* an ellipsis (``...``, ``…``) joins parts of a quote, each matched on its own;
* quotes shorter than ``MIN_TOKENS`` tokens are not evidence.

The tolerance is measured in docs/llm-judge.md (bench/contradiction_evidence.py). Pure and
synchronous.
"""

from __future__ import annotations

import dataclasses
import logging
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from difflib import SequenceMatcher
from functools import lru_cache
from typing import Final

from ... import semconv as sc
from .verdicts import CompactVerdict

log = logging.getLogger(__name__)

MIN_CONTAINMENT: Final = 0.8  # share of the quote's tokens found in order inside one context window
MIN_TOKENS: Final = 3  # a shorter quote ("19", "not") is not a sentence of evidence
_WINDOW_SLACK: Final = 0.25  # a window may be this much longer than the quote (inserted words)

# why a contradiction item was dropped (ragmon_judge_invalid_contradictions_total{reason})
INVALID_NOT_IN_SOURCES: Final = sc.INVALID_CONTRADICTION_NOT_IN_SOURCES
INVALID_QUOTES_ANSWER: Final = sc.INVALID_CONTRADICTION_QUOTES_ANSWER

_QUOTES = str.maketrans({
    "\u2018": "'", "\u2019": "'", "\u201a": "'", "\u201b": "'", "\u2032": "'", "`": "'", "\u00b4": "'",
    "\u201c": '"', "\u201d": '"', "\u201e": '"', "\u201f": '"', "\u2033": '"', "\u00ab": '"', "\u00bb": '"',
})
_ELLIPSIS = re.compile(r"\.{3,}|…|\[\s*\.\.\.\s*\]")  # "first part ... last part": the quote left its middle out
_TOKEN = re.compile(r"[^\W_]+(?:[.,'][^\W_]+)*")


def tokens(text: str) -> tuple[str, ...]:
    """Word tokens of ``text``, normalised (NFKC, case-folded, quotes unified, punctuation dropped)."""
    text = unicodedata.normalize("NFKC", text).translate(_QUOTES).casefold()
    return tuple(_TOKEN.findall(text))


def containment(quote: Sequence[str], source: Sequence[str]) -> float:
    """Share of ``quote``'s tokens found in order inside one window of ``source`` no longer than the
    quote plus a quarter (0 for an empty quote). 1.0: every token of ``quote`` is in ``source``, in
    order, with at most that many other tokens between them."""
    return match(quote, source)[0]


def match(quote: Sequence[str], source: Sequence[str]) -> tuple[float, float]:
    """(containment, tightness): tightness is the tokens found over the length of the window they
    were found in, 1.0 for a token-exact part of ``source``. Between two sources that contain a quote
    equally, the tighter one holds it more exactly ("are higher" is tighter in "are higher" than in
    "are not higher")."""
    n = len(quote)
    if not n or not source:
        return 0.0, 0.0
    blocks = [b for b in SequenceMatcher(None, quote, source, autojunk=False).get_matching_blocks() if b.size]
    width = n + max(2, int(n * _WINDOW_SLACK))
    best, best_span = 0, 1
    total = start = 0
    for block in blocks:  # blocks are in order in both sequences: a sliding window
        total += block.size
        while block.b + block.size - blocks[start].b > width:
            total -= blocks[start].size
            start += 1
        span = block.b + block.size - blocks[start].b
        if total > best or (total == best and span < best_span):
            best, best_span = total, span
    return min(1.0, best / n), best / best_span if best else 0.0


@dataclass(frozen=True, slots=True)
class EvidenceCheck:
    """How a quote matched: its best context (rank, 1-based; None: none), that match, and its match
    in the claim's own answer sentence."""

    valid: bool
    reason: str | None  # None when valid, else INVALID_NOT_IN_SOURCES / INVALID_QUOTES_ANSWER
    context: int | None
    in_context: float
    in_answer: float
    quotes_answer: bool = False  # the claim's own sentence holds the quote at least as well


class EvidenceIndex:
    """The contexts a judge was shown, tokenised once per trace, to check every quote against."""

    def __init__(self, contexts: Sequence[str]) -> None:
        self._contexts = [tokens(c) for c in contexts]

    def check(self, evidence: str, own_text: Sequence[str] = ()) -> EvidenceCheck:
        """Is ``evidence`` a (tolerant) quote of a context, and not a quote of ``own_text`` (the
        contradicted claim and its answer sentence)?"""
        parts = [part for part in map(tokens, _ELLIPSIS.split(evidence)) if part]
        n = sum(len(part) for part in parts)
        if n < MIN_TOKENS:
            return EvidenceCheck(False, INVALID_NOT_IN_SOURCES, None, 0.0, 0.0)
        best, rank = (0.0, 0.0), None
        for i, context in enumerate(self._contexts, start=1):
            score = _parts_match(parts, context)
            if score > best:
                best, rank = score, i
        own = max((_parts_match(parts, tokens(t)) for t in own_text if t), default=(0.0, 0.0))
        quotes_answer = own >= best  # matched as well (and as tightly) by the answer: the answer quoted back
        if best[0] < _required(n):
            return EvidenceCheck(False, INVALID_NOT_IN_SOURCES, rank, best[0], own[0], quotes_answer)
        if quotes_answer:
            return EvidenceCheck(False, INVALID_QUOTES_ANSWER, rank, best[0], own[0], quotes_answer)
        return EvidenceCheck(True, None, rank, best[0], own[0], quotes_answer)


def _parts_match(parts: Sequence[Sequence[str]], source: Sequence[str]) -> tuple[float, float]:
    """``match`` of a quote whose parts were joined by an ellipsis: each part on its own, weighed
    by its tokens."""
    if len(parts) == 1:
        return match(parts[0], source)
    n = sum(len(part) for part in parts)
    scores = [(match(part, source), len(part)) for part in parts]
    return sum(m[0] * k for m, k in scores) / n, sum(m[1] * k for m, k in scores) / n


@lru_cache(maxsize=64)
def _required(n: int) -> float:
    """The containment a quote of ``n`` tokens needs: MIN_CONTAINMENT, but every token of a quote
    too short to lose one (under 5 tokens)."""
    allowed_misses = int(n * (1 - MIN_CONTAINMENT) + 1e-9)
    return 1.0 if allowed_misses == 0 else (n - allowed_misses) / n


def checked(verdict: CompactVerdict, contexts: Sequence[str], answer_sentences: Sequence[str]) -> CompactVerdict:
    """``verdict`` without the contradiction items whose evidence is not a quote of ``contexts``
    (each counted in ``invalid_contradictions`` by reason); such a claim keeps the verdict the rest
    of the reply gave it (its ``supported`` flag)."""
    if not verdict.contradicted:
        return verdict
    index = EvidenceIndex(contexts)
    kept: dict[int, tuple[str, str]] = {}
    invalid = dict(verdict.invalid_contradictions)
    for i, (evidence, reason) in verdict.contradicted.items():
        claim = verdict.claims[i][0]
        number = verdict.claim_sentences[i] if i < len(verdict.claim_sentences) else None
        own = [claim]
        if number is not None and 1 <= number <= len(answer_sentences):
            own.append(answer_sentences[number - 1])
        result = index.check(evidence, own)
        if result.valid:
            kept[i] = (evidence, reason)
        else:
            assert result.reason is not None
            invalid[result.reason] = invalid.get(result.reason, 0) + 1
            # counted above; the text only at debug level (it is the user's data)
            log.debug("contradiction item dropped (%s): claim %d %.200r, evidence %.200r",
                      result.reason, i, claim, evidence,
                      extra={"claim_index": i, "drop_reason": result.reason, "claim": claim, "evidence": evidence})
    return dataclasses.replace(verdict, contradicted=kept, invalid_contradictions=invalid)
