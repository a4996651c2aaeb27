"""Coefficients of the local judge's logistic models (plain numbers, no pickle).

Written by ``bench/fit_local_judge.py --write-coefficients``; see docs/judges.md for how they
were fitted and the held-out agreement they reach. Edit by refitting, not by hand.
"""

# Per-claim support: sigmoid(bias + sum(w * feature)), fitted on claim labels derived from the
# annotated hallucination spans of RAGTruth QA.
CLAIM_WEIGHTS: dict[str, float] = {
    "bias": 2.323251,
    "max_cos": 0.310493,
    "coverage": -0.121832,
    "local_coverage": 0.435712,
    "bigram_coverage": 2.101305,
    "missing_number": -0.083957,
    "local_missing_number": -0.403023,
    "missing_entity": -0.621753,
    "negation_mismatch": 0.098796,
    "short_claim": 0.000387,
    "log_novel": -0.408064,
    "novel_run": -1.841929,
}

# Answer-level faithfulness from aggregates of the per-claim evidence.
ANSWER_WEIGHTS: dict[str, float] = {
    "bias": 3.709405,
    "log_novel_total": -1.005101,
    "min_coverage": 0.734231,
    "max_novel_run": -1.657182,
    "min_rare_coverage": 0.257313,
}

# Per-context relevance to the question, fitted on WikiQA sentence labels.
CONTEXT_WEIGHTS: dict[str, float] = {
    "bias": -4.767611,
    "best_cos": 2.007993,
    "cos_gap": 4.809423,
    "specific_cos": 2.130994,
    "question_coverage": -2.601941,
    "coverage_gap": 0.775441,
    "idf_coverage": 2.452116,
    "question_entity_coverage": -0.084467,
    "answer_type_match": 0.49341,
    "definition": 0.734096,
    "length": 4.270442,
    "pronoun_start": 0.20168,
}

# Best balanced-accuracy thresholds on the fitting data (out-of-fold ones are in docs/judges.md).
FAITHFULNESS_THRESHOLD = 0.5796
CONTEXT_THRESHOLD = 0.1408

# Answer relevancy: cosine(question, answer) mapped linearly onto [0, 1] between these
# (not fitted: the dev data has no answer-relevance labels).
RELEVANCY_COS_LOW = 0.15
RELEVANCY_COS_HIGH = 0.6
