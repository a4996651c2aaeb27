"""Admission and back-pressure (rule 3: pause the source before dropping), and the
power-based sampling plan: the judge capacity it plans with and the gauges it exports."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import cast

from ..ingest.closed_trace import AnySpan
from ..sampling import in_sample
from ..sampling.power import PipelinePlan
from ..scoring.llm.budget import budget_traces_per_s
from ._state import AgentState


class AdmissionMixin(AgentState):
    """Whether the judge backlog can take more, and what the power sampler plans."""

    def backpressure(self) -> bool:
        return len(self._in_flight) >= self.config.judge_backlog

    def admit(self, spans: Sequence[AnySpan]) -> bool:
        """Whether the judge backlog can take every trace these spans may send to the judge (the
        OTLP receiver answers 503 Retry-After otherwise, before accepting anything). The demand is
        estimated from the spans that close a trace (roots): those inside the highest sample rate,
        or carrying an error when errors are priority. An export bigger than the whole backlog is
        admitted once the backlog is empty (its overflow is skipped as backlog_full)."""
        free = self.config.judge_backlog - len(self._in_flight)
        if free <= 0:
            return False
        if self._power.adaptive:
            rate = max(self._power.rates(), default=self._power.target.max_rate)
        else:
            rate = max([self._policy.rate, *self._policy.pipeline_rates.values()])
        demand: set[str] = set()
        for span in spans:
            priority = self._policy.priority_errors and span.status_code == "ERROR"
            closes = span.parent_span_id is None or span.parent_is_remote
            if not (closes or priority) or span.trace_id in demand:
                continue
            if priority or in_sample(span.trace_id, rate):
                demand.add(span.trace_id)
                if len(demand) > free and self._in_flight:
                    return False
        return True

    # ------------------------------------------------------------------ power-based sampling
    def _judge_capacity(self) -> float | None:
        """Judged traces/s this agent's judge can take (concurrency, token budget); None if unknown."""
        c = self.config
        return self._judge_cost.capacity_per_s(
            c.judge_concurrency,
            lambda tokens: budget_traces_per_s(c.judge_budget_tokens_per_minute, c.judge_budget_tokens_per_day, tokens))

    def _export_plan(self, key: Hashable, plan: PipelinePlan) -> None:
        service, pipeline = cast("tuple[str, str]", key)
        self.metrics.sample_rate.labels(service, pipeline).set(plan.rate)
        self.metrics.detectable_drop.labels(service, pipeline).set(plan.detectable_drop)
