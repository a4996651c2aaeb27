"""Helpers for a project's own tests: run a golden-set evaluation inside pytest and assert gate rules.

::

    from ragmon.testing import evaluate, assert_gate

    def test_rag_quality():
        report = evaluate("tests/golden.jsonl", app=my_rag.answer, judge="none")
        assert_gate(report, "recall@5 < 0.8", "mrr < 0.6")

``evaluate`` is ``ragmon eval`` without the command line: the same runner (your decorated entry
point called in-process, its spans captured and read by the agent's own extraction), the same
metrics and the same report. ``assert_gate`` raises ``AssertionError`` naming every failed rule.

``StaticJudge`` is a judge that returns fixed scores: for tests that need the judging path
without a model (it satisfies ``ragmon.scoring.judge.Judge``). ``InMemorySource`` is a span
source the test drives itself — it plays the broker: ``source.push(spans, token)`` hands spans to
the agent and ``source.released`` lists the delivery tokens the agent has released (it satisfies
``ragmon.ingest.source.SpanSource``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Hashable, Mapping, Sequence
from pathlib import Path
from typing import Any

from .evaluation import gate as gates
from .evaluation.report import run_metrics
from .evaluation.run import EvalOptions
from .evaluation.run import evaluate as _evaluate
from .ingest.source import SpanSink
from .scoring.judge import CIRCUIT_CLOSED, Judge
from .types import RagTrace, Scores, SpanRecord

__all__ = ["InMemorySource", "StaticJudge", "assert_gate", "evaluate"]


class StaticJudge:
    """A judge that gives every trace the same scores (quality metric name -> value).

    Subclass it for scripted behaviour (override ``score``); set ``circuit_state`` to
    ``"open"`` to see the agent's /readyz report a degraded judge.
    """

    bounds_own_duration = False
    circuit_state = CIRCUIT_CLOSED

    def __init__(self, scores: Mapping[str, float | None], name: str = "static") -> None:
        self.name = name
        self._scores = Scores(dict(scores), judge=name)
        self.seen: list[str] = []  # trace ids scored, in order

    async def score(self, trace: RagTrace) -> Scores:
        self.seen.append(trace.trace_id)
        return self._scores

    async def aclose(self) -> None:
        return None


class InMemorySource:
    """A span source driven by the test: spans in with ``push``, released tokens in ``released``."""

    name = "memory"
    port = None

    def __init__(self) -> None:
        self.released: list[Hashable] = []
        self.sink: SpanSink | None = None
        self.started = False

    async def start(self, sink: SpanSink) -> None:
        self.sink = sink
        self.started = True

    async def stop(self) -> None:
        self.started = False

    def push(self, spans: Sequence[SpanRecord], token: Hashable | None = None) -> None:
        """Deliver ``spans`` (with an optional delivery token) to the agent, as a broker would."""
        if self.sink is None:
            raise RuntimeError("InMemorySource.push before the agent started it")
        self.sink.submit(spans, token)

    def release(self, token: Hashable) -> None:
        self.released.append(token)

    def ready(self) -> bool:
        return self.started


def _judge(judge: str | Judge | None) -> Judge | None:
    if judge is None or judge == "none":
        return None
    if isinstance(judge, str):
        from . import judges
        from .scoring.factory import build_judge, judge_settings

        if judge not in judges.names():
            raise ValueError(f"judge must be one of {', '.join(judges.names())}, 'none' or a Judge object, "
                             f"got {judge!r}")
        return build_judge(judge_settings({"judge": judge}))
    return judge


def evaluate(
    evalset: str | Path,
    app: str | Callable[..., Any] | None = None,
    *,
    responses: str | Path | None = None,
    judge: str | Judge | None = "none",
    baseline: Mapping[str, Any] | None = None,
    **options: Any,
) -> dict[str, Any]:
    """Evaluate ``app`` (a callable or ``"module:function"``) or a responses file; returns the report.

    ``options`` are :class:`ragmon.evaluation.run.EvalOptions` fields (``ks``, ``primary_k``,
    ``concurrency``, ``timeout_s``, ``doc_id_field``, ``significance``, ...). Call it from a plain
    (sync) test; inside a running event loop use ``ragmon.evaluation.run.evaluate``.
    """
    chosen = _judge(judge)
    label = judge if isinstance(judge, str) else (chosen.name if chosen is not None else "none")
    opts = EvalOptions(evalset=str(evalset), app=app, responses=str(responses) if responses else None,
                       baseline=baseline, judge_label=str(label), **options)

    async def run() -> dict[str, Any]:
        try:
            return await _evaluate(opts, chosen)
        finally:
            if chosen is not None:
                await chosen.aclose()

    return asyncio.run(run())


def assert_gate(report: Mapping[str, Any], *fail_if: str, baseline: Mapping[str, Any] | None = None,
                significance: float | None = None) -> None:
    """Raise ``AssertionError`` if any rule holds (``"recall@5 < 0.8"``, ``"faithfulness drop > 0.05"``).

    Rules are evaluated on ``report``'s rows exactly as ``ragmon eval --fail-if`` does; drop rules
    need ``baseline`` (another report). A rule over a metric the report lacks is an error too, so
    a typo cannot make the assertion pass.
    """
    rules = [gates.parse_rule(text) for text in fail_if]
    result = gates.evaluate_gate(rules, run_metrics(report), run_metrics(baseline) if baseline else None,
                                 significance=significance)
    problems = [f"{o.rule}: {o.message}" for o in result.rules if o.status in (gates.STATUS_FAILED,
                                                                                  gates.STATUS_SKIPPED)]
    if problems:
        raise AssertionError("ragmon gate failed:\n  " + "\n  ".join(problems))
