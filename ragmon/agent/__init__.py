"""The agent: source -> assembler -> latency (all traces) -> sampler -> judge -> metrics.

Every trace that enters ends as exactly one of scored, skipped{reason} or failed{reason}, and a
source's delivery token (a Kafka offset) is released only once every trace with spans in that
delivery is accounted for. The agent is made of parts with narrow interfaces, each tested alone,
wired by one function:

============  ======================================================================================
module        job
============  ======================================================================================
ledger        ``DeliveryLedger``: traces in flight, recent ids, delivery tokens <-> traces, their
              release and the Kafka hand-off (forget / let go) — the one accounting call, ``account``
latency       ``LatencyRecorder``: what every trace records, one path for traces read in full and
              for latency only (received, incomplete, duplicates, latencies, P95, release, traffic)
admission     ``Admission``: back-pressure and OTLP admission from the judge backlog
judge_pool    ``JudgePool``: the queue, the workers, the timeout; every judgement one ``JudgeOutcome``
scores        ``ScoreRecorder``: judge + evaluator scores merged (``EvaluatorSet.merge``, shared with
              ``ragmon eval``), contradictions, diagnosis, /worst, /traces/{id}, listeners
router        ``TraceRouter``: the ``SpanSink`` — spans in -> assemble -> record -> sample -> judge ->
              an outcome, each branch ending in exactly one accounting call
wiring        ``build_parts``: every part from ``AgentConfig.section(...)``, wired
agent         ``Agent``: the parts' lifecycles (source, judge pool, metrics server, expiry), readiness
command       ``ragmon agent``: flags generated from the settings table
============  ======================================================================================
"""

from __future__ import annotations

from .agent import Agent
from .scores import ScoreListener

__all__ = ["Agent", "ScoreListener"]
