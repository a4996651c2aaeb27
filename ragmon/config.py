"""Frozen settings for the agent: explicit argument > ``RAGMON_*`` env var > default.

Every setting is declared once in ``AGENT_SETTINGS``; the CLI builds its flags from that
table, the README's configuration table is checked against it by a test, and a bad value
fails at start-up with a ``ConfigError`` that names the setting and its env var.
Standard ``OTEL_*`` variables are left to the OpenTelemetry SDK.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from . import doc_ids, env, quality
from . import semconv as sc
from .errors import ConfigError

Parser = Callable[[str], Any]
_Section = TypeVar("_Section")


# --- value parsers (each raises ValueError with a short reason) -------------------------------
parse_bool = env.parse_bool  # the one boolean parser, shared with the SDK


def _int_at_least(minimum: int) -> Parser:
    def parse(text: str) -> int:
        value = int(str(text).strip())
        if value < minimum:
            raise ValueError(f"must be >= {minimum}, got {value}")
        return value

    return parse


def _float_in(lo: float, hi: float | None = None) -> Parser:
    def parse(text: str) -> float:
        value = float(str(text).strip())
        if value != value or value < lo or (hi is not None and value > hi):
            bound = f"[{lo}, {hi}]" if hi is not None else f">= {lo}"
            raise ValueError(f"must be in {bound}, got {text!r}")
        return value

    return parse


def parse_port(text: str) -> int:
    value = int(str(text).strip())
    if not 0 <= value <= 65535:
        raise ValueError(f"must be a TCP port 0-65535, got {value}")
    return value


def _choice(*choices: str) -> Parser:
    def parse(text: str) -> str:
        value = str(text).strip().lower()
        if value not in choices:
            raise ValueError(f"must be one of {', '.join(choices)}; got {text!r}")
        return value

    return parse


def parse_csv(text: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in str(text).split(",") if part.strip())


def parse_rate_map(text: str) -> Mapping[str, float]:
    """``"checkout=0.05,search=0.5"`` -> per-pipeline rates."""
    out: dict[str, float] = {}
    for item in parse_csv(text):
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise ValueError(f"expected name=rate pairs, got {item!r}")
        rate = float(value)
        if not 0.0 <= rate <= 1.0:
            raise ValueError(f"rate for {name.strip()!r} must be in [0, 1], got {value}")
        out[name.strip()] = rate
    return out


def parse_rename_rules(text: str) -> Mapping[str, str]:
    """``"RetrieverQueryEngine\\..*=docs-qa;RunnableSequence=support"`` -> ordered REGEX -> NAME
    rules (``;`` or newlines between rules; the last ``=`` splits a rule; each regex compiled here)."""
    out: dict[str, str] = {}
    for item in str(text).replace("\n", ";").split(";"):
        if not item.strip():
            continue
        pattern, sep, name = item.strip().rpartition("=")
        if not sep or not pattern or not name.strip():
            raise ValueError(f"expected REGEX=NAME rules separated by ';', got {item.strip()!r}")
        try:
            re.compile(pattern)
        except re.error as exc:
            raise ValueError(f"bad regex {pattern!r}: {exc}") from exc
        out[pattern] = name.strip()
    return out


_DURATION_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_duration_s(text: str) -> float:
    """``"1h"``, ``"30m"``, ``"90s"``, ``"1d"`` or plain seconds -> seconds (> 0)."""
    value = str(text).strip().lower()
    unit = _DURATION_UNITS.get(value[-1:]) if value else None
    seconds = float(value[:-1]) * unit if unit is not None else float(value)
    if not seconds > 0 or seconds == float("inf"):
        raise ValueError(f"must be a positive duration such as 1h, 30m or 900, got {text!r}")
    return seconds


def parse_optional_port(text: str) -> int | None:
    """A TCP port, or off ('', 'off', 'none')."""
    if str(text).strip().lower() in ("", "off", "none"):
        return None
    return parse_port(text)


def parse_str(text: str) -> str:
    return str(text)


def parse_optional_str(text: str) -> str | None:
    value = str(text).strip()
    return value or None


def parse_optional_float(text: str) -> float | None:
    value = str(text).strip()
    if not value:
        return None
    return float(value)


parse_rate = _float_in(0.0, 1.0)
parse_positive_int = _int_at_least(1)
parse_nonnegative_int = _int_at_least(0)
parse_positive_float = _float_in(1e-9)
parse_nonnegative_float = _float_in(0.0)


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
    fast_path: bool = True  # read traces outside the judging sample for latency only (ingest/otlp_light.py)
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
    detect_alpha: float = 0.05
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
    judge_circuit_failures: int = 5
    judge_circuit_reset_s: float = 30.0
    judge_embedding_model: str | None = None  # None: the agent's own MiniLM embedder
    judge_model_path: str | None = None
    judge_model_sha256: str | None = None
    judge_int8: bool = True  # local judge: integer matrix products (scoring/local/onnx_int8.py); off = float32
    judge_profile: str | None = None  # local judge: weights/thresholds fitted by `ragmon calibrate --fit`
    # diagnosis / error analysis: one diagnosis_<metric>_threshold per online metric of the
    # quality table (ragmon/quality.py); the settings are generated from it, a test checks both agree
    diagnosis_faithfulness_threshold: float = quality.BY_NAME[sc.METRIC_FAITHFULNESS].threshold
    diagnosis_answer_relevancy_threshold: float = quality.BY_NAME[sc.METRIC_ANSWER_RELEVANCY].threshold
    diagnosis_context_precision_threshold: float = quality.BY_NAME[sc.METRIC_CONTEXT_PRECISION].threshold
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
        values = {}
        for f in dataclasses.fields(cls):  # type: ignore[arg-type]
            name = prefix + f.name
            if prefix and name not in SETTINGS_BY_NAME:
                continue
            values[f.name] = getattr(self, name)
        return cls(**values)

    def diagnosis_thresholds(self) -> dict[str, float]:
        """Diagnosis threshold per quality metric: these settings for online metrics, else the table's."""
        out = quality.default_thresholds()
        for m in quality.ONLINE:
            out[m.name] = getattr(self, f"diagnosis_{m.name}_threshold")
        return out

    def redacted(self) -> dict[str, Any]:
        """Settings as a dict with secrets masked, for logs and /readyz."""
        out = dataclasses.asdict(self)
        for setting in AGENT_SETTINGS:
            if setting.secret and out.get(setting.name):
                out[setting.name] = "***"
        return out


@dataclass(frozen=True, slots=True)
class Setting:
    name: str  # AgentConfig field
    env: str  # RAGMON_* variable
    parse: Parser
    help: str
    secret: bool = False
    choices: tuple[str, ...] | None = None
    extra_aliases: tuple[str, ...] = ()  # more flags for the same setting (--within for --detect-within-s)

    @property
    def flag(self) -> str:
        """The flag spelled like the variable: RAGMON_SAMPLER_RATE <-> --sampler-rate."""
        return "--" + self.env.removeprefix(env.PREFIX).lower().replace("_", "-")

    @property
    def aliases(self) -> tuple[str, ...]:
        """Older flag spelled after the setting name (--sample-rate), still accepted."""
        short = "--" + self.name.replace("_", "-")
        return (() if short == self.flag else (short,)) + self.extra_aliases

    @property
    def default(self) -> Any:
        f = AgentConfig.__dataclass_fields__[self.name]
        if f.default is not dataclasses.MISSING:
            return f.default
        factory: Callable[[], Any] = f.default_factory  # type: ignore[assignment]
        return factory()


def _threshold_help(m: quality.QualityMetric) -> str:
    blamed = "a retrieval failure" if m.role == quality.ROLE_RETRIEVAL else "a generation failure"
    return f"{m.title.capitalize()} below this counts as {blamed}."


def _s(name: str, env: str, parse: Parser, help: str, **kw: Any) -> Setting:
    return Setting(name=name, env=env, parse=parse, help=help, **kw)


AGENT_SETTINGS: tuple[Setting, ...] = (
    _s("source", "RAGMON_AGENT_SOURCE", _choice("http", "kafka"), "Where spans come from: OTLP/HTTP receiver or a Kafka topic.", choices=("http", "kafka")),
    _s("receiver_host", "RAGMON_RECEIVER_HOST", parse_str, "OTLP/HTTP receiver bind address."),
    _s("receiver_port", "RAGMON_RECEIVER_PORT", parse_port, "OTLP/HTTP receiver port (POST /v1/traces)."),
    _s("receiver_grpc_port", "RAGMON_RECEIVER_GRPC_PORT", parse_optional_port, "OTLP/gRPC receiver port beside the OTLP/HTTP one (TraceService/Export; the Collector's default 'otlp' exporter and many SDKs send to 4317), same host, limits, TLS and token; empty = off."),
    _s("receiver_max_body_bytes", "RAGMON_RECEIVER_MAX_BODY_BYTES", parse_positive_int, "Largest accepted request body after decompression."),
    _s("receiver_read_timeout_s", "RAGMON_RECEIVER_READ_TIMEOUT_S", parse_positive_float, "A request body must arrive within this many seconds, else 408 and the connection is closed."),
    _s("receiver_tls_cert_file", "RAGMON_RECEIVER_TLS_CERT_FILE", parse_optional_str, "PEM server certificate (chain) for the OTLP receiver: serve HTTPS (empty = plain HTTP)."),
    _s("receiver_tls_key_file", "RAGMON_RECEIVER_TLS_KEY_FILE", parse_optional_str, "PEM private key of the receiver's certificate."),
    _s("receiver_tls_client_ca_file", "RAGMON_RECEIVER_TLS_CLIENT_CA_FILE", parse_optional_str, "PEM CA bundle: require client certificates signed by it (mutual TLS; empty = off)."),
    _s("receiver_bearer_token", "RAGMON_RECEIVER_BEARER_TOKEN", parse_optional_str, "Require 'Authorization: Bearer <token>' on OTLP exports (empty = off; never logged).", secret=True),
    _s("metrics_host", "RAGMON_METRICS_HOST", parse_str, "Bind address for /metrics, /healthz, /readyz and /worst."),
    _s("metrics_port", "RAGMON_METRICS_PORT", parse_port, "Port for /metrics, /healthz, /readyz and /worst."),
    _s("metrics_max_label_values", "RAGMON_METRICS_MAX_LABEL_VALUES", parse_positive_int, "Distinct (service, pipeline) pairs kept as labels; later pairs become ('_other', '_other')."),
    _s("metrics_tls_cert_file", "RAGMON_METRICS_TLS_CERT_FILE", parse_optional_str, "PEM server certificate for the metrics port: serve HTTPS (empty = plain HTTP)."),
    _s("metrics_tls_key_file", "RAGMON_METRICS_TLS_KEY_FILE", parse_optional_str, "PEM private key of the metrics port's certificate."),
    _s("metrics_bearer_token", "RAGMON_METRICS_BEARER_TOKEN", parse_optional_str, "Require 'Authorization: Bearer <token>' on endpoints that serve trace content (/worst); /metrics, /healthz, /readyz stay open.", secret=True),
    _s("insecure_allow_unauthenticated_bind", "RAGMON_INSECURE_ALLOW_UNAUTHENTICATED_BIND", parse_bool, "Waiver: let the receiver listen beyond loopback without TLS or a token, and serve /worst unauthenticated on a non-loopback metrics port."),
    _s("trace_timeout_s", "RAGMON_ASSEMBLER_TRACE_TIMEOUT_S", parse_positive_float, "Close a trace whose root span never arrives after this many seconds without new spans."),
    _s("max_open_traces", "RAGMON_ASSEMBLER_MAX_OPEN_TRACES", parse_positive_int, "Bound on traces being assembled; the oldest is closed early and counted when full."),
    _s("max_spans_per_trace", "RAGMON_ASSEMBLER_MAX_SPANS_PER_TRACE", parse_positive_int, "Spans kept per trace; extra spans are dropped and counted."),
    _s("max_buffered_bytes", "RAGMON_ASSEMBLER_MAX_BUFFERED_BYTES", parse_positive_int, "Bound on span data held by open traces (document text is heavy); the least recently active traces are closed early and counted when over it."),
    _s("root_grace_s", "RAGMON_ASSEMBLER_ROOT_GRACE_S", parse_nonnegative_float, "Keep a trace open this long after its root span for late children (cross-process traces, Kafka without trace-id keys)."),
    _s("max_text_chars", "RAGMON_ASSEMBLER_MAX_TEXT_CHARS", parse_positive_int, "Text kept per trace for the judge: question, answer and documents (in rank order) are cut to this many characters in all; bounds the judge's memory per trace."),
    _s("fast_path", "RAGMON_ASSEMBLER_FAST_PATH", parse_bool, "Read protobuf spans of traces outside every judging rate for latency only (ids, timings, status, the few attributes that name the pipeline and stages, document ids and scores), with the same metrics and accounting; off = decode every span in full."),
    _s("latency_window_s", "RAGMON_LATENCY_WINDOW_S", parse_positive_float, "Sliding window for the exact P95 latency gauges."),
    _s("latency_max_s", "RAGMON_LATENCY_MAX_S", parse_positive_float, "Latencies above this (or negative: clock skew, bogus timestamps) are not observed but counted as dropped{reason=invalid_timestamp}."),
    _s("sample_rate", "RAGMON_SAMPLER_RATE", parse_rate, "Share of traces sent to the judge (deterministic on trace id)."),
    _s("pipeline_sample_rates", "RAGMON_SAMPLER_PIPELINE_RATES", parse_rate_map, "Per-pipeline judge rates, e.g. 'checkout=0.05,search=0.5'."),
    _s("priority_errors", "RAGMON_SAMPLER_PRIORITY_ERRORS", parse_bool, "Always judge traces whose RAG spans ended in error."),
    _s("priority_feedback", "RAGMON_SAMPLER_PRIORITY_FEEDBACK", parse_bool, "Always judge traces with negative user feedback (ragmon.feedback)."),
    _s("priority_slow_retrieval_s", "RAGMON_SAMPLER_PRIORITY_SLOW_RETRIEVAL_S", parse_optional_float, "Always judge traces whose retrieval took longer than this (empty = off)."),
    _s("priority_min_top_score", "RAGMON_SAMPLER_PRIORITY_MIN_TOP_SCORE", parse_optional_float, "Always judge traces whose best retrieval score is below this (empty = off)."),
    _s("dedup_size", "RAGMON_SAMPLER_DEDUP_SIZE", parse_nonnegative_int, "Trace ids remembered to recognise redelivered traces (0 = off)."),
    _s("detect_drop", "RAGMON_SAMPLER_DETECT_DROP", parse_optional_float, "Power-based sampling: judge each pipeline just often enough to detect a drop this large in a mean score (e.g. 0.05) within --within; replaces the fixed rates (empty = off: fixed rates)."),
    _s("detect_within_s", "RAGMON_SAMPLER_DETECT_WITHIN", parse_duration_s, "Power-based sampling: the window the drop must be detectable in (the drop alerts' window, 1h).", extra_aliases=("--within",)),
    _s("detect_power", "RAGMON_SAMPLER_DETECT_POWER", _float_in(0.5, 0.999), "Power-based sampling: probability of detecting a drop of --detect-drop.", extra_aliases=("--power",)),
    _s("detect_alpha", "RAGMON_SAMPLER_DETECT_ALPHA", _float_in(0.0001, 0.5), "Power-based sampling: significance level (two-sided) of the drop test; keep it equal to DROP_ALPHA of the alert rules.", extra_aliases=("--alpha",)),
    _s("detect_min_rate", "RAGMON_SAMPLER_DETECT_MIN_RATE", parse_rate, "Power-based sampling: lowest judging rate of any pipeline."),
    _s("detect_max_rate", "RAGMON_SAMPLER_DETECT_MAX_RATE", parse_rate, "Power-based sampling: highest judging rate of any pipeline (keep it at or below the SDK's content rate)."),
    _s("detect_replicas", "RAGMON_SAMPLER_DETECT_REPLICAS", parse_positive_int, "Power-based sampling: agent replicas that share each pipeline's traffic (Kafka consumers, sidecars behind one pipeline)."),
    _s("judge", "RAGMON_JUDGE", _choice("local", "llm"), "Judge: offline local model, or an LLM over an OpenAI-compatible API.", choices=("local", "llm")),
    _s("judge_concurrency", "RAGMON_JUDGE_CONCURRENCY", parse_positive_int, "Traces judged at once."),
    _s("judge_backlog", "RAGMON_JUDGE_BACKLOG", parse_positive_int, "Sampled traces waiting for the judge; when full (or when an export's traces would not fit) the Kafka source pauses and the OTLP receiver answers 503 Retry-After."),
    _s("judge_timeout_s", "RAGMON_JUDGE_TIMEOUT_S", parse_positive_float, "Timeout for one judge request."),
    _s("judge_base_url", "RAGMON_JUDGE_BASE_URL", parse_optional_str, "OpenAI-compatible base URL, e.g. http://127.0.0.1:8000/v1."),
    _s("judge_model", "RAGMON_JUDGE_MODEL", parse_optional_str, "Chat model name for the LLM judge."),
    _s("judge_api_key", "RAGMON_JUDGE_API_KEY", parse_optional_str, "API key for the LLM judge (never logged).", secret=True),
    _s("judge_mode", "RAGMON_JUDGE_MODE", _choice("compact", "parity"), "LLM judge mode: one call per trace, or RAGAS-parity calls.", choices=("compact", "parity")),
    _s("judge_max_retries", "RAGMON_JUDGE_MAX_RETRIES", parse_nonnegative_int, "Retries on 429/5xx/timeouts (exponential backoff with jitter)."),
    _s("judge_requests_per_minute", "RAGMON_JUDGE_REQUESTS_PER_MINUTE", parse_nonnegative_int, "Client-side request rate limit (0 = none)."),
    _s("judge_tokens_per_minute", "RAGMON_JUDGE_TOKENS_PER_MINUTE", parse_nonnegative_int, "Client-side token rate limit (0 = none)."),
    _s("judge_budget_tokens_per_minute", "RAGMON_JUDGE_BUDGET_TOKENS_PER_MINUTE", parse_nonnegative_int, "Token budget per minute; over it traces are skipped{reason=budget} (0 = none)."),
    _s("judge_budget_tokens_per_day", "RAGMON_JUDGE_BUDGET_TOKENS_PER_DAY", parse_nonnegative_int, "Token budget per day; over it traces are skipped{reason=budget} (0 = none)."),
    _s("judge_cache_ttl_s", "RAGMON_JUDGE_CACHE_TTL_S", parse_nonnegative_float, "An identical (question, contexts, answer) is not judged twice within this time."),
    _s("judge_cache_size", "RAGMON_JUDGE_CACHE_SIZE", parse_nonnegative_int, "Entries in the judge's content-hash cache (0 = off)."),
    _s("judge_max_input_tokens", "RAGMON_JUDGE_MAX_INPUT_TOKENS", parse_positive_int, "Per-trace input budget for the LLM judge; longer inputs are cut with a marker."),
    _s("judge_circuit_failures", "RAGMON_JUDGE_CIRCUIT_FAILURES", parse_positive_int, "Consecutive failures that open the circuit breaker."),
    _s("judge_circuit_reset_s", "RAGMON_JUDGE_CIRCUIT_RESET_S", parse_positive_float, "Seconds the circuit stays open before one trial request."),
    _s("judge_embedding_model", "RAGMON_JUDGE_EMBEDDING_MODEL", parse_optional_str, "Embedding model for answer relevancy via POST {base_url}/embeddings (empty = the agent's built-in MiniLM)."),
    _s("judge_model_path", "RAGMON_JUDGE_MODEL_PATH", parse_optional_str, "Local judge ONNX model file (default: the bundled all-MiniLM-L6-v2 int8)."),
    _s("judge_model_sha256", "RAGMON_JUDGE_MODEL_SHA256", parse_optional_str, "Expected sha256 of the local model file (default: the bundled model's)."),
    _s("judge_int8", "RAGMON_JUDGE_INT8", parse_bool, "Local judge: run the bundled model's matrix products on int8 kernels (~2.5x faster; sentence vectors within cosine ~0.99 of float32, fidelity table unchanged within its noise); off = float32, the scores of releases before 2026-12."),
    _s("judge_profile", "RAGMON_JUDGE_PROFILE", parse_optional_str, "Local judge profile (JSON from `ragmon calibrate --fit`): combination and thresholds fitted to your domain."),
    *(_s(f"diagnosis_{m.name}_threshold", f"RAGMON_DIAGNOSIS_{m.name.upper()}_THRESHOLD", parse_rate, _threshold_help(m)) for m in quality.ONLINE),
    _s("worst_size", "RAGMON_WORST_SIZE", parse_nonnegative_int, "Worst recently scored traces kept for /worst."),
    _s("worst_max_chars", "RAGMON_WORST_MAX_CHARS", parse_nonnegative_int, "Most characters of question/answer text shown per trace in /worst."),
    _s("trace_inspector", "RAGMON_TRACE_INSPECTOR", parse_bool, "Serve GET /traces/{trace_id} on the metrics port: what was extracted from a recently judged trace (question, contexts, answer, scores, where each was read from); guarded like /worst."),
    _s("trace_inspector_size", "RAGMON_TRACE_INSPECTOR_SIZE", parse_positive_int, "Recently judged traces kept for /traces/{trace_id} (oldest evicted first)."),
    _s("trace_inspector_max_chars", "RAGMON_TRACE_INSPECTOR_MAX_CHARS", parse_nonnegative_int, "Most characters of each text (question, answer, each context) kept per trace for /traces/{trace_id}."),
    _s("pipeline_attribute", "RAGMON_PIPELINE_ATTRIBUTE", parse_optional_str, "Span (or resource) attribute that names the pipeline when neither ragmon.pipeline nor gen_ai.workflow.name does; then traceloop.workflow.name, then the root span's name."),
    _s("pipeline_rename", "RAGMON_PIPELINE_RENAME", parse_rename_rules, "Pipeline rename rules 'REGEX=NAME;...', tried in order on the whole name (first match wins, NAME may use \\1), e.g. 'RetrieverQueryEngine\\..*=docs-qa'."),
    _s("doc_id_keys", "RAGMON_DOC_ID_KEYS", parse_csv, "Metadata keys that name a document that has no id, in order; 'key#' names a source shared by chunks (id '<source>#<hash8>'); else a content hash."),
    _s("export_judged", "RAGMON_EXPORT_JUDGED", parse_optional_str, "Append every judged trace (question, document ids and texts, answer, scores, verdict; text as the SDK sent it, redacted) to this JSONL file for `ragmon dataset harvest` (empty = off)."),
    _s("export_judged_max_bytes", "RAGMON_EXPORT_JUDGED_MAX_BYTES", _int_at_least(4096), "Cap on the judged-trace files together: the file rotates to .1, .2, .3 and the oldest is deleted."),
    _s("kafka_bootstrap_servers", "RAGMON_KAFKA_BOOTSTRAP_SERVERS", parse_str, "Kafka bootstrap servers (host:port,...)."),
    _s("kafka_topics", "RAGMON_KAFKA_TOPICS", parse_csv, "Topics to consume (comma separated)."),
    _s("kafka_group_id", "RAGMON_KAFKA_GROUP_ID", parse_str, "Consumer group shared by all agent replicas."),
    _s("kafka_encoding", "RAGMON_KAFKA_ENCODING", _choice("otlp_proto", "otlp_json"), "Message encoding, as the Collector's kafkaexporter writes it.", choices=("otlp_proto", "otlp_json")),
    _s("kafka_security_protocol", "RAGMON_KAFKA_SECURITY_PROTOCOL", lambda t: _choice("plaintext", "ssl", "sasl_plaintext", "sasl_ssl")(t).upper(), "PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL."),
    _s("kafka_sasl_mechanism", "RAGMON_KAFKA_SASL_MECHANISM", parse_optional_str, "PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512."),
    _s("kafka_sasl_username", "RAGMON_KAFKA_SASL_USERNAME", parse_optional_str, "SASL username."),
    _s("kafka_sasl_password", "RAGMON_KAFKA_SASL_PASSWORD", parse_optional_str, "SASL password (never logged).", secret=True),
    _s("kafka_ssl_cafile", "RAGMON_KAFKA_SSL_CAFILE", parse_optional_str, "CA bundle for TLS."),
    _s("kafka_ssl_certfile", "RAGMON_KAFKA_SSL_CERTFILE", parse_optional_str, "Client certificate for mutual TLS."),
    _s("kafka_ssl_keyfile", "RAGMON_KAFKA_SSL_KEYFILE", parse_optional_str, "Client key for mutual TLS."),
    _s("kafka_dead_letter_topic", "RAGMON_KAFKA_DEAD_LETTER_TOPIC", parse_optional_str, "Write poison messages here with the error in a header (empty = off)."),
    _s("kafka_max_message_bytes", "RAGMON_KAFKA_MAX_MESSAGE_BYTES", parse_positive_int, "Messages larger than this are poison (oversize)."),
    _s("kafka_commit_interval_s", "RAGMON_KAFKA_COMMIT_INTERVAL_S", parse_positive_float, "How often safe offsets are committed."),
    _s("log_level", "RAGMON_LOG_LEVEL", _choice("debug", "info", "warning", "error"), "Log level.", choices=("debug", "info", "warning", "error")),
    _s("shutdown_grace_s", "RAGMON_SHUTDOWN_GRACE_S", parse_positive_float, "On SIGTERM, time allowed to finish in-flight traces before the rest are accounted as skipped{reason=shutdown}."),
    _s("shutdown_final_scrape_s", "RAGMON_SHUTDOWN_FINAL_SCRAPE_S", parse_nonnegative_float, "After the final accounting on shutdown, keep /metrics up until one more scrape is served or this many seconds pass, so Prometheus sees the last counts (0 = off)."),
)

SETTINGS_BY_NAME: Mapping[str, Setting] = {s.name: s for s in AGENT_SETTINGS}


def _convert(setting: Setting, raw: Any, origin: str) -> Any:
    if not isinstance(raw, str):
        return raw  # already typed (explicit Python argument)
    try:
        return setting.parse(raw)
    except (ValueError, TypeError) as exc:
        shown = "***" if setting.secret else repr(raw)
        raise ConfigError(
            f"{setting.flag} / {setting.env}", f"invalid value {shown} from {origin}: {exc}"
        ) from exc


def load_agent_config(
    overrides: Mapping[str, Any] | None = None, environ: Mapping[str, str] | None = None
) -> AgentConfig:
    """Explicit ``overrides`` (None values ignored) > ``RAGMON_*`` env > defaults; validated."""
    env = os.environ if environ is None else environ
    values: dict[str, Any] = {}
    for setting in AGENT_SETTINGS:
        if overrides is not None and overrides.get(setting.name) is not None:
            values[setting.name] = _convert(setting, overrides[setting.name], "argument")
        elif setting.env in env:
            values[setting.name] = _convert(setting, env[setting.env], f"env {setting.env}")
    unknown = set(overrides or {}) - set(SETTINGS_BY_NAME)
    if unknown:
        raise ConfigError(", ".join(sorted(unknown)), "unknown setting")
    config = AgentConfig(**values)
    _validate(config)
    return config


def load_section(
    cls: type[_Section], overrides: Mapping[str, Any] | None = None, environ: Mapping[str, str] | None = None
) -> _Section:
    """One stage's section straight from the settings table, without a whole ``AgentConfig``: each
    field is the setting of that name, explicit ``overrides`` (None ignored) > ``RAGMON_*`` > default.

    For commands that need one section only (``ragmon eval`` and ``calibrate``: the judge's)."""
    env = os.environ if environ is None else environ
    names = [f.name for f in dataclasses.fields(cls)]  # type: ignore[arg-type]
    unknown = set(overrides or {}) - set(names)
    if unknown:
        raise ConfigError(", ".join(sorted(unknown)), "unknown setting")
    values: dict[str, Any] = {}
    for name in names:
        setting = SETTINGS_BY_NAME[name]
        if overrides is not None and overrides.get(name) is not None:
            values[name] = _convert(setting, overrides[name], "argument")
        elif setting.env in env:
            values[name] = _convert(setting, env[setting.env], f"env {setting.env}")
        else:
            values[name] = setting.default
    return cls(**values)


def check_judge_endpoint(judge: str, base_url: str | None, model: str | None) -> None:
    """The LLM judge needs an http(s) base URL and a model (the agent's and the commands' check)."""
    if judge != "llm":
        return
    if not base_url:
        raise ConfigError("--judge-base-url / RAGMON_JUDGE_BASE_URL", "required when --judge llm")
    if not model:
        raise ConfigError("--judge-model / RAGMON_JUDGE_MODEL", "required when --judge llm")
    if not base_url.startswith(("http://", "https://")):
        raise ConfigError("--judge-base-url / RAGMON_JUDGE_BASE_URL", f"not an http(s) URL: {base_url!r}")


def _validate(c: AgentConfig) -> None:
    """Cross-field checks that a single parser cannot see."""
    check_judge_endpoint(c.judge, c.judge_base_url, c.judge_model)
    for prefix in ("receiver", "metrics"):
        cert, key = getattr(c, f"{prefix}_tls_cert_file"), getattr(c, f"{prefix}_tls_key_file")
        if bool(cert) != bool(key):
            raise ConfigError(f"--{prefix}-tls-cert-file / --{prefix}-tls-key-file", "set both or neither")
    if c.receiver_tls_client_ca_file and not c.receiver_tls_cert_file:
        raise ConfigError("--receiver-tls-client-ca-file / RAGMON_RECEIVER_TLS_CLIENT_CA_FILE",
                          "client certificates need TLS: set --receiver-tls-cert-file and --receiver-tls-key-file")
    if c.source == "http":
        from ._security import require_protected_bind

        require_protected_bind(
            "the OTLP receiver", "--receiver-host / RAGMON_RECEIVER_HOST", c.receiver_host,
            tls=bool(c.receiver_tls_cert_file), token=bool(c.receiver_bearer_token),
            waived=c.insecure_allow_unauthenticated_bind)
    if c.receiver_grpc_port is not None:
        if c.source != "http":
            raise ConfigError("--receiver-grpc-port / RAGMON_RECEIVER_GRPC_PORT",
                              "the OTLP/gRPC receiver runs beside the OTLP/HTTP one: needs --source http")
        if c.receiver_grpc_port and c.receiver_grpc_port == c.receiver_port:
            raise ConfigError("--receiver-grpc-port / RAGMON_RECEIVER_GRPC_PORT",
                              f"same port as --receiver-port ({c.receiver_port})")
    if c.detect_drop is not None and not 0.0 < c.detect_drop < 1.0:
        raise ConfigError("--detect-drop / RAGMON_SAMPLER_DETECT_DROP", f"must be in (0, 1), got {c.detect_drop}")
    if c.detect_min_rate > c.detect_max_rate:
        raise ConfigError("--detect-min-rate / RAGMON_SAMPLER_DETECT_MIN_RATE",
                          f"is above --detect-max-rate ({c.detect_min_rate} > {c.detect_max_rate})")
    if c.source == "kafka" and not c.kafka_topics:
        raise ConfigError("--kafka-topics / RAGMON_KAFKA_TOPICS", "at least one topic is required")
    if c.kafka_sasl_mechanism and c.kafka_sasl_mechanism.upper() not in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"):
        raise ConfigError("--kafka-sasl-mechanism / RAGMON_KAFKA_SASL_MECHANISM", f"unsupported mechanism {c.kafka_sasl_mechanism!r}")
