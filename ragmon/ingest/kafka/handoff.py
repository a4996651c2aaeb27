"""The partitions the Kafka source owns, how they come and go, and the offset commits that carry a
partition's hand-off from one agent to the next.

Commits: a partition's offset is committed only below the first message of its earliest open trace
(``offsets.py``), with an owner note (``owner_note.py``) in the commit's metadata: the traces already
accounted for beyond it. A periodic commit (``p``) goes out when an offset moved or the note
changed; with nothing to commit the group coordinator is probed instead, so an outage is noticed
even while no messages flow.

Giving partitions up (revocation, stop): the agent forgets their open traces unjudged
(``hand_over``: the sink's ``hand_over_where``) and commits every partition read with a note
(``h``) listing the traces it accounted for; the next owner reads the open traces' messages again,
skips the listed traces and judges every other trace whole, once.

Taking partitions over (assignment): before any record of them is handed out, the previous owners'
notes are read with an admin client and given to ``takeover.Takeovers``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Hashable
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import KafkaError

from ... import semconv as sc
from ...closing import close_quietly
from ..source import KafkaSourceMetrics, SpanSink
from .connection import BrokerHealth
from .offsets import OffsetTracker, PartitionKey
from .owner_note import read_note, write_note
from .settings import KafkaSourceSettings
from .takeover import Takeovers

__all__ = ["PartitionHandoff", "hand_over", "unaccounted"]

log = logging.getLogger("ragmon.kafka")

_PROBE_TIMEOUT_S = 2.0
_COMMIT_TIMEOUT_S = 10.0


class PartitionHandoff:
    """The source's partitions (``assigned``; ``loading``: assigned, the previous owners' notes being
    read) and their commits, hand-offs and takeovers. ``sink`` is set when the source starts."""

    def __init__(self, config: KafkaSourceSettings, client_opts: dict[str, Any], metrics: KafkaSourceMetrics,
                 tracker: OffsetTracker, health: BrokerHealth, clock: Callable[[], float] = time.monotonic) -> None:
        self._config = config
        self._client_opts = client_opts
        self._metrics = metrics
        self._tracker = tracker
        self._health = health
        self._clock = clock
        self.sink: SpanSink | None = None
        self.last_commit = clock()
        # What the rebalance listener last handed us; aiokafka's own view lags behind during a
        # rebalance, and records or lag of a revoked partition must not be touched meanwhile.
        self.assigned: set[TopicPartition] = set()
        self.loading: set[TopicPartition] = set()  # assigned, the previous owner's note being read
        self._commit_lock = asyncio.Lock()
        self._admin: AIOKafkaAdminClient | None = None  # reads the previous owner's commit metadata
        # per assigned partition: what its previous owner handed over, and the metadata last committed
        self.takeovers = Takeovers(lambda kind, n: metrics.kafka_handover.labels(kind).inc(n))
        self._meta_sent: dict[PartitionKey, str] = {}

    # --- commits --------------------------------------------------------------------------------
    async def commit(self, consumer: AIOKafkaConsumer, keys: set[PartitionKey] | None = None, *,
                     final: bool = False, handed: set[str] | None = None) -> None:
        """Commit the safe offsets, each with its owner note. ``final``: a hand-off (revocation,
        stop): every partition read is committed, ``handed`` are the traces given on unjudged;
        otherwise those that moved or whose note changed, the unaccounted traces asked of the sink."""
        self.last_commit = self._clock()
        async with self._commit_lock:
            if keys is None:
                keys = {(tp.topic, tp.partition) for tp in self.assigned}
            moved = self._tracker.to_commit(keys)
            offsets: dict[PartitionKey, int] = {}
            metadata: dict[PartitionKey, str] = {}
            for key in keys:
                safe, end, ids = self._tracker.traces_from_safe(key)
                if safe is None or end is None:
                    continue
                pending = (handed or set()) if final else unaccounted(self.sink, ids) if self.sink else ids
                inherited = self.takeovers.inherited(key)
                taken = ids - pending
                if inherited is not None and inherited.end > end:  # it had read further than we did
                    end = inherited.end
                    taken |= inherited.taken
                meta, unlisted = write_note(final, end, taken)
                if final and unlisted:
                    self._metrics.kafka_handover.labels(sc.HANDOVER_UNLISTED).inc(unlisted)
                    self._health.log_once("unlisted", "kafka: %d accounted traces of %s[%d] did not fit in the "
                                          "commit metadata; its next owner judges them again", unlisted, *key)
                if final or key in moved or (taken and meta != self._meta_sent.get(key)):
                    offsets[key], metadata[key] = safe, meta
            if not offsets:
                await self._probe(consumer)
                return
            try:
                # aiokafka retries a commit until the coordinator answers: bound it, so an
                # outage cannot wedge the poll loop or stop(); the next round commits again.
                await asyncio.wait_for(
                    consumer.commit({TopicPartition(t, p): (o, metadata[(t, p)]) for (t, p), o in offsets.items()}),
                    timeout=_COMMIT_TIMEOUT_S)
            except (KafkaError, TimeoutError) as exc:
                # Not fatal: the same (or a later) offset is committed next time; a rebalance
                # meanwhile means the new owner re-reads from the last committed offset.
                self._metrics.kafka_commits.labels("error").inc()
                self._health.on_outage(exc)
                return
            self._tracker.committed(offsets)
            self._meta_sent.update(metadata)
            self._metrics.kafka_commits.labels("ok").inc()
            self._health.recovered()

    async def _probe(self, consumer: AIOKafkaConsumer) -> None:
        """Nothing to commit: ask the group coordinator something cheap instead, so that an
        outage is noticed (readiness, one log line) even while no messages flow."""
        if not self.assigned:
            return
        tp = next(iter(self.assigned))
        try:
            await asyncio.wait_for(consumer.committed(tp), timeout=_PROBE_TIMEOUT_S)
        except (TimeoutError, KafkaError) as exc:
            self._health.on_outage(exc)
            return
        self._health.recovered()

    # --- giving partitions up -------------------------------------------------------------------
    async def give_up(self, consumer: AIOKafkaConsumer | None, keys: set[PartitionKey]) -> None:
        """``keys`` were revoked: hand their open traces over, commit them with a final note, forget them."""
        log.info("kafka: partitions revoked: %s", _fmt(keys))
        handed: set[str] = set()
        if self.sink is not None:
            try:
                handed = await hand_over(self.sink, lambda tok: isinstance(tok, tuple) and tok[:2] in keys,
                                         self._config.shutdown_grace_s)
            except Exception as exc:  # noqa: BLE001  # revocation must go on; offsets stay uncommitted
                self._health.log_once("flush", "kafka: handing over traces of revoked partitions failed: %r", exc)
        if consumer is not None:
            await self.commit(consumer, keys, final=True, handed=handed)
        log.info("kafka: handed over %s: %d open trace(s) left whole to the next owner", _fmt(keys), len(handed))
        self._tracker.forget(keys)
        self.takeovers.forget(keys)
        for key in keys:
            self._meta_sent.pop(key, None)

    async def give_up_all(self, consumer: AIOKafkaConsumer) -> None:
        """The source stops: hand every open trace over and commit every partition read with a final note."""
        assert self.sink is not None
        handed: set[str] = set()
        try:
            handed = await hand_over(self.sink, lambda tok: True, self._config.shutdown_grace_s)
        except Exception as exc:  # noqa: BLE001  # stopping goes on; offsets stay where they are
            self._health.log_once("handover", "kafka: handing traces over on stop failed: %r", exc)
        await self.commit(consumer, final=True, handed=handed)
        log.info("kafka: stopping: %d open trace(s) left whole to the partitions' next owner", len(handed))

    # --- taking partitions over -----------------------------------------------------------------
    async def take_over(self, assigned: set[TopicPartition]) -> None:
        """``assigned`` is the new assignment: read the previous owners' notes of its partitions
        before any of their records is handed out (the listener runs before the next fetch)."""
        if assigned:
            log.info("kafka: partitions assigned: %s", _fmt({(tp.topic, tp.partition) for tp in assigned}))
            self.loading = set(assigned)
            try:
                await self._read_owner_notes(assigned)
            finally:
                self.loading = set()
            self.takeovers.assigned((tp.topic, tp.partition) for tp in assigned)
        self.assigned = set(assigned)

    async def _read_owner_notes(self, assigned: set[TopicPartition]) -> None:
        """Read what the previous owners committed with their offsets."""
        try:
            if self._admin is None:
                admin = AIOKafkaAdminClient(client_id="ragmon-agent-handover", **self._client_opts)
                try:
                    await asyncio.wait_for(admin.start(), timeout=_COMMIT_TIMEOUT_S)
                except BaseException:
                    await close_quietly(admin.close, 10, "kafka admin client")
                    raise
                self._admin = admin
            committed = await asyncio.wait_for(
                self._admin.list_consumer_group_offsets(self._config.kafka_group_id, partitions=list(assigned)),
                timeout=_COMMIT_TIMEOUT_S)
        except Exception as exc:  # noqa: BLE001  # without it: traces in the re-read range may be judged twice
            self._health.log_once("handover-read", "kafka: could not read the previous owners' commit metadata "
                                  "(%r); traces they accounted for may be judged again", exc)
            return
        for tp in assigned:
            self.takeovers.receive((tp.topic, tp.partition), read_note(getattr(committed.get(tp), "metadata", None)))

    async def close(self) -> None:
        """Close the admin client that read the owner notes (if one was started)."""
        if self._admin is not None:
            await close_quietly(self._admin.close, 10, "kafka admin client")
            self._admin = None


async def hand_over(sink: SpanSink, predicate: Callable[[Hashable], bool], timeout_s: float) -> set[str]:
    """A Kafka partition goes to another agent: the sink's ``hand_over_where`` (open traces of it
    forgotten unjudged, returned)."""
    return set(await sink.hand_over_where(predicate, timeout_s))


def unaccounted(sink: SpanSink, trace_ids: set[str]) -> set[str]:
    """Which of ``trace_ids`` the sink has not accounted for yet (``SpanSink.unaccounted``)."""
    try:
        return set(sink.unaccounted(trace_ids))
    except Exception:  # a broken probe lists nothing as taken: duplicates, never a loss
        log.debug("sink.unaccounted() failed", exc_info=True)
        return trace_ids


def _fmt(keys: set[PartitionKey]) -> str:
    return ", ".join(f"{t}[{p}]" for t, p in sorted(keys))
