"""The agent's settings, declared once: ``AgentConfig`` (each setting's field, type and default) and
``agent_settings()`` (each setting's ``RAGMON_*`` variable, flag, parser and help: the fixed rows here, and
one diagnosis threshold per online metric of the quality table as it is when read, so a metric
registered at run time gets its setting too).

The CLI builds its flags from the table, the README's configuration table is generated from it
(``scripts/gen_config_table.py``), and ``config.py`` loads and checks the values.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from . import doc_ids, judges, quality
from .config_values import (
    Parser,
    Setting,
    choice,
    float_in,
    int_at_least,
    parse_bool,
    parse_csv,
    parse_duration_s,
    parse_judge_name,
    parse_nonnegative_float,
    parse_nonnegative_int,
    parse_optional_float,
    parse_optional_port,
    parse_optional_str,
    parse_port,
    parse_positive_float,
    parse_positive_int,
    parse_rate,
    parse_rate_map,
    parse_rename_rules,
    parse_str,
)

_Section = TypeVar("_Section")


@dataclass(frozen=True, slots=True)
class AgentConfig:
    """All agent settings. Build with ``load_agent_config``; defaults are the embedded default."""

    # source
    source: str = "http"
    receiver_host: str = "127.0.0.1"
    receiver_port: int = 4318
    receiver_grpc_port: int | None = None  # OTLP/gRPC beside OTLP/HTTP (4317 is the usual port); None = off
    receiver_max_body_bytes: int = 16 * 1024 * 1024
    receiver_read_timeout_s: float = 30.0
    receiver_tls_cert_file: str | None = None
    receiver_tls_key_file: str | None = None
    receiver_tls_client_ca_file: str | None = None
    receiver_bearer_token: str | None = None
    # metrics / health server
    metrics_host: str = "127.0.0.1"
    metrics_port: int = 9464
    metrics_max_label_values: int = 200
    metrics_tls_cert_file: str | None = None
    metrics_tls_key_file: str | None = None
    metrics_bearer_token: str | None = None
    insecure_allow_unauthenticated_bind: bool = False
    # assembly
    trace_timeout_s: float = 10.0
    max_open_traces: int = 50_000
    max_spans_per_trace: int = 2_000
    root_grace_s: float = 0.0
    max_buffered_bytes: int = 128 * 1024 * 1024
    max_text_chars: int = 200_000
    fast_path: bool = True  # read traces outside the judging sample for latency only (ingest/otlp_proto.py)
    latency_window_s: float = 300.0
    latency_max_s: float = 3600.0
    # sampling
    sample_rate: float = 1.0
    pipeline_sample_rates: Mapping[str, float] = field(default_factory=dict)
    priority_errors: bool = True
    priority_feedback: bool = True
    priority_slow_retrieval_s: float | None = None
    priority_min_top_score: float | None = None
    dedup_size: int = 100_000
    # power-based sampling (ragmon/sampling/power.py): off while detect_drop is None
    detect_drop: float | None = None
    detect_within_s: float = 3600.0
    detect_power: float = 0.8
    # the drop alerts' own level (generate_rules.py DROP_ALPHA), for the online metrics of the table
    detect_alpha: float = field(default_factory=quality.alert_alpha)
    # the false-page budget the alert rules were generated for (generate_rules.py --pipelines/--fleet-budget):
    # unless --alpha is given, detect_alpha = quality.alert_alpha(alert_pipelines, alert_budget)
    alert_pipelines: int = 1
    alert_budget: float = quality.PAGE_BUDGET_PER_30D
    detect_min_rate: float = 0.0
    detect_max_rate: float = 1.0
    detect_replicas: int = 1
    # judge
    judge: str = "local"
    judge_concurrency: int = 4
    judge_backlog: int = 1_000
    judge_timeout_s: float = 60.0
    judge_base_url: str | None = None
    judge_model: str | None = None
    judge_api_key: str | None = None
    judge_mode: str = "compact"
    judge_max_retries: int = 4
    judge_requests_per_minute: int = 0  # 0 = unlimited
    judge_tokens_per_minute: int = 0
    judge_budget_tokens_per_minute: int = 0
    judge_budget_tokens_per_day: int = 0
    judge_cache_ttl_s: float = 3600.0
    judge_cache_size: int = 10_000
    judge_max_input_tokens: int = 6_000
    judge_max_completion_tokens: int = 1_024
    judge_circuit_failures: int = 5
    judge_circuit_reset_s: float = 30.0
    judge_embedding_model: str | None = None  # None: the agent's own MiniLM embedder
    judge_model_path: str | None = None
    judge_model_sha256: str | None = None
    judge_int8: bool = True  # local judge: integer matrix products (scoring/local/onnx_int8.py); off = float32
    judge_profile: str | None = None  # local judge: weights/thresholds fitted by `ragmon calibrate --fit`
    evaluators: str | None = None  # YAML file of user-declared evaluators (docs/evaluators.md)
    # diagnosis: metric -> threshold for every online metric of the quality table (ragmon/quality.py),
    # each entry its own setting (diagnosis_<metric>_threshold), generated from the table
    diagnosis: Mapping[str, float] = field(default_factory=lambda: {m.name: m.threshold for m in quality.online()})
    worst_size: int = 50
    worst_max_chars: int = 500
    trace_inspector: bool = True  # GET /traces/{trace_id} on the metrics port
    trace_inspector_size: int = 200
    trace_inspector_max_chars: int = 2000
    # extraction: how a trace's pipeline and documents are named (ragmon/ingest/extract)
    pipeline_attribute: str | None = None
    pipeline_rename: Mapping[str, str] = field(default_factory=dict)
    doc_id_keys: tuple[str, ...] = doc_ids.METADATA_ID_KEYS
    # judged traces for the golden set (ragmon dataset harvest)
    export_judged: str | None = None
    export_judged_max_bytes: int = 100 * 1024 * 1024
    # kafka
    kafka_bootstrap_servers: str = "127.0.0.1:9092"
    kafka_topics: tuple[str, ...] = ("otlp_spans",)
    kafka_group_id: str = "ragmon-agent"
    kafka_encoding: str = "otlp_proto"
    kafka_security_protocol: str = "PLAINTEXT"
    kafka_sasl_mechanism: str | None = None
    kafka_sasl_username: str | None = None
    kafka_sasl_password: str | None = None
    kafka_ssl_cafile: str | None = None
    kafka_ssl_certfile: str | None = None
    kafka_ssl_keyfile: str | None = None
    kafka_dead_letter_topic: str | None = None
    kafka_max_message_bytes: int = 8 * 1024 * 1024
    kafka_commit_interval_s: float = 2.0
    # process
    log_level: str = "info"
    shutdown_grace_s: float = 20.0
    shutdown_final_scrape_s: float = 0.0

    def section(self, cls: type[_Section], prefix: str = "") -> _Section:
        """A stage's frozen settings dataclass, each field filled from the setting ``prefix + name``.

        With a ``prefix`` (``judge_``), fields that have no such setting keep their own defaults
        (tuning knobs the agent does not expose); without one, every field must be a setting.
        """
        values, known = {}, settings_by_name()
        for f in dataclasses.fields(cls):  # type: ignore[arg-type]
            name = prefix + f.name
            if prefix and name not in known:
                continue
            values[f.name] = getattr(self, name)
        return cls(**values)

    def diagnosis_thresholds(self) -> dict[str, float]:
        """Diagnosis threshold per quality metric: these settings for online metrics, else the table's."""
        return {**quality.default_thresholds(), **self.diagnosis}

    def redacted(self) -> dict[str, Any]:
        """Settings as a dict with secrets masked, for logs and /readyz."""
        out = dataclasses.asdict(self)
        for setting in agent_settings():
            if setting.secret and out.get(setting.name):
                out[setting.name] = "***"
        return out


def field_default(name: str) -> Any:
    """``AgentConfig``'s default for the field ``name`` (a fresh object for a mapping)."""
    f = AgentConfig.__dataclass_fields__[name]
    if f.default is not dataclasses.MISSING:
        return f.default
    factory: Callable[[], Any] = f.default_factory  # type: ignore[assignment]
    return factory()


def _threshold_help(m: quality.QualityMetric) -> str:
    blamed = "a retrieval failure" if m.role == quality.ROLE_RETRIEVAL else "a generation failure"
    return f"{m.title.capitalize()} below this counts as {blamed}."


def _s(name: str, env: str, parse: Parser, metavar: str | None, help: str, **kw: Any) -> Setting:
    """One row of the table; a choice's metavar (None) lists its choices."""
    if metavar is None:
        metavar = "{" + ",".join(kw["choices"]) + "}"
    entry = kw.get("entry")
    if entry is not None:
        return Setting(name, env, parse, metavar, help, lambda: field_default(entry[0])[entry[1]], **kw)
    return Setting(name, env, parse, metavar, help, lambda: field_default(name), **kw)


# The settings table in two parts: the per-metric diagnosis thresholds go between them (``agent_settings``).
_SETTINGS_BEFORE_DIAGNOSIS: tuple[Setting, ...] = (
    _s("source", "RAGMON_AGENT_SOURCE", choice("http", "kafka"), None,
       "Where spans come from: OTLP/HTTP receiver or a Kafka topic.", choices=("http", "kafka")),
    _s("receiver_host", "RAGMON_RECEIVER_HOST", parse_str, "HOST",
       "OTLP/HTTP receiver bind address."),
    _s("receiver_port", "RAGMON_RECEIVER_PORT", parse_port, "PORT",
       "OTLP/HTTP receiver port (POST /v1/traces)."),
    _s("receiver_grpc_port", "RAGMON_RECEIVER_GRPC_PORT", parse_optional_port, "PORT",
       "OTLP/gRPC receiver port beside the OTLP/HTTP one (TraceService/Export; the Collector's default "
       "'otlp' exporter and many SDKs send to 4317), same host, limits, TLS and token; empty = off."),
    _s("receiver_max_body_bytes", "RAGMON_RECEIVER_MAX_BODY_BYTES", parse_positive_int, "BYTES",
       "Largest accepted request body after decompression."),
    _s("receiver_read_timeout_s", "RAGMON_RECEIVER_READ_TIMEOUT_S", parse_positive_float, "SECONDS",
       "A request body must arrive within this many seconds, else 408 and the connection is closed."),
    _s("receiver_tls_cert_file", "RAGMON_RECEIVER_TLS_CERT_FILE", parse_optional_str, "PATH",
       "PEM server certificate (chain) for the OTLP receiver: serve HTTPS (empty = plain HTTP)."),
    _s("receiver_tls_key_file", "RAGMON_RECEIVER_TLS_KEY_FILE", parse_optional_str, "PATH",
       "PEM private key of the receiver's certificate."),
    _s("receiver_tls_client_ca_file", "RAGMON_RECEIVER_TLS_CLIENT_CA_FILE", parse_optional_str, "PATH",
       "PEM CA bundle: require client certificates signed by it (mutual TLS; empty = off)."),
    _s("receiver_bearer_token", "RAGMON_RECEIVER_BEARER_TOKEN", parse_optional_str, "SECRET",
       "Require 'Authorization: Bearer <token>' on OTLP exports (empty = off; never logged).", secret=True),
    _s("metrics_host", "RAGMON_METRICS_HOST", parse_str, "HOST",
       "Bind address for /metrics, /healthz, /readyz and /worst."),
    _s("metrics_port", "RAGMON_METRICS_PORT", parse_port, "PORT",
       "Port for /metrics, /healthz, /readyz and /worst."),
    _s("metrics_max_label_values", "RAGMON_METRICS_MAX_LABEL_VALUES", parse_positive_int, "N",
       "Distinct (service, pipeline) pairs kept as labels; later pairs become ('_other', '_other')."),
    _s("metrics_tls_cert_file", "RAGMON_METRICS_TLS_CERT_FILE", parse_optional_str, "PATH",
       "PEM server certificate for the metrics port: serve HTTPS (empty = plain HTTP)."),
    _s("metrics_tls_key_file", "RAGMON_METRICS_TLS_KEY_FILE", parse_optional_str, "PATH",
       "PEM private key of the metrics port's certificate."),
    _s("metrics_bearer_token", "RAGMON_METRICS_BEARER_TOKEN", parse_optional_str, "SECRET",
       "Require 'Authorization: Bearer <token>' on endpoints that serve trace content (/worst); /metrics, "
       "/healthz, /readyz stay open.", secret=True),
    _s("insecure_allow_unauthenticated_bind", "RAGMON_INSECURE_ALLOW_UNAUTHENTICATED_BIND", parse_bool, "BOOL",
       "Waiver: let the receiver listen beyond loopback without TLS or a token, and serve /worst "
       "unauthenticated on a non-loopback metrics port."),
    _s("trace_timeout_s", "RAGMON_ASSEMBLER_TRACE_TIMEOUT_S", parse_positive_float, "SECONDS",
       "Close a trace whose root span never arrives after this many seconds without new spans."),
    _s("max_open_traces", "RAGMON_ASSEMBLER_MAX_OPEN_TRACES", parse_positive_int, "N",
       "Bound on traces being assembled; the oldest is closed early and counted when full."),
    _s("max_spans_per_trace", "RAGMON_ASSEMBLER_MAX_SPANS_PER_TRACE", parse_positive_int, "N",
       "Spans kept per trace; extra spans are dropped and counted."),
    _s("max_buffered_bytes", "RAGMON_ASSEMBLER_MAX_BUFFERED_BYTES", parse_positive_int, "BYTES",
       "Bound on span data held by open traces (document text is heavy); the least recently active traces "
       "are closed early and counted when over it."),
    _s("root_grace_s", "RAGMON_ASSEMBLER_ROOT_GRACE_S", parse_nonnegative_float, "SECONDS",
       "Keep a trace open this long after its root span for late children (cross-process traces, Kafka "
       "without trace-id keys)."),
    _s("max_text_chars", "RAGMON_ASSEMBLER_MAX_TEXT_CHARS", parse_positive_int, "CHARS",
       "Text kept per trace for the judge: question, answer and documents (in rank order) are cut to this "
       "many characters in all; bounds the judge's memory per trace."),
    _s("fast_path", "RAGMON_ASSEMBLER_FAST_PATH", parse_bool, "BOOL",
       "Read protobuf spans of traces outside every judging rate for latency only (ids, timings, status, the"
       " few attributes that name the pipeline and stages, document ids and scores), with the same metrics "
       "and accounting; off = decode every span in full."),
    _s("latency_window_s", "RAGMON_LATENCY_WINDOW_S", parse_positive_float, "SECONDS",
       "Sliding window for the exact P95 latency gauges."),
    _s("latency_max_s", "RAGMON_LATENCY_MAX_S", parse_positive_float, "SECONDS",
       "Latencies above this (or negative: clock skew, bogus timestamps) are not observed but counted as "
       "dropped{reason=invalid_timestamp}."),
    _s("sample_rate", "RAGMON_SAMPLER_RATE", parse_rate, "FRACTION",
       "Share of traces sent to the judge (deterministic on trace id)."),
    _s("pipeline_sample_rates", "RAGMON_SAMPLER_PIPELINE_RATES", parse_rate_map, "PIPELINE=RATE,...",
       "Per-pipeline judge rates, e.g. 'checkout=0.05,search=0.5'."),
    _s("priority_errors", "RAGMON_SAMPLER_PRIORITY_ERRORS", parse_bool, "BOOL",
       "Always judge traces whose RAG spans ended in error."),
    _s("priority_feedback", "RAGMON_SAMPLER_PRIORITY_FEEDBACK", parse_bool, "BOOL",
       "Always judge traces with negative user feedback (ragmon.feedback)."),
    _s("priority_slow_retrieval_s", "RAGMON_SAMPLER_PRIORITY_SLOW_RETRIEVAL_S", parse_optional_float, "SECONDS",
       "Always judge traces whose retrieval took longer than this (empty = off)."),
    _s("priority_min_top_score", "RAGMON_SAMPLER_PRIORITY_MIN_TOP_SCORE", parse_optional_float, "FRACTION",
       "Always judge traces whose best retrieval score is below this (empty = off)."),
    _s("dedup_size", "RAGMON_SAMPLER_DEDUP_SIZE", parse_nonnegative_int, "N",
       "Trace ids remembered to recognise redelivered traces (0 = off)."),
    _s("detect_drop", "RAGMON_SAMPLER_DETECT_DROP", parse_optional_float, "FRACTION",
       "Power-based sampling: judge each pipeline just often enough to detect a drop this large in a mean "
       "score (e.g. 0.05) within --within; replaces the fixed rates (empty = off: fixed rates)."),
    _s("detect_within_s", "RAGMON_SAMPLER_DETECT_WITHIN", parse_duration_s, "SECONDS",
       "Power-based sampling: the window the drop must be detectable in (the drop alerts' window, 1h).",
       extra_aliases=("--within",)),
    _s("detect_power", "RAGMON_SAMPLER_DETECT_POWER", float_in(0.5, 0.999), "FRACTION",
       "Power-based sampling: probability of detecting a drop of --detect-drop.", extra_aliases=("--power",)),
    _s("detect_alpha", "RAGMON_SAMPLER_DETECT_ALPHA", float_in(1e-9, 0.5), "FRACTION",
       "Power-based sampling: one-sided significance level of the drop alerts' test; keep it equal to "
       "DROP_ALPHA of the alert rules (the default, sized from --alert-pipelines and --alert-budget as the "
       "rules are, is).", extra_aliases=("--alpha",)),
    _s("alert_pipelines", "RAGMON_SAMPLER_ALERT_PIPELINES", parse_positive_int, "N",
       "Pipelines behind one Alertmanager that share the false-page budget, as the alert rules were generated "
       "(deploy/prometheus/generate_rules.py --pipelines): sizes --alpha."),
    _s("alert_budget", "RAGMON_SAMPLER_ALERT_BUDGET", parse_positive_float, "PAGES",
       "False pages per 30 days those pipelines share, as the alert rules were generated (generate_rules.py "
       "--fleet-budget): sizes --alpha."),
    _s("detect_min_rate", "RAGMON_SAMPLER_DETECT_MIN_RATE", parse_rate, "FRACTION",
       "Power-based sampling: lowest judging rate of any pipeline."),
    _s("detect_max_rate", "RAGMON_SAMPLER_DETECT_MAX_RATE", parse_rate, "FRACTION",
       "Power-based sampling: highest judging rate of any pipeline (keep it at or below the SDK's content "
       "rate)."),
    _s("detect_replicas", "RAGMON_SAMPLER_DETECT_REPLICAS", parse_positive_int, "N",
       "Power-based sampling: agent replicas that share each pipeline's traffic (Kafka consumers, sidecars "
       "behind one pipeline)."),
    _s("judge", "RAGMON_JUDGE", parse_judge_name, None,
       "Judge (ragmon.judges): " + judges.summary_line() + ".", choices=judges.names()),
    _s("judge_concurrency", "RAGMON_JUDGE_CONCURRENCY", parse_positive_int, "N",
       "Traces judged at once, and the most LLM-judge requests in flight: the LLM judge starts at 1 and "
       "adapts to the server's latency, timeouts and 429/503 replies."),
    _s("judge_backlog", "RAGMON_JUDGE_BACKLOG", parse_positive_int, "N",
       "Sampled traces waiting for the judge; when full (or when an export's traces would not fit) the Kafka"
       " source pauses and the OTLP receiver answers 503 Retry-After."),
    _s("judge_timeout_s", "RAGMON_JUDGE_TIMEOUT_S", parse_positive_float, "SECONDS",
       "Timeout of one LLM-judge request, from when it is sent (waiting for a free request slot is not "
       "counted); a model on CPU may need 300."),
    _s("judge_base_url", "RAGMON_JUDGE_BASE_URL", parse_optional_str, "URL",
       "OpenAI-compatible base URL, e.g. http://127.0.0.1:8000/v1."),
    _s("judge_model", "RAGMON_JUDGE_MODEL", parse_optional_str, "NAME",
       "Chat model name for the LLM judge."),
    _s("judge_api_key", "RAGMON_JUDGE_API_KEY", parse_optional_str, "SECRET",
       "API key for the LLM judge (never logged).", secret=True),
    _s("judge_mode", "RAGMON_JUDGE_MODE", choice("compact", "parity"), None,
       "LLM judge mode: one call per trace, or RAGAS-parity calls.", choices=("compact", "parity")),
    _s("judge_max_retries", "RAGMON_JUDGE_MAX_RETRIES", parse_nonnegative_int, "N",
       "Retries on 429/5xx/timeouts (exponential backoff with jitter)."),
    _s("judge_requests_per_minute", "RAGMON_JUDGE_REQUESTS_PER_MINUTE", parse_nonnegative_int, "N",
       "Client-side request rate limit (0 = none)."),
    _s("judge_tokens_per_minute", "RAGMON_JUDGE_TOKENS_PER_MINUTE", parse_nonnegative_int, "N",
       "Client-side token rate limit (0 = none)."),
    _s("judge_budget_tokens_per_minute", "RAGMON_JUDGE_BUDGET_TOKENS_PER_MINUTE", parse_nonnegative_int, "N",
       "Token budget per minute; over it traces are skipped{reason=budget} (0 = none)."),
    _s("judge_budget_tokens_per_day", "RAGMON_JUDGE_BUDGET_TOKENS_PER_DAY", parse_nonnegative_int, "N",
       "Token budget per day; over it traces are skipped{reason=budget} (0 = none)."),
    _s("judge_cache_ttl_s", "RAGMON_JUDGE_CACHE_TTL_S", parse_nonnegative_float, "SECONDS",
       "An identical (question, contexts, answer) is not judged twice within this time."),
    _s("judge_cache_size", "RAGMON_JUDGE_CACHE_SIZE", parse_nonnegative_int, "N",
       "Entries in the judge's content-hash cache (0 = off)."),
    _s("judge_max_input_tokens", "RAGMON_JUDGE_MAX_INPUT_TOKENS", parse_positive_int, "N",
       "Per-trace input budget for the LLM judge; longer inputs are cut with a marker."),
    _s("judge_max_completion_tokens", "RAGMON_JUDGE_MAX_COMPLETION_TOKENS", parse_positive_int, "N",
       "LLM judge: max_tokens of each reply; an unusable reply cut off there fails as reply_truncated."),
    _s("judge_circuit_failures", "RAGMON_JUDGE_CIRCUIT_FAILURES", parse_positive_int, "N",
       "Consecutive failures that open the circuit breaker."),
    _s("judge_circuit_reset_s", "RAGMON_JUDGE_CIRCUIT_RESET_S", parse_positive_float, "SECONDS",
       "Seconds the circuit stays open before one trial request."),
    _s("judge_embedding_model", "RAGMON_JUDGE_EMBEDDING_MODEL", parse_optional_str, "NAME",
       "Embedding model for answer relevancy via POST {base_url}/embeddings (empty = the agent's built-in "
       "MiniLM)."),
    _s("judge_model_path", "RAGMON_JUDGE_MODEL_PATH", parse_optional_str, "PATH",
       "Local judge ONNX model file (default: the bundled all-MiniLM-L6-v2 int8)."),
    _s("judge_model_sha256", "RAGMON_JUDGE_MODEL_SHA256", parse_optional_str, "SHA256",
       "Expected sha256 of the local model file (default: the bundled model's)."),
    _s("judge_int8", "RAGMON_JUDGE_INT8", parse_bool, "BOOL",
       "Local judge: run the bundled model's matrix products on int8 kernels (~2.5x faster; sentence vectors"
       " within cosine ~0.99 of float32, fidelity table unchanged within its noise); off = float32, the "
       "scores of releases before 2026-12."),
    _s("judge_profile", "RAGMON_JUDGE_PROFILE", parse_optional_str, "NAME",
       "Local judge profile (JSON from `ragmon calibrate --fit`): combination and thresholds fitted to your "
       "domain."),
    _s("evaluators", "RAGMON_EVALUATORS", parse_optional_str, "FILE",
       "YAML file of your own evaluators (regex, heuristic, json_schema; llm criteria with the LLM judge), "
       "each a metric beside the built-in three (docs/evaluators.md); a bad file stops start-up."),
)

_SETTINGS_AFTER_DIAGNOSIS: tuple[Setting, ...] = (
    _s("worst_size", "RAGMON_WORST_SIZE", parse_nonnegative_int, "N",
       "Worst recently scored traces kept for /worst."),
    _s("worst_max_chars", "RAGMON_WORST_MAX_CHARS", parse_nonnegative_int, "CHARS",
       "Most characters of question/answer text shown per trace in /worst."),
    _s("trace_inspector", "RAGMON_TRACE_INSPECTOR", parse_bool, "BOOL",
       "Serve GET /traces/{trace_id} on the metrics port: what was extracted from a recently judged trace "
       "(question, contexts, answer, scores, where each was read from); guarded like /worst."),
    _s("trace_inspector_size", "RAGMON_TRACE_INSPECTOR_SIZE", parse_positive_int, "N",
       "Recently judged traces kept for /traces/{trace_id} (oldest evicted first)."),
    _s("trace_inspector_max_chars", "RAGMON_TRACE_INSPECTOR_MAX_CHARS", parse_nonnegative_int, "CHARS",
       "Most characters of each text (question, answer, each context) kept per trace for /traces/{trace_id}."),
    _s("pipeline_attribute", "RAGMON_PIPELINE_ATTRIBUTE", parse_optional_str, "NAME",
       "Span (or resource) attribute that names the pipeline when neither ragmon.pipeline nor "
       "gen_ai.workflow.name does; then traceloop.workflow.name, then the root span's name."),
    _s("pipeline_rename", "RAGMON_PIPELINE_RENAME", parse_rename_rules, "REGEX=NAME,...",
       "Pipeline rename rules 'REGEX=NAME;...', tried in order on the whole name (first match wins, NAME may"
       " use \\1), e.g. 'RetrieverQueryEngine\\..*=docs-qa'."),
    _s("doc_id_keys", "RAGMON_DOC_ID_KEYS", parse_csv, "A,B,...",
       "Metadata keys that name a document that has no id, in order; 'key#' names a source shared by chunks "
       "(id '<source>#<hash8>'); else a content hash."),
    _s("export_judged", "RAGMON_EXPORT_JUDGED", parse_optional_str, "PATH",
       "Append every judged trace (question, document ids and texts, answer, scores, verdict; text as the "
       "SDK sent it, redacted) to this JSONL file for `ragmon dataset harvest` (empty = off)."),
    _s("export_judged_max_bytes", "RAGMON_EXPORT_JUDGED_MAX_BYTES", int_at_least(4096), "BYTES",
       "Cap on the judged-trace files together: the file rotates to .1, .2, .3 and the oldest is deleted."),
    _s("kafka_bootstrap_servers", "RAGMON_KAFKA_BOOTSTRAP_SERVERS", parse_str, "NAME",
       "Kafka bootstrap servers (host:port,...)."),
    _s("kafka_topics", "RAGMON_KAFKA_TOPICS", parse_csv, "A,B,...",
       "Topics to consume (comma separated)."),
    _s("kafka_group_id", "RAGMON_KAFKA_GROUP_ID", parse_str, "NAME",
       "Consumer group shared by all agent replicas."),
    _s("kafka_encoding", "RAGMON_KAFKA_ENCODING", choice("otlp_proto", "otlp_json"), None,
       "Message encoding, as the Collector's kafkaexporter writes it.", choices=("otlp_proto", "otlp_json")),
    _s("kafka_security_protocol", "RAGMON_KAFKA_SECURITY_PROTOCOL",
       lambda t: choice("plaintext", "ssl", "sasl_plaintext", "sasl_ssl")(t).upper(), "NAME",
       "PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL."),
    _s("kafka_sasl_mechanism", "RAGMON_KAFKA_SASL_MECHANISM", parse_optional_str, "NAME",
       "PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512."),
    _s("kafka_sasl_username", "RAGMON_KAFKA_SASL_USERNAME", parse_optional_str, "NAME",
       "SASL username."),
    _s("kafka_sasl_password", "RAGMON_KAFKA_SASL_PASSWORD", parse_optional_str, "SECRET",
       "SASL password (never logged).", secret=True),
    _s("kafka_ssl_cafile", "RAGMON_KAFKA_SSL_CAFILE", parse_optional_str, "PATH",
       "CA bundle for TLS."),
    _s("kafka_ssl_certfile", "RAGMON_KAFKA_SSL_CERTFILE", parse_optional_str, "PATH",
       "Client certificate for mutual TLS."),
    _s("kafka_ssl_keyfile", "RAGMON_KAFKA_SSL_KEYFILE", parse_optional_str, "PATH",
       "Client key for mutual TLS."),
    _s("kafka_dead_letter_topic", "RAGMON_KAFKA_DEAD_LETTER_TOPIC", parse_optional_str, "NAME",
       "Write poison messages here with the error in a header (empty = off)."),
    _s("kafka_max_message_bytes", "RAGMON_KAFKA_MAX_MESSAGE_BYTES", parse_positive_int, "BYTES",
       "Messages larger than this are poison (oversize)."),
    _s("kafka_commit_interval_s", "RAGMON_KAFKA_COMMIT_INTERVAL_S", parse_positive_float, "SECONDS",
       "How often safe offsets are committed."),
    _s("log_level", "RAGMON_LOG_LEVEL", choice("debug", "info", "warning", "error"), None,
       "Log level.", choices=("debug", "info", "warning", "error")),
    _s("shutdown_grace_s", "RAGMON_SHUTDOWN_GRACE_S", parse_positive_float, "SECONDS",
       "On SIGTERM, time allowed to finish in-flight traces before the rest are accounted as "
       "skipped{reason=shutdown}."),
    _s("shutdown_final_scrape_s", "RAGMON_SHUTDOWN_FINAL_SCRAPE_S", parse_nonnegative_float, "SECONDS",
       "After the final accounting on shutdown, keep /metrics up until one more scrape is served or this "
       "many seconds pass, so Prometheus sees the last counts (0 = off)."),
)

def agent_settings() -> tuple[Setting, ...]:
    """The settings table, with one ``diagnosis_<metric>_threshold`` per online metric of the quality
    table as it is now (read per call: a metric registered at run time has its setting)."""
    diagnosis = tuple(
        _s(f"diagnosis_{m.name}_threshold", f"RAGMON_DIAGNOSIS_{m.name.upper()}_THRESHOLD", parse_rate,
           "FRACTION", _threshold_help(m), entry=("diagnosis", m.name))
        for m in quality.online())
    return (*_SETTINGS_BEFORE_DIAGNOSIS, *diagnosis, *_SETTINGS_AFTER_DIAGNOSIS)


def settings_by_name() -> dict[str, Setting]:
    return {s.name: s for s in agent_settings()}
