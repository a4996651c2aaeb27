"""Every Prometheus metric the agent exports, registered on an injected registry.

Names come from ``semconv`` (``ragmon_<thing>_<unit>``); label values come from bounded
sets. Service and pipeline names are user data, so ``LabelLimiter`` caps how many distinct
values become labels. ``docs/metrics.md`` documents each metric; a test keeps the two equal.
"""

from __future__ import annotations

import re
import threading

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Info

from .. import semconv as sc
from .._version import __version__
from .score_family import ScoreFamily

# 10 ms - 5 s retrievals need resolution around the 500 ms target for P95.
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.6, 0.75, 1.0,
                   1.5, 2.0, 3.0, 5.0, 7.5, 10.0, 30.0)
SCORE_BUCKETS = tuple(round(i / 20, 2) for i in range(1, 21))  # 0.05 ... 1.0
JUDGE_DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)
DOCUMENT_COUNT_BUCKETS = (0, 1, 2, 3, 5, 8, 10, 15, 20, 30, 50, 100)

SP = (sc.L_SERVICE, sc.L_PIPELINE)


_SURROGATES = re.compile("[\ud800-\udfff]")


def clean_label_value(value: str) -> str:
    """A label value the exposition can always encode: lone surrogates (which JSON escapes such as
    ``"\\ud800"`` can carry into a Python string) become U+FFFD; one bad value must never make
    every later scrape fail."""
    return _SURROGATES.sub("\ufffd", value) if _SURROGATES.search(value) else value


class LabelLimiter:
    """Maps user-supplied label values onto a bounded set: the first ``limit`` distinct
    values pass, later ones become ``_other``. Thread-safe."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._seen: dict[str, str] = {}  # raw value -> cleaned label value
        self._lock = threading.Lock()

    def __call__(self, value: str | None) -> str:
        value = value or sc.UNKNOWN_LABEL
        label = self._seen.get(value)
        if label is not None:
            return label
        with self._lock:
            label = self._seen.get(value)
            if label is not None:
                return label
            if len(self._seen) >= self._limit:
                return sc.OVERFLOW_LABEL
            label = self._seen[value] = clean_label_value(value)
            return label


class PairLimiter:
    """Bounds the (service, pipeline) *pairs* that become label sets, not each label alone:
    200 services x 200 pipelines would otherwise give 40,000 series per metric and a scrape
    that takes a minute. The first ``limit`` distinct pairs pass; later pairs become
    ``(_other, _other)``, so at most ``limit + 1`` pairs ever exist. Thread-safe."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._pairs: dict[tuple[str, str], tuple[str, str]] = {}
        self._lock = threading.Lock()

    def __call__(self, service: str | None, pipeline: str | None) -> tuple[str, str]:
        key = (service or sc.UNKNOWN_LABEL, pipeline or sc.UNKNOWN_LABEL)
        pair = self._pairs.get(key)
        if pair is not None:
            return pair
        with self._lock:
            pair = self._pairs.get(key)
            if pair is not None:
                return pair
            if len(self._pairs) >= self._limit:
                return (sc.OVERFLOW_LABEL, sc.OVERFLOW_LABEL)
            pair = self._pairs[key] = (clean_label_value(key[0]), clean_label_value(key[1]))
            return pair


class AgentMetrics:
    """All agent metrics on one registry (pass a fresh ``CollectorRegistry`` in tests)."""

    def __init__(self, registry: CollectorRegistry | None = None, max_label_values: int = 200) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        self.service_label = LabelLimiter(max_label_values)  # metrics labelled by service alone
        self._pairs = PairLimiter(max_label_values)

        self.build = Info(sc.M_BUILD_INFO, "ragmon agent build information.", registry=r)
        self.build.info({"version": __version__})

        # ingest
        self.spans_received = Counter(sc.M_SPANS_RECEIVED, "Spans decoded from any source.", [sc.L_SOURCE], registry=r)
        self.requests_received = Counter(sc.M_REQUESTS_RECEIVED, "OTLP export requests / Kafka messages by outcome (ok, rejected).", [sc.L_SOURCE, sc.L_OUTCOME], registry=r)
        self.dropped = Counter(sc.M_DROPPED, "Input dropped before it became a trace, by reason.", [sc.L_REASON], registry=r)
        self.auth_failures = Counter(sc.M_AUTH_FAILURES, "Requests refused for authentication (reason=token: missing/wrong bearer token; tls: failed TLS handshake, e.g. an untrusted client certificate), by endpoint (receiver, metrics).", [sc.L_ENDPOINT, sc.L_REASON], registry=r)
        self.span_attribute_limit = Counter(sc.M_SPAN_ATTRIBUTE_LIMIT, "Spans that arrived with dropped_attributes_count > 0 (raise OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT).", [sc.L_SERVICE], registry=r)
        self.open_traces = Gauge(sc.M_OPEN_TRACES, "Traces being assembled (waiting for their root span or timeout).", registry=r)

        # trace accounting: received = sampled + skipped{not_sampled,...}; sampled = scored + failed + skipped{after sampling}
        self.traces_received = Counter(sc.M_TRACES_RECEIVED, "Traces assembled (every trace that entered).", SP, registry=r)
        self.traces_incomplete = Counter(sc.M_TRACES_INCOMPLETE, "Traces closed incomplete, by reason: timeout (no root span), missing_spans (the root's announced retriever/generator spans did not all come; not judged), evicted, flush.", [*SP, sc.L_REASON], registry=r)
        self.traces_sampled = Counter(sc.M_TRACES_SAMPLED, "Traces selected for judging, by why (rate or a priority rule).", [*SP, sc.L_REASON], registry=r)
        self.traces_scored = Counter(sc.M_TRACES_SCORED, "Traces the judge scored.", [*SP, sc.L_JUDGE], registry=r)
        self.traces_skipped = Counter(sc.M_TRACES_SKIPPED, "Traces not judged, by reason (not_sampled, no_content, budget, backlog_full, ...).", [*SP, sc.L_REASON], registry=r)
        self.traces_failed = Counter(sc.M_TRACES_FAILED, "Traces whose judging failed, by reason.", [*SP, sc.L_JUDGE, sc.L_REASON], registry=r)
        self.traces_duplicate = Counter(sc.M_DEDUP_HITS, "Redelivered traces recognised by trace id and not scored again.", SP, registry=r)
        self.contexts_source = Counter(sc.M_CONTEXTS_SOURCE, "RAG traces by where their contexts came from (retrieval spans, the chat's messages by id or position, the user-message fallback, none).", [*SP, sc.L_SOURCE], registry=r)
        self.judge_backlog = Gauge(sc.M_JUDGE_BACKLOG, "Sampled traces waiting for or in the judge.", registry=r)

        # latency, all traffic
        self.retrieval_latency = Histogram(sc.M_RETRIEVAL_LATENCY, "Retrieval stage duration, every trace.", SP, buckets=LATENCY_BUCKETS, registry=r)
        self.retrieval_latency_p95 = Gauge(sc.M_RETRIEVAL_LATENCY_P95, "Exact P95 retrieval latency over the sliding window.", SP, registry=r)
        self.generation_latency = Histogram(sc.M_GENERATION_LATENCY, "Generation stage duration, every trace.", SP, buckets=LATENCY_BUCKETS, registry=r)
        self.pipeline_latency = Histogram(sc.M_PIPELINE_LATENCY, "End-to-end pipeline duration, every trace.", SP, buckets=LATENCY_BUCKETS, registry=r)
        self.pipeline_latency_p95 = Gauge(sc.M_PIPELINE_LATENCY_P95, "Exact P95 pipeline latency over the sliding window.", SP, registry=r)
        self.retrieved_documents = Histogram(sc.M_RETRIEVED_DOCUMENTS, "Documents returned per retrieval.", SP, buckets=DOCUMENT_COUNT_BUCKETS, registry=r)

        # scores and diagnosis
        score_labels = [*SP, sc.L_JUDGE, sc.L_METRIC, sc.L_SAMPLE]
        self.score = Histogram(sc.M_SCORE, "Judge scores in [0, 1] by metric (faithfulness, answer_relevancy, context_precision, and each evaluator declared with --evaluators: 1 pass, 0 fail, _sum and _count only unless it declares buckets) and sampling stream (sample=rate: unbiased, what means and drop alerts read; priority: errors, negative feedback, slow or weak retrievals).", score_labels, buckets=SCORE_BUCKETS, registry=None)
        # registered through the family collector: evaluators' compact series join the same family
        self.score_family = ScoreFamily(self.score, score_labels)
        r.register(self.score_family)
        self.score_squares = Counter(sc.M_SCORE_SQUARES, "Sum of squared judge scores, beside ragmon_score_ratio_sum/_count: the variance behind the drop alerts' significance test.", [*SP, sc.L_JUDGE, sc.L_METRIC, sc.L_SAMPLE], registry=r)
        self.score_failures = Counter(sc.M_SCORE_FAILURES, "Judged traces whose score is below the metric's threshold (--diagnosis-<metric>-threshold): the failing share the drop alerts test.", [*SP, sc.L_JUDGE, sc.L_METRIC, sc.L_SAMPLE], registry=r)
        self.judge_sensitivity = Gauge(sc.M_JUDGE_SENSITIVITY, "Share of failing answers (human label) the judge scores below the threshold, from its profile or measured defaults; the alert rules correct shares with it.", [sc.L_JUDGE, sc.L_METRIC], registry=r)
        self.judge_specificity = Gauge(sc.M_JUDGE_SPECIFICITY, "Share of passing answers (human label) the judge scores at or above the threshold, from its profile or measured defaults.", [sc.L_JUDGE, sc.L_METRIC], registry=r)
        self.judge_score_gap = Gauge(sc.M_JUDGE_SCORE_GAP, "Mean score of passing answers minus failing ones (human labels), from the judge's profile or measured defaults; the alert rules turn a drop of the mean score into failing-share points with it.", [sc.L_JUDGE, sc.L_METRIC], registry=r)
        self.sample_rate = Gauge(sc.M_SAMPLE_RATE, "Judging rate in use per pipeline (fixed, or chosen by power-based sampling).", SP, registry=r)
        self.detectable_drop = Gauge(sc.M_DETECTABLE_DROP, "Smallest drop in a mean score that the pipeline's rate sample detects within the window (at the configured alpha and power).", SP, registry=r)
        self.detect_target = Gauge(sc.M_DETECT_TARGET, "The drop power-based sampling is sized to detect (--detect-drop); 0 when it is off.", registry=r)
        self.release = Gauge(sc.M_RELEASE_INFO, "1 per release seen on RAG traces: app version (service.version), prompt template version and model; for release annotations.", [*SP, sc.L_APP_VERSION, sc.L_PROMPT_VERSION, sc.L_MODEL], registry=r)
        self.feedback = Counter(sc.M_FEEDBACK, "User feedback events (ragmon.feedback on any span, also after the trace closed), negative or positive.", [*SP, sc.L_FEEDBACK], registry=r)
        self.answers_checked = Counter(sc.M_ANSWERS_CHECKED, "Judged answers whose claims got verdicts (supported, contradicted, unsupported): the denominator of the contradiction share.", [*SP, sc.L_JUDGE, sc.L_SAMPLE], registry=r)
        self.answers_contradicting = Counter(sc.M_ANSWERS_CONTRADICTING, "Judged answers with at least one claim the contexts contradict (a changed number, negation, name, date or unit); with ragmon_answers_checked_total: the share of answers that contradict their sources.", [*SP, sc.L_JUDGE, sc.L_SAMPLE], registry=r)
        self.diagnosis = Counter(sc.M_DIAGNOSIS, "Scored traces by diagnosis verdict (ok, retrieval_failure, generation_failure, both).", [*SP, sc.L_VERDICT], registry=r)

        # judge
        self.evaluator_errors = Counter(sc.M_EVALUATOR_ERRORS, "Declared evaluators that could not judge a trace, by reason (missing_verdict: the LLM judge's reply left the criterion out; timeout: a regex ran past its time limit; no_answer, no_question, no_letters); the score is left out, never guessed.", [sc.L_METRIC, sc.L_REASON], registry=r)
        self.judge_duration = Histogram(sc.M_JUDGE_DURATION, "Time to score one trace.", [sc.L_JUDGE], buckets=JUDGE_DURATION_BUCKETS, registry=r)
        self.judge_requests = Counter(sc.M_JUDGE_REQUESTS, "Judge API requests by outcome (ok, retry, timeout, connect_error, http_error, rate_limited, invalid_reply, reply_truncated, circuit_open).", [sc.L_JUDGE, sc.L_OUTCOME], registry=r)
        self.judge_tokens = Counter(sc.M_JUDGE_TOKENS, "Judge tokens used (kind=prompt|completion), from the API's usage or estimated.", [sc.L_JUDGE, sc.L_KIND], registry=r)
        self.judge_input_truncated = Counter(sc.M_JUDGE_INPUT_TRUNCATED, "Traces whose judge input was cut to the token budget.", [sc.L_JUDGE], registry=r)
        self.judge_cache_hits = Counter(sc.M_JUDGE_CACHE_HITS, "Traces answered from the judge's content-hash cache.", [sc.L_JUDGE], registry=r)
        self.judge_info = Gauge(sc.M_JUDGE_INFO, "1 for what the agent judges with: the judge, its version (local: feature version; llm: model) and the fitted judge profile (profile=\"none\": shipped defaults, not fitted to this domain).", [sc.L_JUDGE, sc.L_VERSION, sc.L_PROFILE], registry=r)
        self.judge_circuit_open = Gauge(sc.M_JUDGE_CIRCUIT_OPEN, "1 while the judge's circuit breaker is open.", [sc.L_JUDGE], registry=r)
        self.judge_invalid_contradictions = Counter(sc.M_JUDGE_INVALID_CONTRADICTIONS, "Items of the LLM judge's contradicted list dropped (reason=no_claim|evidence_not_in_sources|evidence_quotes_answer); the claim keeps its other verdict.", [sc.L_JUDGE, sc.L_REASON], registry=r)
        self.judge_concurrency_limit = Gauge(sc.M_JUDGE_CONCURRENCY_LIMIT, "Requests the LLM judge may have in flight now (1 up to --judge-concurrency), adapted to the server's latency, timeouts and 429/503/504 replies.", [sc.L_JUDGE], registry=r)
        self.judge_budget_remaining = Gauge(sc.M_JUDGE_BUDGET_REMAINING, "Judge tokens left in the current budget window (window=minute|day).", [sc.L_WINDOW], registry=r)

        # kafka
        self.kafka_messages = Counter(sc.M_KAFKA_MESSAGES, "Kafka messages consumed.", [sc.L_TOPIC], registry=r)
        self.kafka_lag = Gauge(sc.M_KAFKA_LAG, "Consumer lag in messages per assigned partition.", [sc.L_TOPIC, sc.L_PARTITION], registry=r)
        self.kafka_commits = Counter(sc.M_KAFKA_COMMITS, "Offset commits by outcome (ok, error).", [sc.L_OUTCOME], registry=r)
        self.kafka_rebalances = Counter(sc.M_KAFKA_REBALANCES, "Partition rebalances (kind=assigned|revoked).", [sc.L_KIND], registry=r)
        self.kafka_paused = Counter(sc.M_KAFKA_PAUSED, "Seconds the consumer spent paused by back-pressure.", registry=r)
        self.kafka_handover = Counter(sc.M_KAFKA_HANDOVER, "Traces in the range a partition's next owner re-reads, by kind: skipped (accounted by the previous owner, listed in the commit metadata), redelivered (re-read after an unclean hand-off, a crash: each may have been judged before, an upper bound on traces judged twice), unlisted (accounted, but the commit metadata had no room: judged again by the next owner).", [sc.L_KIND], registry=r)
        self.kafka_dead_letters = Counter(sc.M_KAFKA_DEAD_LETTERS, "Poison messages skipped (and written to the dead-letter topic when set), by reason.", [sc.L_REASON], registry=r)

    def labels_sp(self, service: str | None, pipeline: str | None) -> tuple[str, str]:
        """Bounded (service, pipeline) label values for a trace (at most max_label_values + 1 pairs)."""
        return self._pairs(service, pipeline)
