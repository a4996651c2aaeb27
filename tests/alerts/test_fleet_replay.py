"""bench/fleet_replay.py: its replica of the paging rules pages exactly when Prometheus's rule engine does."""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
import yaml

from ragmon.alerts.cases import Case
from ragmon.alerts.pools import CONTRADICTIONS, Pools, ScoredRow
from ragmon.alerts.runner import pipeline_rng, simulate
from ragmon.alerts.traffic import DAY, TrafficModel, simulate_pipeline
from tests.alerts.test_simulate import _settings
from tests.helpers.scripts import load_script
from tests.ops.conftest import require_binary

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench" / "fleet_replay.py"


def _bench() -> ModuleType:
    return load_script(BENCH, "fleet_replay")


def _noisy_pools(lowest_score: float, n: int = 300) -> Pools:
    """A judge that cannot tell (scores at random from ``lowest_score`` up; above the threshold 0.5 none fails, and
    only the mean can move) and a contradiction check that flags a fifth of the answers at random: stationary
    traffic whose shares and means wander, so that rules with a low z page often."""
    rng = random.Random(11)
    rows = []
    for i in range(n):
        faithful = i % 3 != 0
        score = lowest_score + (1 - lowest_score) * rng.random()
        rows.append(ScoredRow(id=f"r{i}", group=f"g{i % 2}", labels={"faithful": int(faithful), "contradicts": 0},
                              scores={"faithfulness": score}, contradicting=rng.random() < 0.2))
    return Pools(source="test", judge="local", profile=None, rows=tuple(rows))


def _low_z_rules(tmp_path: Path, budget: str) -> dict:
    out = tmp_path / "rules.yml"
    # a process of its own: main() sets the module's z for the file it writes
    subprocess.run([sys.executable, str(ROOT / "deploy" / "prometheus" / "generate_rules.py"), "--output", str(out),
                    "--fleet-budget", budget], check=True, capture_output=True)
    return yaml.safe_load(out.read_text(encoding="utf-8"))


@pytest.mark.prometheus
@pytest.mark.timeout(1800)
@pytest.mark.parametrize(("rate", "lowest_score", "budget", "windows"), [
    (0.5, 0.0, "1000", {"1h"}),  # the failing share's rise pages on the hourly window
    (0.1, 0.55, "5000", {"1h", "6h"}),  # no answer fails: the mean's drop pages, on a long window too
])
def test_the_replica_pages_as_promtool_does_alert_by_alert(tmp_path: Path, rate: float, lowest_score: float,
                                                          budget: str, windows: set[str]) -> None:
    """Stationary pipelines under rules whose z is low enough to page many times a day (a fleet budget of
    thousands of false pages a month): every alert's false pages and each window's episodes, counted by the
    replica from the same counters, equal promtool's, pipeline by pipeline — the share and mean tests, the judge's
    J and score gap, the contradiction rise, the count guards, ``for`` and the merging of windows into one page."""
    require_binary("promtool")
    fr = _bench()
    rules = _low_z_rules(tmp_path, budget)
    traffic = TrafficModel(rate_per_s=rate, days=1.0, warmup_days=2.0)
    error_rates = {"faithfulness": (0.8, 0.75), CONTRADICTIONS: (0.7, 0.9)}
    gaps = {"faithfulness": 0.3}
    settings = _settings(runs=1, pipelines=3, traffic=traffic, error_rates=error_rates, score_gaps=gaps)
    case = Case("stationary", "none", 0.0)
    pools = _noisy_pools(lowest_score)
    results = simulate(pools, (case,), settings, rules, workdir=tmp_path)

    page_rules, judge = fr.PageRules.of(rules), fr.Judge.of(error_rates, gaps)
    first = round(traffic.warmup_days * DAY / traffic.scrape_s)
    youden = {m: se + sp - 1.0 for m, (se, sp) in error_rates.items()}
    paged = 0
    for p, result in enumerate(results):
        rng = pipeline_rng(settings.seed, case, 0, p)
        incident = case.incident(rng, traffic.warmup_days * DAY, traffic.total_s)
        run = simulate_pipeline(pools, traffic, settings.sampling, incident, "faithfulness", settings.base_share,
                                settings.thresholds, youden, rng)
        counters = {m: {f: np.diff(np.asarray(getattr(c, f), dtype=np.float64), prepend=0.0) for f in fr.FIELDS}
                    for m, c in run.counters.items()}
        got = fr.pages(counters, traffic.scrape_s, settings.evaluation_s, first, page_rules, judge)
        assert {k: v for k, v in got.by_alert.items() if v} == result.by_alert, p
        assert {k: v for k, v in got.by_window.items() if v} == result.by_window, p
        # an alert paged exactly where its margin held above 0 for `for`
        assert {k for k, m in got.closest.items() if m > 0} == {k for k, v in got.by_alert.items() if v}, p
        paged += sum(v for k, v in got.by_alert.items() if "/critical/" in k)
    assert paged >= 3  # pages were compared, not only their absence
    assert {k.split("/")[2] for r in results for k in r.by_alert} == {"faithfulness", CONTRADICTIONS}
    assert {k.split("/")[3] for r in results for k in r.by_window} >= windows


def test_seed_lists_read_ranges() -> None:
    assert _bench().seed_list("1-3, 7,9-10") == [1, 2, 3, 7, 9, 10]
