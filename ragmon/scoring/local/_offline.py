"""The local judge's offline metrics (``ragmon eval``): the per-claim support check of
faithfulness run on other pairs — reference claims against the contexts (context recall),
answer claims against the reference and reference claims against the answer (the TP/FP/FN of
answer correctness, blended with the MiniLM cosine of answer and reference), each cited claim
against the context it cites (citation metrics). Abstention is recognised by ``metrics.abstention``."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ... import semconv as sc
from ...types import ScoreDetails
from ..metrics import abstention, citations, formulas
from ._analysis import MAX_CLAIMS, MAX_CONTEXTS, Analyser
from ._online import short
from .claims import split_claims
from .embedder import EMBEDDING_DIM


def abstention_values(answer: str | None, expect_abstention: bool, details: ScoreDetails) -> dict[str, float | None]:
    """The abstention metric when the question expects one; whether the answer abstained, always."""
    check = abstention.check(answer)
    details["abstained"] = check.abstained
    if check.phrase:
        details["abstention_phrase"] = check.phrase
    return {sc.METRIC_ABSTENTION: formulas.abstention(check.abstained)} if expect_abstention else {}


def reference_values(
    analyser: Analyser, question: str | None, contexts: Sequence[str], answer: str | None, reference: str,
    details: ScoreDetails,
) -> dict[str, float | None]:
    """Context recall and answer correctness against the reference answer."""
    ref_claims = split_claims(reference)[:MAX_CLAIMS]
    if not ref_claims:
        details["reference_reason"] = "the reference answer has no claims"
        return {sc.METRIC_CONTEXT_RECALL: None, sc.METRIC_ANSWER_CORRECTNESS: None}
    used = [c for c in contexts[:MAX_CONTEXTS] if c and c.strip()]
    # context recall: every reference claim against the retrieved contexts
    if used:
        ref_ev, ref_supported, ref_vecs = analyser.support(ref_claims, used, question)
    else:
        ref_ev, ref_supported = [], [False] * len(ref_claims)
        ref_vecs = analyser.encoder.encode(ref_claims)[0]
    recall = formulas.context_recall(ref_supported)
    details["reference_claims"] = [
        {"claim": short(c), "attributed": bool(v)} for c, v in zip(ref_claims, ref_supported, strict=True)
    ]
    missing = [i for i, v in enumerate(ref_supported) if not v]
    if missing:
        why = ref_ev[missing[0]].reason() if ref_ev else "no contexts"
        first = short(ref_claims[missing[0]])
        details["context_recall_reason"] = f"reference claim not in the contexts: {first!r}"
        details["context_recall_evidence"] = why
    # answer correctness: answer claims vs reference (TP/FP) and reference claims vs answer (FN)
    answer_claims = split_claims(answer)[:MAX_CLAIMS] if answer and answer.strip() else []
    if answer_claims:
        _, in_reference, answer_vecs = analyser.support(answer_claims, [reference], question)
        # "I don't know" is not a fact the reference states (RAGAS would count it as an FP)
        in_reference = [v and abstention.refusal_phrase(c) is None for c, v in zip(answer_claims, in_reference,
                                                                                     strict=True)]
        _, in_answer, _ = analyser.support(ref_claims, [answer or ""], question)
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
        details["claims_not_in_reference"] = [short(c) for c in wrong[:5]]
    absent = [c for c, v in zip(ref_claims, in_answer, strict=True) if not v]
    if absent:
        details["reference_claims_not_in_answer"] = [short(c) for c in absent[:5]]
    return {sc.METRIC_CONTEXT_RECALL: recall, sc.METRIC_ANSWER_CORRECTNESS: correctness}


def citation_values(
    analyser: Analyser, question: str | None, contexts: Sequence[str], cmap: citations.CitationMap,
    details: ScoreDetails,
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
            _, verdicts, _ = analyser.support([cmap.claims[i].text for i in claim_indexes], [text], question)
        for i, v in zip(claim_indexes, verdicts, strict=True):
            supported[(i, ctx)] = bool(v)
    return citations.metric_values(cmap, supported, details)


def _mean_unit(vectors: np.ndarray) -> np.ndarray:
    """The normalised mean of unit vectors: a text's vector from its claims' (as ``answer_vec``)."""
    if not len(vectors):
        return np.zeros(EMBEDDING_DIM, dtype=np.float32)
    mean: np.ndarray = np.asarray(vectors, dtype=np.float32).mean(axis=0)
    out: np.ndarray = mean / max(float(np.linalg.norm(mean)), 1e-12)
    return out
