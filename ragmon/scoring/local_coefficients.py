"""Coefficients of the local judge's logistic models (plain numbers, no pickle).

Written by ``bench/fit_local_judge.py``; see docs/judges.md for how they were fitted and the
held-out agreement they reach. Edit by refitting, not by hand.
"""

# Per-claim support: sigmoid(bias + sum(w * feature)).
CLAIM_WEIGHTS: dict[str, float] = {
    "bias": -6.0,
    "max_cos": 5.0,
    "coverage": 5.0,
    "local_coverage": 0.0,
    "bigram_coverage": 1.0,
    "missing_number": -4.0,
    "local_missing_number": -1.0,
    "missing_entity": -3.0,
    "negation_mismatch": -4.0,
    "short_claim": 0.0,
}

# Answer-level faithfulness from aggregates of the per-claim evidence.
ANSWER_WEIGHTS: dict[str, float] = {
    "bias": -3.0,
    "min_support": 5.0,
    "mean_support": 2.0,
    "min_cos": 0.0,
    "mean_cos": 0.0,
    "min_coverage": 0.0,
    "mean_coverage": 0.0,
    "min_bigram": 0.0,
    "mean_bigram": 0.0,
    "any_missing_number": 0.0,
    "any_local_missing_number": 0.0,
    "share_missing_entity": 0.0,
    "any_negation_mismatch": 0.0,
    "log_claims": 0.0,
}

# Per-context relevance to the question.
CONTEXT_WEIGHTS: dict[str, float] = {
    "bias": -5.0,
    "best_cos": 9.0,
    "question_coverage": 3.0,
    "question_entity_coverage": 0.0,
    "answer_type_match": 0.0,
    "length": 0.0,
}
CONTEXT_THRESHOLD = 0.5

# Answer relevancy: cosine(question, answer) mapped linearly onto [0, 1] between these.
RELEVANCY_COS_LOW = 0.15
RELEVANCY_COS_HIGH = 0.6
