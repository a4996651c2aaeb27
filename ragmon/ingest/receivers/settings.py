"""The OTLP receivers' settings: small frozen sections of the agent's configuration.

A source gets only what it uses, never the whole ``AgentConfig``. The field names are the
agent's setting names, so ``AgentConfig.section(HttpReceiverSettings)`` fills a section without
copying fields one by one (and a renamed setting fails loudly at start-up). Both receivers listen
on ``receiver_host`` with the same limits, TLS and token; each has its own port.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class HttpReceiverSettings:
    receiver_host: str
    receiver_port: int
    receiver_max_body_bytes: int
    shutdown_grace_s: float
    receiver_read_timeout_s: float = 30.0
    receiver_tls_cert_file: str | None = None
    receiver_tls_key_file: str | None = None
    receiver_tls_client_ca_file: str | None = None
    receiver_bearer_token: str | None = None


@dataclass(frozen=True, slots=True)
class GrpcReceiverSettings:
    receiver_host: str
    receiver_grpc_port: int | None
    receiver_max_body_bytes: int
    shutdown_grace_s: float
    receiver_tls_cert_file: str | None = None
    receiver_tls_key_file: str | None = None
    receiver_tls_client_ca_file: str | None = None
    receiver_bearer_token: str | None = None
