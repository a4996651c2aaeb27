"""Retry delays: the one ``Backoff`` every retry loop uses — the LLM judge's HTTP retries, the Kafka
source's broker outages and the SDK's Kafka exporter. Pure (the random source is injectable)."""

from __future__ import annotations

import random


class Backoff:
    """Exponential backoff with *equal* jitter, capped.

    Retry number ``attempt`` (0-based) waits a uniform time in ``[c / 2, c]`` with
    ``c = min(max_s, base_s * 2**attempt)``: never close to 0 (as full jitter can be) and never in
    step across replicas (as no jitter is). A server's ``Retry-After`` wins when given: it is
    honoured up to ``max_retry_after_s``, with up to ``base_s / 2`` of jitter on top so replicas do
    not stampede.
    """

    def __init__(
        self, base_s: float = 0.5, max_s: float = 30.0, max_retry_after_s: float = 120.0,
        rng: random.Random | None = None,
    ) -> None:
        if base_s <= 0 or max_s < base_s:
            raise ValueError(f"need 0 < base_s <= max_s, got {base_s}, {max_s}")
        self.base_s = base_s
        self.max_s = max_s
        self.max_retry_after_s = max_retry_after_s
        self._rng = rng or random.Random()

    def delay(self, attempt: int, retry_after_s: float | None = None) -> float:
        """Seconds to wait before retry number ``attempt`` (0-based)."""
        if retry_after_s is not None:
            return min(retry_after_s, self.max_retry_after_s) + self._rng.uniform(0, self.base_s / 2)
        ceiling = min(self.max_s, self.base_s * (2 ** min(attempt, 64)))
        return self._rng.uniform(ceiling / 2, ceiling)
