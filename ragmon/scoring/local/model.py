"""How the local judge turns evidence features into scores.

Faithfulness and context relevance are logistic models over a handful of interpretable
features; their coefficients live in ``coefficients.py`` (plain numbers, refitted by
``bench/fit_local_judge.py`` and reported on held-out data in docs/judges.md).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from ..metrics import formulas
from ..text import content_tokens
from . import coefficients as coef
from .claims import TextFacts, facts
from .evidence import ClaimEvidence

# Scores are shifted so that 0.5 is the best balanced-accuracy threshold found when fitting:
# "below 0.5" then means "more likely a failure than not, on balanced classes".
CONTEXT_RELEVANT_THRESHOLD = 0.5
FAITHFULNESS_THRESHOLD = 0.5
# A claim that an explicit check shows to contradict the contexts (a number, a flipped
# negation, a foreign name) caps faithfulness just below the threshold: the verdict flips to
# "unfaithful" while the ranking among answers already judged unfaithful is left alone. One value
# for both judges (the LLM judge applies it to its contradicted claims).
CONTRADICTION_CAP = formulas.CONTRADICTION_CAP


def _sigmoid(z: float) -> float:
    if z >= 0:
        return 1.0 / (1.0 + math.exp(-z))
    e = math.exp(z)
    return e / (1.0 + e)


def _logit(p: float) -> float:
    p = min(max(p, 1e-6), 1 - 1e-6)
    return math.log(p / (1 - p))


sigmoid, logit = _sigmoid, _logit  # public for the stacked reader features (``_online``)


def _clip01(x: float) -> float:
    return 0.0 if x < 0.0 else 1.0 if x > 1.0 else x


def _linear(weights: dict[str, float], features: dict[str, float]) -> float:
    return weights.get("bias", 0.0) + sum(w * features[name] for name, w in weights.items() if name != "bias")


# --- faithfulness ---------------------------------------------------------------------------
def claim_features(e: ClaimEvidence) -> dict[str, float]:
    """Interpretable per-claim features (all roughly in [0, 1])."""
    return {
        "max_cos": e.max_cos,
        "coverage": e.coverage,
        "local_coverage": e.local_coverage,
        "bigram_coverage": e.bigram_coverage,
        "missing_number": 1.0 if e.missing_numbers else 0.0,
        "local_missing_number": 1.0 if e.local_missing_numbers else 0.0,
        "missing_entity": 1.0 if e.missing_entities else 0.0,
        "negation_mismatch": 1.0 if e.negation_mismatch else 0.0,
        "short_claim": 1.0 if e.n_tokens <= 3 else 0.0,
        "log_novel": math.log1p(e.novel_tokens),
        "novel_run": min(e.novel_run, 5) / 5.0,
        "rare_coverage": e.rare_coverage,
        "log_rare_novel": math.log1p(e.rare_novel),
    }


CLAIM_FEATURES = [
    "max_cos", "coverage", "local_coverage", "bigram_coverage", "missing_number",
    "local_missing_number", "missing_entity", "negation_mismatch", "short_claim", "log_novel",
    "novel_run",
]
ANSWER_BASE_FEATURES = [
    "min_cos", "mean_cos", "min_coverage", "mean_coverage", "min_bigram", "mean_bigram",
    "any_missing_number", "any_local_missing_number", "share_missing_entity",
    "any_negation_mismatch", "log_claims", "log_novel_total", "max_novel_run", "share_low_coverage",
]


def claim_support(e: ClaimEvidence) -> float:
    """Probability-like support of one claim by the contexts."""
    return _sigmoid(_linear(coef.CLAIM_WEIGHTS, claim_features(e)))


@dataclass(frozen=True, slots=True)
class TraceShape:
    """What kind of trace this is, as far as the judge can see: the faithfulness model may set
    its intercept per kind (a summary of one long document, a JSON record, a short claim)."""

    has_question: bool = True
    structured_share: float = 0.0  # share of the contexts that are JSON
    context_words: int = 0


def answer_features(
    evidence: Sequence[ClaimEvidence], supports: Sequence[float], shape: TraceShape | None = None
) -> dict[str, float]:
    """Answer-level aggregates of the per-claim evidence (input of the faithfulness model)."""
    n = len(evidence)
    feats = [claim_features(e) for e in evidence]
    shape = shape or TraceShape()
    return {
        "no_question": 0.0 if shape.has_question else 1.0,
        "structured": shape.structured_share,
        "log_context_words": math.log1p(shape.context_words) / 10.0,
        "single_claim": 1.0 if n == 1 else 0.0,
        "any_contradiction": 1.0 if any(e.contradiction() for e in evidence) else 0.0,
        "share_contradicted": sum(e.contradiction() is not None for e in evidence) / n,
        "max_soft_novel_share": max(e.soft_novel / max(1, e.n_tokens) for e in evidence),
        "mean_soft_novel_share": sum(e.soft_novel / max(1, e.n_tokens) for e in evidence) / n,
        "max_novel_share": max(e.novel_tokens / max(1, e.n_tokens) for e in evidence),
        "min_support": min(supports),
        "mean_support": sum(supports) / n,
        "min_cos": min(f["max_cos"] for f in feats),
        "mean_cos": sum(f["max_cos"] for f in feats) / n,
        "min_coverage": min(f["coverage"] for f in feats),
        "mean_coverage": sum(f["coverage"] for f in feats) / n,
        "min_bigram": min(f["bigram_coverage"] for f in feats),
        "mean_bigram": sum(f["bigram_coverage"] for f in feats) / n,
        "any_missing_number": max(f["missing_number"] for f in feats),
        "any_local_missing_number": max(f["local_missing_number"] for f in feats),
        "share_missing_entity": sum(f["missing_entity"] > 0 for f in feats) / n,
        "any_negation_mismatch": max(f["negation_mismatch"] for f in feats),
        "log_claims": math.log1p(n),
        "log_novel_total": math.log1p(sum(e.novel_tokens for e in evidence)),
        "max_novel_run": max(f["novel_run"] for f in feats),
        "share_low_coverage": sum(f["coverage"] < 0.6 for f in feats) / n,
        "share_unsupported": sum(s < 0.5 for s in supports) / n,
        "novel_share_total": sum(e.novel_tokens for e in evidence) / max(1, sum(e.n_tokens for e in evidence)),
        "log_answer_tokens": math.log1p(sum(e.n_tokens for e in evidence)),
        "mean_novel_run": sum(f["novel_run"] for f in feats) / n,
        "share_runs": sum(f["novel_run"] >= 0.6 for f in feats) / n,
        # novel words count more in claims that their best evidence does not cover/resemble
        "log_weighted_novel": math.log1p(sum(e.novel_tokens * (1 - e.local_coverage) for e in evidence)),
        "log_cos_weighted_novel": math.log1p(sum(e.novel_tokens * max(0.0, 1 - e.max_cos) for e in evidence)),
        "min_rare_coverage": min(f["rare_coverage"] for f in feats),
        "mean_rare_coverage": sum(f["rare_coverage"] for f in feats) / n,
        "log_rare_novel_total": math.log1p(sum(e.rare_novel for e in evidence)),
        # token level: content tokens with no close contextual match in the contexts
        "log_soft_novel_total": math.log1p(sum(e.soft_novel for e in evidence)),
        "max_soft_novel": min(max(e.soft_novel for e in evidence), 5) / 5.0,
    }


SHAPE_FEATURES = ("no_question", "structured", "log_context_words", "single_claim")


def with_interactions(features: dict[str, float]) -> dict[str, float]:
    """``features`` plus each evidence feature times the "no question" (summaries, data-to-text,
    claims) and "JSON contexts" flags: the faithfulness model may weigh evidence differently there."""
    out = dict(features)
    for name, value in features.items():
        if name not in SHAPE_FEATURES and "*" not in name:
            out[f"{name}*nq"] = value * features["no_question"]
            out[f"{name}*st"] = value * features["structured"]
    return out


FAITHFULNESS_PROFILE_FEATURES = [
    *ANSWER_BASE_FEATURES, "min_support", "mean_support", "share_unsupported", "novel_share_total",
    "log_answer_tokens", "mean_novel_run", "share_runs", "log_weighted_novel", "log_cos_weighted_novel",
    "min_rare_coverage", "mean_rare_coverage", "log_rare_novel_total", "log_soft_novel_total", "max_soft_novel",
    "no_question", "structured", "log_context_words", "single_claim", "any_contradiction", "share_contradicted",
    "max_soft_novel_share", "mean_soft_novel_share", "max_novel_share",
]
FAITHFULNESS_PROFILE_FEATURES += [f"{n}*{k}" for k in ("nq", "st") for n in FAITHFULNESS_PROFILE_FEATURES
                                  if n not in SHAPE_FEATURES]


def faithfulness(
    evidence: Sequence[ClaimEvidence], supports: Sequence[float], shape: TraceShape | None = None,
    weights: dict[str, float] | None = None, threshold: float | None = None, cap: bool = True,
) -> float:
    """P(faithful) on balanced classes, shifted so that ``threshold`` (the shipped one by
    default) lands on 0.5; an explicit contradiction caps it below 0.5 when ``CAP_CONTRADICTIONS``."""
    z = _linear(coef.ANSWER_WEIGHTS if weights is None else weights,
                with_interactions(answer_features(evidence, supports, shape)))
    t = coef.FAITHFULNESS_THRESHOLD if threshold is None else threshold
    score = _sigmoid(z - _logit(t))
    if cap and coef.CAP_CONTRADICTIONS:
        score = formulas.with_contradictions(score, sum(e.contradiction() is not None for e in evidence), len(evidence))
    return score


# --- answer relevancy -----------------------------------------------------------------------
RELEVANCY_FEATURES = ["cos", "new_info", "type_match", "type_other"]
# An answer that declines to answer does not address the question, whatever its words: it is
# capped here (RAGAS scores "noncommittal" answers 0); ``details.abstained`` says why.
REFUSAL_CAP = 0.1
# the cosine floor for multi-sentence answers with information of their own (``answer_relevancy``)
COS_FLOOR_LOW, COS_FLOOR_HIGH = 0.15, 0.6


def _new_information(new: set[str], answer: TextFacts, question: TextFacts, answer_tokens: set[str]) -> float:
    """What the answer says that the question does not, in [0, 1].

    Content words of its own, saturating at 3 (an echo padded with filler — "that is a good
    question about ..." — adds one or two generic words); but a new number or name, or an answer
    mostly made of new words, is a whole answer by itself ("Paris.", "49 dollars a month.").
    """
    specific = (answer.numbers - question.numbers) | (answer.entities - question.tokens)
    if specific or (answer_tokens and len(new) / len(answer_tokens) >= 0.5):
        return 1.0
    return min(len(new), 3) / 3.0


def relevancy_features(
    question: str, answer: str, whole_cos: float, best_claim_cos: float, *, claims: int = 1
) -> dict[str, float]:
    """Does the answer address the question: closeness in meaning (cosine), information beyond
    the question's own words (an echo of the question has none) and the answer type the
    question asks for (a date for "when", a quantity for "how many", a name for "who").
    ``claims`` is how many claims (sentences) the answer was split into."""
    q = facts(question)
    a = facts(answer)
    a_tokens = set(content_tokens(answer))
    new = a_tokens - q.tokens
    qtype = question_type(question)
    text = answer.lower()
    if qtype == "date":
        match = 1.0 if _YEAR_OR_MONTH.search(text) else 0.0
    elif qtype == "number":
        match = 1.0 if (_MONEY.search(answer) if _MONEY_Q.search(question.lower()) else
                        any(not _YEAR.match(n) for n in a.numbers - q.numbers)) else 0.0
    elif qtype in ("person", "place", "named"):
        match = 1.0 if (a.entities - q.tokens) else 0.0
    else:
        match = 0.0
    return {
        "cos": max(whole_cos, best_claim_cos),
        "whole_cos": whole_cos,
        "new_share": len(new) / len(a_tokens) if a_tokens else 0.0,
        "new_info": _new_information(new, a, q, a_tokens),
        "type_match": match,
        "type_other": 1.0 if qtype == "other" else 0.0,
        # not a model input: decides whether the cosine floor applies (``answer_relevancy``)
        "multi_sentence": 1.0 if claims >= 2 else 0.0,
    }


def answer_relevancy(features: dict[str, float], abstained: bool = False,
                     weights: dict[str, float] | None = None, threshold: float = 0.5) -> float:
    """P(the answer addresses the question), on balanced classes (0.5 = as likely as not)."""
    z = _linear(coef.RELEVANCY_WEIGHTS if weights is None else weights, features)
    score = _sigmoid(z - _logit(threshold))
    if features["new_info"] >= 1.0 and features.get("multi_sentence", 0.0) >= 1.0:
        # A multi-sentence answer that says something of its own and is close in meaning to the
        # question is on topic even when the fitted model doubts it: a generated answer spreads
        # over sentences that each sit a little further from the question, and a yes/no or
        # "which" question's answer need not carry the regex-detected type. The floor is the
        # earlier unfitted cosine map. A single sentence gets the fitted probability alone: one
        # on-topic sentence that does not answer is WikiQA's failure, and the floor lifted it
        # above 0.5 (balanced accuracy 0.663 at 0.5 with the floor on every answer, 0.731 with
        # it on multi-sentence answers only; docs/judges.md). Echoes (no new information) and
        # refusals (capped below) never get it.
        score = max(score, _clip01((features["cos"] - COS_FLOOR_LOW) / (COS_FLOOR_HIGH - COS_FLOOR_LOW)))
    return min(score, REFUSAL_CAP) if abstained else score


# --- context relevance ----------------------------------------------------------------------
# Features of one retrieved context, by name; computed for all contexts of a trace at once
# because some are relative to the best context of the same trace.
ContextFeatures = dict[str, float]

# The on-topic gate reads absolute similarities only: in a retrieval miss every context is
# off topic, so comparisons with the trace's best context say nothing.
TOPIC_FEATURES = ["best_cos", "maxsim", "question_coverage", "idf_coverage"]
CONTEXT_FEATURES = [
    "best_cos", "cos_gap", "specific_cos", "focus_cos", "focus_gap", "question_coverage", "coverage_gap",
    "idf_coverage", "question_entity_coverage", "answer_type_match", "definition", "length", "pronoun_start",
]

_DATE_Q = re.compile(r"\b(when(?! (to|should|do you|can you)\b)|what (year|day|date|month|time|century|decade)|"
                     r"how long ago|born)\b")
_NUMBER_Q = re.compile(r"\b(how (many|much|long|far|tall|big|large|fast|deep|high|old|often)|what (percentage|"
                       r"number|size|height|temperature|population|age))\b")
_PERSON_Q = re.compile(r"^\s*(who|whom|whose)\b")
_PLACE_Q = re.compile(r"^\s*where\b")
# "what county", "which team": the answer is a name the question does not contain
_NAMED_Q = re.compile(r"\b(what|which)\s+(county|city|state|country|continent|island|team|school|college|"
                      r"university|company|band|language|party|church|river|ocean|sea|mountain|airport|"
                      r"station|league|award|province|region|nationality|religion|town|club|brand)\b")
# "how much did it gross / cost": the answer is an amount of money
_MONEY_Q = re.compile(r"\bhow much\b.*\b(cost|costs|gross|grossed|earn|earned|make|made|pay|paid|price|worth|"
                      r"spend|spent|sell|sold|raise|raised|charge)\b|\b(salary|price|cost|budget|revenue)\b")
_MONEY = re.compile(r"[$£€¥]\s?\d|\b\d[\d,.]*\s*(million|billion|dollars?|pounds?|euros?)\b", re.IGNORECASE)
_YEAR = re.compile(r"^(1[0-9]{3}|20[0-9]{2})$")
_DEFINITION_Q = re.compile(r"^\s*(what|who)\s+(is|are|was|were)\b|^\s*(what|who)\b.*\bmean")
_DEFINITION = re.compile(r"^\W*(?:[\w'’.-]+[\s,()]+){0,8}?(?:is|are|was|were|refers to|means|stands for)\s")
_YEAR_OR_MONTH = re.compile(
    r"\b(1[0-9]{3}|20[0-9]{2}|january|february|march|april|may|june|july|august|september|october|"
    r"november|december|century|bc|ad)\b",
    re.IGNORECASE,
)
_PRONOUN_START = re.compile(r"^\W*(it|they|this|these|he|she|its|their|his|her)\b", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class ContextEvidence:
    """What the relevance model needs from one context (pre-computed by the judge)."""

    best_cos: float  # best cosine between the question and a sentence of the context
    best_specific_cos: float  # same, with the direction all contexts share removed from the question
    best_focus_cos: float  # same, for the question without the words most contexts share
    best_maxsim: float  # token-level alignment: mean over question tokens of the best token match
    best_wh_match: float  # best match of the question's wh-words among the context's new tokens
    tokens: frozenset[str]
    numbers: frozenset[str]
    entities: frozenset[str]
    sentences: tuple[str, ...]


def question_type(question: str) -> str:
    q = question.lower()
    if _DATE_Q.search(q):
        return "date"
    if _NUMBER_Q.search(q):
        return "number"
    if _PERSON_Q.search(q):
        return "person"
    if _PLACE_Q.search(q):
        return "place"
    if _NAMED_Q.search(q):
        return "named"
    return "other"


def _answer_type_match(qtype: str, ctx: ContextEvidence, question: TextFacts, question_text: str) -> float:
    text = " ".join(ctx.sentences)
    if qtype == "date":
        return 1.0 if _YEAR_OR_MONTH.search(text) else 0.0
    if qtype == "number":
        if _MONEY_Q.search(question_text):
            return 1.0 if _MONEY.search(text) else 0.0
        # a year is rarely the answer to "how many": count quantities only
        return 1.0 if any(not _YEAR.match(n) for n in ctx.numbers) else 0.0
    if qtype in ("person", "place", "named"):
        return 1.0 if (ctx.entities - question.tokens) else 0.0
    return 0.0


def context_features(question_text: str, question: TextFacts, contexts: Sequence[ContextEvidence]) -> list[
        ContextFeatures]:
    """Per-context relevance features for all contexts of one trace."""
    if not contexts:
        return []
    qtype = question_type(question_text)
    definitional = bool(_DEFINITION_Q.search(question_text.lower()))
    q_tokens = question.tokens
    n = len(contexts)
    # in-trace IDF: a question word found in every context says little about which is relevant
    idf = {t: math.log((n + 1) / (sum(t in c.tokens for c in contexts) + 0.5)) + 1.0 for t in q_tokens}
    idf_total = math.fsum(idf.values())
    raw = []
    for c in contexts:
        coverage = len(q_tokens & c.tokens) / len(q_tokens) if q_tokens else 0.0
        idf_cov = math.fsum(idf[t] for t in q_tokens & c.tokens) / idf_total if idf_total else 0.0
        ents = question.entities
        first_words = set(content_tokens(" ".join(c.sentences[0].split()[:6]))) if c.sentences else set()
        is_definition = any(_DEFINITION.search(s) for s in c.sentences[:3]) and bool(first_words & q_tokens)
        raw.append({
            "best_cos": c.best_cos,
            "specific_cos": c.best_specific_cos,
            "focus_cos": c.best_focus_cos,
            "maxsim": c.best_maxsim,
            "wh_match": c.best_wh_match,
            "question_coverage": coverage,
            "idf_coverage": idf_cov,
            "question_entity_coverage": len(ents & c.tokens) / len(ents) if ents else 1.0,
            "answer_type_match": _answer_type_match(qtype, c, question, question_text.lower()),
            "definition": 1.0 if (definitional and is_definition) else 0.0,
            # a definition of the topic is a distractor when the question asks something else
            "definition_distractor": 1.0 if (is_definition and not definitional) else 0.0,
            "new_entities": min(len(c.entities - q_tokens), 4) / 4.0,
            "new_information": len(c.tokens - q_tokens) / len(c.tokens) if c.tokens else 0.0,
            "length": min(math.log1p(sum(len(s.split()) for s in c.sentences)) / 5.0, 1.0),
            "pronoun_start": 1.0 if c.sentences and _PRONOUN_START.search(c.sentences[0]) else 0.0,
        })
    best_cos = max(r["best_cos"] for r in raw)
    best_cov = max(r["question_coverage"] for r in raw)
    best_focus = max(r["focus_cos"] for r in raw)
    best_maxsim = max(r["maxsim"] for r in raw)
    best_wh = max(r["wh_match"] for r in raw)
    for r in raw:
        r["cos_gap"] = r["best_cos"] - best_cos
        r["focus_gap"] = r["focus_cos"] - best_focus
        r["maxsim_gap"] = r["maxsim"] - best_maxsim
        r["wh_match_gap"] = r["wh_match"] - best_wh
        r["coverage_gap"] = r["question_coverage"] - best_cov
    return raw


# a profile's context weights (``ragmon calibrate --fit``) sit on top of the shipped model: its logit
# is one more feature, so a few labels recalibrate it and more re-weigh the evidence
CONTEXT_PROFILE_FEATURES = ["shipped_logit", *CONTEXT_FEATURES]


def context_relevance(f: ContextFeatures, threshold: float | None = None,
                      weights: dict[str, float] | None = None) -> float:
    """P(answers the question) x P(on topic at all), centred so that 0.5 is the threshold; with a
    profile's ``weights``, the fitted model over the shipped logit and the features instead."""
    p = _sigmoid(_linear(coef.CONTEXT_WEIGHTS, f)) * _sigmoid(_linear(coef.TOPIC_WEIGHTS, f))
    if weights is not None:
        return _sigmoid(_linear(weights, {**f, "shipped_logit": _logit(p)}))
    return _sigmoid(_logit(p) - _logit(coef.CONTEXT_THRESHOLD if threshold is None else threshold))
