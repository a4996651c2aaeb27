"""Coefficients of the local judge's logistic models (plain numbers, no pickle).

Claim support and context relevance: written by ``bench/fit_local_judge.py --write-coefficients``
(RAGTruth QA spans, WikiQA). Answer-level faithfulness and answer relevancy: written by
``bench/judge_fidelity.py --fit --write-coefficients`` (every dev set, grouped cross-validation).
See docs/judges.md for how they were fitted and the held-out agreement they reach. Edit by
refitting, not by hand.
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

# Answer-level faithfulness from aggregates of the per-claim evidence, the trace's shape and their
# interactions (``local_model.with_interactions``): P(faithful) fitted with every dev set and both
# classes weighing the same, so 0.5 is the balanced cut in every domain.
ANSWER_WEIGHTS: dict[str, float] = {
    "bias": 3.367602,
    "min_cos": -0.421704,
    "mean_cos": 0.988691,
    "min_coverage": 0.088377,
    "mean_coverage": 1.568567,
    "min_bigram": 0.179534,
    "mean_bigram": -0.279662,
    "any_missing_number": 0.301836,
    "any_local_missing_number": -0.48288,
    "share_missing_entity": -0.426558,
    "any_negation_mismatch": 0.147655,
    "log_claims": -0.044403,
    "log_novel_total": -0.167603,
    "max_novel_run": -1.250563,
    "share_low_coverage": -0.079677,
    "novel_share_total": -1.029447,
    "log_answer_tokens": -0.051411,
    "mean_novel_run": 1.312912,
    "share_runs": -0.511309,
    "log_weighted_novel": -0.528189,
    "log_cos_weighted_novel": -0.351836,
    "min_rare_coverage": -0.320271,
    "mean_rare_coverage": -1.674613,
    "log_rare_novel_total": 0.098302,
    "log_soft_novel_total": -0.252599,
    "max_soft_novel": 0.428044,
    "no_question": -0.482375,
    "structured": 0.181835,
    "log_context_words": 0.109799,
    "single_claim": 1.190397,
    "any_contradiction": -0.465733,
    "share_contradicted": -1.813751,
    "max_soft_novel_share": -0.557755,
    "mean_soft_novel_share": -0.652499,
    "max_novel_share": -0.088377,
    "min_cos*nq": 1.170166,
    "mean_cos*nq": 0.859189,
    "min_coverage*nq": -0.99065,
    "mean_coverage*nq": 0.023491,
    "min_bigram*nq": 1.213001,
    "mean_bigram*nq": -0.133558,
    "any_missing_number*nq": -0.917423,
    "any_local_missing_number*nq": 0.354778,
    "share_missing_entity*nq": -0.839206,
    "any_negation_mismatch*nq": 0.232509,
    "log_claims*nq": -0.013412,
    "log_novel_total*nq": 0.119908,
    "max_novel_run*nq": 0.898779,
    "share_low_coverage*nq": -1.35002,
    "novel_share_total*nq": -1.938294,
    "log_answer_tokens*nq": -0.043946,
    "mean_novel_run*nq": 0.258381,
    "share_runs*nq": -0.383623,
    "log_weighted_novel*nq": -0.01889,
    "log_cos_weighted_novel*nq": -0.0265,
    "min_rare_coverage*nq": -1.41203,
    "mean_rare_coverage*nq": -0.693393,
    "log_rare_novel_total*nq": 0.256244,
    "log_soft_novel_total*nq": 0.092725,
    "max_soft_novel*nq": 0.371495,
    "any_contradiction*nq": 1.117287,
    "share_contradicted*nq": -0.252463,
    "max_soft_novel_share*nq": 0.724824,
    "mean_soft_novel_share*nq": -1.692401,
    "max_novel_share*nq": -0.112284,
    "min_cos*st": -1.594807,
    "mean_cos*st": -0.067016,
    "min_coverage*st": 0.532508,
    "mean_coverage*st": 0.378256,
    "min_bigram*st": -2.056739,
    "mean_bigram*st": -1.225099,
    "any_missing_number*st": 1.034502,
    "any_local_missing_number*st": -0.358438,
    "share_missing_entity*st": -4.392173,
    "any_negation_mismatch*st": -0.612082,
    "log_claims*st": 0.240966,
    "log_novel_total*st": -0.006604,
    "max_novel_run*st": 0.449689,
    "share_low_coverage*st": 1.273443,
    "novel_share_total*st": -0.399733,
    "log_answer_tokens*st": 0.038665,
    "mean_novel_run*st": -0.23593,
    "share_runs*st": 0.089963,
    "log_weighted_novel*st": -0.074402,
    "log_cos_weighted_novel*st": 0.045179,
    "min_rare_coverage*st": 1.122106,
    "mean_rare_coverage*st": 0.392112,
    "log_rare_novel_total*st": -0.000257,
    "log_soft_novel_total*st": 0.089414,
    "max_soft_novel*st": 0.181835,
    "any_contradiction*st": -2.140152,
    "share_contradicted*st": -4.566303,
    "max_soft_novel_share*st": 0.451004,
    "mean_soft_novel_share*st": 1.566083,
    "max_novel_share*st": 0.23243,
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

# Thresholds: faithfulness is a balanced probability (0.5); context relevance: best balanced
# accuracy on out-of-fold scores, synthetic misses included. Held-out numbers are in docs/judges.md.
FAITHFULNESS_THRESHOLD = 0.5
CONTEXT_THRESHOLD = 0.1844
# A trace with a single context: no other context to compare with, so every relative feature
# reads "best of the trace"; its threshold is chosen on WikiQA sentences judged alone (grouped
# 5-fold CV: the fold thresholds 0.69-0.78 on the centred scale; out-of-fold balanced accuracy
# 0.729 against 0.668 with the shared threshold; bench/judge_fidelity.py).
CONTEXT_THRESHOLD_SINGLE = 0.3788
# An explicit contradiction (digits, flipped negation, foreign name) caps faithfulness below 0.5:
# the most actionable alarms (changed numbers, flipped negations) always flip the verdict. Measured
# cost across the dev sets: -0.002 mean AUC (docs/judges.md).
CAP_CONTRADICTIONS = True

# The trained reader's answer-level features (``reader.verdicts.FEATURES``) stacked on the logit of the
# faithfulness above: P(faithful) = sigmoid(bias + base * logit(faithfulness) + sum(w * feature)).
# Written by ``bench/fit_reader_stack.py --write-coefficients``: fitted on the RAGTruth rows the reader
# never trained on (its held-out fold), all three tasks together, out-of-fold numbers in docs/judges.md.
# Empty: the reader gives claim verdicts only, faithfulness stays the base model's. Empty on purpose
# today: out of fold the stack added nothing (QA 0.829 vs 0.837, summaries 0.710 vs 0.719, data-to-text
# 0.767 vs 0.772, WiCE 0.948 vs 0.953) and moved the 0.5 cut on summaries, so it does not ship.
READER_WEIGHTS: dict[str, float] = {
}
# A contradiction only the reader finds caps faithfulness like a lexical one (measured: docs/judges.md).
CAP_READER_CONTRADICTIONS = False

# Answer relevancy: P(the answer addresses the question) from cosine, new information beyond the
# question's words and the asked-for answer type (fitted on WikiQA sentences and constructed
# negatives: answers to other questions, echoes; refusals are capped by rule).
RELEVANCY_WEIGHTS: dict[str, float] = {
    "bias": -21.472183,
    "cos": 8.293539,
    "new_info": 15.597274,
    "type_match": 1.849758,
    "type_other": 1.649056,
}
