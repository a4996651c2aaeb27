"""The one function that builds the agent's parts from its settings (``build_parts``).

Every part gets its settings as a section of the table (``AgentConfig.section``: field names are
setting names), never restated by hand: the assembler, the sampling policy and the power sampler,
the latency recorder, the judge pool, the score recorder's worst/inspector sizes. The parts are
wired here and nowhere else; ``Agent`` owns their lifecycles.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import cast

from prometheus_client import CollectorRegistry

from .._log import LogOnce
from ..config import AgentConfig
from ..evaluators import EvaluatorSet, evaluator_set_from
from ..export.inspector import RecentTraces
from ..export.metrics import AgentMetrics
from ..export.releases import ReleaseTracker
from ..export.worst import WorstTraces
from ..ingest.assembler import TraceAssembler
from ..ingest.extract import ExtractSettings, LatencyOnly, latency_keys
from ..ingest.tally import Tally
from ..sampling.power import DetectSettings, JudgeCost, PipelinePlan, PowerSampler
from ..sampling.sampler import SamplingPolicy, SamplingSettings
from ..scoring.llm.budget import budget_traces_per_s
from .admission import Admission
from .judge_pool import JudgePool, JudgePoolSettings
from .latency import LatencyRecorder, LatencySettings
from .ledger import DeliveryLedger
from .router import TraceRouter
from .scores import ScoreRecorder

__all__ = ["AgentParts", "AssemblerSettings", "CapacitySettings", "InspectSettings", "build_parts"]


@dataclass(frozen=True, slots=True)
class AssemblerSettings:
    """What ``TraceAssembler`` takes from the settings table: its keyword arguments, by name."""

    trace_timeout_s: float
    max_open_traces: int
    max_spans_per_trace: int
    root_grace_s: float
    max_buffered_bytes: int
    max_text_chars: int


@dataclass(frozen=True, slots=True)
class CapacitySettings:
    """What the judge can take per second (the power sampler plans with it)."""

    judge_concurrency: int
    judge_budget_tokens_per_minute: int
    judge_budget_tokens_per_day: int


@dataclass(frozen=True, slots=True)
class InspectSettings:
    """The bounded views of judged traces: ``/worst`` and ``/traces/{id}``."""

    worst_size: int
    worst_max_chars: int
    trace_inspector: bool
    trace_inspector_size: int
    trace_inspector_max_chars: int


@dataclass(frozen=True, slots=True)
class AgentParts:
    """The agent's parts, wired: ``router`` is the sink sources hand spans to."""

    metrics: AgentMetrics
    assembler: TraceAssembler
    ledger: DeliveryLedger
    latency: LatencyRecorder
    scores: ScoreRecorder
    admission: Admission
    pool: JudgePool
    router: TraceRouter
    policy: SamplingPolicy
    power: PowerSampler
    evaluators: EvaluatorSet
    log_once: LogOnce


def build_parts(config: AgentConfig, *, registry: CollectorRegistry | None, clock: Callable[[], float],
                release: Callable[[Hashable], None], log_once: LogOnce) -> AgentParts:
    """Every part of the agent, from ``config``; ``release(token)`` gives a delivery back to the source."""
    metrics = AgentMetrics(registry, max_label_values=config.metrics_max_label_values)
    extract = config.section(ExtractSettings)
    assembler = TraceAssembler(**dataclasses.asdict(config.section(AssemblerSettings)), extract_settings=extract,
                               clock=clock)
    policy = SamplingPolicy.from_settings(config.section(SamplingSettings))
    detect = config.section(DetectSettings)
    judge_cost = JudgeCost()
    capacity = config.section(CapacitySettings)

    def judge_capacity() -> float | None:
        """Judged traces/s this agent's judge can take (concurrency, token budget); None if unknown."""
        return judge_cost.capacity_per_s(capacity.judge_concurrency, lambda tokens: budget_traces_per_s(
            capacity.judge_budget_tokens_per_minute, capacity.judge_budget_tokens_per_day, tokens))

    def export_plan(key: Hashable, plan: PipelinePlan) -> None:
        service, pipeline = cast("tuple[str, str]", key)
        metrics.sample_rate.labels(service, pipeline).set(plan.rate)
        metrics.detectable_drop.labels(service, pipeline).set(plan.detectable_drop)

    # power-based sampling (adaptive when --detect-drop is set; else it only reports the fixed rates)
    power = PowerSampler(detect.target(), fixed=lambda key: policy.rate_for(key[1]),  # type: ignore[index]
                         capacity_per_s=judge_capacity, clock=clock, adaptive=detect.adaptive, on_plan=export_plan)
    if detect.detect_drop is not None:
        metrics.detect_target.set(detect.detect_drop)

    ledger = DeliveryLedger(release, dedup_size=config.dedup_size, on_in_flight=metrics.judge_backlog.set)
    fixed_max = policy.max_rate
    max_rate = ((lambda: max(power.rates(), default=power.target.max_rate)) if power.adaptive
                else (lambda: fixed_max))
    admission = Admission(config.judge_backlog, ledger.__len__, max_rate, priority_errors=policy.priority_errors)
    releases = ReleaseTracker(metrics.release, config.metrics_max_label_values)
    tally = Tally()
    latency = LatencyRecorder(config.section(LatencySettings), metrics, tally, releases, clock=clock,
                              observe_traffic=power.observe_traffic, log_once=log_once)
    evaluators = evaluator_set_from(config.evaluators)
    views = config.section(InspectSettings)
    scores = ScoreRecorder(
        metrics, thresholds=config.diagnosis_thresholds(), evaluators=evaluators,
        worst=WorstTraces(views.worst_size, views.worst_max_chars, clock=clock),
        inspector=(RecentTraces(views.trace_inspector_size, views.trace_inspector_max_chars)
                   if views.trace_inspector else None),
        observe_shares=power.observe_shares, log_once=log_once)
    if config.export_judged:  # judged traces for `ragmon dataset harvest` (bounded, rotating JSONL)
        from ..export.judged import JudgedSink

        scores.listeners.append(JudgedSink(config.export_judged, config.export_judged_max_bytes))
    router = TraceRouter(
        metrics, assembler=assembler, ledger=ledger, latency=latency, scores=scores, admission=admission,
        policy=policy, power=power, judge_cost=judge_cost, releases=releases, tally=tally,
        latency_only=latency_only(config.fast_path, detect, policy, extract), log_once=log_once)
    pool = JudgePool(config.section(JudgePoolSettings), router.settle, router.settle_error, log_once)
    router.attach(pool)
    return AgentParts(metrics=metrics, assembler=assembler, ledger=ledger, latency=latency, scores=scores,
                      admission=admission, pool=pool, router=router, policy=policy, power=power,
                      evaluators=evaluators, log_once=log_once)


def latency_only(fast_path: bool, detect: DetectSettings, policy: SamplingPolicy,
                 extract: ExtractSettings) -> LatencyOnly | None:
    """Which traces the sources may read for latency only; None when every trace is read in full
    (``--no-fast-path``, or a rate that may judge every trace)."""
    if not fast_path:
        return None
    # The highest rate any pipeline can be judged at: adaptive rates stay within detect_max_rate.
    bound = detect.detect_max_rate if detect.adaptive else policy.max_rate
    if bound >= 1.0:
        return None  # every trace may be judged
    return LatencyOnly(bound, latency_keys(extract))

