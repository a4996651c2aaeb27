"""The ``Judge`` protocol: one small interface every judge implements, and ``JudgeMetrics``,
what a judge records (owned here so that scoring never imports ``export``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final, Protocol, runtime_checkable

from ..types import RagTrace, Scores

CIRCUIT_CLOSED: Final = "closed"
CIRCUIT_OPEN: Final = "open"
CIRCUIT_HALF_OPEN: Final = "half_open"


@dataclass(frozen=True, slots=True)
class Criterion:
    """A user-declared ``llm`` evaluator as the LLM judge sees it: a yes/no question in words,
    judged inside the compact call; ``pass_when`` is the answer that passes (``yes`` or ``no``)."""

    name: str
    question: str
    pass_when: str = "yes"


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

    #: True when every wait of ``score`` is bounded by the judge's own settings (request
    #: timeouts, capped retries and Retry-After); the agent then adds no outer timeout of its
    #: own, which would cut legitimate Retry-After waits short. False: the agent bounds it.
    bounds_own_duration: bool

    @property
    def circuit_state(self) -> str:
        """``closed`` (healthy), ``open`` (failing fast) or ``half_open`` (probing); a judge
        without a circuit breaker is always ``closed``. /readyz reports a non-closed judge as
        degraded."""
        ...

    async def score(self, trace: RagTrace) -> Scores: ...

    async def aclose(self) -> None: ...


@dataclass(frozen=True, slots=True)
class EvalRequest:
    """What offline evaluation (``ragmon eval``) asks of a judge beyond the reference-free metrics.

    ``reference`` is the golden row's reference answer (enables context recall and answer
    correctness); ``citation_pattern`` is a regular expression whose first group is a citation
    marker's key (``1`` in ``[1]``, ``doc-7`` in ``[doc-7]``), None to skip citation metrics;
    ``expect_abstention`` marks a ``no_answer`` question (enables the abstention metric).
    """

    reference: str | None = None
    citation_pattern: str | None = None
    expect_abstention: bool = False


@runtime_checkable
class EvalJudge(Judge, Protocol):
    """A judge that also scores the offline metrics of ``EvalRequest`` (both built-in judges do).

    ``score_for_eval`` returns the same reference-free scores as ``score`` plus every offline
    metric the request enables (``context_recall``, ``answer_correctness``, ``abstention``,
    ``citation_*``), with the same error contract as ``score``.
    """

    async def score_for_eval(self, trace: RagTrace, request: EvalRequest) -> Scores: ...


class Labelled(Protocol):
    """A Prometheus metric family: ``family.labels(*values)`` gives the child to inc/set."""

    def labels(self, *values: str) -> Any: ...


class JudgeMetrics(Protocol):
    """The metric families a judge records (``ragmon.export.metrics.AgentMetrics`` has them).

    Read-only properties, so any object whose attributes are metric families satisfies it.
    ``ragmon_judge_duration_seconds`` is not here: the agent observes it around ``score``."""

    @property
    def judge_requests(self) -> Labelled: ...  # {judge, outcome}
    @property
    def judge_tokens(self) -> Labelled: ...  # {judge, kind=prompt|completion}
    @property
    def judge_input_truncated(self) -> Labelled: ...  # {judge}
    @property
    def judge_cache_hits(self) -> Labelled: ...  # {judge}
    @property
    def judge_circuit_open(self) -> Labelled: ...  # {judge}
    @property
    def judge_budget_remaining(self) -> Labelled: ...  # {window=minute|day}
    @property
    def judge_invalid_contradictions(self) -> Labelled: ...  # {judge, reason}
    @property
    def judge_concurrency_limit(self) -> Labelled: ...  # {judge}
