"""What is simulated: stationary traffic, steps of the failing share, a slow drift."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .traffic import DAY, Incident

STEPS = (0.05, 0.10, 0.20)
DRIFT = 0.10  # a drift of ten points over DRIFT_S
DRIFT_S = DAY


@dataclass(frozen=True, slots=True)
class Case:
    name: str  # "stationary", "step_0.10", "drift_0.10"
    kind: str  # "none" | "step" | "drift"
    size: float

    def incident(self, rng: np.random.Generator, warmup_s: float, end_s: float) -> Incident:
        """The incident of one run: it starts at a random minute of the measured period that leaves
        a day after it (a drift needs it to reach its size), at a uniformly random time of day.

        Traffic swings over the day, so when an incident starts decides how many traces see it: a
        start span that is not whole days weights some hours twice (3 measured days left 1.5 days
        of starts, so afternoon starts, followed by the night's trough, were 2 in 3). The span is cut
        to whole days; under one day it is kept as it is (too short a period to be uniform)."""
        if self.kind == "none":
            return Incident("none")
        first = warmup_s + DAY / 2
        span = max(0.0, end_s - DAY - first)
        if span >= DAY:
            span = math.floor(span / DAY) * DAY
        start = float(rng.uniform(first, first + span)) // 60 * 60
        return Incident(self.kind, self.size, start, DRIFT_S)


def default_cases() -> tuple[Case, ...]:
    return (
        Case("stationary", "none", 0.0),
        *(Case(f"step_{s:.2f}", "step", s) for s in STEPS),
        Case(f"drift_{DRIFT:.2f}", "drift", DRIFT),
    )
