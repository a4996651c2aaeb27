"""The ``Judge`` protocol: one small interface every judge implements."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from ..types import RagTrace, Scores


@runtime_checkable
class Judge(Protocol):
    """Scores one trace.

    ``score`` returns ``Scores`` (a metric that cannot be computed is None) or raises a
    ``ragmon.errors.JudgeError`` subclass whose ``reason`` becomes failed{reason}
    (``JudgeBudgetExceeded`` becomes skipped{reason="budget"}). It must never raise
    anything else for bad input; the agent treats any other exception as
    failed{reason="internal_error"}.
    """

    #: Bounded label value for the ``judge`` label, e.g. "local" or "llm".
    name: str

    # Optional: a judge whose every wait is bounded by its own settings (request timeouts,
    # capped retries and Retry-After) sets ``bounds_own_duration = True``; the agent then adds
    # no outer timeout of its own, which would cut legitimate Retry-After waits short.

    async def score(self, trace: RagTrace) -> Scores: ...

    async def aclose(self) -> None: ...
