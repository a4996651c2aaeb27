"""The new owner's side of a Kafka partition hand-off: what each taken-over partition inherited
(``owner_note.OwnerNote``, read from the previous owner's commit metadata) and what that
means for the records re-read after it.

- Traces the previous owner listed as accounted for are left out (counted once each as
  ``skipped``).
- A partition whose last commit was periodic (its owner may have crashed after it), or that was
  taken over in a rebalance with no commit at all (its owner died before its first commit), is
  *suspect* until the highwater seen at the takeover: traces re-read there may have been judged
  by the dead owner, and are counted once each as ``redelivered`` (an upper bound).

Pure bookkeeping: the source reads the metadata and the highwater, this decides and counts.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ... import semconv as sc
from .offsets import PartitionKey
from .owner_note import OwnerNote, short_id

Count = Callable[[str, int], None]  # (hand-over kind, traces): the ragmon_kafka_handover_traces_total counter


class Takeovers:
    """Per assigned partition: its inheritance, the traces skipped so far, its suspect range."""

    def __init__(self, count: Count) -> None:
        self._count = count
        self._inherited: dict[PartitionKey, OwnerNote] = {}
        self._skipped: dict[PartitionKey, set[str]] = {}
        # until (the highwater at the takeover, read with the first re-read record) and the trace ids counted
        self._suspect: dict[PartitionKey, tuple[int | None, set[str]]] = {}
        # the partitions of this agent's previous assignment, and whether it has had one: a partition
        # given in a later rebalance, not held just before, without a commit lost its owner before
        # that owner's first commit. Held *just before*, not ever: a partition this agent held at
        # start, then lost to another agent that died before committing, comes back uncommitted.
        self._held: set[PartitionKey] = set()
        self._ever_assigned = False

    @property
    def active(self) -> bool:
        """Some partition still has traces to skip or a suspect range: records need ``filter``."""
        return bool(self._inherited or self._suspect)

    def inherited(self, key: PartitionKey) -> OwnerNote | None:
        return self._inherited.get(key)

    def receive(self, key: PartitionKey, note: OwnerNote | None) -> None:
        """What the previous owner of ``key`` committed (None: no commit, or another writer's)."""
        if note is None:
            if self._ever_assigned and key not in self._held:
                # taken over in a rebalance, and its owner never committed: it may have judged
                # traces before dying; re-reading them counts as redelivered (an upper bound)
                self._suspect[key] = (None, set())
            return
        self._inherited[key] = note
        if not note.clean:  # its owner may have died after this commit
            self._suspect[key] = (None, set())

    def assigned(self, keys: Iterable[PartitionKey]) -> None:
        """The assignment is complete (after ``receive`` for each of ``keys``)."""
        self._ever_assigned = True
        self._held = set(keys)

    def filter(self, key: PartitionKey, offset: int, spans: Sequence[Any], trace_ids: set[str],
               highwater: Callable[[], int | None]) -> Sequence[Any]:
        """The spans of the record at ``offset`` left to judge: without the traces the previous
        owner accounted for; traces re-read in a suspect range are counted as redelivered."""
        inherited = self._inherited.get(key)
        if inherited is not None and inherited.taken:
            skip = {t for t in trace_ids if short_id(t) in inherited.taken}
            if skip:
                seen = self._skipped.setdefault(key, set())
                new = skip - seen
                if new:
                    seen.update(new)
                    self._count(sc.HANDOVER_SKIPPED, len(new))
                spans = [span for span in spans if span.trace_id not in skip]
                trace_ids = trace_ids - skip
        suspect = self._suspect.get(key)
        if suspect is not None:
            until, counted = suspect
            if until is None:
                until = highwater()  # what was there at the takeover
                self._suspect[key] = (until, counted)
            if until is None or offset >= until:
                del self._suspect[key]
            else:
                new = trace_ids - counted
                if new:
                    counted.update(new)
                    self._count(sc.HANDOVER_REDELIVERED, len(new))
        return spans

    def forget(self, keys: Iterable[PartitionKey]) -> None:
        """``keys`` were revoked: their next owner inherits from this one's commit."""
        for key in keys:
            for state in (self._inherited, self._skipped, self._suspect):
                state.pop(key, None)
