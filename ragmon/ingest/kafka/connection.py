"""The Kafka source's side of the broker connection: aiokafka's connection and security options
from the settings, a consumer stopped whatever it raises, and the broker's health as the source
sees it (``BrokerHealth``: an outage logged once when it starts and once when it ends, readiness,
and one log line per kind of problem).
"""

from __future__ import annotations

import logging
from typing import Any

from aiokafka import AIOKafkaConsumer
from aiokafka.helpers import create_ssl_context

from ...closing import close_quietly
from ...errors import ConfigError
from .settings import KafkaSourceSettings

__all__ = ["BrokerHealth", "kafka_client_options", "stop_consumer"]

log = logging.getLogger("ragmon.kafka")


def kafka_client_options(config: KafkaSourceSettings) -> dict[str, Any]:
    """aiokafka connection/security keyword arguments from the agent settings.

    Raises ``ConfigError`` for combinations that cannot work (SASL without credentials)."""
    protocol = config.kafka_security_protocol.upper()
    opts: dict[str, Any] = {
        "bootstrap_servers": config.kafka_bootstrap_servers,
        "security_protocol": protocol,
    }
    if protocol in ("SSL", "SASL_SSL"):
        try:
            opts["ssl_context"] = create_ssl_context(
                cafile=config.kafka_ssl_cafile,
                certfile=config.kafka_ssl_certfile,
                keyfile=config.kafka_ssl_keyfile,
            )
        except (OSError, ValueError) as exc:
            raise ConfigError("--kafka-ssl-cafile / RAGMON_KAFKA_SSL_CAFILE",
                              f"cannot load TLS files: {exc}") from exc
    elif config.kafka_ssl_cafile or config.kafka_ssl_certfile:
        raise ConfigError("--kafka-security-protocol / RAGMON_KAFKA_SECURITY_PROTOCOL",
                          f"TLS files are set but the protocol is {protocol}; use SSL or SASL_SSL")
    if protocol.startswith("SASL_"):
        mechanism = (config.kafka_sasl_mechanism or "").upper()
        if not mechanism:
            raise ConfigError("--kafka-sasl-mechanism / RAGMON_KAFKA_SASL_MECHANISM",
                              f"required with {protocol}")
        if not (config.kafka_sasl_username and config.kafka_sasl_password):
            raise ConfigError("--kafka-sasl-username / RAGMON_KAFKA_SASL_USERNAME",
                              f"username and password are required with {protocol}")
        opts.update(sasl_mechanism=mechanism, sasl_plain_username=config.kafka_sasl_username,
                    sasl_plain_password=config.kafka_sasl_password)
    return opts


async def stop_consumer(consumer: AIOKafkaConsumer) -> None:
    """Stop ``consumer`` whatever it raises; when aiokafka's stop fails half-way (see ``ragmon.closing``)
    its connections are closed here, through the one private attribute it offers for them."""
    await close_quietly(consumer.stop, 30, "kafka consumer", connections=lambda: consumer._client.close())


class BrokerHealth:
    """Whether the broker at ``bootstrap_servers`` answers, as the consumer loop and the commits see
    it (``outage``), and the source's log-once (warning the first time per key, debug after)."""

    def __init__(self, bootstrap_servers: str) -> None:
        self._servers = bootstrap_servers
        self.outage = False
        self._logged: set[str] = set()

    def on_outage(self, exc: BaseException) -> None:
        if not self.outage:
            self.outage = True
            log.warning("kafka: broker %s unavailable or failing, retrying with backoff: %r", self._servers, exc)

    def recovered(self) -> None:
        if self.outage:
            self.outage = False
            log.info("kafka: broker %s reachable again", self._servers)

    def log_once(self, key: str, msg: str, *args: Any, exc_info: bool = False) -> None:
        if key in self._logged:
            log.debug(msg, *args)
            return
        self._logged.add(key)
        log.warning(msg, *args, exc_info=exc_info)
