"""Citation markers in an answer: find them, pair each claim with the contexts it cites (pure).

An answer such as ``"Paris is the capital of France [1]. It has 2.1 million people [doc-7]."``
carries markers matched by a configurable pattern whose first group is the marker's key
(default: ``[...]`` not followed by ``(``, so Markdown links are not citations). A marker may
hold several keys separated by commas or semicolons (``[1, 3]``). A key maps to a context:

* a whole number ``n`` -> the n-th context, 1-based, in rank order (the order of
  ``RagTrace.contexts``, which is what the app's prompt numbered);
* otherwise -> the document whose ``id`` equals the key (also a number out of range, when a
  document has that id);
* anything else is *unknown*: a citation that cannot be correct (it counts against pointing
  correctness and is listed in the details). A document without text cannot support anything
  either and is treated the same way.

The answer's claims are its sentences (the splitter both judges use), computed on the text with
the markers removed; a marker belongs to the sentence it sits in, or to the sentence it follows
("... capital. [1] It has ...": the marker cites the first sentence). Sentences without any
content word ("Sources: [1], [2]") are not claims.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from ... import semconv as sc
from ...types import CitationCheck, Document, ScoreDetails
from ..text import content_tokens, split_sentences
from . import formulas

DEFAULT_CITATION_PATTERN = r"\[([^\[\]]{1,64})\](?!\()"
_KEY_SPLIT = re.compile(r"\s*[,;]\s*")


@dataclass(frozen=True, slots=True)
class Citation:
    """One key of one marker, resolved (``context`` is None for an unknown key)."""

    key: str
    context: int | None  # 0-based index into the trace's contexts (rank order), or None
    problem: str | None = None  # why it is unknown: "no such context", "document has no text"


@dataclass(frozen=True, slots=True)
class CitedClaim:
    """One claim (a sentence with its markers removed) and the citations attached to it."""

    text: str
    citations: tuple[Citation, ...] = ()

    @property
    def cited(self) -> bool:
        return bool(self.citations)

    @property
    def contexts(self) -> tuple[int, ...]:
        """The distinct known contexts this claim cites, in the order cited."""
        return tuple(dict.fromkeys(c.context for c in self.citations if c.context is not None))


@dataclass(frozen=True, slots=True)
class CitationMap:
    """The answer's claims with their citations, and the answer with the markers removed."""

    claims: tuple[CitedClaim, ...]
    stripped_answer: str
    markers: int  # markers found in the answer

    @property
    def cited_claims(self) -> tuple[CitedClaim, ...]:
        return tuple(c for c in self.claims if c.cited)

    @property
    def unknown(self) -> tuple[Citation, ...]:
        return tuple(cit for c in self.claims for cit in c.citations if cit.context is None)

    def pairs(self) -> list[tuple[int, int]]:
        """(claim index, context index) for every distinct known citation: what a judge checks."""
        return [(i, ctx) for i, claim in enumerate(self.claims) for ctx in claim.contexts]


def compile_pattern(pattern: str | re.Pattern[str] | None) -> re.Pattern[str]:
    """The citation pattern, compiled; ValueError when it is invalid or has no group."""
    if isinstance(pattern, re.Pattern):
        compiled = pattern
    else:
        try:
            compiled = re.compile(pattern or DEFAULT_CITATION_PATTERN)
        except re.error as exc:
            raise ValueError(f"invalid citation pattern {pattern!r}: {exc}") from exc
    if compiled.groups < 1:
        raise ValueError(f"citation pattern {compiled.pattern!r} needs a group that captures the marker's key")
    return compiled


def strip_markers(text: str, pattern: str | re.Pattern[str] | None = None) -> str:
    """``text`` with every citation marker (and the space before it) removed."""
    return _strip(text, compile_pattern(pattern))[0]


def _strip(text: str, rx: re.Pattern[str]) -> tuple[str, list[tuple[int, str]]]:
    """(stripped text, [(offset in the stripped text, marker key)])."""
    out: list[str] = []
    found: list[tuple[int, str]] = []
    length = 0
    last = 0
    for match in rx.finditer(text):
        before = text[last : match.start()]
        glued = match.end() < len(text) and text[match.end()].isalnum()  # "[1]Paris"
        if not glued:
            before = before.rstrip(" \t")  # "capital [1]." -> "capital."
        out.append(before)
        length += len(before)
        found.append((length, match.group(1) or ""))
        if glued and before and not before[-1].isspace():
            out.append(" ")
            length += 1
        last = match.end()
    out.append(text[last:])
    return "".join(out), found


def _resolve(key: str, documents: Sequence[Document]) -> list[Citation]:
    """The citations one marker key stands for (several when it lists keys: ``1, 3``)."""
    key = key.strip()
    texts = [d for d in documents if d.content]
    by_id = {d.id: i for i, d in enumerate(texts)}
    without_text = {d.id for d in documents if not d.content}

    def one(k: str) -> Citation:
        if k.isdigit():
            n = int(k)
            if 1 <= n <= len(texts):
                return Citation(k, n - 1)
        if k in by_id:
            return Citation(k, by_id[k])
        if k in without_text:
            return Citation(k, None, "document has no text")
        return Citation(k, None, "no such context")

    if key in by_id or key.isdigit():
        return [one(key)]
    parts = [p for p in _KEY_SPLIT.split(key) if p]
    if len(parts) > 1:
        return [one(p) for p in parts]
    return [one(key)]


def parse_citations(
    answer: str | None, documents: Sequence[Document], pattern: str | re.Pattern[str] | None = None
) -> CitationMap:
    """The answer's claims and the contexts each one cites (see the module doc)."""
    rx = compile_pattern(pattern)
    if not answer:
        return CitationMap((), "", 0)
    stripped, markers = _strip(answer, rx)
    sentences = split_sentences(stripped)
    spans: list[tuple[int, int]] = []
    cursor = 0
    for s in sentences:
        start = stripped.find(s, cursor)
        if start < 0:  # not expected (sentences are substrings); fall back to the cursor
            start = cursor
        spans.append((start, start + len(s)))
        cursor = start + len(s)
    citations: list[list[Citation]] = [[] for _ in sentences]
    for offset, key in markers:
        if not sentences:
            break
        # the sentence the marker sits in or follows: the last one starting before it
        index = 0
        for i, (start, _) in enumerate(spans):
            if start < offset:
                index = i
        citations[index].extend(_resolve(key, documents))
    claims = tuple(
        CitedClaim(s, tuple(_dedupe(c)))
        for s, c in zip(sentences, citations, strict=True)
        if content_tokens(s) or any(ch.isdigit() for ch in s)
    )
    return CitationMap(claims, stripped, len(markers))


def _dedupe(citations: Sequence[Citation]) -> list[Citation]:
    seen: set[tuple[str, int | None]] = set()
    out = []
    for c in citations:
        if (c.key, c.context) not in seen:
            seen.add((c.key, c.context))
            out.append(c)
    return out


@dataclass(frozen=True, slots=True)
class CitationResult:
    """Claim-level outcome of judging every (claim, cited context) pair."""

    n_claims: int
    cited: tuple[bool, ...]  # per claim
    correct: tuple[bool, ...]  # per claim: cited and supported by at least one context it cites


def combine(cmap: CitationMap, supported: dict[tuple[int, int], bool]) -> CitationResult:
    """Per-claim verdicts from the per-pair ones (``supported[(claim, context)]``, see ``pairs``).

    A cited claim is correct when at least one context it cites supports it; an unknown key
    supports nothing, so a claim citing only unknown keys is incorrectly cited."""
    cited = tuple(c.cited for c in cmap.claims)
    correct = tuple(
        c.cited and any(supported.get((i, ctx), False) for ctx in c.contexts) for i, c in enumerate(cmap.claims)
    )
    return CitationResult(len(cmap.claims), cited, correct)


def details(cmap: CitationMap, supported: dict[tuple[int, int], bool], result: CitationResult) -> ScoreDetails:
    """Explanations for the report: each cited claim with its citations and verdicts."""
    out: ScoreDetails = {
        "citation_claims": result.n_claims,
        "cited_claims": sum(result.cited),
        "citation_markers": cmap.markers,
        "citations": [
            {
                "claim": c.text,
                "citations": [_citation_check(cit, i, supported) for cit in c.citations],
                "correct": result.correct[i],
            }
            for i, c in enumerate(cmap.claims)
            if c.cited
        ],
    }
    unknown = cmap.unknown
    if unknown:
        out["unknown_citations"] = sorted({u.key for u in unknown})
    n_pairs = sum(len(c.citations) for c in cmap.claims)
    if n_pairs:
        good = sum(
            1 for i, c in enumerate(cmap.claims) for cit in c.citations
            if cit.context is not None and supported.get((i, cit.context), False)
        )
        out["citation_precision"] = round(good / n_pairs, 4)  # per citation, unknown keys included
    return out


def _citation_check(cit: Citation, claim: int, supported: dict[tuple[int, int], bool]) -> CitationCheck:
    """One citation of claim number ``claim`` for the details, its context as a 1-based rank."""
    if cit.context is None:
        check: CitationCheck = {"key": cit.key, "context": None, "supported": False}
    else:
        check = {"key": cit.key, "context": cit.context + 1, "supported": supported.get((claim, cit.context), False)}
    if cit.problem:
        check["problem"] = cit.problem
    return check


def metric_values(
    cmap: CitationMap, supported: dict[tuple[int, int], bool], into: ScoreDetails
) -> dict[str, float | None]:
    """Citation presence, correctness and coverage from the per-pair verdicts (both judges);
    their ``details`` are added to ``into``."""
    result = combine(cmap, supported)
    into.update(details(cmap, supported, result))
    cited_correct = [ok for ok, c in zip(result.correct, result.cited, strict=True) if c]
    return {
        sc.METRIC_CITATION_PRESENCE: formulas.citation_presence(result.n_claims, sum(result.cited)),
        sc.METRIC_CITATION_CORRECTNESS: formulas.citation_correctness(cited_correct),
        sc.METRIC_CITATION_COVERAGE: formulas.citation_coverage(result.n_claims, sum(result.correct)),
    }


__all__ = [
    "DEFAULT_CITATION_PATTERN", "Citation", "CitationMap", "CitationResult", "CitedClaim", "combine",
    "compile_pattern", "details", "metric_values", "parse_citations", "strip_markers",
]
