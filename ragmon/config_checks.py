"""Cross-field checks of the agent's settings that a single value parser cannot see; each failure
is a ``ConfigError`` naming the flag and variable to fix (bad configuration fails fast)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import judges
from .errors import ConfigError

if TYPE_CHECKING:
    from .config_table import AgentConfig


def check_judge_endpoint(judge: str, base_url: str | None, model: str | None) -> None:
    """A judge with an endpoint (the LLM judge) needs an http(s) base URL and a model (the agent's and
    the commands' check)."""
    if judge not in judges.names() or not judges.spec(judge).needs_endpoint:
        return
    if not base_url:
        raise ConfigError("--judge-base-url / RAGMON_JUDGE_BASE_URL", f"required when --judge {judge}")
    if not model:
        raise ConfigError("--judge-model / RAGMON_JUDGE_MODEL", f"required when --judge {judge}")
    if not base_url.startswith(("http://", "https://")):
        raise ConfigError("--judge-base-url / RAGMON_JUDGE_BASE_URL", f"not an http(s) URL: {base_url!r}")


def validate(c: AgentConfig) -> None:
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
        raise ConfigError("--kafka-sasl-mechanism / RAGMON_KAFKA_SASL_MECHANISM",
                          f"unsupported mechanism {c.kafka_sasl_mechanism!r}")
