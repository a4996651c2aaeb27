"""``ragmon alerts simulate``: pools, traffic, promtool evaluation, the report contract.

The pools here are built from rows whose judge scores are given (a labelled pool with a judge
that separates failing from passing answers perfectly, and one that cannot tell them apart), so
the tests know what the shipped rules must do; the command test scores real rows with the local
judge. promtool is the real one (Debian's prometheus package); nothing of PromQL is stubbed.
"""

from __future__ import annotations

import json
import math
import os
import random
from pathlib import Path
from statistics import NormalDist

import numpy as np
import pytest
import yaml

from ragmon.alerts import pools as pools_module
from ragmon.alerts import promtool as pt
from ragmon.alerts.answers import PromtoolAnswers
from ragmon.alerts.cases import Case
from ragmon.alerts.latency import LatencyModel
from ragmon.alerts.level import level, mean_level
from ragmon.alerts.pools import CONTRADICTIONS, Pools, ScoredRow, build_pools
from ragmon.alerts.report import proportion_ci95, summarize
from ragmon.alerts.runner import RunResult, Settings, simulate
from ragmon.alerts.tails import pooled_tails, summarize_tails
from ragmon.alerts.traffic import DAY, WARMUP_DAYS, Incident, Sampling, TrafficModel, simulate_pipeline
from ragmon.cli import main
from ragmon.scoring.onnx_runner import cpu_model
from tests.helpers.scripts import load_script
from tests.ops.conftest import RULES, require_binary

# promtool over simulated weeks: minutes each on a busy machine
pytestmark = [pytest.mark.prometheus, pytest.mark.timeout(1800)]
THRESHOLDS = {"faithfulness": 0.5}


def _pools(separates: bool, n: int = 200) -> Pools:
    """Rows labelled faithful / unfaithful; the judge scores them 0.9 / 0.1 (separates) or at random."""
    rng = random.Random(7)
    rows = []
    for i in range(n):
        faithful = i % 3 != 0
        score = (0.9 if faithful else 0.1) if separates else rng.random()
        rows.append(ScoredRow(id=f"r{i}", group=f"g{i % 2}", labels={"faithful": int(faithful)},
                              scores={"faithfulness": score}))
    return Pools(source="test", judge="local", profile=None, rows=tuple(rows))


def _contradiction_pools(sees: bool, n: int = 200) -> Pools:
    """Rows labelled contradicting (every fifth) or not; the judge's claim verdicts find exactly
    those (sees) or never find one. Faithfulness scores are the same for all: only the share moves."""
    rows = []
    for i in range(n):
        contradicts = i % 5 == 0
        rows.append(ScoredRow(id=f"r{i}", group="all", labels={"faithful": int(not contradicts),
                                                               "contradicts": int(contradicts)},
                              scores={"faithfulness": 0.8}, contradicting=contradicts and sees))
    return Pools(source="test", judge="local", profile=None, rows=tuple(rows))


def _settings(**overrides: object) -> Settings:
    values: dict[str, object] = {
        # a day of warm-up, not the default 8: the baseline is then one day (the nearest of its seven), enough for
        # every test here, and promtool evaluates 2 simulated days a run instead of 9 (CI time)
        "traffic": TrafficModel(rate_per_s=0.5, days=1.0, warmup_days=1.0),
        "sampling": Sampling(rate=1.0),
        "base_share": 0.10,
        "thresholds": THRESHOLDS,
        "error_rates": {"faithfulness": (1.0, 1.0)},
        "score_gaps": {},
        "judge": "local",
        "incident_metric": "faithfulness",
        "runs": 2,
        "pipelines": 1,
        "seed": 3,
        "jobs": 2,
    }
    values.update(overrides)
    return Settings(**values)  # type: ignore[arg-type]


def test_the_incident_raises_the_failing_share_the_agent_counts() -> None:
    traffic = TrafficModel(rate_per_s=1.0, days=1.0, warmup_days=1.0)
    incident = Incident("step", 0.20, start_s=1.5 * DAY)
    run = simulate_pipeline(_pools(True), traffic, Sampling(rate=1.0), incident, "faithfulness", 0.10,
                            THRESHOLDS, {"faithfulness": 1.0}, np.random.default_rng(1))
    c = run.counters["faithfulness"]
    i = int(1.5 * DAY / traffic.scrape_s)  # the scrape at the incident's start
    before = (c.failures[i - 1] - c.failures[i - 73]) / (c.count[i - 1] - c.count[i - 73])
    after = (c.failures[-1] - c.failures[-73]) / (c.count[-1] - c.count[-73])
    assert 0.08 < before < 0.12 and 0.27 < after < 0.33  # 10 % -> 30 % (a perfect judge flags exactly these)
    assert run.requests == pytest.approx(2 * DAY, rel=0.02) and run.judged == run.requests  # rate 1: all judged


@pytest.mark.parametrize("days", [3.0, 4.0, 2.2])
def test_incidents_start_at_every_time_of_day_alike(days: float) -> None:
    # traffic swings over the day: a start span of 1.5 days would make afternoon starts 2 in 3
    warmup, end = 7 * DAY, (7 + days) * DAY
    rng = np.random.default_rng(5)
    starts = np.array([Case("step_0.10", "step", 0.10).incident(rng, warmup, end).start_s for _ in range(20_000)])
    assert starts.min() >= warmup + DAY / 2 and starts.max() <= end - DAY  # a day after it, as before
    hours = (starts % DAY) / 3600.0
    if days - 1.5 >= 1.0:  # at least a whole day of starts: each quarter of the day gets a quarter of them
        counts = np.histogram(hours, bins=4, range=(0, 24))[0] / len(hours)
        assert np.all(np.abs(counts - 0.25) < 0.015), counts


def test_power_based_sampling_judges_a_busy_pipeline_less() -> None:
    traffic = TrafficModel(rate_per_s=20.0, days=0.5, warmup_days=0.5)
    run = simulate_pipeline(_pools(True), traffic, Sampling(detect_drop=0.08, alpha=2.3e-4), Incident("none"),
                            "faithfulness", 0.10, THRESHOLDS, {"faithfulness": 1.0}, np.random.default_rng(2))
    assert 0.0 < run.rates[-1] < 0.2  # the agent's PowerSampler chose a rate far below 1
    assert run.judged < 0.2 * run.requests


def test_rules_are_evaluated_by_promtool_and_a_rule_change_changes_the_pages(tmp_path: Path) -> None:
    require_binary("promtool")
    shipped = yaml.safe_load(RULES.read_text(encoding="utf-8"))
    cases = (Case("step_0.20", "step", 0.20),)
    results = simulate(_pools(True), cases, _settings(), shipped, workdir=tmp_path)
    paged = [r.first_page_s.get("critical", math.inf) for r in results]
    assert all(d <= 2 * 3600 for d in paged), paged  # a perfect judge sees +20 points within 2 h

    # the same simulation with the critical drop alert made impossible (over every window): no page any more
    changed = yaml.safe_load(RULES.read_text(encoding="utf-8"))
    for group in changed["groups"]:
        for rule in group["rules"]:
            if rule.get("alert") == "RagmonFaithfulnessDrop" and rule["labels"]["severity"] == "critical":
                window = rule["labels"]["window"]
                rule["expr"] = rule["expr"].replace(f"rise{window}{{metric=\"faithfulness\"}} >= 0.04",
                                                    f"rise{window}{{metric=\"faithfulness\"}} >= 2")
                assert ">= 2" in rule["expr"]
    results = simulate(_pools(True), cases, _settings(), changed, workdir=tmp_path)
    assert all("critical" not in r.first_page_s for r in results)
    assert all(r.first_page_s.get("warning", math.inf) <= 2 * 3600 for r in results)


def test_false_pages_name_the_windows_that_started_them(tmp_path: Path) -> None:
    """Each false page is also counted per window of its alert: here the 6 h warning is made to fire as soon as
    the measured period starts (the alert reads the simulated scores, so the simulation keeps it); no other
    window or severity fires on stationary traffic seen by a perfect judge."""
    require_binary("promtool")
    rules = yaml.safe_load(RULES.read_text(encoding="utf-8"))
    for group in rules["groups"]:
        for rule in group["rules"]:
            if (rule.get("alert") == "RagmonFaithfulnessDrop" and rule["labels"]["severity"] == "warning"
                    and rule["labels"]["window"] == "6h"):
                rule["expr"] = ('ragmon:score_ratio_count:increase6h{metric="faithfulness"} > 0\n'
                                "and on(service, pipeline) (ragmon_sim_phase == 1)")
    results = simulate(_pools(True), (Case("stationary", "none", 0.0),), _settings(), rules, workdir=tmp_path)
    assert [r.by_alert for r in results] == [{"RagmonFaithfulnessDrop/warning/faithfulness": 1}] * 2
    assert [r.by_window for r in results] == [{"RagmonFaithfulnessDrop/warning/faithfulness/6h": 1}] * 2
    report = summarize(results, 7200.0)
    assert report["severities"]["warning"]["false_windows_by_alert"] == {
        "RagmonFaithfulnessDrop/warning/faithfulness/6h": 2}
    assert report["severities"]["critical"]["false_windows_by_alert"] == {}


def test_a_fleet_split_into_chunks_that_run_side_by_side_gets_the_same_results(tmp_path: Path) -> None:
    """A fleet's pipelines go to promtool in chunks, two at once when the cases leave jobs over: every run's
    pages, windows and delays are those of one promtool test over the whole fleet, in the same order."""
    require_binary("promtool")
    rules = yaml.safe_load(RULES.read_text(encoding="utf-8"))
    cases = (Case("step_0.20", "step", 0.20),)
    whole = simulate(_pools(True), cases, _settings(runs=1, pipelines=2, chunk=2, jobs=2), rules, workdir=tmp_path)
    split = simulate(_pools(True), cases, _settings(runs=1, pipelines=2, chunk=1, jobs=2), rules, workdir=tmp_path)
    assert [r.pipeline for r in split] == [r.pipeline for r in whole] and len(whole) == 2
    assert [(r.first_page_s, r.false_pages, r.by_alert, r.by_window, r.pages_after) for r in split] == \
        [(r.first_page_s, r.false_pages, r.by_alert, r.by_window, r.pages_after) for r in whole]
    assert all(r.first_page_s.get("critical", math.inf) <= 2 * 3600 for r in whole)  # and they did page


def test_a_simulation_stopped_midway_resumes_from_the_chunks_it_had_finished(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """promtool's answer to each chunk is kept under its question: a run killed after its first chunk, started
    again, asks promtool only the chunk it had not finished and gets the results of an uninterrupted run; a third
    run asks promtool nothing (a promtool that dies on every test would fail it)."""
    real = require_binary("promtool")
    rules = yaml.safe_load(RULES.read_text(encoding="utf-8"))
    cases = (Case("step_0.20", "step", 0.20),)
    # two chunks, one after the other; a day of warm-up (not the week) is enough for a +20-point step to page
    settings = _settings(runs=1, pipelines=2, chunk=1, jobs=1,
                         traffic=TrafficModel(rate_per_s=0.5, days=1.0, warmup_days=1.0))
    kept = tmp_path / "answers"

    def promtool_that(script: str) -> None:
        fake = tmp_path / script / "promtool"
        fake.parent.mkdir()
        body = {"dies-after-one": f'[ -e "{tmp_path}/asked" ] && kill -9 $$\ntouch "{tmp_path}/asked"\n',
                "always-dies": "kill -9 $$\n"}[script]
        fake.write_text(f'#!/bin/sh\n[ "$1" = --version ] && exec "{real}" "$@"\n{body}exec "{real}" "$@"\n',
                        encoding="utf-8")
        fake.chmod(0o755)
        monkeypatch.setenv("PATH", f"{fake.parent}:{os.environ['PATH']}")

    promtool_that("dies-after-one")
    stopped = PromtoolAnswers(kept)
    with pytest.raises(Exception, match=r"promtool.*exited with -9"):
        simulate(_pools(True), cases, settings, rules, workdir=tmp_path, answers=stopped)
    assert (stopped.asked, stopped.reused) == (2, 0) and len(list(kept.glob("*.txt"))) == 1

    monkeypatch.setenv("PATH", f"{Path(real).parent}:{os.environ['PATH']}")
    resumed = PromtoolAnswers(kept)
    results = simulate(_pools(True), cases, settings, rules, workdir=tmp_path, answers=resumed)
    assert (resumed.asked, resumed.reused) == (2, 1)
    uninterrupted = simulate(_pools(True), cases, settings, rules, workdir=tmp_path)
    outcome = [(r.pipeline, r.first_page_s, r.false_pages, r.by_alert, r.by_window, r.pages_after) for r in results]
    assert outcome == [(r.pipeline, r.first_page_s, r.false_pages, r.by_alert, r.by_window, r.pages_after)
                       for r in uninterrupted]
    assert all(r.first_page_s.get("critical", math.inf) <= 2 * 3600 for r in results)  # and they did page

    promtool_that("always-dies")
    again = PromtoolAnswers(kept)
    assert [(r.pipeline, r.first_page_s, r.by_window) for r in simulate(
        _pools(True), cases, settings, rules, workdir=tmp_path, answers=again)] == [o[:2] + o[4:5] for o in outcome]
    assert (again.asked, again.reused) == (2, 2)


def test_a_kept_answer_that_cannot_be_read_is_asked_again(tmp_path: Path) -> None:
    require_binary("promtool")
    rules = yaml.safe_load(RULES.read_text(encoding="utf-8"))
    cases = (Case("stationary", "none", 0.0),)
    settings = _settings(runs=1, pipelines=1, traffic=TrafficModel(rate_per_s=0.5, days=0.5, warmup_days=1.0))
    first = PromtoolAnswers(tmp_path / "answers")
    simulate(_pools(True), cases, settings, rules, workdir=tmp_path, answers=first)
    (answer,) = (tmp_path / "answers").glob("*.txt")
    answer.write_text("", encoding="utf-8")  # a disk that lost it
    second = PromtoolAnswers(tmp_path / "answers")
    simulate(_pools(True), cases, settings, rules, workdir=tmp_path, answers=second)
    assert (second.asked, second.reused) == (1, 0) and "SUCCESS" in answer.read_text(encoding="utf-8")


def test_tails_count_each_statistic_above_each_level_while_measured(tmp_path: Path) -> None:
    """With tail levels, promtool also counts the measured evaluations at which each test statistic was above each
    level. Here the hourly share statistic is made a constant 2.5 (its labels kept): above 2 at every evaluation,
    above 3 at none; the others move with the noise, and their counts fall as the level rises."""
    require_binary("promtool")
    rules = yaml.safe_load(RULES.read_text(encoding="utf-8"))
    z = pt.drop_z(rules)
    assert z is not None
    for group in rules["groups"]:
        for rule in group["rules"]:
            if rule.get("record") == "ragmon:score_failures:rise_z1h":
                rule["expr"] = "ragmon:score_ratio_count:increase1h * 0 + 2.5"
            if rule.get("record") == "ragmon:score_ratio:drop_z_limit1h":
                # a limit 2.5 below the rules' z over the drop: the drop against its limit is 2.5 throughout
                rule["expr"] = f"ragmon:score_ratio:drop_z1h + {z - 2.5:g}"
    settings = _settings(runs=1, pipelines=2, tail_levels=(0.0, 2.0, 3.0))
    results = simulate(_pools(True), (Case("stationary", "none", 0.0),), settings, rules, workdir=tmp_path)
    measured = int(DAY // 300)  # a day measured, every 5 minutes
    for r in results:
        # a day of history: a long window has its baseline once that day holds all of it (the 6h window after 6
        # hours of the measured day, the 12h after 12), the 24h window never (generate_rules.py _partial_day)
        assert {k.split("/")[0] for k in r.tails} == {
            f"ragmon:{stat}_z{w}" for stat in ("score_failures:rise", "score_ratio:drop", "score_ratio:drop_at_limit")
            for w in ("1h", "6h", "12h")}
        for constant in (r.tails["ragmon:score_failures:rise_z1h/faithfulness"],
                         r.tails["ragmon:score_ratio:drop_at_limit_z1h/faithfulness"]):
            assert constant == {"points": constant["points"], "0": constant["points"], "2": constant["points"], "3": 0}
            assert measured - 2 <= constant["points"] <= measured + 1
        for window, whole in (("6h", 0.75), ("12h", 0.5)):
            points = r.tails[f"ragmon:score_failures:rise_z{window}/faithfulness"]["points"]
            assert abs(points - whole * measured) <= 3, (window, points)
        for counts in r.tails.values():
            assert counts["points"] >= counts["0"] >= counts["2"] >= counts["3"]
    # the noise moves the others on both sides of 0
    noisy = [c for r in results for k, c in r.tails.items() if "_z1h" not in k]
    assert 0 < sum(c["0"] for c in noisy) < sum(c["points"] for c in noisy)
    tails = summarize(results, 7200.0)["tails"]
    assert tails["levels"] == [0.0, 2.0, 3.0] and tails["pipelines"] == 2
    rise = tails["by_statistic"]["score_failures:rise/faithfulness"]
    assert rise["points"] == sum(c["points"] for r in results for k, c in r.tails.items() if "score_failures" in k)
    assert rise["ratio"]["0"] == pytest.approx(rise["share_above"]["0"] / 0.5, rel=1e-3)
    assert tails["all"]["ratio_ci95"]["2"][0] <= tails["all"]["ratio"]["2"] <= tails["all"]["ratio_ci95"]["2"][1]
    # "all" pools the statistics as they page: the drop against its limit, not the raw drop beside it
    paging = [c for r in results for k, c in r.tails.items() if "score_ratio:drop_z" not in k]
    assert tails["all"]["points"] == sum(c["points"] for c in paging)
    assert "score_ratio:drop/faithfulness" in tails["by_statistic"]
    # without levels the test document is the one every kept answer was asked with
    sets = [pt.SeriesSet("p", "local", {"faithfulness": {"ragmon_score_ratio_count": [1.0]}}, [0, 1])]
    assert "count_over_time" not in json.dumps(pt.test_file(tmp_path / "r.yml", sets, {}, 300, 300, 600, 600))


def test_tails_pool_over_pipelines_and_over_reports() -> None:
    def run(name: str, counts: dict[str, int]) -> RunResult:
        return RunResult(case="stationary", pipeline=name, incident=Incident("none", 0.0), measured_s=DAY,
                         judged_per_hour=1.0, requests_per_hour=1.0, false_pages={}, first_page_s={}, pages_after={},
                         tails={"ragmon:score_failures:rise_z1h/faithfulness": counts})

    tails = summarize_tails([run("a", {"points": 1000, "2": 30, "3": 2}), run("b", {"points": 1000, "2": 16, "3": 0})])
    assert tails is not None and tails["pipelines"] == 2 and tails["levels"] == [2.0, 3.0]
    pooled = tails["all"]
    assert (pooled["points"], pooled["above"], pooled["per_pipeline"]) == (2000, {"2": 46, "3": 2},
                                                                           [[1000, 30, 2], [1000, 16, 0]])
    assert pooled["ratio"]["2"] == pytest.approx(46 / 2000 / (1 - NormalDist().cdf(2.0)), abs=1e-3)
    assert pooled["ratio_ci95"]["3"][0] == 0.0 and pooled["ratio_ci95"]["3"][1] > pooled["ratio"]["3"]
    assert list(tails["by_statistic"]) == ["score_failures:rise/faithfulness"]
    both = pooled_tails([{"tails": tails}, {"tails": tails}])
    assert both is not None and (both["pipelines"], both["points"], both["above"]) == (4, 4000, {"2": 92, "3": 4})
    other = {**tails, "levels": [2.0, 4.0]}
    assert pooled_tails([{"tails": tails}, {"tails": other}]) is None  # levels that differ do not pool
    assert tails["mean_drop"] == "raw"  # no drop counted against its limit here
    at_limit = {**tails, "mean_drop": "against its skew limit"}
    assert pooled_tails([{"tails": tails}, {"tails": at_limit}]) is None  # nor drops counted another way
    assert summarize_tails([run("c", {})][:0]) is None


def test_a_rule_promtool_cannot_evaluate_is_an_error(tmp_path: Path) -> None:
    require_binary("promtool")
    broken = yaml.safe_load(RULES.read_text(encoding="utf-8"))
    for group in broken["groups"]:
        for rule in group["rules"]:
            if rule.get("alert") == "RagmonFaithfulnessDrop":
                rule["expr"] = "ragmon_score_failures_total{metric=\"faithfulness\"} +"  # not PromQL
    with pytest.raises(Exception, match="promtool"):
        simulate(_pools(True), (Case("stationary", "none", 0.0),), _settings(runs=1), broken, workdir=tmp_path)


def test_a_promtool_that_dies_is_an_error_not_a_quiet_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # killed mid-run (an operator's pkill, the OOM killer), promtool prints no report: that must not read
    # as a simulation in which no alert fired
    real = require_binary("promtool")
    dying = tmp_path / "bin" / "promtool"
    dying.parent.mkdir()
    dying.write_text(f'#!/bin/sh\n"{real}" "$@" & kill -9 $$\n', encoding="utf-8")
    dying.chmod(0o755)
    monkeypatch.setenv("PATH", f"{dying.parent}:{os.environ['PATH']}")
    rules = yaml.safe_load(RULES.read_text(encoding="utf-8"))
    with pytest.raises(Exception, match=r"promtool.*exited with -9"):
        simulate(_pools(True), (Case("step_0.20", "step", 0.20),), _settings(runs=1), rules, workdir=tmp_path)


def test_a_judge_that_cannot_tell_neither_pages_for_a_step_nor_for_noise(tmp_path: Path) -> None:
    """With a day of history (a new pipeline's second day): the long windows' baselines that held a partial day
    (other hours than the window's, another question mix) paged twice in these two pipeline-days before they
    were left out (generate_rules.py _partial_day)."""
    require_binary("promtool")
    rules = yaml.safe_load(RULES.read_text(encoding="utf-8"))
    cases = (Case("stationary", "none", 0.0), Case("step_0.20", "step", 0.20))
    report = summarize(simulate(_pools(False), cases, _settings(), rules, workdir=tmp_path), 7200.0)
    assert report["steps"]["0.20"]["p_detect"] == 0.0  # scores independent of the labels: nothing to see
    assert report["false_pages_per_30d"] == 0.0
    assert report["severities"]["critical"]["false_pages_per_30d_ci95"][1] > 0  # an interval, not a claim of 0


def test_the_contradiction_share_is_simulated_and_its_rise_pages(tmp_path: Path) -> None:
    """The share of answers with a contradicted claim is its own series (ragmon_answers_checked_total,
    ragmon_answers_contradicting_total): a rise of it pages RagmonContradictionsRise through
    promtool when the judge's verdicts see the contradictions, and never when they cannot."""
    require_binary("promtool")
    rules = yaml.safe_load(RULES.read_text(encoding="utf-8"))
    seeing = _contradiction_pools(True)
    assert seeing.metrics() == ("faithfulness", CONTRADICTIONS)
    assert CONTRADICTIONS in seeing.labelled_metrics()
    cases = (Case("stationary", "none", 0.0), Case("step_0.20", "step", 0.20))
    settings = _settings(incident_metric=CONTRADICTIONS, error_rates={})
    results = simulate(seeing, cases, settings, rules, workdir=tmp_path)
    stepped = [r for r in results if r.incident.kind == "step"]
    assert all(r.first_page_s.get("critical", math.inf) <= 2 * 3600 for r in stepped), stepped
    report = summarize(results, 7200.0)
    assert report["steps"]["0.20"]["p_detect"] == 1.0
    # a +20-point rise of contradictions moves no faithfulness score here: the page is the contradiction alert's
    assert report["false_pages_per_30d"] == 0.0
    blind = summarize(simulate(_contradiction_pools(False), cases, settings, rules, workdir=tmp_path), 7200.0)
    assert blind["steps"]["0.20"]["p_detect"] == 0.0


def test_pools_read_the_judges_verdicts_and_rescore_when_the_judge_changes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    labels = tmp_path / "labels.jsonl"
    labels.write_text("\n".join(json.dumps({"id": str(i), "question": "q", "contexts": ["c"], "answer": "a",
                                            "labels": {"faithful": i % 2, "contradicts": 1 - i % 2}})
                                for i in range(4)) + "\n", encoding="utf-8")
    calls: list[int] = []

    def score(rows: list[object]) -> list[dict[str, float] | None]:
        calls.append(len(rows))
        return [{"faithfulness": 0.9, pools_module.CONTRADICTING_KEY: 0.0}, {"faithfulness": 0.2},
                {"faithfulness": 0.9, pools_module.CONTRADICTING_KEY: 0.0},
                {"faithfulness": 0.1, pools_module.CONTRADICTING_KEY: 1.0}]

    first = build_pools(labels, "local", None, score, None, tmp_path / "cache")
    assert [r.contradicting for r in first.rows] == [False, None, False, True]
    assert first.failing_flags(CONTRADICTIONS) == [1, 0, 1, 0]
    assert [r.value(CONTRADICTIONS) for r in first.rows] == [1.0, None, 1.0, 0.0]
    assert build_pools(labels, "local", None, score, None, tmp_path / "cache").rows == first.rows
    assert calls == [4]  # the second read came from the cache
    monkeypatch.setattr(pools_module, "judge_build", lambda: "another-build")
    build_pools(labels, "local", None, score, None, tmp_path / "cache")
    assert calls == [4, 4]  # a changed judge is never read from an earlier judge's cache


def test_parse_output_matches_reports_to_queries_by_text_and_time() -> None:
    queries = [('sum_over_time(x{a="1"}[1d])', "86400s"), ('sum_over_time(x{a="1"}[1d])', "172800s")]
    text = (
        '  FAILED:\n    expr: "sum_over_time(x{a=\\"1\\"}[1d])", time: 2d,\n        exp: nil\n'
        '        got: {alertname="A", pipeline="p1", severity="critical", metric="m"} 2E+00, '
        '{alertname="A", pipeline="p2", severity="warning", metric="m"} 1E+00\n'
    )
    first, second = pt.parse_output(text, queries)
    assert first == []  # the query at 1d passed (empty): promtool printed nothing for it
    assert [(e.pipeline, e.severity, e.value) for e in second] == [("p1", "critical", 2.0), ("p2", "warning", 1.0)]


def test_counters_past_a_million_reach_promtool_exactly(tmp_path: Path) -> None:
    """A busy pipeline's cumulative counters pass a million within the week of warm-up: every count must
    reach promtool as it is (rounded to six digits, two buckets' difference became noise and a healthy
    store's P95 jumped to seconds)."""
    counts = [1_234_567.0, 1_234_572.0, 2_000_003.0]
    sets = [pt.SeriesSet(pipeline="p", judge="local", counters={"": {"c": counts}}, phases=[0, 0, 0, 0])]
    document = pt.test_file(tmp_path / "rules.yml", sets, {}, 300, 300, 900, 900)
    values = next(s["values"] for s in document["tests"][0]["input_series"] if s["series"].startswith("c{"))
    assert values == "0 1234567 1234572 2000003"


def test_promtool_evaluates_the_rule_groups_in_the_rules_files_order(tmp_path: Path) -> None:
    """The long windows sum the hourly records of another group: the test document names the groups' order (the
    file's), so every run reads this step's hourly record (unnamed, promtool's order changed between runs and so did
    the counts; tests/alerts/test_tails_null.py holds a run equal to the statistic computed with fresh records)."""
    rules = yaml.safe_load(RULES.read_text(encoding="utf-8"))
    names = [g["name"] for g in rules["groups"]]
    assert names.index("ragmon-quality") < names.index("ragmon-quality-long")
    assert pt.group_order_of(rules) == names
    sets = [pt.SeriesSet(pipeline="p", judge="local", counters={"": {"c": [1.0]}}, phases=[0, 1])]
    document = pt.test_file(tmp_path / "rules.yml", sets, {}, 300, 300, 600, 600, group_order=names)
    assert document["group_eval_order"] == names
    assert "group_eval_order" not in pt.test_file(tmp_path / "rules.yml", sets, {}, 300, 300, 600, 600)


def test_the_command_writes_the_json_contract(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    require_binary("promtool")
    labels = tmp_path / "labels.jsonl"
    rows = []
    for i in range(40):
        faithful = i % 4 != 0
        context = f"The store in town {i} opens at {8 + i % 3} am and closes at 6 pm on weekdays."
        answer = (f"The store in town {i} opens at {8 + i % 3} am." if faithful
                  else f"The store in town {i} opens at noon and sells cars on Sundays.")
        rows.append({"id": str(i), "question": f"When does the store in town {i} open?", "contexts": [context],
                     "answer": answer, "labels": {"faithful": int(faithful)}, "meta": {"generator": f"m{i % 2}"}})
    labels.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    out, md = tmp_path / "report.json", tmp_path / "report.md"
    code = main(["alerts", "simulate", str(labels), "--runs", "1", "--days", "1", "--warmup-days", "1", "--rate", "0.2",
                 "--cases", "stationary,step_0.20", "--cache", str(tmp_path / "cache"), "--seed", "5",
                 "--out", str(out), "--markdown", str(md)])
    assert code == 0
    report = json.loads(out.read_text(encoding="utf-8"))
    assert isinstance(report["false_pages_per_30d"], float) and report["warmup_days"] == 1.0
    step = report["steps"]["0.20"]
    assert set(step) >= {"p_detect", "median_minutes", "p90_minutes"} and 0.0 <= step["p_detect"] <= 1.0
    for severity in ("warning", "critical"):
        assert "0.20" in report["severities"][severity]["steps"]
    assert report["auc"] is not None and report["groups"] == ["m0", "m1"]
    assert report["judge_build"] == pools_module.judge_build()
    assert report["cpu"] == cpu_model() and "logical CPUs" in report["cpu"]  # int8 scores depend on it
    # the level the rules' drop tests page above, as the generator sized it (cells under other budgets differ)
    generator = load_script(RULES.with_name("generate_rules.py"), "gen_rules_z")
    assert report["drop_z"] == generator.DROP_Z
    # every alert of the rules file: simulated with its false firings a month, or why not
    shipped = {r["alert"] for g in yaml.safe_load(RULES.read_text(encoding="utf-8"))["groups"] for r in g["rules"]
               if "alert" in r}
    assert set(report["alerts"]) == shipped
    assert report["alerts"]["RagmonFaithfulnessDrop"]["simulated"] is True
    assert isinstance(report["alerts"]["RagmonContradictionsRise"]["false_per_30d"], float)
    assert "--latency" in report["alerts"]["RagmonRetrievalLatencyHigh"]["why"]
    assert not report["alerts"]["RagmonAgentDown"]["simulated"] and report["alerts"]["RagmonAgentDown"]["why"]
    assert report["severities"]["critical"]["steps"]["0.20"]["delays_minutes"]
    # when in the day each incident started, and what was paged in time by quarter of the day
    assert len(step["start_hours"]) == step["runs"] and all(0 <= h < 24 for h in step["start_hours"])
    by_start = step["within_by_start"]
    assert sum(runs for _hits, runs in by_start.values()) == step["runs"]
    assert sum(hits for hits, _runs in by_start.values()) == round(step["p_detect"] * step["runs"])
    quarter = int(step["start_hours"][0] // 6)
    assert f"{6 * quarter:02d}-{6 * quarter + 6:02d}h" in by_start
    assert "| critical |" in md.read_text(encoding="utf-8") and "| critical |" in capsys.readouterr().out
    assert report["promtool_answers"]["asked"] == 2 and report["promtool_answers"]["reused"] == 0  # one per case
    # deterministic with --seed: the judge's scores come from the cache the second time, and promtool's answers
    # too, which they can only where every input series came out the same to the byte (the answer's key)
    again = tmp_path / "again.json"
    main(["alerts", "simulate", str(labels), "--runs", "1", "--days", "1", "--warmup-days", "1", "--rate", "0.2",
          "--cases", "stationary,step_0.20", "--cache", str(tmp_path / "cache"), "--seed", "5", "--out", str(again)])
    second = json.loads(again.read_text(encoding="utf-8"))
    assert (second["steps"], second["false_pages_per_30d"]) == (report["steps"], report["false_pages_per_30d"])
    assert second["promtool_answers"]["reused"] == 2


def test_bad_arguments_are_one_line_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["alerts", "simulate", str(tmp_path / "missing.jsonl")]) == 2
    assert "no such file" in capsys.readouterr().err
    labels = tmp_path / "l.jsonl"
    labels.write_text('{"id": "1", "question": "q", "contexts": ["c"], "answer": "a", "labels": {"faithful": 1}}\n')
    assert main(["alerts", "simulate", str(labels), "--cases", "nope"]) == 2
    assert "unknown case" in capsys.readouterr().err
    # under a day of warm-up no window has a baseline: nothing could page, and the run would read as quiet
    assert main(["alerts", "simulate", str(labels), "--warmup-days", "0.5"]) == 2
    assert "--warmup-days" in capsys.readouterr().err
    assert main(["alerts", "simulate", str(labels), "--tail-levels", "3,2"]) == 2
    assert "--tail-levels" in capsys.readouterr().err
    assert main(["alerts", "simulate", "--latency", "--tail-levels", "3"]) == 2
    assert "no test statistic" in capsys.readouterr().err


def test_the_default_warm_up_is_the_rules_baseline() -> None:
    generator = load_script(RULES.with_name("generate_rules.py"), "gen_rules_days")
    # a week of baseline, each day of it whole for the longest window: a pipeline in its steady state
    longest_window_days = max(generator._seconds(w) for w in (generator.WINDOW, *generator.LONG_WINDOWS)) / DAY
    assert TrafficModel(rate_per_s=1.0, days=1.0).warmup_days == WARMUP_DAYS == \
        generator.SEASONAL_DAYS + longest_window_days


def test_latency_series_page_for_a_slower_store_and_stay_quiet_on_a_healthy_one(tmp_path: Path) -> None:
    """Retrieval latency simulated per request into the agent's histogram buckets: a store 4x slower (P95
    0.32 s -> 1.3 s) pages RagmonRetrievalLatencyHigh, the healthy one (P95 under the 0.5 s bound) does not."""
    require_binary("promtool")
    rules = yaml.safe_load(RULES.read_text(encoding="utf-8"))
    settings = _settings(latency=LatencyModel(), runs=1, incident_metric=None, error_rates={}, judge="none",
                         traffic=TrafficModel(rate_per_s=1.0, days=1.0, warmup_days=1.0))
    empty = Pools(source="latency", judge="none", profile=None, rows=())
    results = simulate(empty, (Case("stationary", "none", 0.0), Case("step_3.00", "step", 3.0)), settings, rules,
                       workdir=tmp_path)
    report = summarize(results, 7200.0)
    assert report["false_pages_per_30d"] == 0.0
    assert report["steps"]["3.00"]["p_detect"] == 1.0
    assert report["severities"]["critical"]["steps"]["3.00"]["median_minutes"] <= 30


def test_latency_buckets_are_the_agents() -> None:
    from ragmon.alerts.latency import LATENCY_BUCKETS
    from ragmon.export.metrics import LATENCY_BUCKETS as EXPORTED

    assert LATENCY_BUCKETS == EXPORTED


def test_level_of_the_rise_tests_on_small_counts() -> None:
    """On a share that did not change, the plain two-proportion z fires several times more often than its
    level on small counts; the arcsine statistic the rules use stays near it (exact binomial sums)."""
    z, alpha = 3.64, 1.3441e-4
    assert level("plain", 30, 210, 0.05, z) > 5 * alpha
    assert level("arcsine", 30, 210, 0.05, z) < alpha
    for n, p in ((30, 0.3), (120, 0.1), (360, 0.5)):
        assert level("arcsine", n, 7 * n, p, z) < 1.3 * alpha
    with pytest.raises(ValueError, match="unknown statistic"):
        level("wald", 30, 210, 0.1, z)


def test_the_mean_test_holds_its_level_with_its_skew_limit_on_a_thin_tail_of_low_scores() -> None:
    """Scores near 1 with a thin tail of low ones (WikiQA's faithfulness in the simulation: 2.4 % below 0.5):
    a window's mean has a heavy low tail, and a fixed z (3.79 + 0.15) fires twice its level on 500 traces;
    the rules' limit, Cornish-Fisher's skewness term at the largest skewness of a [0, 1] score with that mean
    and sd, keeps the test near its level there and on a 5 % tail (Monte Carlo over a million windows, seeded)."""
    gen = load_script(RULES.with_name("generate_rules.py"), "gen_rules_level")
    z, n = gen.DROP_Z, gen.MIN_SCORED_MEAN_WINDOW
    coef = round((z * z - 1) / 6, 4)
    # as shipped: the limit's formula and the alert comparing the drop z with it
    shipped = RULES.read_text(encoding="utf-8")
    assert f"{z:g} + {coef:g} * ragmon:score_ratio:mean1h_same_hour_7d" in shipped
    assert 'drop_z1h{metric="faithfulness"} > on(service, pipeline, judge, metric) ragmon:score_ratio:drop_z_limit1h' \
        in shipped
    alpha = 1.0 - NormalDist().cdf(z)
    rng = np.random.default_rng(5)
    thin = np.concatenate([rng.uniform(0.95, 1.0, 1950), rng.uniform(0.0, 0.5, 50)])
    tail = np.concatenate([rng.uniform(0.7, 1.0, 1900), rng.uniform(0.0, 0.5, 100)])
    assert mean_level(thin, n, z + 0.15, draws=1_000_000, seed=1) > 1.5 * alpha  # the fixed margin before
    for scores in (thin, tail):
        limit = z + coef * scores.mean() / np.sqrt(scores.var() * n)
        assert mean_level(scores, n, limit, draws=1_000_000, seed=1) < 1.3 * alpha


def test_the_share_of_runs_paged_carries_wilsons_interval() -> None:
    # 16 of 20 runs: Wilson's 95 % interval is 58.4-91.9 %; at 0 or n it stays inside [0, 1] and is not empty
    lo, hi = proportion_ci95(16, 20)
    assert (round(lo, 3), round(hi, 3)) == (0.584, 0.919)
    assert proportion_ci95(0, 5)[0] == 0.0 and 0.4 < proportion_ci95(0, 5)[1] < 0.45
    assert proportion_ci95(5, 5)[1] == 1.0 and 0.55 < proportion_ci95(5, 5)[0] < 0.6
    assert proportion_ci95(0, 0) == (0.0, 1.0)


def test_the_judge_build_leaves_out_only_recipe_files_the_judge_never_imports(tmp_path: Path) -> None:
    """The judge build (the pools' cache key) skips the reader's training recipe: safe only while the judge, the
    agent and the CLI's scoring never import it, which a fresh interpreter checks."""
    import subprocess
    import sys

    code = ("import sys, ragmon.scoring.local, ragmon.agent, ragmon.alerts.command\n"
            "from ragmon.scoring.local import LocalJudge\n"
            "LocalJudge()\n"
            "print('\\n'.join(sorted(m for m in sys.modules if m.startswith('ragmon.scoring.reader'))))\n")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert "ragmon.scoring.reader.model" in loaded  # the judge does read with the reader
    recipe = {"ragmon." + name.removesuffix(".py").replace("/", ".") for name in pools_module.RECIPE_ONLY
              if name.endswith(".py")}
    assert recipe and not recipe & set(loaded)
    for name in pools_module.RECIPE_ONLY:
        assert (Path(pools_module.__file__).resolve().parents[1] / name).is_file(), name  # no stale name
