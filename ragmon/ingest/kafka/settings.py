"""The Kafka source's settings: a small frozen section of the agent's configuration.

A source gets only what it uses, never the whole ``AgentConfig``. The field names are the
agent's setting names, so ``AgentConfig.section(KafkaSourceSettings)`` fills a section without
copying fields one by one (and a renamed setting fails loudly at start-up).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class KafkaSourceSettings:
    kafka_bootstrap_servers: str
    kafka_topics: tuple[str, ...]
    kafka_group_id: str
    kafka_encoding: str
    kafka_security_protocol: str
    kafka_sasl_mechanism: str | None
    kafka_sasl_username: str | None
    kafka_sasl_password: str | None
    kafka_ssl_cafile: str | None
    kafka_ssl_certfile: str | None
    kafka_ssl_keyfile: str | None
    kafka_dead_letter_topic: str | None
    kafka_max_message_bytes: int
    kafka_commit_interval_s: float
    shutdown_grace_s: float
