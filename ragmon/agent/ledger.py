"""The delivery ledger: which traces are in flight, which were accounted for lately, and when a
source's delivery token goes back (rule 4: only once every trace with spans in that delivery is
accounted for as scored, skipped or failed).

A source hands spans over with a token (a Kafka ``(topic, partition, offset)``); the traces those
spans touch hold the token while they are open or being judged. ``account`` is the one call that
ends a trace's stay: it drops it from the in-flight table, remembers its id (a redelivered copy is
a duplicate) and releases each token it was the last holder of. A partition handed to another
agent lets go of its tokens without releasing them (``forget`` / ``let_go``).

No metrics and no asyncio: the agent's router, judge pool and hand-off call it, and each can be
tested against it alone.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable
from collections.abc import Set as AbstractSet
from typing import Final

from ..ingest.closed_trace import ClosedTrace

__all__ = ["DeliveryLedger", "RecentIds"]

_NO_STREAM: Final = ""


class RecentIds(OrderedDict[str, None]):
    """Bounded memory of accounted trace ids, to recognise redelivered traces (``in`` is the
    dict's own: asked for every trace)."""

    def __init__(self, size: int) -> None:
        super().__init__()
        self._size = size

    def add(self, trace_id: str) -> None:
        if self._size <= 0:
            return
        if trace_id in self:
            self.move_to_end(trace_id)
            return
        self[trace_id] = None
        while len(self) > self._size:
            self.popitem(last=False)


class DeliveryLedger:
    """Tokens <-> traces, the traces in flight (queued for or inside the judge) and recent ids.

    ``release(token)`` is the source's (called once per token, when its last trace is accounted);
    ``on_in_flight(n)`` is told the in-flight count whenever it changes (the backlog gauge)."""

    def __init__(self, release: Callable[[Hashable], None], *, dedup_size: int,
                 on_in_flight: Callable[[int], None] = lambda n: None) -> None:
        self._release = release
        self._on_in_flight = on_in_flight
        self.recent = RecentIds(dedup_size)
        self.in_flight: dict[str, ClosedTrace] = {}  # read-only outside: trace id -> the copy being judged
        self._stream: dict[str, str] = {}  # trace id -> sample stream (rate | priority) while in flight
        self._token_traces: dict[Hashable, set[str]] = {}
        self._trace_tokens: dict[str, set[Hashable]] = {}

    # ------------------------------------------------------------------ traces
    def __len__(self) -> int:
        """Traces in flight."""
        return len(self.in_flight)

    def seen(self, trace_id: str) -> bool:
        """Accounted for lately, or in flight now: a copy of it is a duplicate."""
        return trace_id in self.recent or trace_id in self.in_flight

    def enqueue(self, closed: ClosedTrace, stream: str) -> None:
        """The trace goes to the judge: in flight until ``account``."""
        self.in_flight[closed.trace_id] = closed
        self._stream[closed.trace_id] = stream
        self._on_in_flight(len(self.in_flight))

    def holds(self, closed: ClosedTrace) -> bool:
        """This very copy is in flight (not accounted for yet, e.g. by a stop that gave up waiting)."""
        return self.in_flight.get(closed.trace_id) is closed

    def stream_of(self, trace_id: str) -> str | None:
        """The sample stream of a trace in flight; None for one that is not."""
        return self._stream.get(trace_id)

    def account(self, closed: ClosedTrace, *, remember: bool = True) -> None:
        """The trace is scored, skipped or failed: release delivery tokens no longer needed."""
        trace_id = closed.trace_id
        in_flight = self.in_flight
        if in_flight.get(trace_id) is closed:
            del in_flight[trace_id]
            self._stream.pop(trace_id, None)
            self._on_in_flight(len(in_flight))
        if remember:
            self.recent.add(trace_id)
        if trace_id in in_flight:
            return  # an earlier copy of this trace is still being judged and holds the tokens
        held = self._trace_tokens.pop(trace_id, None)
        tokens = closed.tokens if held is None else held | closed.tokens
        for token in tokens:
            holders = self._token_traces.get(token)
            if holders is None:
                continue
            holders.discard(trace_id)
            if not holders:
                del self._token_traces[token]
                self._release(token)

    # ------------------------------------------------------------------ tokens
    def hold(self, token: Hashable, touched: Iterable[str], is_open: Callable[[str], bool]) -> None:
        """A delivery was handed over: the traces it touched that are still open or in flight hold
        ``token``; with none (the usual case: a trace in one message, accounted already) it goes
        back at once."""
        in_flight = self.in_flight
        holders: set[str] | None = None
        for trace_id in touched:
            if trace_id in in_flight or is_open(trace_id):
                if holders is None:
                    holders = self._token_traces.setdefault(token, set())
                holders.add(trace_id)
                self._trace_tokens.setdefault(trace_id, set()).add(token)
        if holders is None and not self._token_traces.get(token):
            self._token_traces.pop(token, None)
            self._release(token)

    def waiting(self, predicate: Callable[[Hashable], bool], handed: AbstractSet[str] = frozenset()) -> bool:
        """Whether a token matching ``predicate`` is still held by a trace not in ``handed``."""
        return any(predicate(tok) and not holders <= handed for tok, holders in self._token_traces.items())

    def forget(self, trace_ids: Iterable[str]) -> None:
        """These traces are handed on unjudged: their tokens keep them as holders, never released."""
        for trace_id in trace_ids:
            self._trace_tokens.pop(trace_id, None)

    def let_go(self, predicate: Callable[[Hashable], bool]) -> None:
        """Drop every token matching ``predicate`` unreleased (its partition went to another agent:
        a later release would be ignored)."""
        for token in [tok for tok in self._token_traces if predicate(tok)]:
            del self._token_traces[token]

    @property
    def tokens_held(self) -> int:
        return len(self._token_traces)
