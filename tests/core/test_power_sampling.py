"""Power-based sampling (ragmon/sampling/power.py), the two sampling streams and the budget helper:
pure logic with an injected clock."""

from __future__ import annotations

import math
import random

import pytest

from ragmon import quality
from ragmon import semconv as sc
from ragmon.agent.command import config_from_args
from ragmon.cli import build_parser
from ragmon.config_values import parse_duration_s
from ragmon.sampling import in_sample
from ragmon.sampling.power import PowerSampler, PowerTarget, detectable_drop, required_n
from ragmon.sampling.sampler import SamplingPolicy
from ragmon.scoring.llm.budget import budget_traces_per_s
from ragmon.types import Document, RagTrace


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def test_required_n_matches_the_textbook_number() -> None:
    # 0.05 rise, sd 0.3, alpha 0.05 one-sided, power 0.8, 1h against 7 same hours:
    # ((1.645 + 0.842) * 6)^2 * (1 + 1/7) = 254.4
    n = required_n(0.05, 0.3, 0.05, 0.8, 3600)
    assert 253 < n < 256
    assert detectable_drop(n, 0.3, 0.05, 0.8, 3600) == pytest.approx(0.05)
    assert detectable_drop(0, 0.3, 0.05, 0.8, 3600) == math.inf


FAILING, YOUDEN = 0.3, 0.5  # 30 % of judged traces flagged by a judge with J = 0.5
SD = math.sqrt(FAILING * (1 - FAILING)) / YOUDEN  # a flag's sd in the alerts' corrected unit: 0.917


def _drive(sampler: PowerSampler, clock: Clock, traffic: dict[str, float], minutes: int,
           rng: random.Random) -> None:
    """``traffic`` traces/s per pipeline for ``minutes``; rate-stream failing flags, as the agent feeds them."""
    for _ in range(minutes):
        clock.now += 60
        for key, per_s in traffic.items():
            sampler.observe_traffic(key, per_s * 60)
            judged = max(1, round(per_s * 60 * sampler.rate_for(key)))
            for _ in range(judged):
                sampler.observe_shares(key, {"faithfulness": rng.random() < FAILING}, {"faithfulness": YOUDEN})
    sampler.update()


def test_a_judge_whose_j_is_too_small_to_correct_is_sized_in_the_flagged_unit() -> None:
    # the rules divide a flagged rise by J only where J >= quality.MIN_CORRECTABLE_YOUDEN (0.1); the sampler
    # sizes the sample for the same test: a J of 0.03 is not divided by (it would ask 1,100x more traces)
    assert quality.correction_divisor(0.5) == 0.5
    assert quality.correction_divisor(0.03) == quality.correction_divisor(None) == 1.0
    plans = {}
    for youden in (0.03, 1.0, 0.5):
        clock, rng = Clock(), random.Random(5)
        sampler = PowerSampler(PowerTarget(drop=0.05), clock=clock)
        for _ in range(90):
            clock.now += 60
            sampler.observe_traffic("p", 50.0 * 60)
            for _ in range(max(1, round(50.0 * 60 * sampler.rate_for("p")))):
                sampler.observe_shares("p", {"faithfulness": rng.random() < FAILING}, {"faithfulness": youden})
        sampler.update()
        plans[youden] = sampler.plans()["p"].rate
    assert plans[0.03] == pytest.approx(plans[1.0], rel=0.05)
    assert plans[0.5] > 3 * plans[1.0]  # a usable J of 0.5 is divided by: four times the variance


def test_busy_pipeline_is_judged_rarely_and_quiet_one_cannot_reach_the_target() -> None:
    clock, rng = Clock(), random.Random(3)
    sampler = PowerSampler(PowerTarget(drop=0.05), clock=clock)
    _drive(sampler, clock, {"busy": 50.0, "quiet": 0.02}, 90, rng=rng)
    plans = sampler.plans()
    busy, quiet = plans["busy"], plans["quiet"]
    # ((1.645 + 0.842) x 0.917 / 0.05)^2 x (1 + 1/7) = ~2,370 judged an hour: a rate of ~1.3 % of 180,000
    assert 0.010 < busy.rate < 0.017
    assert busy.reaches_target and busy.detectable_drop == pytest.approx(0.05, rel=0.05)
    assert 2000 < busy.judged_per_window < 2800
    assert busy.window_s == 3600  # the hourly test catches it
    # 72 traces an hour cannot show a 0.05 rise in an hour (~0.29), nor 1,728 in the 24h window (~0.06):
    # judged at the max rate, and it says what its longest window can detect
    assert quiet.rate == 1.0 and not quiet.reaches_target
    assert quiet.window_s == 24 * 3600
    assert 0.24 / math.sqrt(24) < quiet.detectable_drop < 0.34 / math.sqrt(24)
    assert sampler.rate_for("busy") == busy.rate


def test_a_pipeline_too_quiet_for_the_hour_is_caught_by_a_longer_window() -> None:
    clock, rng = Clock(), random.Random(4)
    sampler = PowerSampler(PowerTarget(drop=0.05), clock=clock)
    _drive(sampler, clock, {"mid": 0.3}, 90, rng=rng)
    plan = sampler.plans()["mid"]
    # 1,080 judged an hour: the hour detects ~0.074, 6 hours (6,480) ~0.030 <= 0.05
    assert plan.rate == 1.0 and plan.window_s == 6 * 3600
    assert 0.02 < plan.detectable_drop <= 0.05
    # with the hourly test only, the same pipeline reports what the hour can detect
    clock2, rng2 = Clock(), random.Random(4)
    hourly = PowerSampler(PowerTarget(drop=0.05, longer_windows_s=()), clock=clock2)
    _drive(hourly, clock2, {"mid": 0.3}, 90, rng=rng2)
    only = hourly.plans()["mid"]
    assert only.window_s == 3600 and only.detectable_drop > 0.06
    assert only.detectable_drop == pytest.approx(plan.detectable_drop * math.sqrt(6), rel=0.1)


def test_budget_scales_every_pipeline_by_one_factor() -> None:
    clock, rng = Clock(), random.Random(5)
    free = PowerSampler(PowerTarget(drop=0.05), clock=clock)
    _drive(free, clock, {"a": 20.0, "b": 5.0}, 70, rng=rng)
    need = sum(p.traffic_per_s * p.rate for p in free.plans().values())
    clock2, rng2 = Clock(), random.Random(5)
    tight = PowerSampler(PowerTarget(drop=0.05), clock=clock2, capacity_per_s=lambda: need / 4)
    _drive(tight, clock2, {"a": 20.0, "b": 5.0}, 70, rng=rng2)
    spent = sum(p.traffic_per_s * p.rate for p in tight.plans().values())
    assert spent == pytest.approx(need / 4 * 0.8, rel=0.1)  # CAPACITY_SAFETY of the capacity
    for key in ("a", "b"):
        assert not tight.plans()[key].reaches_target
        # a quarter of the judged traces (x 0.8 safety): each detectable drop grows by ~sqrt(5)
        ratio = tight.plans()[key].detectable_drop / free.plans()[key].detectable_drop
        assert ratio == pytest.approx(math.sqrt(5), rel=0.15)


def test_replicas_choose_the_rate_of_the_whole_pipeline() -> None:
    clock, rng = Clock(), random.Random(9)
    one = PowerSampler(PowerTarget(drop=0.05), clock=clock)
    _drive(one, clock, {"p": 10.0}, 70, rng=rng)
    clock2, rng2 = Clock(), random.Random(9)
    half = PowerSampler(PowerTarget(drop=0.05, replicas=2), clock=clock2)
    _drive(half, clock2, {"p": 5.0}, 70, rng=rng2)  # each of 2 replicas sees half the traffic
    assert half.plans()["p"].rate == pytest.approx(one.plans()["p"].rate, rel=0.1)


def test_fixed_rates_are_reported_not_changed() -> None:
    clock, rng = Clock(), random.Random(1)
    sampler = PowerSampler(PowerTarget(drop=0.05), fixed=lambda key: 0.01, clock=clock, adaptive=False)
    assert sampler.rate_for("p") == 0.01
    _drive(sampler, clock, {"p": 2.0}, 70, rng=rng)
    plan = sampler.plans()["p"]
    assert plan.rate == 0.01
    # 72 judged an hour: the hour detects only a rise of ~0.29, its 24h window ~0.06
    assert plan.window_s == 24 * 3600
    assert 0.24 / math.sqrt(24) < plan.detectable_drop < 0.34 / math.sqrt(24)


def test_a_rate_only_moves_the_threshold() -> None:
    """Power-based rates keep the hash decision: a trace judged at a lower rate is judged at every
    higher one, so replicas agree and the SDK's content rate still nests around the judge rate."""
    rng = random.Random(2)
    ids = [f"{rng.getrandbits(128):032x}" for _ in range(4000)]
    low = {t for t in ids if in_sample(t, 0.01)}
    high = {t for t in ids if in_sample(t, 0.2)}
    assert low and low <= high


def _trace(tid: str, **kw: object) -> RagTrace:
    base: dict = dict(trace_id=tid, service="s", pipeline="p", question="q", answer="a",
                      documents=(Document(id="d", content="c", score=0.9),), retrieval_latency_s=0.1)
    base.update(kw)
    return RagTrace(**base)


def test_rate_decision_comes_first_so_the_rate_stream_stays_unbiased() -> None:
    tid = "0" * 31 + "1"
    policy = SamplingPolicy(rate=1.0)
    errored = policy.decide(_trace(tid, error_type="ValueError"))
    assert errored.reason == sc.SAMPLED_RATE and errored.stream == sc.SAMPLE_STREAM_RATE
    outside = policy.decide(_trace(tid, error_type="ValueError"), rate=0.0)
    assert outside.reason == sc.SAMPLED_PRIORITY_ERROR and outside.stream == sc.SAMPLE_STREAM_PRIORITY


def test_budget_traces_per_second() -> None:
    assert budget_traces_per_s(0, 0, 500) is None
    assert budget_traces_per_s(6000, 0, 500) == pytest.approx(0.2)
    assert budget_traces_per_s(6000, 86_400 * 10, 0) is None
    assert budget_traces_per_s(6000, 864_000, 500) == pytest.approx(0.02)  # the day budget is tighter


def test_cli_flags_of_power_based_sampling() -> None:
    args = build_parser().parse_args(
        ["agent", "--detect-drop", "0.05", "--within", "1h", "--power", "0.8", "--alpha", "0.05"])
    config = config_from_args(args)
    assert (config.detect_drop, config.detect_within_s, config.detect_power, config.detect_alpha) == (
        0.05, 3600.0, 0.8, 0.05)
    assert parse_duration_s("30m") == 1800 and parse_duration_s("900") == 900
    with pytest.raises(ValueError):
        parse_duration_s("-1h")
