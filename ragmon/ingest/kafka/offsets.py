"""Which Kafka offsets are safe to commit: pure bookkeeping, no I/O (compiled: see ``_native.py``).

A consumer may commit offset ``N`` for a partition only when every message below ``N`` that it
was handed is accounted for. Messages are *tracked* in the order they are fetched and
*released* in any order (a trace that closes early releases its message before a slower one).
The safe commit offset is therefore the lowest still-pending offset, or one past the highest
tracked offset when nothing is pending. Offsets need not be contiguous (compacted topics,
transaction markers), so the tracker never assumes ``offset + 1`` is the next message.

It also remembers which trace ids each message at or after the safe offset held
(``note_traces``): the range a partition's next owner will read again. The Kafka source lists the
accounted ones among them in the offset commit's metadata (``kafka/owner_note.py``).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable, Iterable

# (topic, partition)
PartitionKey = tuple[str, int]


class _Partition:
    __slots__ = ("committed", "next_offset", "order", "pending", "start", "traces")

    def __init__(self) -> None:
        self.order: deque[int] = deque()  # tracked offsets, ascending (lazily trimmed)
        self.pending: set[int] = set()  # tracked and not yet released
        self.next_offset: int | None = None  # one past the highest tracked offset
        self.start: int | None = None  # first tracked offset: where fetching began (nothing to commit yet)
        self.committed: int | None = None  # last offset acknowledged by the broker
        self.traces: deque[tuple[int, tuple[str, ...]]] = deque()  # (offset, trace ids), ascending

    def safe(self) -> int | None:
        while self.order and self.order[0] not in self.pending:
            self.order.popleft()
        safe = self.order[0] if self.order else self.next_offset
        traces = self.traces
        while traces and safe is not None and traces[0][0] < safe:
            traces.popleft()  # below what will be committed: never read again
        return safe


class OffsetTracker:
    """Per-partition pending offsets. Not thread-safe: use it from one event loop."""

    def __init__(self) -> None:
        self._parts: dict[PartitionKey, _Partition] = {}

    def track(self, key: PartitionKey, offset: int) -> None:
        """A message was handed out; it stays pending until ``release``."""
        part = self._parts.get(key)
        if part is None:  # (not setdefault: that would build a _Partition for every message)
            part = self._parts[key] = _Partition()
        if part.start is None:
            part.start = offset
        if part.next_offset is not None and offset < part.next_offset:
            # A re-fetch after a seek (e.g. back to the committed offset): start over from here.
            part.order = deque(o for o in part.order if o < offset)
            part.pending = {o for o in part.pending if o < offset}
            part.traces = deque(item for item in part.traces if item[0] < offset)
        part.order.append(offset)
        part.pending.add(offset)
        part.next_offset = offset + 1

    def note_traces(self, key: PartitionKey, offset: int, trace_ids: tuple[str, ...]) -> None:
        """The trace ids of the message at ``offset`` (tracked just before)."""
        part = self._parts.get(key)
        if part is not None and trace_ids:
            part.traces.append((offset, trace_ids))

    def traces_from_safe(self, key: PartitionKey) -> tuple[int | None, int | None, set[str]]:
        """The safe offset, one past the last tracked offset, and the trace ids of the messages in
        between: what the partition's next owner reads again after a commit at the safe offset."""
        part = self._parts.get(key)
        if part is None:
            return None, None, set()
        safe = part.safe()
        ids: set[str] = set()
        for _, trace_ids in part.traces:
            ids.update(trace_ids)
        return safe, part.next_offset, ids

    def release(self, key: PartitionKey, offset: int) -> bool:
        """Mark a message accounted for. False when it is unknown (partition revoked meanwhile)."""
        part = self._parts.get(key)
        if part is None or offset not in part.pending:
            return False
        part.pending.discard(offset)
        return True

    def release_token(self, token: Hashable) -> bool:
        """``release`` for a ``(topic, partition, offset)`` delivery token."""
        if not (isinstance(token, tuple) and len(token) >= 3):
            return False
        topic, partition, offset = token[0], token[1], token[2]
        return self.release((topic, partition), offset)

    def safe_offset(self, key: PartitionKey) -> int | None:
        """The offset to commit (next message to read), or None when nothing was tracked."""
        part = self._parts.get(key)
        return part.safe() if part is not None else None

    def pending(self, key: PartitionKey | None = None) -> int:
        """Messages handed out and not yet released (for one partition or all)."""
        parts = self._parts.values() if key is None else [self._parts[key]] if key in self._parts else []
        return sum(len(part.pending) for part in parts)

    def to_commit(self, keys: Iterable[PartitionKey] | None = None) -> dict[PartitionKey, int]:
        """Safe offsets that move past what was last committed."""
        out: dict[PartitionKey, int] = {}
        for key in self._parts if keys is None else keys:
            part = self._parts.get(key)
            if part is None:
                continue
            safe = part.safe()
            baseline = part.committed if part.committed is not None else part.start
            if safe is not None and baseline is not None and safe > baseline:
                out[key] = safe
        return out

    def committed(self, offsets: dict[PartitionKey, int]) -> None:
        """The broker acknowledged these offsets."""
        for key, offset in offsets.items():
            part = self._parts.get(key)
            if part is not None and (part.committed is None or offset > part.committed):
                part.committed = offset

    def forget(self, keys: Iterable[PartitionKey]) -> None:
        """Partitions were revoked: whoever owns them next resumes from the committed offset."""
        for key in keys:
            self._parts.pop(key, None)

    def partitions(self) -> list[PartitionKey]:
        return list(self._parts)
