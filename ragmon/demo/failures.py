"""The failures ``ragmon demo`` injects on purpose, and the pure functions that make them.

=================  ==========================================================  =====================
kind               what happens                                                who should catch it
=================  ==========================================================  =====================
healthy            right articles, answer made of their sentences              nobody (false alarms)
retrieval_miss     the retriever returns articles on another topic             context precision
contradiction      right articles, but one fact in the answer is changed:      faithfulness
                   a number ("30 days" -> "60 days"), a name ("Business"
                   -> "Team") or a negation ("is" -> "is not")
off_topic          right articles, but the answer is about another article     answer relevancy
slow_retrieval     right answer, the retriever sleeps 0.6-1.4 s first          retrieval P95 latency
=================  ==========================================================  =====================
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from .corpus import Corpus, KbDocument
from .text import sentences


class FailureKind(StrEnum):
    HEALTHY = "healthy"
    RETRIEVAL_MISS = "retrieval_miss"
    CONTRADICTION = "contradiction"
    OFF_TOPIC = "off_topic"
    SLOW_RETRIEVAL = "slow_retrieval"


INJECTED_KINDS: tuple[FailureKind, ...] = tuple(k for k in FailureKind if k is not FailureKind.HEALTHY)

# Default share of requests that get each injected failure; the rest is healthy.
DEFAULT_SHARES: Mapping[FailureKind, float] = {
    FailureKind.RETRIEVAL_MISS: 0.10,
    FailureKind.CONTRADICTION: 0.12,
    FailureKind.OFF_TOPIC: 0.08,
    FailureKind.SLOW_RETRIEVAL: 0.08,
}

SLOW_RETRIEVAL_S = (0.6, 1.4)  # injected extra retrieval latency, uniform
BASE_RETRIEVAL_S = (0.01, 0.06)  # what a vector-store round trip costs; BM25 alone takes ~1 ms


class FailureMix:
    """Draws a failure kind per request from configured shares (the rest is healthy)."""

    def __init__(self, shares: Mapping[FailureKind, float] | None = None) -> None:
        self.shares = dict(DEFAULT_SHARES if shares is None else shares)
        for kind, share in self.shares.items():
            if kind is FailureKind.HEALTHY or not 0.0 <= share <= 1.0:
                raise ValueError(f"share for {kind} must be in [0, 1], got {share}")
        total = sum(self.shares.values())
        if total > 1.0 + 1e-9:
            raise ValueError(f"failure shares add up to {total:.2f}, more than 1")

    @property
    def healthy_share(self) -> float:
        return max(0.0, 1.0 - sum(self.shares.values()))

    def pick(self, rng: random.Random) -> FailureKind:
        x = rng.random()
        for kind in INJECTED_KINDS:
            x -= self.shares.get(kind, 0.0)
            if x < 0:
                return kind
        return FailureKind.HEALTHY


# --- contradiction ------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Contradiction:
    text: str  # the answer with one fact changed
    change: str  # "number" | "name" | "negation"
    original: str
    replacement: str


# A quantity: optional currency sign, a number, and a unit that makes it a fact we can change
# ("SAML 2.0", "ISO 27001" or "iOS 16" are names, not quantities, and are left alone).
_QUANTITY = re.compile(
    r"(?<![\w.])(?P<cur>\$)?(?P<num>\d+(?:\.\d+)?)(?P<unit>%|(?:[ -](?:"
    r"days?|business days|hours?|minutes?|months?|years?|agent seats|seats|shared inboxes|GB|MB|"
    r"requests|automation rules|conditions|actions|webhooks|languages|times|US states|"
    r"Slack workspaces|bullet points|million))\b)"
)

# Interchangeable names in the corpus: swapping one for another is a plausible hallucination.
_NAME_GROUPS: tuple[tuple[str, ...], ...] = (
    ("Starter", "Team", "Business", "Enterprise"),
    ("Frankfurt", "Sydney", "Virginia"),
    ("Okta", "Microsoft Entra ID", "Google Workspace", "OneLogin"),
    ("Visa", "Mastercard", "American Express", "PayPal"),
    ("Monday", "Friday", "Saturday", "Sunday"),
    ("Sundays", "Saturdays", "Wednesdays"),
    ("US dollars", "euros", "British pounds", "Swiss francs"),
    ("Splunk", "Datadog", "Elastic"),
    ("JSON", "CSV", "XML"),
    ("ClamAV", "Sophos"),
    ("AWS KMS", "Google Cloud KMS"),
    ("iOS", "Android"),
    ("three", "four", "five"),
)

# (pattern, replacement): flip the first one that matches.
_NEGATIONS: tuple[tuple[str, str], ...] = (
    (r"^No ", "A "),
    (r"\bis not\b", "is"),
    (r"\bare not\b", "are"),
    (r"\bdoes not\b", "does"),
    (r"\bdo not\b", "do"),
    (r"\bcannot\b", "can"),
    (r"\bnever\b", "always"),
    (r"\bhave no\b", "have full"),
    (r"\boffers\b", "no longer offers"),
    (r"\bdiffer\b", "do not differ"),
    (r"\bis\b", "is not"),
    (r"\bare\b", "are not"),
    (r"\bcan\b", "cannot"),
    (r"\bmust\b", "need not"),
    (r"\bincludes\b", "does not include"),
    (r"\binclude\b", "do not include"),
)


def _other_number(num: str, rng: random.Random) -> str:
    """A plausible wrong value: doubled or halved counts, a slightly lower percentage."""
    if "." in num:
        decimals = len(num.split(".")[1])
        value = float(num)
        changed = value - 0.1 * rng.choice((4, 5)) if value > 1 else value * 5
        return f"{changed:.{decimals}f}"
    value = int(num)
    options = [value * 2]
    if value % 2 == 0 and value >= 4:
        options.append(value // 2)
    if value <= 5:
        options += [value + 1, value + 2]
    return str(rng.choice(options))


def _change_number(sentence: str, rng: random.Random) -> tuple[str, str, str] | None:
    matches = list(_QUANTITY.finditer(sentence))
    if not matches:
        return None
    m = rng.choice(matches)
    new_num = _other_number(m["num"], rng)
    original = m.group(0)
    replacement = (m["cur"] or "") + new_num + m["unit"]
    return sentence[: m.start()] + replacement + sentence[m.end() :], original, replacement


def _change_name(sentence: str, rng: random.Random) -> tuple[str, str, str] | None:
    options = []
    for group in _NAME_GROUPS:
        for name in group:
            if re.search(rf"\b{re.escape(name)}\b", sentence):
                others = [o for o in group if not re.search(rf"\b{re.escape(o)}\b", sentence)]
                if others:
                    options.append((name, others))
    if not options:
        return None
    name, others = rng.choice(options)
    other = rng.choice(others)
    return re.sub(rf"\b{re.escape(name)}\b", other, sentence, count=1), name, other


def _negate(sentence: str, rng: random.Random) -> tuple[str, str, str] | None:
    for pattern, repl in _NEGATIONS:
        m = re.search(pattern, sentence)
        if m:
            return sentence[: m.start()] + repl + sentence[m.end() :], m.group(0), repl
    return None


_CHANGES = (("number", _change_number, 0.5), ("name", _change_name, 0.3), ("negation", _negate, 0.2))


CHANGE_KINDS: tuple[str, ...] = tuple(name for name, _, _ in _CHANGES)


def contradict(answer: str, rng: random.Random, changes: Sequence[str] = CHANGE_KINDS) -> Contradiction:
    """Change exactly one fact in one sentence of ``answer`` (a number, a name or a
    negation), keeping everything else word for word — a realistic hallucination.
    The kind of change is drawn first (numbers 50 %, names 30 %, negations 20 % when the
    answer allows all three; only those in ``changes``), then the sentence. When none of the
    allowed changes applies, a negation is used; when none applies at all, a false sentence
    is appended."""
    parts = sentences(answer)
    by_change: dict[str, list[tuple[int, tuple[str, str, str]]]] = {}
    for index, sentence in enumerate(parts):
        for change, fn, _ in _CHANGES:
            result = fn(sentence, random.Random(rng.random()))  # one draw each: same rng path for any ``changes``
            if result is not None and result[0] != sentence:
                by_change.setdefault(change, []).append((index, result))
    if not by_change:
        # No fact to twist: state the opposite outright.
        return Contradiction(answer + " This does not apply to your plan.", "negation", "", "does not apply")
    available = [(c, w) for c, _, w in _CHANGES if c in by_change and c in changes]
    if not available:
        available = [(c, w) for c, _, w in _CHANGES if c in by_change and c == "negation"] or [
            (c, w) for c, _, w in _CHANGES if c in by_change
        ]
    change = rng.choices([c for c, _ in available], weights=[w for _, w in available])[0]
    index, (new_sentence, original, replacement) = rng.choice(by_change[change])
    parts[index] = new_sentence
    return Contradiction(" ".join(parts), change, original, replacement)


# --- off-topic answer -----------------------------------------------------------------------

def off_topic_article(corpus: Corpus, avoid_topics: Sequence[str], rng: random.Random) -> KbDocument:
    """An article on a topic none of the retrieved articles is about."""
    pool = [d for d in corpus.documents if d.topic not in set(avoid_topics)] or list(corpus.documents)
    return rng.choice(pool)


def slow_retrieval_delay(rng: random.Random) -> float:
    return rng.uniform(*SLOW_RETRIEVAL_S)


def base_retrieval_delay(rng: random.Random) -> float:
    return rng.uniform(*BASE_RETRIEVAL_S)
