"""Which Kafka offsets are safe to commit: pure bookkeeping, no I/O (compiled: see ``_native.py``).

A consumer may commit offset ``N`` for a partition only when every message below ``N`` that it
was handed is accounted for. Messages are *tracked* in the order they are fetched and
*released* in any order (a trace that closes early releases its message before a slower one).
The safe commit offset is therefore the lowest still-pending offset, or one past the highest
tracked offset when nothing is pending. Offsets need not be contiguous (compacted topics,
transaction markers), so the tracker never assumes ``offset + 1`` is the next message.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable, Iterable

# (topic, partition)
PartitionKey = tuple[str, int]


class _Partition:
    __slots__ = ("committed", "next_offset", "order", "pending", "start")

    def __init__(self) -> None:
        self.order: deque[int] = deque()  # tracked offsets, ascending (lazily trimmed)
        self.pending: set[int] = set()  # tracked and not yet released
        self.next_offset: int | None = None  # one past the highest tracked offset
        self.start: int | None = None  # first tracked offset: where fetching began (nothing to commit yet)
        self.committed: int | None = None  # last offset acknowledged by the broker

    def safe(self) -> int | None:
        while self.order and self.order[0] not in self.pending:
            self.order.popleft()
        if self.order:
            return self.order[0]
        return self.next_offset


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
        part.order.append(offset)
        part.pending.add(offset)
        part.next_offset = offset + 1

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
