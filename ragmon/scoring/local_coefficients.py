"""Coefficients of the local judge's logistic models (plain numbers, no pickle).

Written by ``bench/fit_local_judge.py --write-coefficients``; see docs/judges.md for how they
were fitted and the held-out agreement they reach. Edit by refitting, not by hand.
"""

# Per-claim support: sigmoid(bias + sum(w * feature)), fitted on claim labels derived from the
# annotated hallucination spans of RAGTruth QA.
CLAIM_WEIGHTS: dict[str, float] = {
    "bias": 2.334455,
    "max_cos": 0.373591,
    "coverage": -0.212818,
    "local_coverage": 0.490965,
    "bigram_coverage": 2.136438,
    "missing_number": -0.031422,
    "local_missing_number": -0.473715,
    "missing_entity": -0.578302,
    "negation_mismatch": 0.303389,
    "short_claim": 0.009488,
    "log_novel": -0.431601,
    "novel_run": -1.86329,
}

# Answer-level faithfulness from aggregates of the per-claim evidence.
ANSWER_WEIGHTS: dict[str, float] = {
    "bias": 3.645416,
    "log_novel_total": -0.094756,
    "min_coverage": 0.459663,
    "max_novel_run": -1.419012,
    "min_rare_coverage": -0.205122,
    "log_weighted_novel": -0.722521,
    "log_cos_weighted_novel": -0.447839,
}

# Per-context relevance to the question, fitted on WikiQA sentence labels.
CONTEXT_WEIGHTS: dict[str, float] = {
    "bias": -4.384659,
    "best_cos": 1.973596,
    "cos_gap": 2.670626,
    "specific_cos": 2.272252,
    "focus_cos": -0.500623,
    "focus_gap": 3.139313,
    "question_coverage": -2.750298,
    "coverage_gap": 0.732626,
    "idf_coverage": 2.635127,
    "question_entity_coverage": -0.072808,
    "answer_type_match": 0.492494,
    "definition": 0.794109,
    "length": 4.166152,
    "pronoun_start": 0.172894,
}

# Best balanced-accuracy thresholds on the fitting data (out-of-fold ones are in docs/judges.md).
FAITHFULNESS_THRESHOLD = 0.5867
CONTEXT_THRESHOLD = 0.1448

# Answer relevancy: cosine(question, answer) mapped linearly onto [0, 1] between these
# (not fitted: the dev data has no answer-relevance labels).
RELEVANCY_COS_LOW = 0.15
RELEVANCY_COS_HIGH = 0.6
