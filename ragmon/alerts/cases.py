"""What is simulated: stationary traffic, steps of the failing share, a slow drift."""

from __future__ import annotations

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
        a day after it (a drift needs it to reach its size)."""
        if self.kind == "none":
            return Incident("none")
        first, last = warmup_s + DAY / 2, max(warmup_s + DAY / 2, end_s - DAY)
        start = float(rng.uniform(first, last)) // 60 * 60
        return Incident(self.kind, self.size, start, DRIFT_S)


def default_cases() -> tuple[Case, ...]:
    return (
        Case("stationary", "none", 0.0),
        *(Case(f"step_{s:.2f}", "step", s) for s in STEPS),
        Case(f"drift_{DRIFT:.2f}", "drift", DRIFT),
    )
