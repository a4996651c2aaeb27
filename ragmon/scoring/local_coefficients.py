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
    "bias": -7.64414,
    "best_cos": 6.172476,
    "cos_gap": -0.797275,
    "specific_cos": 1.836051,
    "focus_cos": -0.112345,
    "focus_gap": 2.58294,
    "question_coverage": -1.740873,
    "coverage_gap": 0.450978,
    "idf_coverage": 1.845493,
    "question_entity_coverage": -0.337383,
    "answer_type_match": 0.524672,
    "definition": 0.721768,
    "length": 4.205619,
    "pronoun_start": 0.189435,
}

# Best balanced-accuracy thresholds on the fitting data (out-of-fold ones are in docs/judges.md).
FAITHFULNESS_THRESHOLD = 0.5867
CONTEXT_THRESHOLD = 0.1111

# Answer relevancy: cosine(question, answer) mapped linearly onto [0, 1] between these
# (not fitted: the dev data has no answer-relevance labels).
RELEVANCY_COS_LOW = 0.15
RELEVANCY_COS_HIGH = 0.6
