"""Kafka exporter options for ``init(exporter="kafka")``: explicit keywords, then the environment.

The same ``RAGMON_KAFKA_*`` variables the agent's Kafka source reads; ``KafkaSpanExporter`` itself
is imported lazily (aiokafka only for Kafka users) by :func:`ragmon.sdk._exporters.build_exporter`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from .. import env

ENV_KAFKA_BOOTSTRAP = env.KAFKA_BOOTSTRAP_SERVERS
ENV_KAFKA_TOPIC = env.KAFKA_TOPIC
ENV_KAFKA_TOPICS = env.KAFKA_TOPICS  # the agent's list; the exporter writes to its first topic
DEFAULT_KAFKA_BOOTSTRAP = "127.0.0.1:9092"
# KafkaSpanExporter keyword <- env var (the same variables the agent's Kafka source reads)
KAFKA_ENV_OPTIONS: Mapping[str, str] = env.KAFKA_EXPORTER_OPTIONS


def kafka_exporter_options(explicit: Mapping[str, Any]) -> dict[str, Any]:
    """Explicit ``init(**kafka_options)`` > ``RAGMON_KAFKA_*`` env > the exporter's defaults."""
    options = dict(explicit)
    options.setdefault("bootstrap_servers", os.environ.get(ENV_KAFKA_BOOTSTRAP) or DEFAULT_KAFKA_BOOTSTRAP)
    topic = os.environ.get(ENV_KAFKA_TOPIC) or os.environ.get(ENV_KAFKA_TOPICS, "").split(",")[0].strip()
    if topic:
        options.setdefault("topic", topic)
    for key, variable in KAFKA_ENV_OPTIONS.items():
        value = os.environ.get(variable, "").strip()
        if value:
            options.setdefault(key, value.upper() if key == "security_protocol" else value)
    return options

