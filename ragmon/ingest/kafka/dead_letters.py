"""The Kafka source's dead-letter topic: the original bytes of a message the agent refused
(poison, oversize), with headers saying why and where it came from.

Sends run in the background and are bounded in time; whatever happens to a send, the message is
released so its partition moves on (the drop is already counted by the source; a failed write is
logged once). Without a dead-letter topic nothing is written and the message is released at once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from aiokafka import AIOKafkaProducer, ConsumerRecord
from aiokafka.errors import KafkaError

from ...closing import close_quietly

#: Dead-letter headers: why the message was refused and where it came from.
DLQ_ERROR_HEADER = "ragmon.error"
DLQ_REASON_HEADER = "ragmon.reason"
DLQ_TOPIC_HEADER = "ragmon.original.topic"
DLQ_PARTITION_HEADER = "ragmon.original.partition"
DLQ_OFFSET_HEADER = "ragmon.original.offset"

SEND_TIMEOUT_S = 10.0
_MAX_ERROR_BYTES = 1000

Release = Callable[[ConsumerRecord[Any, Any]], object]  # the source lets the message's offset move on
LogOnce = Callable[..., None]  # (key, message, *args): the source's log-once


class DeadLetters:
    """A producer for ``topic`` (None: no dead-letter topic) and its in-flight sends."""

    def __init__(self, topic: str | None, client_opts: dict[str, Any], release: Release, log_once: LogOnce) -> None:
        self.topic = topic
        self._client_opts = client_opts
        self._release = release
        self._log_once = log_once
        self._producer: AIOKafkaProducer | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def writing(self) -> bool:
        """A refused message will be written (the topic is set and the producer started)."""
        return self._producer is not None

    async def start(self) -> None:
        """Start the producer (once); raises what the broker raises, leaving nothing half-started."""
        if not self.topic or self._producer is not None:
            return
        producer = AIOKafkaProducer(client_id="ragmon-agent-dlq", acks="all", **self._client_opts)
        try:
            await producer.start()
        except BaseException:
            await close_quietly(producer.stop, 10, "dead-letter producer", connections=producer.client.close)
            raise
        self._producer = producer

    def refuse(self, record: ConsumerRecord[Any, Any], reason: str, error: str) -> None:
        """Write ``record`` to the dead-letter topic in the background, or release it at once."""
        if self._producer is None:
            self._release(record)
            return
        task = asyncio.create_task(self._send(self._producer, record, reason, error))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _send(self, producer: AIOKafkaProducer, record: ConsumerRecord[Any, Any], reason: str,
                    error: str) -> None:
        assert self.topic is not None
        headers = [
            (DLQ_ERROR_HEADER, error.encode("utf-8", "replace")[:_MAX_ERROR_BYTES]),
            (DLQ_REASON_HEADER, reason.encode()),
            (DLQ_TOPIC_HEADER, record.topic.encode()),
            (DLQ_PARTITION_HEADER, str(record.partition).encode()),
            (DLQ_OFFSET_HEADER, str(record.offset).encode()),
        ]
        try:
            fut = await asyncio.wait_for(producer.send(self.topic, record.value, key=record.key, headers=headers),
                                         timeout=SEND_TIMEOUT_S)
            await asyncio.wait_for(fut, timeout=SEND_TIMEOUT_S)
        except (TimeoutError, KafkaError) as exc:
            self._log_once("dlq", "kafka: could not write to dead-letter topic %s: %r", self.topic, exc)
        finally:
            self._release(record)

    async def drain(self) -> None:
        """Let in-flight sends finish (bounded)."""
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=SEND_TIMEOUT_S)

    async def stop(self) -> None:
        producer, self._producer = self._producer, None
        if producer is not None:
            await close_quietly(producer.stop, 10, "dead-letter producer", connections=producer.client.close)
