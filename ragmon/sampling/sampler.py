"""Which traces go to the judge: deterministic rate sampling plus priority rules.

Pure and synchronous. The rate decision is ``ragmon.sampling.in_sample`` on the trace id,
so every replica decides the same way and smaller samples nest inside larger ones.
Priority rules pick a trace regardless of the rate, because those are the traces an
operator most wants explained: errors, negative user feedback, slow or weak retrievals.

Two streams. The rate decision is taken *first*: a trace inside the rate is a rate sample
whatever else it is (an errored trace that the hash picks is part of the unbiased sample), and
only traces outside the rate can be priority samples. Scores carry the stream as the ``sample``
label (``rate`` | ``priority``); means, drop alerts and power estimates read the rate stream
only, because priority traces are chosen for being bad and would move the mean on their own.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from .. import semconv as sc
from ..types import RagTrace
from .rate import in_sample

NEGATIVE_FEEDBACK = frozenset({"negative", "thumbs_down", "down", "bad", "-1", "0"})


@dataclass(frozen=True, slots=True)
class SampleDecision:
    sampled: bool
    reason: str  # a semconv SAMPLED_* value when sampled, SKIP_NOT_SAMPLED otherwise

    @property
    def stream(self) -> str:
        """``sample`` label of the trace's scores: SAMPLE_STREAM_RATE or SAMPLE_STREAM_PRIORITY."""
        return sc.SAMPLE_STREAM_RATE if self.reason == sc.SAMPLED_RATE else sc.SAMPLE_STREAM_PRIORITY


@dataclass(frozen=True, slots=True)
class SamplingSettings:
    """The sampling rows of the agent's settings table: field names are setting names, so
    ``AgentConfig.section(SamplingSettings)`` fills it (``SamplingPolicy.from_settings``)."""

    sample_rate: float = 1.0
    pipeline_sample_rates: Mapping[str, float] = field(default_factory=dict)
    priority_errors: bool = True
    priority_feedback: bool = True
    priority_slow_retrieval_s: float | None = None
    priority_min_top_score: float | None = None


@dataclass(frozen=True, slots=True)
class SamplingPolicy:
    rate: float = 1.0
    pipeline_rates: Mapping[str, float] = field(default_factory=dict)
    priority_errors: bool = True
    priority_feedback: bool = True
    slow_retrieval_s: float | None = None
    min_top_score: float | None = None

    @classmethod
    def from_settings(cls, settings: SamplingSettings) -> SamplingPolicy:
        """The agent's policy, from its settings section (``AgentConfig.section(SamplingSettings)``)."""
        return cls(rate=settings.sample_rate, pipeline_rates=dict(settings.pipeline_sample_rates),
                   priority_errors=settings.priority_errors, priority_feedback=settings.priority_feedback,
                   slow_retrieval_s=settings.priority_slow_retrieval_s, min_top_score=settings.priority_min_top_score)

    @property
    def max_rate(self) -> float:
        """The highest rate any pipeline is sampled at."""
        return max([self.rate, *self.pipeline_rates.values()])

    def rate_for(self, pipeline: str) -> float:
        return self.pipeline_rates.get(pipeline, self.rate)

    def decide(self, trace: RagTrace, rate: float | None = None) -> SampleDecision:
        """Rate first (``rate`` overrides the configured one: power-based sampling), then priority rules."""
        if in_sample(trace.trace_id, self.rate_for(trace.pipeline) if rate is None else rate):
            return SampleDecision(True, sc.SAMPLED_RATE)
        if self.priority_errors and trace.error_type:
            return SampleDecision(True, sc.SAMPLED_PRIORITY_ERROR)
        if self.priority_feedback and is_negative_feedback(trace.attributes.get(sc.RAGMON_FEEDBACK)):
            return SampleDecision(True, sc.SAMPLED_PRIORITY_FEEDBACK)
        if (
            self.slow_retrieval_s is not None
            and trace.retrieval_latency_s is not None
            and trace.retrieval_latency_s > self.slow_retrieval_s
        ):
            return SampleDecision(True, sc.SAMPLED_PRIORITY_SLOW)
        if self.min_top_score is not None:
            top = trace.top_retrieval_score
            if top is not None and top < self.min_top_score:
                return SampleDecision(True, sc.SAMPLED_PRIORITY_LOW_SCORE)
        return SampleDecision(False, sc.SKIP_NOT_SAMPLED)


def is_negative_feedback(feedback: object) -> bool:
    """"negative"/"thumbs_down"/… , False, or a number <= 0."""
    if feedback is None or isinstance(feedback, bool):
        return feedback is False
    if isinstance(feedback, int | float):
        return feedback <= 0
    return str(feedback).strip().lower() in NEGATIVE_FEEDBACK


def judgeable_skip_reason(trace: RagTrace) -> str | None:
    """Why a sampled trace cannot be judged (a bounded skip reason), or None if it can."""
    if not trace.content_sampled:
        return sc.SKIP_NO_CONTENT
    if not trace.answer:
        return sc.SKIP_NO_ANSWER if trace.answer is None and trace.contexts else sc.SKIP_NO_CONTENT
    if not trace.question:
        return sc.SKIP_NO_QUESTION
    return None
