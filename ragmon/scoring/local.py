"""The offline local judge: MiniLM sentence embeddings plus claim-level evidence checks.

No network, no GPU, no LLM. For each trace it

1. splits the answer into claims and each context into sentences (``claims``),
2. embeds the question, the claims and the context sentences in one batch (``embedder``),
3. finds each claim's best evidence and checks words, numbers, negations and names
   against it (``evidence``),
4. combines those interpretable features with coefficients fitted on human-labelled data
   (``local_model``; see docs/judges.md for the method, the held-out numbers and the blind spots).

For ``ragmon eval`` (``score_for_eval``) the same per-claim support check is run on other pairs:
reference claims against the contexts (context recall), answer claims against the reference and
reference claims against the answer (the TP/FP/FN of answer correctness, blended with the MiniLM
cosine of answer and reference), and each cited claim against the context it cites (citation
correctness; markers found by ``citations``); abstention is recognised by ``abstention``.

What it cannot do is read: a paraphrase that reverses the meaning without a negation word,
a wrong causal link between two supported facts, or a claim that is true in the world but not
stated in the contexts all look the same to it as faithful text. See docs/judges.md.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import semconv as sc
from ..types import RagTrace, Scores
from . import abstention, citations, formulas, local_model
from .claims import (
    TextFacts,
    content_tokens,
    cut_long,
    facts,
    rarity,
    split_claims,
    split_sentences,
    stem,
    words,
)
from .embedder import EMBEDDING_DIM, NO_TOKENS, Embedder, TokenStates
from .evidence import ClaimEvidence, check_claims, maxsim_per_sentence, soft_novel_counts, wh_match_per_sentence
from .formulas import context_precision as rank_weighted_precision
from .judge import CIRCUIT_CLOSED, EvalRequest

MAX_CONTEXT_SENTENCE_WORDS = 60
MAX_CONTEXTS = 50  # bound the work per trace; later contexts are ignored (and said so in details)
MAX_CLAIMS = 40
_REASON_CHARS = 160
STAGES = ("split", "embed", "evidence", "combine")


def _short(text: str, limit: int = _REASON_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _mean_unit(vectors: np.ndarray) -> np.ndarray:
    """The normalised mean of unit vectors: a text's vector from its claims' (as ``answer_vec``)."""
    if not len(vectors):
        return np.zeros(EMBEDDING_DIM, dtype=np.float32)
    mean: np.ndarray = np.asarray(vectors, dtype=np.float32).mean(axis=0)
    out: np.ndarray = mean / max(float(np.linalg.norm(mean)), 1e-12)
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


class _VectorCache:
    """A bounded LRU of sentence -> (embedding, token states): retrieved documents recur across
    requests. Bounded by entries and by bytes (token states are ~20x a sentence vector)."""

    def __init__(self, size: int, max_bytes: int = 64 << 20) -> None:
        self._size = size
        self._max_bytes = max_bytes
        self._bytes = 0
        self._data: OrderedDict[str, _Cached] = OrderedDict()
        self._lock = threading.Lock()

    def get_many(self, texts: Sequence[str]) -> list[_Cached | None]:
        if self._size <= 0:
            return [None] * len(texts)
        with self._lock:
            out: list[_Cached | None] = []
            for t in texts:
                hit = self._data.get(t)
                if hit is not None:
                    self._data.move_to_end(t)
                out.append(hit)
            return out

    def put_many(self, texts: Sequence[str], vecs: np.ndarray, states: Sequence[TokenStates]) -> None:
        if self._size <= 0:
            return
        with self._lock:
            for t, v, st in zip(texts, vecs, states, strict=True):
                old = self._data.pop(t, None)
                if old is not None:
                    self._bytes -= _nbytes(old)
                entry = (v, st)
                self._data[t] = entry
                self._bytes += _nbytes(entry)
            while self._data and (len(self._data) > self._size or self._bytes > self._max_bytes):
                _, dropped = self._data.popitem(last=False)
                self._bytes -= _nbytes(dropped)


_Cached = tuple[np.ndarray, TokenStates]


def _nbytes(entry: _Cached) -> int:
    vec, st = entry
    return int(vec.nbytes + st.vectors.nbytes + st.ids.nbytes) + 200  # + key and object overhead


_embedders: dict[tuple[str | None, str | None, int], Embedder] = {}
_embedders_lock = threading.Lock()


def _embedder_for(model_path: str | None, sha256: str | None, threads: int) -> Embedder:
    # Small batches pad less: sentences vary in length and attention cost grows with padding.
    key = (model_path, sha256, threads)
    with _embedders_lock:
        if key not in _embedders:
            _embedders[key] = Embedder(model_path, sha256, threads=threads, batch_size=8)
        return _embedders[key]


@dataclass(frozen=True, slots=True)
class _Embedded:
    """What one trace's embedding pass produced (vectors are unit-normalised)."""

    question_vecs: np.ndarray  # the question, then its topic-free version when there is one
    claim_vecs: np.ndarray
    sentence_vecs: np.ndarray  # zeros for sentences left out (see _sentences_to_embed)
    answer_vec: np.ndarray | None
    question_tokens: list[TokenStates]
    claim_tokens: list[TokenStates]
    sentence_tokens: list[TokenStates]  # empty for sentences left out


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


class LocalJudge:
    """Scores faithfulness, answer relevancy and context precision offline (see module doc);
    ``score_for_eval`` adds the reference-based, abstention and citation metrics."""

    name = "local"
    bounds_own_duration = False  # CPU work on a thread: the agent's outer timeout applies
    circuit_state = CIRCUIT_CLOSED  # no remote endpoint, no breaker

    def __init__(
        self,
        model_path: str | None = None,
        sha256: str | None = None,
        *,
        threads: int = 1,
        cache_size: int = 8192,
        max_sentences_per_context: int = 4,
    ) -> None:
        # Raises ModelError (missing file, checksum mismatch) at construction: fail fast.
        self._embedder = _embedder_for(model_path, sha256, threads)
        self._cache = _VectorCache(cache_size)
        self._max_sentences = max_sentences_per_context
        self._stage_lock = threading.Lock()
        self.stage_seconds: dict[str, float] = dict.fromkeys(STAGES, 0.0)

    async def score(self, trace: RagTrace) -> Scores:
        return await asyncio.to_thread(self.score_sync, trace.question, trace.contexts, trace.answer)

    async def aclose(self) -> None:
        return None

    async def score_for_eval(self, trace: RagTrace, request: EvalRequest) -> Scores:
        """``score`` plus the offline metrics ``request`` enables (the ``EvalJudge`` protocol)."""
        return await asyncio.to_thread(self.score_eval_sync, trace, request)

    # --- the work -------------------------------------------------------------------------
    def score_sync(self, question: str | None, contexts: Sequence[str], answer: str | None) -> Scores:
        analysis = self.analyse(question, contexts, answer)
        t0 = time.perf_counter()
        details: dict[str, Any] = {}
        faithfulness = self._faithfulness(analysis.evidence, analysis.n_contexts > 0, details)
        relevancy = self._answer_relevancy(
            analysis.question_vec, analysis.answer_vec, analysis.claim_vecs, details
        )
        precision = self._context_precision(analysis.context_features, details)
        if analysis.contexts_ignored:
            details["contexts_ignored"] = analysis.contexts_ignored
        details["reason"] = self._reason(faithfulness, relevancy, precision, details)
        self._add_time("combine", time.perf_counter() - t0)
        return Scores(
            {
                sc.METRIC_FAITHFULNESS: faithfulness,
                sc.METRIC_ANSWER_RELEVANCY: relevancy,
                sc.METRIC_CONTEXT_PRECISION: precision,
            },
            judge=self.name,
            details=details,
        )

    def score_eval_sync(self, trace: RagTrace, request: EvalRequest) -> Scores:
        """The reference-free scores and the offline metrics of ``request`` (see ``EvalRequest``).

        With a citation pattern the markers are removed from the answer before anything is
        judged (a ``[1]`` is not a claim's number). Claim support everywhere is the per-claim
        model the faithfulness score is built from: a claim counts as supported by a text when
        ``local_model.claim_support`` >= 0.5 and no explicit check finds a contradiction.
        """
        question, contexts, answer = trace.question, trace.contexts, trace.answer
        cmap = None
        if request.citation_pattern is not None:
            cmap = citations.parse_citations(answer, trace.documents, request.citation_pattern)
            if cmap.markers:
                answer = cmap.stripped_answer
        base = self.score_sync(question, contexts, answer)
        values: dict[str, float | None] = dict(base.values)
        details: dict[str, Any] = dict(base.details)
        t0 = time.perf_counter()
        check = abstention.check(trace.answer)
        details["abstained"] = check.abstained
        if check.phrase:
            details["abstention_phrase"] = check.phrase
        if request.expect_abstention:
            values[sc.METRIC_ABSTENTION] = formulas.abstention(check.abstained)
        if request.reference is not None:
            recall, correctness = self._reference_metrics(question, contexts, answer, request.reference, details)
            values[sc.METRIC_CONTEXT_RECALL] = recall
            values[sc.METRIC_ANSWER_CORRECTNESS] = correctness
        if cmap is not None:
            values.update(self._citation_metrics(question, contexts, cmap, details))
        self._add_time("combine", time.perf_counter() - t0)
        return Scores(values, judge=self.name, details=details)

    def _reference_metrics(
        self, question: str | None, contexts: Sequence[str], answer: str | None, reference: str,
        details: dict[str, Any],
    ) -> tuple[float | None, float | None]:
        """Context recall and answer correctness against the reference answer."""
        ref_claims = split_claims(reference)[:MAX_CLAIMS]
        if not ref_claims:
            details["reference_reason"] = "the reference answer has no claims"
            return None, None
        used = [c for c in contexts[:MAX_CONTEXTS] if c and c.strip()]
        # context recall: every reference claim against the retrieved contexts
        if used:
            ref_ev, ref_supported, ref_vecs = self._support(ref_claims, used, question)
        else:
            ref_ev, ref_supported = [], [False] * len(ref_claims)
            ref_vecs = self._encode(ref_claims)[0]
        recall = formulas.context_recall(ref_supported)
        details["reference_claims"] = [
            {"claim": _short(c), "attributed": bool(v)} for c, v in zip(ref_claims, ref_supported, strict=True)
        ]
        missing = [i for i, v in enumerate(ref_supported) if not v]
        if missing:
            why = ref_ev[missing[0]].reason() if ref_ev else "no contexts"
            first = _short(ref_claims[missing[0]])
            details["context_recall_reason"] = f"reference claim not in the contexts: {first!r}"
            details["context_recall_evidence"] = why
        # answer correctness: answer claims vs reference (TP/FP) and reference claims vs answer (FN)
        answer_claims = split_claims(answer)[:MAX_CLAIMS] if answer and answer.strip() else []
        if answer_claims:
            _, in_reference, answer_vecs = self._support(answer_claims, [reference], question)
            # "I don't know" is not a fact the reference states (RAGAS would count it as an FP)
            in_reference = [v and abstention.refusal_phrase(c) is None for c, v in zip(answer_claims, in_reference,
                                                                                         strict=True)]
            _, in_answer, _ = self._support(ref_claims, [answer or ""], question)
        else:
            in_reference, in_answer, answer_vecs = [], [False] * len(ref_claims), np.zeros((0, EMBEDDING_DIM))
        tp = sum(in_reference)
        fp = len(in_reference) - tp
        fn = sum(1 for v in in_answer if not v)
        similarity = formulas.cosine(_mean_unit(answer_vecs), _mean_unit(ref_vecs)) if answer_claims else 0.0
        correctness = formulas.answer_correctness(tp, fp, fn, similarity)
        details["answer_correctness_counts"] = {"tp": tp, "fp": fp, "fn": fn}
        details["answer_reference_similarity"] = round(similarity, 3)
        wrong = [c for c, v in zip(answer_claims, in_reference, strict=True) if not v]
        if wrong:
            details["claims_not_in_reference"] = [_short(c) for c in wrong[:5]]
        absent = [c for c, v in zip(ref_claims, in_answer, strict=True) if not v]
        if absent:
            details["reference_claims_not_in_answer"] = [_short(c) for c in absent[:5]]
        return recall, correctness

    def _citation_metrics(
        self, question: str | None, contexts: Sequence[str], cmap: citations.CitationMap, details: dict[str, Any]
    ) -> dict[str, float | None]:
        """Presence, pointing correctness and coverage: each cited claim against each context it cites."""
        by_context: dict[int, list[int]] = {}
        for claim_index, ctx in cmap.pairs():
            by_context.setdefault(ctx, []).append(claim_index)
        supported: dict[tuple[int, int], bool] = {}
        for ctx, claim_indexes in by_context.items():
            text = contexts[ctx] if ctx < len(contexts) else ""
            if not text.strip():
                verdicts = [False] * len(claim_indexes)
            else:
                _, verdicts, _ = self._support([cmap.claims[i].text for i in claim_indexes], [text], question)
            for i, v in zip(claim_indexes, verdicts, strict=True):
                supported[(i, ctx)] = bool(v)
        result = citations.combine(cmap, supported)
        details.update(citations.details(cmap, supported, result))
        cited_correct = [ok for ok, c in zip(result.correct, result.cited, strict=True) if c]
        return {
            sc.METRIC_CITATION_PRESENCE: formulas.citation_presence(result.n_claims, sum(result.cited)),
            sc.METRIC_CITATION_CORRECTNESS: formulas.citation_correctness(cited_correct),
            sc.METRIC_CITATION_COVERAGE: formulas.citation_coverage(result.n_claims, sum(result.correct)),
        }

    def claim_support(
        self, claims: Sequence[str], sources: Sequence[str], question: str | None = None
    ) -> list[float]:
        """Support in [0, 1] of each claim by the source texts (the per-claim faithfulness model)."""
        evidence, _, _ = self._support(list(claims), [s for s in sources if s and s.strip()], question)
        return [local_model.claim_support(e) for e in evidence]

    def _support(
        self, claims: list[str], sources: Sequence[str], question: str | None
    ) -> tuple[list[ClaimEvidence], list[bool], np.ndarray]:
        """Evidence for ``claims`` against the ``sources``' sentences, the supported verdict per
        claim, and the claims' vectors: the same checks ``analyse`` makes for faithfulness."""
        if not claims:
            return [], [], np.zeros((0, EMBEDDING_DIM), dtype=np.float32)
        question = (question or "").strip() or None
        ctx_sentences: list[list[str]] = []
        for src in sources:
            sents = [p for s in split_sentences(src) for p in cut_long(s, MAX_CONTEXT_SENTENCE_WORDS)]
            ctx_sentences.append(sents or [src[:1000]])
        flat = [s for sents in ctx_sentences for s in sents]
        sentence_facts = [facts(s) for s in flat]
        claim_facts = [facts(c) for c in claims]
        claim_tokens = [content_tokens(c) for c in claims]
        question_tokens = facts(question).tokens if question else frozenset()
        mask = self._sentences_to_embed(ctx_sentences, sentence_facts, question_tokens, claim_facts)
        cached = self._cache.get_many(flat)
        to_embed = [s for s, keep, hit in zip(flat, mask, cached, strict=True) if keep and hit is None]
        extra = [*claims, *([question] if question else [])]
        vecs, states = self._encode([*dict.fromkeys(to_embed), *extra])
        n_new = len(dict.fromkeys(to_embed))
        lookup = {s: (vecs[i], states[i]) for i, s in enumerate(dict.fromkeys(to_embed))}
        zero: _Cached = (np.zeros(EMBEDDING_DIM, dtype=np.float32), NO_TOKENS)
        entries = [
            hit if hit is not None else lookup.get(s, zero) for s, hit in zip(flat, cached, strict=True)
        ]
        sentence_vecs = np.array([e[0] for e in entries], dtype=np.float32).reshape(len(flat), EMBEDDING_DIM)
        claim_vecs = vecs[n_new : n_new + len(claims)]
        claim_states = states[n_new : n_new + len(claims)]
        bigrams: set[tuple[str, str]] = set()
        for s in flat:
            bigrams.update(itertools.pairwise(content_tokens(s)))
        support = [e[1] for e in entries] + ([states[n_new + len(claims)]] if question else [])
        evidence = check_claims(
            claims, claim_facts, claim_tokens, claim_vecs, flat, sentence_facts, sentence_vecs, bigrams,
            question_tokens, soft_novel=soft_novel_counts(claim_states, support),
        )
        verdicts = [
            local_model.claim_support(e) >= local_model.FAITHFULNESS_THRESHOLD and not e.contradiction()
            for e in evidence
        ]
        return evidence, verdicts, claim_vecs

    def _encode(self, texts: list[str]) -> tuple[np.ndarray, list[TokenStates]]:
        """Vectors and token states of ``texts``, through the sentence cache."""
        if not texts:
            return np.zeros((0, EMBEDDING_DIM), dtype=np.float32), []
        cached = self._cache.get_many(texts)
        missing = list(dict.fromkeys(t for t, hit in zip(texts, cached, strict=True) if hit is None))
        if missing:
            fresh, fresh_states = self._embedder.embed_with_tokens(missing)
            self._cache.put_many(missing, fresh, fresh_states)
            found = {t: (fresh[i], fresh_states[i]) for i, t in enumerate(missing)}
        else:
            found = {}
        entries = [hit if hit is not None else found[t] for t, hit in zip(texts, cached, strict=True)]
        return (
            np.array([e[0] for e in entries], dtype=np.float32).reshape(len(texts), EMBEDDING_DIM),
            [e[1] for e in entries],
        )

    def analyse(self, question: str | None, contexts: Sequence[str], answer: str | None) -> Analysis:
        """Claims, their evidence and the per-context features, before any model is applied."""
        t0 = time.perf_counter()
        question = (question or "").strip() or None
        answer = (answer or "").strip() or None
        used_contexts = [c for c in contexts[:MAX_CONTEXTS] if c and c.strip()]
        claims = split_claims(answer)[:MAX_CLAIMS] if answer else []
        ctx_sentences: list[list[str]] = []
        for ctx in used_contexts:
            sents = [p for s in split_sentences(ctx) for p in cut_long(s, MAX_CONTEXT_SENTENCE_WORDS)]
            ctx_sentences.append(sents or [ctx[:1000]])
        flat_sentences = [s for sents in ctx_sentences for s in sents]
        sentence_facts = [facts(s) for s in flat_sentences]
        claim_tokens = [content_tokens(c) for c in claims]
        claim_facts = [facts(c) for c in claims]
        question_tokens = facts(question).tokens if question else frozenset()
        embed_mask = self._sentences_to_embed(ctx_sentences, sentence_facts, question_tokens, claim_facts)
        t1 = time.perf_counter()

        focus = focus_question(question, ctx_sentences, sentence_facts) if question else None
        questions = [q for q in (question, focus) if q]
        emb = self._embed_all(questions, claims, flat_sentences, answer, embed_mask)
        question_vec = emb.question_vecs[0] if question else None
        focus_vec = emb.question_vecs[1] if focus else question_vec
        claim_vecs, sentence_vecs = emb.claim_vecs, emb.sentence_vecs
        t2 = time.perf_counter()

        context_bigrams: set[tuple[str, str]] = set()
        for s in flat_sentences:
            context_bigrams.update(itertools.pairwise(content_tokens(s)))
        # the question's words count as supported, as they do lexically
        support = [*emb.sentence_tokens, *emb.question_tokens[:1]]
        evidence = check_claims(
            claims, claim_facts, claim_tokens, claim_vecs, flat_sentences, sentence_facts,
            sentence_vecs, context_bigrams, question_tokens,
            soft_novel=soft_novel_counts(emb.claim_tokens, support),
        )
        token_scores = (
            np.stack([maxsim_per_sentence(emb.question_tokens[0], emb.sentence_tokens),
                      wh_match_per_sentence(emb.question_tokens[0], emb.sentence_tokens)])
            if question else np.zeros((2, 0))
        )
        ctx_features = self._context_features(
            question, question_vec, focus_vec, ctx_sentences, sentence_facts, sentence_vecs, embed_mask,
            token_scores,
        )
        t3 = time.perf_counter()
        self._add_time("split", t1 - t0)
        self._add_time("embed", t2 - t1)
        self._add_time("evidence", t3 - t2)
        return Analysis(
            claims=claims,
            evidence=evidence,
            context_features=ctx_features,
            question_vec=question_vec,
            answer_vec=emb.answer_vec,
            claim_vecs=claim_vecs,
            n_contexts=len(used_contexts),
            contexts_ignored=max(0, len(contexts) - MAX_CONTEXTS),
        )

    def _sentences_to_embed(
        self,
        ctx_sentences: Sequence[Sequence[str]],
        sentence_facts: Sequence[TextFacts],
        question_tokens: frozenset[str],
        claim_facts: Sequence[TextFacts],
    ) -> np.ndarray:
        """Which context sentences to embed: in long contexts, only the ``max_sentences`` that
        share the most (rarity-weighted) words with the question or the answer. Embedding is
        ~95% of the judge's time, and a sentence sharing no word with either is almost never
        the best evidence or the most relevant one; its words still count for coverage."""
        mask = np.ones(len(sentence_facts), dtype=bool)
        if self._max_sentences <= 0:
            return mask
        wanted = set(question_tokens)
        for f in claim_facts:
            wanted |= f.tokens
        start = 0
        for sents in ctx_sentences:
            stop = start + len(sents)
            if len(sents) > self._max_sentences:
                overlap = [
                    (sum(rarity(t) for t in sentence_facts[j].tokens & wanted), -j) for j in range(start, stop)
                ]
                keep = {-j for _, j in sorted(overlap, reverse=True)[: self._max_sentences]}
                for j in range(start, stop):
                    mask[j] = j in keep
            start = stop
        return mask

    def _add_time(self, stage: str, seconds: float) -> None:
        with self._stage_lock:
            self.stage_seconds[stage] += seconds

    def _embed_all(
        self, questions: list[str], claims: list[str], sentences: list[str], answer: str | None,
        embed_mask: np.ndarray,
    ) -> _Embedded:
        cached = self._cache.get_many(sentences)
        zero: _Cached = (np.zeros(EMBEDDING_DIM, dtype=np.float32), NO_TOKENS)
        for j, keep in enumerate(embed_mask):
            if not keep and cached[j] is None:
                cached[j] = zero  # not embedded: cosine 0 with everything, no tokens to align
        missing = [s for s, v in zip(sentences, cached, strict=True) if v is None]
        missing_unique = list(dict.fromkeys(missing))
        batch: list[str] = list(missing_unique)
        q_start = len(batch)
        batch.extend(questions)
        claim_start = len(batch)
        batch.extend(claims)
        vecs, states = self._embedder.embed_with_tokens(batch)
        fresh = vecs[: len(missing_unique)]
        self._cache.put_many(missing_unique, fresh, states[: len(missing_unique)])
        lookup = {s: (fresh[i], states[i]) for i, s in enumerate(missing_unique)}
        entries = [v if v is not None else lookup[s] for s, v in zip(sentences, cached, strict=True)]
        sentence_vecs = np.array([e[0] for e in entries], dtype=np.float32).reshape(len(sentences), EMBEDDING_DIM)
        claim_vecs = vecs[claim_start : claim_start + len(claims)]
        # The answer as a whole: the normalised mean of its claims (embedding the full answer
        # again would cost a third more and MiniLM would cut it at 128 tokens anyway).
        answer_vec: np.ndarray | None = None
        if answer is not None and len(claims):
            mean = claim_vecs.mean(axis=0)
            answer_vec = mean / max(float(np.linalg.norm(mean)), 1e-12)
        return _Embedded(
            question_vecs=vecs[q_start:claim_start],
            claim_vecs=claim_vecs,
            sentence_vecs=sentence_vecs,
            answer_vec=answer_vec,
            question_tokens=states[q_start:claim_start],
            claim_tokens=states[claim_start : claim_start + len(claims)],
            sentence_tokens=[e[1] for e in entries],
        )

    @staticmethod
    def _context_features(
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

    @staticmethod
    def _reason(
        faithfulness: float | None, relevancy: float | None, precision: float | None, details: dict[str, Any]
    ) -> str:
        """One short line for error analysis (/worst): the weakest metric and why."""
        candidates = []
        if faithfulness is not None:
            claim = details.get("least_supported_claim", "")
            why = details.get("faithfulness_reason", "")
            candidates.append((faithfulness, f"unsupported claim {claim!r}: {why}" if claim else str(why)))
        if relevancy is not None:
            candidates.append((relevancy, details.get("answer_relevancy_reason", "answer relevancy")))
        if precision is not None:
            bad = details.get("irrelevant_contexts", [])
            candidates.append((precision, f"contexts {bad} look irrelevant to the question" if bad else
                               "context precision"))
        if not candidates:
            return "nothing to score"
        score, text = min(candidates, key=lambda c: c[0])
        if score >= 0.5:
            return "no metric below 0.5"
        return _short(str(text), 2 * _REASON_CHARS)

    # --- the three metrics ----------------------------------------------------------------
    @staticmethod
    def _faithfulness(
        evidence: list[ClaimEvidence], has_contexts: bool, details: dict[str, Any]
    ) -> float | None:
        if not evidence:
            return None  # no answer (or nothing checkable in it)
        if not has_contexts:
            details["faithfulness_reason"] = "no contexts to support the answer"
            return 0.0
        supports = [local_model.claim_support(e) for e in evidence]
        score = local_model.faithfulness(evidence, supports)
        contradicted = [i for i, e in enumerate(evidence) if e.contradiction()]
        weakest = contradicted[0] if contradicted else int(np.argmin(supports))
        if contradicted:
            details["contradicted_claims"] = len(contradicted)
        details["claims"] = len(evidence)
        details["unsupported_claims"] = sum(s < 0.5 for s in supports)
        details["least_supported_claim"] = _short(evidence[weakest].claim)
        details["least_supported_support"] = round(float(supports[weakest]), 3)
        details["least_supported_evidence"] = _short(evidence[weakest].evidence)
        details["faithfulness_reason"] = evidence[weakest].reason()
        return score

    @staticmethod
    def _answer_relevancy(
        question_vec: np.ndarray | None,
        answer_vec: np.ndarray | None,
        claim_vecs: np.ndarray,
        details: dict[str, Any],
    ) -> float | None:
        if question_vec is None or answer_vec is None:
            return None
        whole = float(answer_vec @ question_vec)
        best_claim = float((claim_vecs @ question_vec).max()) if len(claim_vecs) else whole
        score = local_model.answer_relevancy(whole, best_claim)
        details["answer_question_cosine"] = round(max(whole, best_claim), 3)
        if score < 0.5:
            details["answer_relevancy_reason"] = "the answer is semantically far from the question"
        return score

    @staticmethod
    def _context_precision(
        features: list[local_model.ContextFeatures], details: dict[str, Any]
    ) -> float | None:
        if not features:
            return None
        relevance = [local_model.context_relevance(f) for f in features]
        verdicts = [r >= local_model.CONTEXT_RELEVANT_THRESHOLD for r in relevance]
        details["context_relevance"] = [round(r, 3) for r in relevance]
        irrelevant = [i for i, v in enumerate(verdicts) if not v]
        if irrelevant:
            details["irrelevant_contexts"] = irrelevant[:20]
        if not any(verdicts):
            details["context_precision_reason"] = "no retrieved context looks relevant to the question"
        return rank_weighted_precision(verdicts)


__all__ = ["STAGES", "Analysis", "LocalJudge"]
