"""Every span attribute, metric name and label name ragmon reads or writes.

One place for the strings, so the SDK that writes an attribute and the agent that reads
it can never disagree. Where OpenInference has a name we use it; OTel GenAI and
OpenLLMetry names are listed so the agent can *read* them. ragmon's own extras live
under ``ragmon.*``.
"""

from __future__ import annotations

from typing import Final

# --- OpenInference (written by ragmon's SDK, read by the agent) -----------------------
SPAN_KIND: Final = "openinference.span.kind"
KIND_CHAIN: Final = "CHAIN"
KIND_RETRIEVER: Final = "RETRIEVER"
KIND_LLM: Final = "LLM"
KIND_RERANKER: Final = "RERANKER"
KIND_EMBEDDING: Final = "EMBEDDING"

INPUT_VALUE: Final = "input.value"
INPUT_MIME_TYPE: Final = "input.mime_type"
OUTPUT_VALUE: Final = "output.value"
OUTPUT_MIME_TYPE: Final = "output.mime_type"

RETRIEVAL_DOCUMENTS_PREFIX: Final = "retrieval.documents"
DOCUMENT_ID: Final = "document.id"
DOCUMENT_CONTENT: Final = "document.content"
DOCUMENT_SCORE: Final = "document.score"
DOCUMENT_METADATA: Final = "document.metadata"

LLM_MODEL_NAME: Final = "llm.model_name"
LLM_PROMPT_TEMPLATE_VERSION: Final = "llm.prompt_template.version"
SESSION_ID: Final = "session.id"
USER_ID: Final = "user.id"
TAG_TAGS: Final = "tag.tags"
METADATA: Final = "metadata"


def retrieval_document_attr(index: int, field: str) -> str:
    """``retrieval.documents.{i}.document.{field}`` (OpenInference flattened list)."""
    return f"{RETRIEVAL_DOCUMENTS_PREFIX}.{index}.{field}"


# --- OpenTelemetry general / GenAI semantic conventions (read) ------------------------
SERVICE_NAME: Final = "service.name"
SERVICE_VERSION: Final = "service.version"  # resource attribute: the app's release (ragmon_release_info)
ERROR_TYPE: Final = "error.type"
EXCEPTION_EVENT: Final = "exception"
EXCEPTION_TYPE: Final = "exception.type"
EXCEPTION_MESSAGE: Final = "exception.message"

GEN_AI_OPERATION_NAME: Final = "gen_ai.operation.name"
GEN_AI_OP_RETRIEVAL: Final = "retrieval"
GEN_AI_OP_CHAT: Final = "chat"
GEN_AI_OP_TEXT_COMPLETION: Final = "text_completion"
GEN_AI_OP_GENERATE_CONTENT: Final = "generate_content"
GEN_AI_OP_RERANK: Final = "rerank"  # OpenLLMetry (LlamaIndex postprocessors, Cohere, ...)
GEN_AI_WORKFLOW_NAME: Final = "gen_ai.workflow.name"  # names the pipeline (before --pipeline-attribute)
GEN_AI_RETRIEVAL_DOCUMENTS: Final = "gen_ai.retrieval.documents"
GEN_AI_RETRIEVAL_QUERY_TEXT: Final = "gen_ai.retrieval.query.text"
GEN_AI_REQUEST_MODEL: Final = "gen_ai.request.model"
GEN_AI_INPUT_MESSAGES: Final = "gen_ai.input.messages"
GEN_AI_OUTPUT_MESSAGES: Final = "gen_ai.output.messages"

# --- OpenLLMetry / Traceloop (read) ---------------------------------------------------
TRACELOOP_SPAN_KIND: Final = "traceloop.span.kind"
TRACELOOP_ENTITY_INPUT: Final = "traceloop.entity.input"
TRACELOOP_ENTITY_OUTPUT: Final = "traceloop.entity.output"
TRACELOOP_ENTITY_NAME: Final = "traceloop.entity.name"
TRACELOOP_WORKFLOW_NAME: Final = "traceloop.workflow.name"
OPENLLMETRY_OP_VECTOR_DB_RETRIEVE: Final = "vector_db_retrieve"
DB_QUERY_RESULT_EVENT: Final = "db.query.result"

# --- more names the agent reads (ingest/extract.py) ------------------------------------
# OpenInference messages and reranker documents (flattened lists, like retrieval.documents)
LLM_INPUT_MESSAGES_PREFIX: Final = "llm.input_messages"  # .{i}.message.role / .content
LLM_OUTPUT_MESSAGES_PREFIX: Final = "llm.output_messages"
MESSAGE_ROLE: Final = "message.role"
MESSAGE_CONTENT: Final = "message.content"
RERANKER_INPUT_DOCUMENTS_PREFIX: Final = "reranker.input_documents"
RERANKER_OUTPUT_DOCUMENTS_PREFIX: Final = "reranker.output_documents"
RERANKER_QUERY: Final = "reranker.query"
# OTel GenAI extras and the older flattened prompt/completion form (still sent by OpenLLMetry)
GEN_AI_RESPONSE_MODEL: Final = "gen_ai.response.model"
GEN_AI_CONVERSATION_ID: Final = "gen_ai.conversation.id"
GEN_AI_SYSTEM_INSTRUCTIONS: Final = "gen_ai.system_instructions"
GEN_AI_PROMPT_PREFIX: Final = "gen_ai.prompt"  # .{i}.role / .content
GEN_AI_COMPLETION_PREFIX: Final = "gen_ai.completion"
ENDUSER_ID: Final = "enduser.id"
# OpenLLMetry
TRACELOOP_KIND_WORKFLOW: Final = "workflow"
TRACELOOP_KIND_TASK: Final = "task"
LLM_REQUEST_TYPE: Final = "llm.request.type"  # chat | completion | embedding | rerank
TRACELOOP_ASSOCIATION_PREFIX: Final = "traceloop.association.properties."
DB_QUERY_RESULT_ID: Final = "db.query.result.id"
DB_QUERY_RESULT_SCORE: Final = "db.query.result.score"
DB_QUERY_RESULT_DISTANCE: Final = "db.query.result.distance"
DB_QUERY_RESULT_DOCUMENT: Final = "db.query.result.document"
DB_QUERY_RESULT_METADATA: Final = "db.query.result.metadata"

# --- ragmon's own extras ----------------------------------------------------------------
RAGMON_PIPELINE: Final = "ragmon.pipeline"
RAGMON_STAGE: Final = "ragmon.stage"  # pipeline | retriever | generator
RAGMON_CONTENT_SAMPLED: Final = "ragmon.content.sampled"  # bool: text attached to this trace
RAGMON_TRUNCATED_FIELDS: Final = "ragmon.truncated_fields"  # list of attribute names cut to the cap
# On the pipeline span: how many retriever / generator spans the SDK made inside it, so that an
# agent knows when the trace is whole (its parts may come in several exports or messages).
RAGMON_RETRIEVER_SPANS: Final = "ragmon.spans.retriever"  # int
RAGMON_GENERATOR_SPANS: Final = "ragmon.spans.generator"  # int
RAGMON_REDACTED: Final = "ragmon.redacted"  # bool: the redaction hook changed/dropped text
RAGMON_DOCUMENT_COUNT: Final = "ragmon.retrieval.document_count"
RAGMON_EVAL_ROW_ID: Final = "ragmon.eval.row_id"  # ties a replayed trace to its golden row (ragmon eval --traces)
RAGMON_FEEDBACK: Final = "ragmon.feedback"  # "negative" | "positive" | numeric
RAGMON_SDK_VERSION: Final = "ragmon.sdk.version"
# set by the agent's extractor on RagTrace.attributes (never read from spans)
RAGMON_NOT_RAG: Final = "ragmon.not_rag"  # True: no retrieval, reranking, generation or pipeline span
RAGMON_CONTEXTS_SOURCE: Final = "ragmon.contexts.source"  # a CONTEXTS_SOURCES value (also on a fallback document)
# where the extractor read the question / answer: "<span name>: <attribute>" (the trace inspector shows it)
RAGMON_QUESTION_FROM: Final = "ragmon.extract.question_from"
RAGMON_ANSWER_FROM: Final = "ragmon.extract.answer_from"

STAGE_PIPELINE: Final = "pipeline"
STAGE_RETRIEVER: Final = "retriever"
STAGE_GENERATOR: Final = "generator"

TRUNCATION_MARKER: Final = "…[truncated by ragmon]"

# --- Metric names: ragmon_<thing>_<unit>, base units, counters end in _total -----------
# (prometheus_client appends _total to Counter names itself; these are the names without it)
M_SPANS_RECEIVED: Final = "ragmon_spans_received"  # counter {source}
M_REQUESTS_RECEIVED: Final = "ragmon_receiver_requests"  # counter {source, outcome}
M_DROPPED: Final = "ragmon_dropped"  # counter {reason}
M_AUTH_FAILURES: Final = "ragmon_auth_failures"  # counter {endpoint, reason}
M_TRACES_RECEIVED: Final = "ragmon_traces_received"  # counter {service, pipeline}
M_TRACES_SAMPLED: Final = "ragmon_traces_sampled"  # counter {service, pipeline, reason}
M_TRACES_SCORED: Final = "ragmon_traces_scored"  # counter {service, pipeline, judge}
M_TRACES_SKIPPED: Final = "ragmon_traces_skipped"  # counter {service, pipeline, reason}
M_TRACES_FAILED: Final = "ragmon_traces_failed"  # counter {service, pipeline, judge, reason}
M_TRACES_INCOMPLETE: Final = "ragmon_traces_incomplete"  # counter {service, pipeline, reason}
M_SPAN_ATTRIBUTE_LIMIT: Final = "ragmon_spans_attribute_limit_hit"  # counter {service}
M_OPEN_TRACES: Final = "ragmon_open_traces"  # gauge
M_JUDGE_BACKLOG: Final = "ragmon_judge_backlog"  # gauge: traces waiting for the judge
M_SCORE: Final = "ragmon_score_ratio"  # histogram {service, pipeline, judge, metric, sample}
M_SCORE_SQUARES: Final = "ragmon_score_squared_ratio"  # counter {service, pipeline, judge, metric, sample}: sum of x²
# counter {service, pipeline, judge, metric, sample}: scores below the metric's threshold
M_SCORE_FAILURES: Final = "ragmon_score_failures"
M_EVALUATOR_ERRORS: Final = "ragmon_evaluator_errors"  # counter {metric, reason}
M_JUDGE_SENSITIVITY: Final = "ragmon_judge_sensitivity_ratio"  # gauge {judge, metric}: P(score < threshold | failing)
M_JUDGE_SPECIFICITY: Final = "ragmon_judge_specificity_ratio"  # gauge {judge, metric}: P(score >= threshold | passing)
M_JUDGE_SCORE_GAP: Final = "ragmon_judge_score_gap_ratio"  # gauge {judge, metric}: E[score|passing] - E[score|failing]
M_SAMPLE_RATE: Final = "ragmon_sample_rate_ratio"  # gauge {service, pipeline}: the judging rate in use
M_DETECTABLE_DROP: Final = "ragmon_detectable_drop_ratio"  # gauge {service, pipeline}: drop the rate sample can detect
M_DETECT_TARGET: Final = "ragmon_detect_target_drop_ratio"  # gauge: the --detect-drop target (only when set)
M_RELEASE_INFO: Final = "ragmon_release_info"  # gauge {service, pipeline, app_version, prompt_version, model}: 1
M_RETRIEVAL_LATENCY: Final = "ragmon_retrieval_latency_seconds"  # histogram {service, pipeline}
M_RETRIEVAL_LATENCY_P95: Final = "ragmon_retrieval_latency_p95_seconds"  # gauge {service, pipeline}
M_GENERATION_LATENCY: Final = "ragmon_generation_latency_seconds"  # histogram {service, pipeline}
M_PIPELINE_LATENCY: Final = "ragmon_pipeline_latency_seconds"  # histogram {service, pipeline}
M_PIPELINE_LATENCY_P95: Final = "ragmon_pipeline_latency_p95_seconds"  # gauge {service, pipeline}
M_RETRIEVED_DOCUMENTS: Final = "ragmon_retrieved_documents"  # histogram {service, pipeline}
M_JUDGE_DURATION: Final = "ragmon_judge_duration_seconds"  # histogram {judge}
M_JUDGE_REQUESTS: Final = "ragmon_judge_requests"  # counter {judge, outcome}
M_JUDGE_TOKENS: Final = "ragmon_judge_tokens"  # counter {judge, kind}
M_JUDGE_INPUT_TRUNCATED: Final = "ragmon_judge_input_truncated"  # counter {judge}
M_JUDGE_CACHE_HITS: Final = "ragmon_judge_cache_hits"  # counter {judge}
M_JUDGE_CIRCUIT_OPEN: Final = "ragmon_judge_circuit_open"  # gauge {judge}: 1 while open
M_JUDGE_CONCURRENCY_LIMIT: Final = "ragmon_judge_concurrency_limit"  # gauge {judge}: requests in flight allowed now
M_JUDGE_BUDGET_REMAINING: Final = "ragmon_judge_budget_remaining_tokens"  # gauge {window}
# counter {judge, reason}: items of the LLM judge's "contradicted" list dropped (INVALID_CONTRADICTION_*)
M_JUDGE_INVALID_CONTRADICTIONS: Final = "ragmon_judge_invalid_contradictions"
M_DIAGNOSIS: Final = "ragmon_diagnosis"  # counter {service, pipeline, verdict}
# Scores.details keys read outside scoring (the trace inspector): per-claim verdicts
# (scoring/claim_verdicts.py) and the declared evaluators' reasons (evaluators/)
DETAIL_CLAIM_VERDICTS: Final = "claim_verdicts"
DETAIL_EVALUATORS: Final = "evaluators"
M_ANSWERS_CHECKED: Final = "ragmon_answers_checked"  # counter {service, pipeline, judge, sample}
M_ANSWERS_CONTRADICTING: Final = "ragmon_answers_contradicting"  # counter {service, pipeline, judge, sample}
M_DEDUP_HITS: Final = "ragmon_traces_duplicate"  # counter {service, pipeline}
M_CONTEXTS_SOURCE: Final = "ragmon_contexts_source"  # counter {service, pipeline, source}: where contexts came from
M_FEEDBACK: Final = "ragmon_feedback"  # counter {service, pipeline, feedback}: user feedback spans
M_KAFKA_MESSAGES: Final = "ragmon_kafka_messages_consumed"  # counter {topic}
M_KAFKA_LAG: Final = "ragmon_kafka_consumer_lag_messages"  # gauge {topic, partition}
M_KAFKA_COMMITS: Final = "ragmon_kafka_commits"  # counter {outcome}
M_KAFKA_REBALANCES: Final = "ragmon_kafka_rebalances"  # counter {kind}
M_KAFKA_PAUSED: Final = "ragmon_kafka_paused_seconds"  # counter
M_KAFKA_DEAD_LETTERS: Final = "ragmon_kafka_dead_letters"  # counter {reason}
M_KAFKA_HANDOVER: Final = "ragmon_kafka_handover_traces"  # counter {kind}: skipped | redelivered | unlisted
HANDOVER_SKIPPED: Final = "skipped"  # re-read after a hand-off; the previous owner had accounted for it
HANDOVER_REDELIVERED: Final = "redelivered"  # re-read after an unclean hand-off (a crash): maybe judged twice
HANDOVER_UNLISTED: Final = "unlisted"  # accounted but past the commit metadata's room: its next owner judges it again
M_BUILD_INFO: Final = "ragmon_build"  # info {version}
M_JUDGE_INFO: Final = "ragmon_judge_info"  # gauge {judge, version, profile}: 1, what the agent judges with

# --- offline evaluation (ragmon eval --pushgateway; job ragmon_eval, grouped by evalset) ---------
M_EVAL_SCORE: Final = "ragmon_eval_score_ratio"
M_EVAL_SCORE_CI_LOWER: Final = "ragmon_eval_score_ci95_lower_ratio"
M_EVAL_SCORE_CI_UPPER: Final = "ragmon_eval_score_ci95_upper_ratio"
M_EVAL_QUESTIONS: Final = "ragmon_eval_questions"
M_EVAL_PROBLEMS: Final = "ragmon_eval_problems"
M_EVAL_VERDICTS: Final = "ragmon_eval_verdicts"
M_EVAL_GATE_PASSED: Final = "ragmon_eval_gate_passed"
M_EVAL_GATE_RULES: Final = "ragmon_eval_gate_rules"
M_EVAL_RETRIEVAL_P95: Final = "ragmon_eval_retrieval_latency_p95_seconds"
M_EVAL_PIPELINE_P95: Final = "ragmon_eval_pipeline_latency_p95_seconds"
M_EVAL_LAST_RUN: Final = "ragmon_eval_last_run_timestamp_seconds"

FEEDBACK_NEGATIVE: Final = "negative"
FEEDBACK_POSITIVE: Final = "positive"

# --- Label names and their bounded value sets ---------------------------------------------
L_SERVICE: Final = "service"
L_PIPELINE: Final = "pipeline"
L_JUDGE: Final = "judge"
L_METRIC: Final = "metric"
L_REASON: Final = "reason"
L_OUTCOME: Final = "outcome"
L_SOURCE: Final = "source"
L_KIND: Final = "kind"
L_VERDICT: Final = "verdict"
L_FEEDBACK: Final = "feedback"  # negative | positive
L_TOPIC: Final = "topic"
L_PARTITION: Final = "partition"
L_WINDOW: Final = "window"
L_ENDPOINT: Final = "endpoint"  # receiver | metrics
L_SAMPLE: Final = "sample"  # rate | priority: which sampling stream a score belongs to
L_APP_VERSION: Final = "app_version"  # ragmon_release_info: the app's service.version
L_PROMPT_VERSION: Final = "prompt_version"  # ragmon_release_info: llm.prompt_template.version
L_MODEL: Final = "model"  # ragmon_release_info: llm.model_name / gen_ai.*.model
L_VERSION: Final = "version"  # ragmon_judge_info: the judge's feature version (local) or model (llm)
L_PROFILE: Final = "profile"  # ragmon_judge_info: the fitted judge profile's name, or PROFILE_NONE

METRIC_FAITHFULNESS: Final = "faithfulness"
METRIC_ANSWER_RELEVANCY: Final = "answer_relevancy"
METRIC_CONTEXT_PRECISION: Final = "context_precision"
# reference-based and offline-only quality metrics (ragmon eval); the table is ragmon/quality.py
METRIC_CONTEXT_RECALL: Final = "context_recall"
METRIC_ANSWER_CORRECTNESS: Final = "answer_correctness"
METRIC_ABSTENTION: Final = "abstention"
METRIC_CITATION_PRESENCE: Final = "citation_presence"
METRIC_CITATION_CORRECTNESS: Final = "citation_correctness"
METRIC_CITATION_COVERAGE: Final = "citation_coverage"

VERDICT_OK: Final = "ok"
VERDICT_RETRIEVAL: Final = "retrieval_failure"
VERDICT_GENERATION: Final = "generation_failure"
VERDICT_BOTH: Final = "both"
VERDICTS: Final = (VERDICT_OK, VERDICT_RETRIEVAL, VERDICT_GENERATION, VERDICT_BOTH)
# The agent's own verdict for a RAG trace whose retrieval returned no documents: a retrieval problem,
# not judged (a faithfulness of 0 would enter the mean as a hallucination); counted under
# ragmon_diagnosis_total and skipped{no_context}.
VERDICT_NO_CONTEXT: Final = "no_context"

# Label value used once a bounded label set is full (see export.labels).
OVERFLOW_LABEL: Final = "_other"
UNKNOWN_LABEL: Final = "unknown"
PROFILE_NONE: Final = "none"  # ragmon_judge_info{profile}: no fitted profile, the judge's shipped defaults

# --- Bounded reason values -------------------------------------------------------------------
# traces skipped (not judged, by design)
SKIP_NOT_SAMPLED: Final = "not_sampled"
SKIP_NO_CONTENT: Final = "no_content"  # SDK content rate left the text off
SKIP_NO_ANSWER: Final = "no_answer"  # retrieval-only trace: latency yes, judge no
SKIP_NO_QUESTION: Final = "no_question"
SKIP_BUDGET: Final = "budget"
SKIP_BACKLOG_FULL: Final = "backlog_full"
SKIP_DUPLICATE: Final = "duplicate"
SKIP_SHUTDOWN: Final = "shutdown"
SKIP_NO_CONTEXT: Final = "no_context"  # retrieval ran and returned nothing: verdict no_context, not judged
SKIP_INCOMPLETE: Final = "incomplete"  # spans the root announced never came: never judged on part of a trace
SKIP_NOT_RAG: Final = "not_rag"  # no retrieval/generation span: index building, embedding batches, ...
NOT_RAG_PIPELINE_LABEL: Final = "_not_rag"  # pipeline label of not_rag traces (keeps them out of traffic)
# traces failed (the judge was asked and could not answer)
FAIL_TIMEOUT: Final = "timeout"
FAIL_HTTP: Final = "http_error"
FAIL_CONNECT: Final = "connect_error"  # no connection to the judge endpoint (refused, unreachable): it is down
FAIL_RATE_LIMITED: Final = "rate_limited"
FAIL_INVALID_REPLY: Final = "invalid_reply"
# an unusable reply cut off at max_tokens (finish_reason "length"): the cap or a verbose model is the cause
FAIL_REPLY_TRUNCATED: Final = "reply_truncated"
FAIL_CIRCUIT_OPEN: Final = "circuit_open"
FAIL_INTERNAL: Final = "internal_error"
# contradiction items the LLM judge's reply listed and ragmon dropped (the claim keeps its other verdict)
INVALID_CONTRADICTION_NO_CLAIM: Final = "no_claim"  # the item names no claim of the reply
INVALID_CONTRADICTION_NOT_IN_SOURCES: Final = "evidence_not_in_sources"  # its quote is in no context shown
INVALID_CONTRADICTION_QUOTES_ANSWER: Final = "evidence_quotes_answer"  # its quote is the claim's own sentence
# input dropped before it became a trace
DROP_MALFORMED_BODY: Final = "malformed_body"
DROP_UNSUPPORTED_MEDIA: Final = "unsupported_media_type"
DROP_BODY_TOO_LARGE: Final = "body_too_large"
DROP_MALFORMED_SPAN: Final = "malformed_span"
DROP_OPEN_TRACES_FULL: Final = "open_traces_limit"  # oldest open trace evicted
DROP_SPANS_PER_TRACE: Final = "spans_per_trace_limit"
DROP_LATE_SPAN: Final = "late_span"  # span of a trace already closed
DROP_DUPLICATE_SPAN: Final = "duplicate_span"  # same span id twice in one open trace (redelivery)
DROP_POISON_MESSAGE: Final = "poison_message"
DROP_OVERSIZE_MESSAGE: Final = "oversize_message"
DROP_MALFORMED_REQUEST: Final = "malformed_http_request"  # HTTP framing the server could not parse
DROP_READ_TIMEOUT: Final = "read_timeout"  # request body not received within the read timeout
DROP_INVALID_TIMESTAMP: Final = "invalid_timestamp"  # a latency outside [0, RAGMON_LATENCY_MAX_S], not observed
DROP_TEXT_TRUNCATED: Final = "text_truncated"  # trace text cut to RAGMON_ASSEMBLER_MAX_TEXT_CHARS before judging
# receiver/source request outcomes (ragmon_receiver_requests_total{outcome})
OUTCOME_OK: Final = "ok"
OUTCOME_PARTIAL: Final = "partial"  # accepted, some spans rejected (OTLP partial_success)
OUTCOME_REJECTED: Final = "rejected"  # nothing accepted: bad body, media type, size, method
OUTCOME_THROTTLED: Final = "throttled"  # 503 + Retry-After under back-pressure (client retries)
OUTCOME_UNAUTHORIZED: Final = "unauthorized"  # 401: missing or wrong bearer token
# ragmon_auth_failures_total{endpoint, reason}
ENDPOINT_RECEIVER: Final = "receiver"
ENDPOINT_METRICS: Final = "metrics"
AUTH_FAILED_TOKEN: Final = "token"  # missing or wrong bearer token
AUTH_FAILED_TLS: Final = "tls"  # TLS handshake failed (untrusted or missing client certificate, ...)
# sampled reasons
SAMPLED_RATE: Final = "rate"
SAMPLED_PRIORITY_ERROR: Final = "priority_error"
SAMPLED_PRIORITY_FEEDBACK: Final = "priority_feedback"
SAMPLED_PRIORITY_SLOW: Final = "priority_slow_retrieval"
SAMPLED_PRIORITY_LOW_SCORE: Final = "priority_low_retrieval_score"
# the two score streams (ragmon_score_ratio{sample}): rate samples are unbiased, priority ones are not
SAMPLE_STREAM_RATE: Final = "rate"
SAMPLE_STREAM_PRIORITY: Final = "priority"
# where a trace's contexts came from (ragmon_contexts_source_total{source}, ragmon.contexts.source)
CONTEXTS_RETRIEVAL: Final = "retrieval"  # the retrieval/reranker spans carried the text
CONTEXTS_MESSAGE_ID: Final = "message_id"  # ids-only documents, text found by id in the chat's input messages
CONTEXTS_MESSAGE_POSITION: Final = "message_position"  # ids-only documents, one context message each
CONTEXTS_MESSAGES: Final = "messages"  # no retrieval span: tool results / context messages of the chat
CONTEXTS_USER_MESSAGE: Final = "user_message"  # fallback: the user message minus the question
CONTEXTS_NONE: Final = "none"  # no context text at all
CONTEXTS_SOURCES: Final = (CONTEXTS_RETRIEVAL, CONTEXTS_MESSAGE_ID, CONTEXTS_MESSAGE_POSITION, CONTEXTS_MESSAGES,
                           CONTEXTS_USER_MESSAGE, CONTEXTS_NONE)
