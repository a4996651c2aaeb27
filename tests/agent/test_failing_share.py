"""The agent's side of the failing-share alerts, over real HTTP: ragmon_score_failures_total counts
rate-sampled scores below each metric's threshold, and the judge's error rates are exported for the
rules' correction (a judge that declares none exports none)."""

from __future__ import annotations

import asyncio
from typing import ClassVar

from ragmon import semconv as sc
from ragmon.scoring.error_rates import ErrorRates
from ragmon.testing import StaticJudge
from tests.agent.conftest import running_agent
from tests.helpers.scrape import scrape
from tests.helpers.traffic import OtlpTraffic, healthy

FAITH, RELEVANCY = sc.METRIC_FAITHFULNESS, sc.METRIC_ANSWER_RELEVANCY


class RatedJudge(StaticJudge):
    """A fixed-score judge that declares measured error rates, as the local judge and profiles do."""

    error_rates: ClassVar[dict[str, ErrorRates]] = {FAITH: ErrorRates(0.8, 0.7, "test", score_gap=0.3),
                                                    RELEVANCY: ErrorRates(0.6, 0.9, "test")}


async def test_scores_below_threshold_are_counted_and_error_rates_exported(endpoint_of) -> None:
    judge = RatedJudge({FAITH: 0.3, RELEVANCY: 0.9, sc.METRIC_CONTEXT_PRECISION: 0.5}, name="rated")
    async with running_agent(judge, sample_rate=1.0) as agent:
        traffic = OtlpTraffic(endpoint_of(agent))
        for _ in range(3):
            await asyncio.to_thread(traffic.send, healthy())
        assert await agent.wait_idle(20)
        s = await asyncio.to_thread(scrape, agent.metrics_port)
        traffic.close()
    failures = f"{sc.M_SCORE_FAILURES}_total"
    assert s.value(failures, metric=FAITH, sample=sc.SAMPLE_STREAM_RATE) == 3  # 0.3 < 0.5
    assert s.value(failures, metric=RELEVANCY) == 0  # 0.9 passes
    assert s.value(failures, metric=sc.METRIC_CONTEXT_PRECISION) == 0  # 0.5 is not below 0.5
    assert s.value(sc.M_JUDGE_SENSITIVITY, judge="rated", metric=FAITH) == 0.8
    assert s.value(sc.M_JUDGE_SPECIFICITY, judge="rated", metric=FAITH) == 0.7
    assert s.value(sc.M_JUDGE_SCORE_GAP, judge="rated", metric=FAITH) == 0.3
    # only what was measured: relevancy has rates but no score gap
    assert sorted(d["metric"] for d in s.labelsets(sc.M_JUDGE_SENSITIVITY)) == sorted([FAITH, RELEVANCY])
    assert s.labelsets(sc.M_JUDGE_SCORE_GAP) == [{"judge": "rated", "metric": FAITH}]


async def test_a_judge_without_error_rates_exports_none(endpoint_of) -> None:
    async with running_agent(StaticJudge({FAITH: 0.9}, name="plain"), sample_rate=1.0) as agent:
        s = await asyncio.to_thread(scrape, agent.metrics_port)
    assert s.labelsets(sc.M_JUDGE_SENSITIVITY) == [] and s.labelsets(sc.M_JUDGE_SPECIFICITY) == []
    assert s.labelsets(sc.M_JUDGE_SCORE_GAP) == []
