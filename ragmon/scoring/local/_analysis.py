"""What the local judge finds in a trace before any model is applied: claims, each claim's best
evidence among the context sentences (words, numbers, negations, names), and per-context
features. ``support`` runs the same claim checks against any other texts (offline metrics)."""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ..reader.model import Reader
from ..reader.verdicts import ClaimReading, readings, worth_reading
from ..reader.windows import claim_window, context_sentences, copies, copy_key, sentence_words, short_claim
from ..text import content_tokens, split_sentences, stem, words
from . import attribution
from . import model as local_model
from ._encoder import SentenceEncoder
from .claims import TextFacts, cut_long, facts, rarity, split_claims, structured_sentences
from .embedder import EMBEDDING_DIM, TokenStates
from .evidence import ClaimEvidence, check_claims, maxsim_per_sentence, soft_novel_counts, wh_match_per_sentence

MAX_CONTEXT_SENTENCE_WORDS = 60
MAX_CONTEXTS = 50  # bound the work per trace; later contexts are ignored (and said so in details)
MAX_CLAIMS = 40
_PLAIN = local_model.TraceShape()
BUDGET_CONTEXTS = 4  # sentences embedded per trace: max_sentences_per_context x this


@dataclass(frozen=True, slots=True)
class Analysis:
    """Everything the local judge found in one trace before combining it into scores."""

    claims: list[str]
    evidence: list[ClaimEvidence]
    context_features: list[local_model.ContextFeatures]
    question_vec: np.ndarray | None
    answer_vec: np.ndarray | None
    claim_vecs: np.ndarray
    n_contexts: int
    contexts_ignored: int
    question: str | None = None
    answer: str | None = None
    shape: local_model.TraceShape = _PLAIN
    # the trained reader's view of each claim (None: not read, the judge's verdict stands; empty without it)
    readings: tuple[ClaimReading | None, ...] = ()


class Analyser:
    """Splits, embeds (through ``encoder``) and checks claims; ``add_time(stage, seconds)``
    receives the split/embed/evidence timings."""

    def __init__(
        self, encoder: SentenceEncoder, max_sentences: int, add_time: Callable[[str, float], None],
        reader: Reader | None = None,
    ) -> None:
        self.encoder = encoder
        self.reader = reader
        self._max_sentences = max_sentences
        self._add_time = add_time

    def analyse(self, question: str | None, contexts: Sequence[str], answer: str | None) -> Analysis:
        """Claims, their evidence and the per-context features, before any model is applied."""
        t0 = time.perf_counter()
        question = (question or "").strip() or None
        answer = (answer or "").strip() or None
        used_contexts = [c for c in contexts[:MAX_CONTEXTS] if c and c.strip()]
        claims = split_claims(answer)[:MAX_CLAIMS] if answer else []
        split = self._split(claims, used_contexts, question)
        ctx_sentences, flat_sentences, sentence_facts = split.ctx_sentences, split.sentences, split.sentence_facts
        question_tokens, embed_mask = split.question_tokens, split.embed_mask
        t1 = time.perf_counter()

        focus = focus_question(question, ctx_sentences, sentence_facts) if question else None
        questions = [q for q in (question, focus) if q]
        emb = self.encoder.embed_all(questions, claims, flat_sentences, answer, embed_mask)
        question_vec = emb.question_vecs[0] if question else None
        focus_vec = emb.question_vecs[1] if focus else question_vec
        claim_vecs, sentence_vecs = emb.claim_vecs, emb.sentence_vecs
        t2 = time.perf_counter()

        # the question's words count as supported, as they do lexically
        support = [*emb.sentence_tokens, *emb.question_tokens[:1]]
        evidence = check_claims(
            claims, split.claim_facts, split.claim_tokens, claim_vecs, flat_sentences, sentence_facts,
            sentence_vecs, _bigrams(flat_sentences), question_tokens,
            soft_novel=soft_novel_counts(emb.claim_tokens, support),
        )
        token_scores = (
            np.stack([maxsim_per_sentence(emb.question_tokens[0], emb.sentence_tokens),
                      wh_match_per_sentence(emb.question_tokens[0], emb.sentence_tokens)])
            if question else np.zeros((2, 0))
        )
        ctx_features = context_features(
            question, question_vec, focus_vec, ctx_sentences, sentence_facts, sentence_vecs, embed_mask,
            token_scores,
        )
        t3 = time.perf_counter()
        decided = [e.about_sources or e.contradiction() is not None for e in evidence]
        claim_readings = self.read(claims, used_contexts, decided)
        t4 = time.perf_counter()
        self._add_time("split", t1 - t0)
        self._add_time("embed", t2 - t1)
        self._add_time("evidence", t3 - t2)
        self._add_time("read", t4 - t3)
        return Analysis(
            claims=claims,
            evidence=evidence,
            context_features=ctx_features,
            question_vec=question_vec,
            answer_vec=emb.answer_vec,
            claim_vecs=claim_vecs,
            n_contexts=len(used_contexts),
            contexts_ignored=max(0, len(contexts) - MAX_CONTEXTS),
            question=question,
            answer=answer,
            shape=local_model.TraceShape(
                has_question=question is not None,
                structured_share=(sum(structured_sentences(c) is not None for c in used_contexts) / len(used_contexts)
                                  if used_contexts else 0.0),
                context_words=sum(len(c.split()) for c in used_contexts),
            ),
            readings=tuple(claim_readings),
        )

    def read(self, claims: Sequence[str], sources: Sequence[str],
             decided: Sequence[bool] | None = None) -> list[ClaimReading | None]:
        """The reader's probabilities for each claim worth reading (``verdicts.worth_reading``; ``decided``:
        the claims the lexical checks decide) against its premise window of ``sources``' sentences: one
        model run per claim read, never per sentence pair; None for a claim not read."""
        if self.reader is None or not claims or not sources:
            return []
        sentences = context_sentences(sources)
        # the claim without its attribution and citation markers ("(Passage 7)" is not a fact the
        # window must hold; the training pairs carried them, the next training drops them too)
        cores = [attribution.core(c) or c for c in claims]
        held, keys = sentence_words(sentences), [copy_key(s) for s in sentences]
        windows = [claim_window(c, sentences, words=held) for c in cores]
        todo = [i for i, w in enumerate(windows)
                if worth_reading(w, bool(decided and decided[i]), copies(cores[i], keys))]
        probs = self.reader.read([(windows[i].text, short_claim(cores[i])) for i in todo])
        out: list[ClaimReading | None] = [None] * len(claims)
        for i, reading in zip(todo, readings(probs, [windows[i] for i in todo]), strict=True):
            out[i] = reading
        return out

    def support(
        self, claims: list[str], sources: Sequence[str], question: str | None
    ) -> tuple[list[ClaimEvidence], list[bool], np.ndarray]:
        """Evidence for ``claims`` against the ``sources``' sentences, the supported verdict per
        claim, and the claims' vectors: the same checks ``analyse`` makes for faithfulness."""
        if not claims:
            return [], [], np.zeros((0, EMBEDDING_DIM), dtype=np.float32)
        question = (question or "").strip() or None
        split = self._split(claims, sources, question)
        flat = split.sentences
        cached = self.encoder.kept_hits(flat, split.embed_mask)
        to_embed = list(dict.fromkeys(s for s, hit in zip(flat, cached, strict=True) if hit is None))
        extra = [*claims, *([question] if question else [])]
        vecs, states = self.encoder.encode([*to_embed, *extra])
        n_new = len(to_embed)
        lookup = {s: (vecs[i], states[i]) for i, s in enumerate(to_embed)}
        entries = [hit if hit is not None else lookup[s] for s, hit in zip(flat, cached, strict=True)]
        sentence_vecs = np.array([e[0] for e in entries], dtype=np.float32).reshape(len(flat), EMBEDDING_DIM)
        claim_vecs = vecs[n_new : n_new + len(claims)]
        claim_states = states[n_new : n_new + len(claims)]
        support: list[TokenStates] = [e[1] for e in entries] + ([states[n_new + len(claims)]] if question else [])
        evidence = check_claims(
            claims, split.claim_facts, split.claim_tokens, claim_vecs, flat, split.sentence_facts, sentence_vecs,
            _bigrams(flat), split.question_tokens, soft_novel=soft_novel_counts(claim_states, support),
        )
        verdicts = [
            local_model.claim_support(e) >= local_model.FAITHFULNESS_THRESHOLD and not e.contradiction()
            for e in evidence
        ]
        return evidence, verdicts, claim_vecs

    def _split(self, claims: list[str], sources: Sequence[str], question: str | None) -> _Split:
        ctx_sentences = _sentences(sources)
        flat = [s for sents in ctx_sentences for s in sents]
        sentence_facts = [facts(s) for s in flat]
        claim_facts = [facts(c) for c in claims]
        question_tokens = facts(question).tokens if question else frozenset()
        mask = sentences_to_embed(ctx_sentences, sentence_facts, question_tokens, claim_facts, self._max_sentences)
        return _Split(
            ctx_sentences, flat, sentence_facts, [content_tokens(c) for c in claims], claim_facts, question_tokens, mask
        )


@dataclass(frozen=True, slots=True)
class _Split:
    """Claims and source texts in pieces: sentences, words and facts, and which sentences to embed."""

    ctx_sentences: list[list[str]]  # per source text
    sentences: list[str]  # flattened
    sentence_facts: list[TextFacts]
    claim_tokens: list[list[str]]
    claim_facts: list[TextFacts]
    question_tokens: frozenset[str]
    embed_mask: np.ndarray


def _sentences(texts: Sequence[str]) -> list[list[str]]:
    """Each text's sentences, long ones cut (a text without a sentence stands for itself)."""
    out: list[list[str]] = []
    for text in texts:
        # a JSON context (a record, an API response) is read as "key path: value" sentences
        pieces = structured_sentences(text)
        if pieces is None:
            pieces = split_sentences(text)
        sents = [p for s in pieces for p in cut_long(s, MAX_CONTEXT_SENTENCE_WORDS)]
        out.append(sents or [text[:1000]])
    return out


def _bigrams(sentences: Sequence[str]) -> set[tuple[str, str]]:
    out: set[tuple[str, str]] = set()
    for s in sentences:
        out.update(itertools.pairwise(content_tokens(s)))
    return out


def focus_question(
    question: str, ctx_sentences: Sequence[Sequence[str]], sentence_facts: Sequence[TextFacts]
) -> str | None:
    """The question without its topic: words found in most contexts ("Cougar Town" in "where is
    Cougar Town filmed") say little about *which* context answers it; "where ... filmed" does.
    None when no word qualifies (fewer than 2 contexts, or the topic is the whole question)."""
    if len(ctx_sentences) < 2:
        return None
    context_tokens: list[set[str]] = []
    start = 0
    for sents in ctx_sentences:
        toks: set[str] = set()
        for f in sentence_facts[start : start + len(sents)]:
            toks |= f.tokens
        context_tokens.append(toks)
        start += len(sents)
    common = {t for t in facts(question).tokens if sum(t in c for c in context_tokens) * 2 > len(context_tokens)}
    if not common:
        return None
    kept = [w for w in words(question) if stem(w.lower().replace("’", "'")) not in common]
    if len(content_tokens(" ".join(kept))) == 0:
        return None
    return " ".join(kept)


def sentences_to_embed(
    ctx_sentences: Sequence[Sequence[str]],
    sentence_facts: Sequence[TextFacts],
    question_tokens: frozenset[str],
    claim_facts: Sequence[TextFacts],
    max_sentences: int,
) -> np.ndarray:
    """Which context sentences to embed: in long contexts, only the ``max_sentences`` that
    share the most (rarity-weighted) words with the question or the answer, and in any context
    none that shares no word with either (but at least one sentence per context, its first
    when none shares a word: context relevance reads each context's best sentence). Embedding
    is most of the judge's time, and a sentence sharing no word with the question or the
    answer is almost never the best evidence or the most relevant one; its words still count
    for coverage. ``max_sentences`` <= 0: embed every sentence."""
    mask = np.ones(len(sentence_facts), dtype=bool)
    if max_sentences <= 0:
        return mask
    wanted = set(question_tokens)
    for f in claim_facts:
        wanted |= f.tokens
    if not wanted:
        return mask
    # the budget is per trace (max_sentences x 4 contexts): a trace with one long context (a
    # document to summarise, a JSON record) gets all of it, not 4 of its sentences
    per_context = max(max_sentences, (max_sentences * BUDGET_CONTEXTS) // max(1, len(ctx_sentences)))
    start = 0
    for sents in ctx_sentences:
        stop = start + len(sents)
        ranked = sorted(
            ((math.fsum(rarity(t) for t in sentence_facts[j].tokens & wanted), -j) for j in range(start, stop)),
            reverse=True,
        )
        keep = {-j for score, j in ranked[:per_context] if score > 0} or {-ranked[0][1]}
        mask[start:stop] = [j in keep for j in range(start, stop)]
        start = stop
    return mask


def context_features(
    question: str | None,
    question_vec: np.ndarray | None,
    focus_vec: np.ndarray | None,
    ctx_sentences: Sequence[Sequence[str]],
    sentence_facts: Sequence[TextFacts],
    sentence_vecs: np.ndarray,
    embedded: np.ndarray,
    token_scores: np.ndarray,
) -> list[local_model.ContextFeatures]:
    """Per-context features; ``token_scores`` has one row per token-level score (MaxSim,
    wh-word match) and one column per sentence."""
    if question is None or question_vec is None or not ctx_sentences:
        return []
    sims = sentence_vecs @ question_vec if len(sentence_vecs) else np.zeros(0)
    sims = np.where(embedded, sims, -1.0)  # a sentence left out is never the best one
    focus_sims = sentence_vecs @ focus_vec if focus_vec is not None and len(sentence_vecs) else sims
    focus_sims = np.where(embedded, focus_sims, -1.0)
    # The question minus what all contexts share (their centroid): what is specific to it.
    centroid = sentence_vecs[embedded].mean(axis=0) if embedded.any() else np.zeros_like(question_vec)
    norm = float(np.linalg.norm(centroid))
    specific = question_vec - (question_vec @ centroid) / (norm * norm) * centroid if norm > 0 else question_vec
    specific_norm = float(np.linalg.norm(specific))
    resid = sentence_vecs @ specific / specific_norm if specific_norm > 1e-6 else sims
    token_best = np.where(embedded, token_scores, -1.0)  # a sentence left out is never the best one
    evidence = []
    start = 0
    for sents in ctx_sentences:
        stop = start + len(sents)
        own = sentence_facts[start:stop]
        evidence.append(
            local_model.ContextEvidence(
                best_cos=float(sims[start:stop].max()) if stop > start else 0.0,
                best_focus_cos=float(focus_sims[start:stop].max()) if stop > start else 0.0,
                best_specific_cos=(
                    float(np.where(embedded, resid, -1.0)[start:stop].max()) if stop > start else 0.0
                ),
                best_maxsim=float(token_best[0, start:stop].max()) if stop > start else 0.0,
                best_wh_match=float(token_best[1, start:stop].max()) if stop > start else 0.0,
                tokens=frozenset().union(*(f.tokens for f in own)),
                numbers=frozenset().union(*(f.numbers for f in own)),
                entities=frozenset().union(*(f.entities for f in own)),
                sentences=tuple(sents),
            )
        )
        start = stop
    return local_model.context_features(question, facts(question), evidence)
