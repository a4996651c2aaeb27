"""The judge pool alone: every way a judgement can end becomes one outcome handed to ``settle``,
a bug while settling goes to ``on_error``, and ``close`` ends workers that swallow cancellation."""

from __future__ import annotations

import asyncio
import logging

from ragmon import semconv as sc
from ragmon._log import LogOnce
from ragmon.agent.judge_pool import JudgeOutcome, JudgePool, JudgePoolSettings
from ragmon.ingest.closed_trace import ClosedTrace
from ragmon.testing import StaticJudge
from ragmon.types import RagTrace, Scores
from tests.agent.conftest import SCORES, ScriptedJudge
from tests.helpers.eventually import eventually

LOG = LogOnce(logging.getLogger("test"))


def _closed(trace_id: str, answer: str = "fine") -> ClosedTrace:
    return ClosedTrace(RagTrace(trace_id=trace_id, service="svc", pipeline="p", answer=answer))


class _Settled:
    def __init__(self) -> None:
        self.outcomes: dict[str, JudgeOutcome] = {}
        self.errors: list[str] = []

    def settle(self, closed: ClosedTrace, outcome: JudgeOutcome) -> None:
        self.outcomes[closed.trace_id] = outcome

    def on_error(self, closed: ClosedTrace) -> None:
        self.errors.append(closed.trace_id)


def _pool(settled: _Settled, timeout_s: float = 30.0, concurrency: int = 2) -> JudgePool:
    return JudgePool(JudgePoolSettings(judge_concurrency=concurrency, judge_timeout_s=timeout_s, judge_max_retries=0),
                     settled.settle, settled.on_error, LOG)


class _Hanging(StaticJudge):
    """Never answers (until cancelled); ``bounds_own_duration`` as told."""

    def __init__(self, bounds_own_duration: bool) -> None:
        super().__init__(SCORES, name="hanging")
        self.bounds_own_duration = bounds_own_duration
        self.started = asyncio.Event()

    async def score(self, trace: RagTrace) -> Scores:
        self.started.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")


class _Raising(StaticJudge):
    async def score(self, trace: RagTrace) -> Scores:
        raise RuntimeError("a judge bug")


async def test_every_judgement_ends_in_one_outcome():
    settled = _Settled()
    pool = _pool(settled)
    pool.start(ScriptedJudge())
    try:
        for trace_id, answer in (("ok", "fine"), ("budget", "budget"), ("broken", "broken")):
            pool.put(_closed(trace_id, answer))
        await eventually(lambda: len(settled.outcomes) == 3, timeout_s=30, what="three outcomes")
    finally:
        await pool.close()
    ok = settled.outcomes["ok"]
    assert ok.scores is not None and ok.scores.values == SCORES and ok.skip is None and ok.failed is None
    assert ok.elapsed_s >= 0.0
    assert settled.outcomes["budget"] == JudgeOutcome(skip=sc.SKIP_BUDGET)
    assert settled.outcomes["broken"] == JudgeOutcome(failed=sc.FAIL_INVALID_REPLY)  # the JudgeError's reason
    assert pool.closed and pool.judge_name == "scripted"


async def test_a_judge_that_ignores_its_timeouts_is_cut_and_a_bug_is_internal_error():
    settled = _Settled()
    pool = _pool(settled, timeout_s=0.01)  # outer bound: 0.01 s * (0 retries + 2)
    pool.start(_Hanging(bounds_own_duration=False))
    try:
        pool.put(_closed("slow"))
        await eventually(lambda: "slow" in settled.outcomes, timeout_s=30, what="the outer timeout")
    finally:
        await pool.close()
    assert settled.outcomes["slow"] == JudgeOutcome(failed=sc.FAIL_TIMEOUT)
    raising = _Settled()
    pool = _pool(raising)
    pool.start(_Raising(SCORES))
    try:
        pool.put(_closed("bug"))
        await eventually(lambda: "bug" in raising.outcomes, timeout_s=30, what="the judge's bug")
    finally:
        await pool.close()
    assert raising.outcomes["bug"] == JudgeOutcome(failed=sc.FAIL_INTERNAL)


async def test_a_judge_that_bounds_itself_is_not_cut_and_close_ends_its_worker():
    settled = _Settled()
    pool = _pool(settled, timeout_s=0.01, concurrency=1)
    judge = _Hanging(bounds_own_duration=True)
    pool.start(judge)
    pool.put(_closed("waiting"))
    await asyncio.wait_for(judge.started.wait(), 30)
    assert not pool.closed and pool.idle()  # taken from the queue, being judged
    await pool.close()
    assert pool.closed and settled.outcomes == {}  # cancelled, never settled: the caller accounts for it


async def test_a_bug_while_settling_goes_to_on_error_and_the_worker_goes_on():
    errors: list[str] = []
    outcomes: list[str] = []

    def settle(closed: ClosedTrace, outcome: JudgeOutcome) -> None:
        if closed.trace_id == "first":
            raise RuntimeError("a recorder bug")
        outcomes.append(closed.trace_id)

    pool = JudgePool(JudgePoolSettings(judge_concurrency=1, judge_timeout_s=30.0, judge_max_retries=0), settle,
                     lambda closed: errors.append(closed.trace_id), LOG)
    pool.start(StaticJudge(SCORES))
    try:
        pool.put(_closed("first"))
        pool.put(_closed("second"))
        await eventually(lambda: outcomes == ["second"], timeout_s=30, what="the next trace settled")
    finally:
        await pool.close()
    assert errors == ["first"]
