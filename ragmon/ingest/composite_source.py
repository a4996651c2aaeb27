"""Several span sources run as one (the OTLP/HTTP and OTLP/gRPC receivers side by side).

The agent drives one ``SpanSource``; this one starts its members in order (stopping those
already started if a later one fails, so a busy port leaves nothing listening), stops them all,
is ready when every member is, and forwards ``release`` to each member (a member ignores
tokens that are not its own). ``port`` is the first member's; ``port_of(name)`` finds another's.
"""

from __future__ import annotations

import asyncio
from collections.abc import Hashable, Sequence

from .source import SpanSink, SpanSource

__all__ = ["CompositeSource"]


class CompositeSource:
    def __init__(self, sources: Sequence[SpanSource]) -> None:
        if not sources:
            raise ValueError("CompositeSource needs at least one source")
        self._sources = tuple(sources)
        self.name = "+".join(s.name for s in self._sources)  # for logs and /readyz, never a label

    @property
    def sources(self) -> tuple[SpanSource, ...]:
        return self._sources

    @property
    def port(self) -> int | None:
        return self._sources[0].port

    def port_of(self, name: str) -> int | None:
        for source in self._sources:
            if source.name == name:
                return source.port
        return None

    async def start(self, sink: SpanSink) -> None:
        started: list[SpanSource] = []
        try:
            for source in self._sources:
                await source.start(sink)
                started.append(source)
        except BaseException:
            for source in reversed(started):
                await source.stop()
            raise

    async def stop(self) -> None:
        """Stop every member at once (each bounds its own grace period)."""
        await asyncio.gather(*(source.stop() for source in self._sources))

    def release(self, token: Hashable) -> None:
        for source in self._sources:
            source.release(token)

    def ready(self) -> bool:
        return all(source.ready() for source in self._sources)
