"""Coefficients of the local judge's logistic models (plain numbers, no pickle).

Written by ``bench/fit_local_judge.py --write-coefficients``; see docs/judges.md for how they
were fitted and the held-out agreement they reach. Edit by refitting, not by hand.
"""

# Per-claim support: sigmoid(bias + sum(w * feature)), fitted on claim labels derived from the
# annotated hallucination spans of RAGTruth QA.
CLAIM_WEIGHTS: dict[str, float] = {
    "bias": 2.333462,
    "max_cos": 0.375673,
    "coverage": -0.215482,
    "local_coverage": 0.492571,
    "bigram_coverage": 2.137066,
    "missing_number": -0.035224,
    "local_missing_number": -0.469651,
    "missing_entity": -0.578859,
    "negation_mismatch": 0.303546,
    "short_claim": 0.009839,
    "log_novel": -0.431581,
    "novel_run": -1.863431,
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
    "bias": -3.235421,
    "best_cos": 0.41551,
    "cos_gap": 0.094706,
    "specific_cos": 0.814573,
    "focus_cos": -0.342179,
    "focus_gap": 2.100823,
    "question_coverage": -1.844443,
    "coverage_gap": 0.46081,
    "idf_coverage": 2.04088,
    "question_entity_coverage": -0.084704,
    "answer_type_match": 0.370776,
    "definition": 0.798943,
    "length": 2.859706,
    "pronoun_start": 0.326003,
    "maxsim": 1.107376,
    "maxsim_gap": -0.165412,
    "definition_distractor": 0.621471,
    "new_entities": 0.263612,
    "wh_match_gap": 8.741477,
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
CONTEXT_THRESHOLD = 0.1844

# Answer relevancy: cosine(question, answer) mapped linearly onto [0, 1] between these
# (not fitted: the dev data has no answer-relevance labels).
RELEVANCY_COS_LOW = 0.15
RELEVANCY_COS_HIGH = 0.6
