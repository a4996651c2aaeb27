"""Token budget per minute and per day for the LLM judge.

Before a trace is judged its estimated tokens are *reserved* in both windows; when either
window cannot take them, ``JudgeBudgetExceeded`` is raised at once (the agent accounts the
trace as skipped{reason="budget"}) — nothing is queued. After the calls, the reservation is
*settled* against the tokens the API reported, so the budget tracks real spend.

Windows are fixed and aligned to the wall clock: the minute window resets at each whole
minute, the day window at 00:00 UTC. A limit of 0 means no budget for that window.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from ...errors import JudgeBudgetExceeded

WINDOW_MINUTE = "minute"
WINDOW_DAY = "day"
_SECONDS = {WINDOW_MINUTE: 60, WINDOW_DAY: 86_400}


class _Window:
    def __init__(self, name: str, limit: int) -> None:
        self.name = name
        self.limit = limit
        self.index = -1
        self.used = 0

    def roll(self, now: float) -> None:
        index = int(now // _SECONDS[self.name])
        if index != self.index:
            self.index = index
            self.used = 0

    @property
    def remaining(self) -> int:
        return max(0, self.limit - self.used)


@dataclass(frozen=True, slots=True)
class Reservation:
    tokens: int
    windows: dict[str, int]  # window name -> index of the window the tokens were taken from


class TokenBudget:
    """Thread-unsafe by design: it lives on the judge's event loop."""

    def __init__(
        self, per_minute: int = 0, per_day: int = 0, *, clock: Callable[[], float] = time.time,
        on_remaining: Callable[[str, int], None] | None = None,
    ) -> None:
        self._windows = [
            _Window(name, limit) for name, limit in ((WINDOW_MINUTE, per_minute), (WINDOW_DAY, per_day)) if limit > 0
        ]
        self._clock = clock
        self._on_remaining = on_remaining
        self._publish()

    @property
    def enabled(self) -> bool:
        return bool(self._windows)

    def remaining(self, window: str) -> int | None:
        for w in self._windows:
            if w.name == window:
                w.roll(self._clock())
                return w.remaining
        return None

    def reserve(self, tokens: int) -> Reservation:
        """Reserve ``tokens`` in every window or raise ``JudgeBudgetExceeded``."""
        now = self._clock()
        for w in self._windows:
            w.roll(now)
        for w in self._windows:
            if w.used + tokens > w.limit:
                self._publish()
                raise JudgeBudgetExceeded(
                    f"judge token budget per {w.name} exhausted: {w.used} of {w.limit} used, "
                    f"this trace needs about {tokens}"
                )
        for w in self._windows:
            w.used += tokens
        self._publish()
        return Reservation(tokens, {w.name: w.index for w in self._windows})

    def settle(self, reservation: Reservation, actual: int) -> None:
        """Replace a reservation with the tokens actually spent (may be more or less)."""
        now = self._clock()
        for w in self._windows:
            w.roll(now)
            if reservation.windows.get(w.name) == w.index:
                w.used = max(0, w.used + actual - reservation.tokens)
            else:  # the reservation's window has closed: the spend lands in the current one
                w.used += actual
        self._publish()

    def _publish(self) -> None:
        if self._on_remaining is None:
            return
        for w in self._windows:
            self._on_remaining(w.name, w.remaining)


def budget_traces_per_s(per_minute: int, per_day: int, tokens_per_trace: float) -> float | None:
    """Judged traces per second a token budget sustains at ``tokens_per_trace`` (None: no budget or
    no estimate yet). Power-based sampling plans within this (ragmon/sampling/power.py)."""
    if tokens_per_trace <= 0:
        return None
    limits = [limit / seconds for limit, seconds in ((per_minute, 60.0), (per_day, 86_400.0)) if limit > 0]
    return min(limits) / tokens_per_trace if limits else None
