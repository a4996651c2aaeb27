"""A manual clock for tests: time moves only when the test (or an injected sleep) moves it."""

from __future__ import annotations


class ManualClock:
    """``clock()`` returns the current time; ``await clock.sleep(d)`` records ``d`` and advances."""

    def __init__(self, start: float = 1_000_000.0) -> None:
        self.now = start
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds
