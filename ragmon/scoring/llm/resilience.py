"""Retry-After parsing, a circuit breaker and a client-side rate limiter for the LLM judge (the retry
delays themselves are ``ragmon.backoff.Backoff``, shared with the Kafka loops).

The breaker and the limiter take an injected clock (and the limiter an injected sleep) so tests drive time
themselves instead of waiting for it.
"""

from __future__ import annotations

import asyncio
import email.utils
import time
from collections.abc import Awaitable, Callable

from ..judge import CIRCUIT_CLOSED, CIRCUIT_HALF_OPEN, CIRCUIT_OPEN

Clock = Callable[[], float]
Sleep = Callable[[float], Awaitable[None]]


# --- retries ---------------------------------------------------------------------------------
def parse_retry_after(value: str | None, now_epoch: float | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (delta-seconds or HTTP-date), or None."""
    if value is None or not value.strip():
        return None
    text = value.strip()
    try:
        return max(0.0, float(text))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return None
    now = time.time() if now_epoch is None else now_epoch
    return max(0.0, when.timestamp() - now)


# --- circuit breaker -------------------------------------------------------------------------
# the circuit states are the Judge protocol's (circuit_state)
CLOSED, OPEN, HALF_OPEN = CIRCUIT_CLOSED, CIRCUIT_OPEN, CIRCUIT_HALF_OPEN


class CircuitBreaker:
    """Opens after ``failures`` consecutive failures; after ``reset_s`` lets one trial through
    (half-open): success closes it, failure opens it again for another ``reset_s``."""

    def __init__(
        self, failures: int, reset_s: float, *, clock: Clock = time.monotonic,
        on_change: Callable[[str], None] | None = None,
    ) -> None:
        self.failures = failures
        self.reset_s = reset_s
        self._clock = clock
        self._on_change = on_change
        self._consecutive = 0
        self._state = CLOSED
        self._opened_at = 0.0
        self._trial_in_flight = False

    @property
    def state(self) -> str:
        if self._state == OPEN and self._clock() - self._opened_at >= self.reset_s:
            return HALF_OPEN
        return self._state

    def allow(self) -> bool:
        """May a request go out now? In half-open state only one trial at a time."""
        state = self.state
        if state == CLOSED:
            return True
        if state == HALF_OPEN and not self._trial_in_flight:
            self._trial_in_flight = True
            return True
        return False

    def record_success(self) -> None:
        self._consecutive = 0
        self._trial_in_flight = False
        self._set(CLOSED)

    def record_failure(self) -> None:
        self._consecutive += 1
        was_trial = self._trial_in_flight
        self._trial_in_flight = False
        if was_trial or self._consecutive >= self.failures:
            self._opened_at = self._clock()
            self._set(OPEN)

    def release(self) -> None:
        """A request ended in a way that says nothing about the endpoint's health."""
        self._trial_in_flight = False

    def _set(self, state: str) -> None:
        if state != self._state:
            self._state = state
            if self._on_change is not None:
                self._on_change(state)


# --- client-side rate limits -----------------------------------------------------------------
class _Bucket:
    """Token bucket holding at most one minute's allowance, refilled continuously."""

    def __init__(self, per_minute: int, now: float) -> None:
        self.capacity = float(per_minute)
        self.rate = per_minute / 60.0
        self.level = self.capacity
        self.stamp = now

    def refill(self, now: float) -> None:
        self.level = min(self.capacity, self.level + (now - self.stamp) * self.rate)
        self.stamp = now

    def wait_for(self, amount: float) -> float:
        amount = min(amount, self.capacity)  # a request larger than a minute's allowance waits for a full bucket
        # the tolerance absorbs float rounding after sleeping exactly the computed wait
        return 0.0 if self.level + 1e-6 >= amount else max(1e-3, (amount - self.level) / self.rate)


class RateLimiter:
    """Requests/min and tokens/min limits (0 = unlimited). ``acquire`` waits, FIFO."""

    def __init__(
        self, requests_per_minute: int = 0, tokens_per_minute: int = 0, *,
        clock: Clock = time.monotonic, sleep: Sleep = asyncio.sleep,
    ) -> None:
        now = clock()
        self._requests = _Bucket(requests_per_minute, now) if requests_per_minute > 0 else None
        self._tokens = _Bucket(tokens_per_minute, now) if tokens_per_minute > 0 else None
        self._clock = clock
        self._sleep = sleep
        self._lock = asyncio.Lock()
        self.waited_s = 0.0  # total time spent throttled, for diagnostics

    async def acquire(self, tokens: int) -> None:
        if self._requests is None and self._tokens is None:
            return
        async with self._lock:  # FIFO: one waiter at a time keeps ordering fair
            while True:
                now = self._clock()
                wait = 0.0
                for bucket, amount in ((self._requests, 1.0), (self._tokens, float(tokens))):
                    if bucket is not None:
                        bucket.refill(now)
                        wait = max(wait, bucket.wait_for(amount))
                if wait <= 0:
                    if self._requests is not None:
                        self._requests.level = max(0.0, self._requests.level - 1)
                    if self._tokens is not None:
                        self._tokens.level = max(0.0, self._tokens.level - min(float(tokens), self._tokens.capacity))
                    return
                self.waited_s += wait
                await self._sleep(wait)
