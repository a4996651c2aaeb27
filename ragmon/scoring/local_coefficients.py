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
    "bias": 3.935675,
    "log_novel_total": -0.406758,
    "min_coverage": 0.793677,
    "max_novel_run": -1.650606,
    "min_rare_coverage": 0.058031,
    "log_soft_novel_total": -0.682724,
}

# Per-context relevance = sigmoid(CONTEXT_WEIGHTS . x) * sigmoid(TOPIC_WEIGHTS . x): which
# sentence answers (fitted on WikiQA sentence labels) times whether the context is on topic at
# all (fitted on WikiQA sentences against synthetic retrieval misses: other questions' sentences).
CONTEXT_WEIGHTS: dict[str, float] = {
    "bias": -4.391116,
    "best_cos": 1.244194,
    "cos_gap": 1.180824,
    "specific_cos": 1.846337,
    "focus_cos": -0.355216,
    "focus_gap": 2.781656,
    "question_coverage": -3.176451,
    "coverage_gap": 0.524392,
    "idf_coverage": 2.846183,
    "question_entity_coverage": -0.106669,
    "answer_type_match": 0.57526,
    "definition": 1.00763,
    "length": 3.789001,
    "pronoun_start": 0.22935,
    "maxsim": 0.988028,
    "maxsim_gap": 2.663489,
    "definition_distractor": 0.479778,
    "new_entities": 0.082937,
}

TOPIC_WEIGHTS: dict[str, float] = {
    "bias": -5.732982,
    "best_cos": 14.863382,
    "maxsim": 1.415077,
    "question_coverage": 0.376774,
    "idf_coverage": 0.672492,
}

# Thresholds chosen on out-of-fold scores of the fitting data (faithfulness: the score below
# which the same share of answers is flagged as the share unfaithful; context: best balanced
# accuracy, synthetic misses included). Held-out numbers are in docs/judges.md.
FAITHFULNESS_THRESHOLD = 0.5773
CONTEXT_THRESHOLD = 0.131

# Answer relevancy: cosine(question, answer) mapped linearly onto [0, 1] between these
# (not fitted: the dev data has no answer-relevance labels).
RELEVANCY_COS_LOW = 0.15
RELEVANCY_COS_HIGH = 0.6
