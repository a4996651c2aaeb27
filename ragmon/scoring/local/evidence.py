"""Claim-level evidence checks: for every claim of an answer, find the context sentences that
support it best (embedding cosine + word overlap) and check what an embedding cannot see —
numbers, negations and names — against that evidence. Pure numpy; no model calls here.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..text import stem, words
from .attribution import citation_numbers, core
from .claims import TextFacts, content_pieces, facts, question_word_pieces, rarity, strict_numbers
from .conflicts import conflict, slots
from .embedder import TokenStates

TOP_K_EVIDENCE = 3
NEGATION_MIN_COS = 0.6  # a flipped negation counts only against a sentence about the same thing
PARAPHRASE_OVERLAP = 0.6
PARAPHRASE_REVERSE = 0.3
# A claim token whose contextual MiniLM vector has no context token closer than this counts as
# new information even when its word occurs (BERTScore-style soft coverage; also catches
# paraphrase the other way round: a synonym of a context word is *not* novel).
SOFT_MATCH_MIN_COS = 0.6
_ABOUT_SOURCES = re.compile(
    r"\b(passages?|contexts?|provided|mention(s|ed)?|documents?|sources?|information)\b", re.IGNORECASE
)  # evidence window: the k context sentences closest to the claim


@dataclass(frozen=True, slots=True)
class ClaimEvidence:
    """The evidence found for one claim and the checks made against it."""

    claim: str
    evidence: str  # the best-matching context sentence
    max_cos: float  # best cosine between the claim and any context sentence
    coverage: float  # share of the claim's content words found anywhere in the contexts
    local_coverage: float  # share found in the evidence window (top-k sentences)
    bigram_coverage: float  # share of the claim's content-word bigrams found in the contexts
    missing_numbers: tuple[str, ...]  # numbers in the claim absent from all contexts
    local_missing_numbers: tuple[str, ...]  # numbers absent from the evidence window
    missing_entities: tuple[str, ...]  # names in the claim absent from all contexts
    negation_mismatch: bool  # the claim negates and its evidence does not, or vice versa
    n_tokens: int  # content words in the claim
    novel_tokens: int = 0  # content words of the claim found nowhere in the contexts or question
    novel_run: int = 0  # longest run of consecutive such words (new information comes in runs)
    rare_coverage: float = 1.0  # coverage with each word weighted by its rarity
    rare_novel: float = 0.0  # sum of the rarity of the novel words
    missing_digits: tuple[str, ...] = ()  # numbers written in digits absent from all contexts
    about_sources: bool = False  # a meta-statement about the passages ("the passages do not say"), not
    # a claim with an attribution ("Based on the passages, X" claims X: attribution.py)
    best_overlap: float = 0.0  # share of the claim's words in its best evidence sentence
    best_reverse_overlap: float = 0.0  # share of that sentence's words in the claim
    claim_negated: bool = False  # the claim itself carries the negation
    soft_novel: int = 0  # content tokens with no close token (in meaning, in context) in the contexts
    conflict: str | None = None  # a changed fact against the aligned sentence ("name: Team ≠ Business")
    window_negated: bool = False  # a negation in any of the claim's closest context sentences

    @property
    def paraphrase(self) -> bool:
        """The claim restates its best evidence sentence closely (so a difference is a change)."""
        return self.best_overlap >= PARAPHRASE_OVERLAP and self.best_reverse_overlap >= PARAPHRASE_REVERSE

    @property
    def close_paraphrase(self) -> bool:
        """Claim and evidence sentence say nearly the same words (a negation flip shows)."""
        return self.best_overlap >= 0.7 and self.best_reverse_overlap >= 0.6

    def entity_names(self) -> list[str]:
        """The missing names as written in the claim."""
        out: list[str] = []
        for w in words(self.claim):
            name = re.sub(r"['’]s$", "", w)
            if stem(w.lower()) in self.missing_entities and name not in out:
                out.append(name)
        return out or list(self.missing_entities)

    def contradiction(self) -> str | None:
        """A hard contradiction an explicit check can name, or None.

        Digits absent from every context; a negation flipped against a closely matching
        context sentence; a number, month, unit or name changed against the sentence the claim
        restates while no context sentence agrees (``conflicts.py``); a name absent from the
        contexts in an otherwise supported claim.
        """
        if self.about_sources:
            return None
        if self.missing_digits:
            return "number(s) not in contexts: " + ", ".join(self.missing_digits[:3])
        if self.negation_mismatch and self.close_paraphrase and self.max_cos >= NEGATION_MIN_COS and (
            self.claim_negated or self.best_reverse_overlap >= 0.85  # a claim dropping a negated clause is fine
        ):
            return "negation differs from the closest context sentence"
        if self.conflict:
            return self.conflict
        if self.missing_entities and self.paraphrase:
            return "name(s) not in contexts: " + ", ".join(self.entity_names()[:3])
        return None

    def reason(self) -> str:
        """A short human explanation of the weakest point of this claim."""
        hard = self.contradiction()
        if hard:
            return hard
        if self.missing_numbers:
            return "number(s) not in contexts: " + ", ".join(self.missing_numbers[:3])
        if self.missing_entities:
            return "name(s) not in contexts: " + ", ".join(self.entity_names()[:3])
        if self.local_missing_numbers:
            return "number(s) not near the supporting sentence: " + ", ".join(self.local_missing_numbers[:3])
        if self.coverage < 0.5:
            return f"only {self.coverage:.0%} of its words appear in the contexts"
        return f"closest context sentence has cosine {self.max_cos:.2f}"


def _bigrams(tokens: Sequence[str]) -> set[tuple[str, str]]:
    return {(a, b) for a, b in itertools.pairwise(tokens)}


def check_claims(
    claims: Sequence[str],
    claim_facts: Sequence[TextFacts],
    claim_token_lists: Sequence[Sequence[str]],
    claim_vecs: np.ndarray,
    sentences: Sequence[str],
    sentence_facts: Sequence[TextFacts],
    sentence_vecs: np.ndarray,
    context_bigrams: set[tuple[str, str]],
    question_tokens: frozenset[str] = frozenset(),
    soft_novel: Sequence[int] | None = None,
) -> list[ClaimEvidence]:
    """Evidence for each claim against all context sentences (vectors are unit-normalised).

    Words of the question count as supported: restating the question is not a hallucination.
    ``soft_novel`` is ``soft_novel_counts`` for the claims (token level), when it was computed.
    """
    if not claims:
        return []
    all_tokens: set[str] = set(question_tokens)
    all_numbers: set[str] = set()
    for f in sentence_facts:
        all_tokens |= f.tokens
        all_numbers |= f.numbers
    # (claims, sentences) cosine matrix: the vectors are unit-normalised
    sims = _cosines(claim_vecs, sentence_vecs) if len(sentences) else np.zeros((len(claims), 0), np.float32)
    out: list[ClaimEvidence] = []
    sentence_slots = [slots(s, f) for s, f in zip(sentences, sentence_facts, strict=True)]
    known = frozenset(all_tokens)
    for i, claim in enumerate(claims):
        cf = claim_facts[i]
        cites = citation_numbers(claim)
        if sims.shape[1]:
            order = np.argsort(-sims[i])[:TOP_K_EVIDENCE]
            best = int(order[0])
            max_cos = float(sims[i, best])
            window_tokens: set[str] = set()
            window_numbers: set[str] = set()
            for j in order:
                window_tokens |= sentence_facts[int(j)].tokens
                window_numbers |= sentence_facts[int(j)].numbers
            evidence = sentences[best]
            evidence_neg = sentence_facts[best].negations
            best_tokens = sentence_facts[best].tokens
            # what the claim says, its attribution and citations aside ("Passage 4" names a source,
            # not a quantity or a name to compare)
            said = core(claim)
            claim_slots = slots(claim, cf) if said == claim else slots(said, facts(said))
            if cites:
                claim_slots = dataclasses.replace(claim_slots, numbers=claim_slots.numbers - cites)
            changed = conflict(said, claim_slots, evidence, sentence_slots[best], sentence_slots,
                               frozenset(window_tokens), known)
            window_negated = any(sentence_facts[int(j)].negations for j in order)
        else:
            changed, window_negated = None, False
            max_cos, evidence, evidence_neg = 0.0, "", 0
            best_tokens = frozenset()
            window_tokens, window_numbers = set(), set()
        n_tok = len(cf.tokens)
        coverage = len(cf.tokens & all_tokens) / n_tok if n_tok else 1.0
        local_cov = len(cf.tokens & window_tokens) / n_tok if n_tok else 1.0
        grams = _bigrams(claim_token_lists[i])
        bigram_cov = len(grams & context_bigrams) / len(grams) if grams else coverage
        weights = {t: rarity(t) for t in cf.tokens}
        total_weight = math.fsum(weights.values())
        novel = cf.tokens - all_tokens
        rare_novel = math.fsum(weights[t] for t in novel)
        run = longest = 0
        for tok in claim_token_lists[i]:
            run = run + 1 if tok not in all_tokens else 0
            longest = max(longest, run)
        out.append(
            ClaimEvidence(
                claim=claim,
                evidence=evidence,
                max_cos=max_cos,
                coverage=coverage,
                local_coverage=local_cov,
                bigram_coverage=bigram_cov,
                missing_numbers=tuple(sorted(cf.numbers - all_numbers)),
                local_missing_numbers=tuple(sorted(cf.numbers - window_numbers)),
                missing_entities=tuple(sorted(cf.entities - all_tokens)),
                negation_mismatch=(cf.negations > 0) != (evidence_neg > 0),
                claim_negated=cf.negations > 0,
                n_tokens=n_tok,
                novel_tokens=len(novel),
                novel_run=longest,
                rare_coverage=1.0 - rare_novel / total_weight if total_weight else 1.0,
                rare_novel=rare_novel,
                missing_digits=tuple(sorted(strict_numbers(claim) - cites - all_numbers)),
                about_sources=bool(_ABOUT_SOURCES.search(core(claim))),
                best_overlap=len(cf.tokens & best_tokens) / n_tok if n_tok else 0.0,
                best_reverse_overlap=len(cf.tokens & best_tokens) / len(best_tokens) if best_tokens else 0.0,
                soft_novel=soft_novel[i] if soft_novel is not None else 0,
                conflict=changed,
                window_negated=window_negated,
            )
        )
    return out


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a @ b.T for unit rows, single-threaded on purpose: token matrices are just big enough for
    OpenBLAS to wake its thread pool, whose spinning threads then slow every call (and the
    ONNX model) several-fold on a small shared machine; einsum's own loop is ~1 ms here."""
    out: np.ndarray = np.einsum("id,jd->ij", a, b)
    return out


def _content(states: TokenStates) -> np.ndarray:
    mask = content_pieces()
    keep = mask[np.minimum(states.ids, len(mask) - 1)]
    out: np.ndarray = states.vectors[keep]
    return out


def soft_novel_counts(claims: Sequence[TokenStates], support: Sequence[TokenStates]) -> list[int]:
    """Per claim: how many of its content tokens have no context token within
    ``SOFT_MATCH_MIN_COS`` (cosine of contextual token vectors, BERTScore-style)."""
    pool = [_content(s) for s in support]
    matrix = np.concatenate([p for p in pool if len(p)] or [np.zeros((0, 1), np.float16)]).astype(np.float32)
    out = []
    for c in claims:
        own = _content(c).astype(np.float32)
        if not len(own):
            out.append(0)
        elif not len(matrix):
            out.append(len(own))
        else:
            out.append(int((_cosines(own, matrix).max(axis=1) < SOFT_MATCH_MIN_COS).sum()))
    return out


def maxsim_per_sentence(question: TokenStates, sentences: Sequence[TokenStates]) -> np.ndarray:
    """ColBERT-style MaxSim of the question against each sentence: the mean over the question's
    tokens of their best cosine with a token of the sentence (-1 for a sentence without tokens).
    All tokens count here: "when", "how many" carry what the question asks for."""
    out = np.full(len(sentences), -1.0)
    q = question.vectors.astype(np.float32)
    sizes = [len(s.vectors) for s in sentences]
    if not len(q) or not sum(sizes):
        return out
    sims = _cosines(q, np.concatenate([s.vectors for s in sentences if len(s.vectors)]).astype(np.float32))
    start = 0
    for j, n in enumerate(sizes):
        if n:
            out[j] = float(sims[:, start : start + n].max(axis=1).mean())
            start += n
    return out


def wh_match_per_sentence(question: TokenStates, sentences: Sequence[TokenStates]) -> np.ndarray:
    """How well the question's wh-words ("when", "how many", "who") find a token of the sentence
    that the question does not contain: the best cosine between their contextual vectors and the
    sentence's new tokens. MiniLM's "when" sits near dates, "how many" near quantities — an
    answer-type check in embedding space. 0 when the question has no such word or the sentence
    only repeats the question; -1 for a sentence without tokens."""
    out = np.full(len(sentences), -1.0)
    wh_ids = question_word_pieces()
    wh = np.array([int(i) in wh_ids for i in question.ids], dtype=bool)
    q_ids = {int(i) for i in question.ids}
    wh_vecs = question.vectors[wh].astype(np.float32)
    for j, s in enumerate(sentences):
        if not len(s.ids):
            continue
        new = np.array([int(i) not in q_ids for i in s.ids], dtype=bool)
        if not len(wh_vecs) or not new.any():
            out[j] = 0.0
            continue
        out[j] = float(_cosines(wh_vecs, s.vectors[new].astype(np.float32)).max())
    return out
