"""bench/tails_null.py: its replica of the mean-drop statistic counts what promtool counts, and its normal replicas
are standard normal when nothing changes."""

from __future__ import annotations

import math
from pathlib import Path
from statistics import NormalDist
from types import ModuleType

import numpy as np
import pytest
import yaml

from ragmon.alerts import promtool as pt
from ragmon.alerts.cases import Case
from ragmon.alerts.runner import pipeline_rng, simulate
from ragmon.alerts.traffic import DAY, TrafficModel, simulate_pipeline
from tests.alerts.test_simulate import _pools, _settings
from tests.helpers.scripts import load_script
from tests.ops.conftest import RULES, require_binary

BENCH = Path(__file__).resolve().parents[2] / "bench" / "tails_null.py"


def _bench() -> ModuleType:
    return load_script(BENCH, "tails_null")


@pytest.mark.prometheus
@pytest.mark.timeout(1800)
def test_the_replica_counts_the_mean_drop_above_each_level_as_promtool_does(tmp_path: Path) -> None:
    """A pipeline with a full week of history, replayed alone from its own random stream: at every measured
    evaluation, each window's drop (plain, and against its skew limit) is above each level exactly as often as
    Prometheus's rule engine finds it over the shipped rules."""
    require_binary("promtool")
    tn = _bench()
    rules = yaml.safe_load(RULES.read_text(encoding="utf-8"))
    z = pt.drop_z(rules)
    levels = (0.0, 1.0, 2.0)
    traffic = TrafficModel(rate_per_s=0.5, days=0.5, warmup_days=8.0)
    settings = _settings(runs=1, pipelines=1, tail_levels=levels, traffic=traffic)
    case = Case("stationary", "none", 0.0)
    pools = _pools(True)
    (result,) = simulate(pools, (case,), settings, rules, workdir=tmp_path)

    rng = pipeline_rng(settings.seed, case, 0, 0)
    incident = case.incident(rng, traffic.warmup_days * DAY, traffic.total_s)
    run = simulate_pipeline(pools, traffic, settings.sampling, incident, "faithfulness", settings.base_share,
                            settings.thresholds, {"faithfulness": 1.0}, rng)
    c = run.counters["faithfulness"]
    first = round(traffic.warmup_days * DAY / traffic.scrape_s)
    compared = 0
    for record, level_z in (("drop", None), ("drop_at_limit", z)):
        stats = tn.drop_statistic(np.array(c.count), np.array(c.total), np.array(c.squares), traffic.scrape_s,
                                  first, level_z)
        for window, stat in stats.items():
            got = result.tails[f"ragmon:score_ratio:{record}_z{window}/faithfulness"]
            mine = {"points": int(np.sum(~np.isnan(stat)))}
            mine.update({lv: count for lv, (count, _episodes) in
                         tn.exceedances(stat, levels).items()})
            assert mine == got, (record, window)
            compared += got["0"]
    assert compared > 0  # the noise put the statistics above 0 somewhere: the counts compared are not all zeros


def test_a_normal_replica_is_standard_normal_when_nothing_changes() -> None:
    """Replicas of a pipeline whose traffic swings over the day: the plain drop z of every window has mean 0 and
    spread 1, and is above 2 and 3 about as often as a standard normal, so the replicas are the reference the
    false-page budget assumes. (With a replica's squares at their expectation instead of drawn with its sums, the
    1h window was above 3 twice as often as the normal: the test caught that.)"""
    tn = _bench()
    rng = np.random.default_rng(5)
    scrape_s, days = 300.0, 16
    n = int(days * DAY / scrape_s)
    hours = (np.arange(1, n + 1) * scrape_s % DAY) / 3600
    counts = np.cumsum(rng.poisson(100 * (1 + 0.6 * np.sin(2 * math.pi * (hours - 9) / 24))))
    sums, squares = counts * 0.9, counts * (0.81 + 0.04)
    first = int(8 * DAY / scrape_s)
    pooled: list[np.ndarray] = []
    for _ in range(100):
        total, sq = tn.normal_replica(counts, sums, squares, scrape_s, rng)
        stats = tn.drop_statistic(counts, total, sq, scrape_s, first, None)
        pooled.append(np.concatenate([s[~np.isnan(s)] for s in stats.values()]))
    values = np.concatenate(pooled)
    assert abs(values.mean()) < 0.05 and 0.97 < values.std() < 1.04
    for level, (low, high) in ((2.0, (0.8, 1.3)), (3.0, (0.5, 2.0))):
        ratio = float(np.mean(values > level)) / (1 - NormalDist().cdf(level))
        assert low < ratio < high, (level, ratio)


def test_episodes_are_runs_of_evaluations_above_the_level() -> None:
    tn = _bench()
    stat = np.array([np.nan, 3.2, 3.4, 1.0, 3.1, np.nan, 3.3, 3.6, 2.0])
    assert tn.exceedances(stat, (3.0, 3.5)) == {"3": [5, 3], "3.5": [1, 1]}
