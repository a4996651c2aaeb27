"""Retry-After parsing, a circuit breaker, a client-side rate limiter and an adaptive concurrency limit
for the LLM judge (the retry delays themselves are ``ragmon.backoff.Backoff``, shared with the Kafka
loops).

The breaker and the limiter take an injected clock (and the limiter an injected sleep) so tests drive time
themselves instead of waiting for it.
"""

from __future__ import annotations

import asyncio
import email.utils
import time
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Final

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
        self.last_cause = ""  # the last failure that counted, named

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

    def record_failure(self, cause: str = "") -> None:
        """A failure that says the endpoint is down (``cause``: what happened, for the open circuit's message)."""
        self._consecutive += 1
        self.last_cause = cause or self.last_cause
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


# --- adaptive concurrency --------------------------------------------------------------------
class AdaptiveConcurrency:
    """How many requests may be in flight: AIMD between 1 and ``maximum``, driven by what the server shows.

    It starts at 1 and grows by one for each fast reply (slow start) until the server first shows
    overload, then by one per ``limit`` fast replies in a row; it halves (never below 1) on overload.
    A reply is *fast* when it took at most a quarter of the request timeout. *Overload* is a
    timeout, a 429 / 503 / 504, or a reply that took more than half the timeout: the server queues
    requests of its own (a llama.cpp server with one slot answers them one after another), so more
    of them in flight only brings each closer to its timeout. Requests that started before a
    decrease do not decrease it again (one halving per round, as in TCP).

    Waiting here for a slot is not part of any request's timeout: the timeout starts when the
    request is sent.
    """

    FAST: Final = 0.25  # share of the timeout a reply may take to let the limit grow
    SLOW: Final = 0.5  # share of the timeout beyond which a reply counts as overload

    def __init__(self, maximum: int, timeout_s: float, *, on_change: Callable[[int], None] | None = None) -> None:
        self.maximum = max(1, maximum)
        self.limit = 1
        self._timeout_s = timeout_s
        self._on_change = on_change
        self._in_flight = 0
        self._round = 0  # bumped by each decrease
        self._credit = 0  # fast replies since the last increase
        self._slow_start = True
        self._waiters: deque[asyncio.Future[None]] = deque()
        if on_change is not None:
            on_change(self.limit)

    @property
    def in_flight(self) -> int:
        return self._in_flight

    async def acquire(self) -> int:
        """Wait for a slot; returns the round it was taken in (hand it to ``release``)."""
        while self._in_flight >= self.limit:
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                await waiter
            except asyncio.CancelledError:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)
                else:  # woken, then cancelled: hand the wake-up on
                    self._wake()
                raise
        self._in_flight += 1
        return self._round

    def release(self, taken_in: int, *, latency_s: float | None = None, overload: bool = False) -> None:
        """Give the slot back, telling how the request went: ``latency_s`` of a reply, or ``overload``
        (neither: nothing learned, e.g. a connection error or a cancelled request)."""
        self._in_flight -= 1
        if latency_s is not None and latency_s > self.SLOW * self._timeout_s:
            overload = True
        if overload:
            if taken_in == self._round:
                self._round += 1
                self._slow_start = False
                self._credit = 0
                self._set(max(1, self.limit // 2))
        elif latency_s is not None and latency_s <= self.FAST * self._timeout_s and self.limit < self.maximum:
            self._credit += 1
            if self._slow_start or self._credit >= self.limit:
                self._credit = 0
                self._set(self.limit + 1)
        self._wake()

    def _wake(self) -> None:
        free = self.limit - self._in_flight
        while free > 0 and self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                free -= 1

    def _set(self, limit: int) -> None:
        if limit != self.limit:
            self.limit = limit
            if self._on_change is not None:
                self._on_change(limit)
