"""aiokafka's start-up noise turned into one line that says what the agent waits for.

Before a topic exists (the Collector's kafkaexporter creates it with its first write) aiokafka logs
"Topic X not found in cluster metadata" at ERROR on every metadata refresh, and while a new broker
creates ``__consumer_offsets`` it logs "Group Coordinator Request failed:
CoordinatorNotAvailableError" likewise. Neither is a fault: the consumer retries and starts on its
own. ``WaitingFilter`` holds those records back (they stay visible at DEBUG under ragmon.kafka) and
logs once per wait what the agent is waiting for, and once when the wait is over.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

log = logging.getLogger("ragmon.kafka")

#: aiokafka's loggers that report the waits (cluster metadata, group coordinator, assignors).
AIOKAFKA_LOGGERS = (
    "aiokafka.cluster",
    "aiokafka.consumer.group_coordinator",
    "aiokafka.coordinator.assignors.roundrobin",
    "aiokafka.coordinator.assignors.range",
    "aiokafka.coordinator.assignors.sticky.sticky_assignor",
)
_TOPIC_MESSAGES = (
    "Topic %s not found in cluster metadata",
    "Topic %s is not available during auto-create initialization",
    "No partition metadata for topic %s",
    "No partition metadata for topic %r",
)
_COORDINATOR_MESSAGE = "Group Coordinator Request failed: %s"
_COORDINATOR_ERRORS = ("CoordinatorNotAvailable", "NotCoordinator", "CoordinatorLoadInProgress")


class WaitingFilter(logging.Filter):
    """A logging filter for aiokafka's loggers, one per Kafka source (its topics and group)."""

    def __init__(self, topics: Iterable[str], group: str) -> None:
        super().__init__()
        self._topics = frozenset(topics)
        self._group = group
        self._waiting: set[str] = set()  # what a line was logged for and is not over yet

    def filter(self, record: logging.LogRecord) -> bool:
        what = self._wait_of(record)
        if what is None:
            return True
        if what not in self._waiting:
            self._waiting.add(what)
            log.info("kafka: waiting for %s; consuming starts on its own when it is there "
                        "(aiokafka's retries are logged at DEBUG)", what)
        log.debug("kafka: %s", record.getMessage())
        return False

    def _wait_of(self, record: logging.LogRecord) -> str | None:
        args = record.args if isinstance(record.args, tuple) else ()
        if record.msg in _TOPIC_MESSAGES and args and str(args[0]) in self._topics:
            return (f"topic {args[0]} to be created (the Collector's kafkaexporter creates it with its "
                    "first write where the broker allows auto-creation; or create it with kafka-topics)")
        if record.msg == _COORDINATOR_MESSAGE and args and any(e in repr(args[0]) for e in _COORDINATOR_ERRORS):
            return f"the group coordinator of consumer group {self._group!r} (the broker is still starting it)"
        return None

    def over(self) -> None:
        """Partitions were assigned: every wait is over (a later one is logged again)."""
        if self._waiting:
            log.info("kafka: done waiting for %s", "; ".join(sorted(w.split(" (")[0] for w in self._waiting)))
            self._waiting.clear()

    def install(self) -> None:
        for name in AIOKAFKA_LOGGERS:
            logging.getLogger(name).addFilter(self)

    def remove(self) -> None:
        for name in AIOKAFKA_LOGGERS:
            logging.getLogger(name).removeFilter(self)
