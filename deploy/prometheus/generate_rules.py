#!/usr/bin/env python3
"""Generate ``ragmon-rules.yml`` (Prometheus recording + alerting rules) from the constants below.

Thresholds, windows and minimum sample counts live here, in one table, so that changing a
threshold is a one-line edit followed by::

    python deploy/prometheus/generate_rules.py            # rewrites deploy/prometheus/ragmon-rules.yml
    python deploy/prometheus/generate_rules.py --check    # exit 1 if the file is out of date (CI)
    promtool test rules deploy/prometheus/tests/*.yml     # the unit tests pin the default thresholds

Editing ``ragmon-rules.yml`` by hand works too (it is plain Prometheus YAML), but then the
``--check`` test in ``tests/ops`` fails until this file agrees. Metric and label names are the
ones in ``ragmon/semconv.py`` (documented in ``docs/metrics.md``); this script has no
dependency on the installed ragmon package so it can run in a bare CI or ops checkout (the quality
metrics come from ``ragmon/quality.py``, read straight from the source tree, or the process's own
table when ragmon is already imported, with the metrics registered there).
"""

from __future__ import annotations

import argparse
import importlib
import re
import sys
from pathlib import Path
from statistics import NormalDist
from types import ModuleType
from typing import Any

import yaml

OUTPUT = Path(__file__).with_name("ragmon-rules.yml")
# The same rules as a Prometheus Operator PrometheusRule, for Kubernetes.
PROMETHEUS_RULE = Path(__file__).resolve().parents[1] / "kubernetes" / "prometheusrule.yaml"
RUNBOOK_BASE = "https://github.com/ragmon/ragmon/blob/main/docs/alerts.md"
JOB_SELECTOR = 'job=~"ragmon.*"'

# --- windows ------------------------------------------------------------------------------
LATENCY_WINDOW = "5m"  # rate window for latency quantiles

# --- quality: the share of failing answers, now against the same window of the past week ------------
# A judged trace "fails" a metric when its score is below the metric's threshold (the agent counts
# them in ragmon_score_failures_total). The drop alerts compare the failing share of the last WINDOW
# (and of the LONG_WINDOWS, for pipelines too quiet to show a rise within an hour) with the same
# window of each of the previous SEASONAL_DAYS days: traffic whose question mix changes by hour of
# day is compared like with like. The test is a two-proportion test of a rise (one-sided) on
# Anscombe's arcsine scale, 2 (asin sqrt((x + 3/8) / (n + 3/4)) - the same of the baseline) /
# sqrt(1/n + 1/n_baseline): unlike the plain z it holds its level on the small counts of a quiet
# pipeline (docs/alerts.md, measured by ragmon/alerts/level.py). The alert also needs the estimated
# rise, corrected for the judge's error rates (Rogan-Gladen: divided by sensitivity + specificity - 1),
# to be at least MIN_EFFECT x its step. Chosen with `ragmon alerts simulate` (docs/alerts.md has the table).
DROP_WARNING = 0.05  # rise of the failing share (0.05 = five points) the warning is sized for
DROP_CRITICAL = 0.08  # ... the critical alert (the page) is sized for
MIN_EFFECT = 0.5  # an alert needs an estimated rise of at least this share of its step
SEASONAL_DAYS = 7
MIN_SCORED_WINDOW = 30  # scored traces needed in a window before any quality alert
MIN_SCORED_BASELINE = 200  # scored traces needed in the baseline windows for a relative alert
# The mean score's drop test pages above DROP_Z plus a skewness correction, on windows of MIN_SCORED_MEAN_WINDOW
# traces or more. A mean of skewed scores has a heavier low tail than the normal z assumes: a thin tail of low
# scores under a mass near 1 (WikiQA's faithfulness at a 10 % failing share: 2.4 % of scores below 0.5) fires
# 2.1-2.6x the level at 500-800 traces and 1.6x at 5,000 with a fixed z. The correction is Cornish-Fisher's first
# term, (DROP_Z^2 - 1) / 6 * skew / sqrt(n), with the largest skewness a score in [0, 1] with the baseline's mean
# m and sd s can have, m / s (ragmon:score_ratio:drop_z_limit*): within 1.06x of the level on every distribution
# measured, labelled and synthetic, and below DROP_Z + 0.15 on long windows of moderately skewed scores
# (ragmon/alerts/level.py mean_level; docs/alerts.md). Under 500 traces the one-term expansion is not trusted:
# smaller windows keep the share test.
MIN_SCORED_MEAN_WINDOW = 500
MIN_SCORE_VARIANCE = 0.0001  # floor of a baseline's score variance (a baseline of identical scores)
QUALITY_FOR = "10m"
# Significance: quality.alert_alpha(), the false pages per pipeline per 30 days allowed for, spread over
# every hourly window and online metric of a month; the agent's --alpha defaults to the same value
# (power-based sampling sizes the sample for this test).
# Scores of priority-sampled traces (errors, negative feedback, slow or weak retrievals) are chosen
# for being bad: every mean, share, drop and floor reads the unbiased rate stream only. `!=` also keeps
# series from agents older than the `sample` label, so an upgrade does not restart the baseline.
RATE_STREAM = 'sample!="priority"'
PRIORITY_STREAM = 'sample="priority"'
WINDOW = "1h"  # the "current" quality window: means, shares and the first drop test
LONG_WINDOWS: tuple[str, ...] = ("6h", "12h", "24h")  # further drop tests: a quiet pipeline has its samples there
LONG_INTERVAL = "5m"  # the long windows' group: they move slowly (hour-apart lookups of the hourly counts)
BASELINE = "7d"  # the dashboard's long mean (ragmon:score_ratio:mean7d); alerts use the seasonal baseline
SAME_HOUR = f"same_hour_{SEASONAL_DAYS}d"


def _load_quality_table() -> ModuleType:
    """``ragmon/quality.py`` (the quality-metric table), loaded without importing the ragmon package.

    The table imports only the standard library and ``ragmon/semconv.py``; loading both under a
    private package name keeps this script runnable from a bare checkout (no OpenTelemetry). A
    process that has imported ragmon already (the agent's tests, a plugin that registers a metric)
    gets its own table, registered rows included.
    """
    if "ragmon.quality" in sys.modules:
        return sys.modules["ragmon.quality"]
    package = "_ragmon_tables"
    if package not in sys.modules:
        module = ModuleType(package)
        module.__path__ = [str(Path(__file__).resolve().parents[2] / "ragmon")]
        sys.modules[package] = module
    return importlib.import_module(f"{package}.quality")


def quality_metrics() -> tuple[Any, ...]:
    """Alerts and panels for every metric the agent judges online, from the quality table as it is now:
    m.name (the `metric` label), m.alert (alert name stem), m.title, m.floor, m.stage."""
    return tuple(_load_quality_table().online())


# The false-page budget: PIPELINES pipelines behind one Alertmanager share FLEET_BUDGET_PER_30D false pages
# a month (quality.alert_alpha: Bonferroni over every window, alerting share and pipeline); --pipelines and
# --fleet-budget write a rules file for a fleet. The agent's --alpha must be the same level: give it the
# same --alert-pipelines / --alert-budget.
PIPELINES = 1
FLEET_BUDGET_PER_30D = _load_quality_table().PAGE_BUDGET_PER_30D
DROP_ALPHA = _load_quality_table().alert_alpha(PIPELINES, FLEET_BUDGET_PER_30D)
DROP_Z = round(NormalDist().inv_cdf(1 - DROP_ALPHA), 2)  # one-sided: a rise
# Absolute floors of the 1h mean score (Ragmon*BelowFloor): off unless set. A judge puts healthy answers of
# some domains near any fixed floor (the local judge: data-to-text near 0.5), where a floor fires on a
# pipeline whose quality never changed; set one per metric from your own pipeline (ragmon:score_ratio:mean7d,
# or a fitted profile's threshold) with --floor METRIC=VALUE, or here.
FLOORS: dict[str, float] = {}
FLOOR_FOR = "15m"
FLOOR_SEVERITY = "warning"
CONTRADICTIONS = "contradictions"  # the `metric` label of the contradiction check's error-rate gauges
MIN_CORRECTABLE_YOUDEN = _load_quality_table().MIN_CORRECTABLE_YOUDEN  # J under it: shares uncorrected

# --- latency ------------------------------------------------------------------------------------
RETRIEVAL_P95_WARNING_S = 0.5
RETRIEVAL_P95_CRITICAL_S = 1.0
MIN_RETRIEVALS_LATENCY = 20  # retrievals in the latency window before a P95 can alert
LATENCY_FOR = "10m"

# --- pipeline health ----------------------------------------------------------------------------
STALLED_WINDOW = "15m"
STALLED_FOR = "10m"
COVERAGE_MIN = 0.8  # scored / sampled over the 1h window
MIN_SAMPLED_WINDOW = 30
COVERAGE_FOR = "15m"
JUDGE_ERROR_WINDOW = "10m"
JUDGE_ERROR_RATIO = 0.1
MIN_JUDGE_REQUESTS_PER_S = 0.01  # ~6 requests in 10 minutes
JUDGE_ERROR_FOR = "10m"
BUDGET_WINDOW = "10m"
BUDGET_FOR = "15m"
KAFKA_LAG_MIN = 1000  # messages; lag below this never alerts
KAFKA_LAG_WINDOW = "10m"
KAFKA_LAG_FOR = "15m"
AGENT_DOWN_FOR = "5m"
DETECT_FOR = "30m"  # RagmonDetectionTargetMissed: a pipeline's sample cannot detect the --detect-drop target

# --- offline evaluation (`ragmon eval --pushgateway`): pushed gauges, one value per run ---------------
EVAL_COMPARE_OFFSET = "1d"  # a scheduled run is compared with the value current this long ago (the previous run)
EVAL_DROP = 0.05  # a score this far below its value a day ago -> RagmonOfflineEvalRegression
EVAL_STALE_AFTER_S = 26 * 3600  # nightly schedule + 2h slack -> RagmonOfflineEvalStale
EVAL_FOR = "5m"
EVAL_STALE_FOR = "15m"

SP = "service, pipeline"
SPJM = "service, pipeline, judge, metric"


def _r(seconds: float) -> str:
    return f"{seconds:g}"


def _runbook(alert: str) -> str:
    return f"{RUNBOOK_BASE}#{alert.lower()}"


def _alert(
    name: str,
    expr: str,
    for_: str,
    severity: str,
    summary: str,
    description: str,
    extra_labels: dict[str, str] | None = None,
) -> dict[str, object]:
    return {
        "alert": name,
        "expr": expr,
        "for": for_,
        "labels": {"severity": severity, **(extra_labels or {})},
        "annotations": {"summary": summary, "description": description, "runbook_url": _runbook(name)},
    }


SCORE_FMT = 'printf "%.3f"'  # scores are ratios in [0, 1]: "0.712" reads better than humanize's "712m"


def _q(query: str, fmt: str = "humanize") -> str:
    """Template snippet: the formatted value of a PromQL query for this alert's labels."""
    return "{{ with printf " + query + " | query }}{{ . | first | value | " + fmt + " }}{{ end }}"


def _sp_query(record: str) -> str:
    """printf arguments selecting ``record`` for the alert's service/pipeline."""
    return f'"{record}{{service=%q,pipeline=%q}}" $labels.service $labels.pipeline'


def _seconds(duration: str) -> int:
    """'6h' -> 21600 (the long windows are whole hours or days)."""
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    return int(duration[:-1]) * units[duration[-1]]


def _sum_labelled(parts: list[tuple[str, str]], label: str, by: str) -> str:
    """The sum by ``by`` of each (expression, value) with its own ``label`` value first, so that a part without
    data leaves a smaller sum instead of none (``or`` keeps every part: their label sets differ)."""
    terms = [f'label_replace({expr}, "{label}", "{value}", "", "")' for expr, value in parts]
    return f"sum by ({by}) (\n  " + "\n  or ".join(terms) + "\n)"


def _same_hour(expr: str, by: str, window: str | None = None) -> str:
    """``expr`` (a range selector ``[window]`` inside) summed over the same window of the past days.

    Each day's value gets its own ``day`` label before the sum, so a day without data (a new
    pipeline, an agent outage) leaves a smaller baseline instead of none."""
    w = window or WINDOW
    days = [(expr.replace(f"[{w}]", f"[{w}] offset {d}d"), str(d)) for d in range(1, SEASONAL_DAYS + 1)]
    return _sum_labelled(days, "day", by)


def _rolling(hourly: str, by: str, w: str) -> str:
    """``hourly`` (a count over the last hour, recorded at every evaluation) summed over the hours of window
    ``w`` that end now, 1 h ago, 2 h ago, …: the count of the last ``w``, up to the last evaluation. Each hour gets
    its own ``hour`` label before the sum, so an hour without data (a new pipeline, an agent outage) leaves a
    smaller window instead of none."""
    hours = [(f"{hourly} offset {k}h" if k else hourly, str(k)) for k in range(_seconds(w) // _seconds(WINDOW))]
    return _sum_labelled(hours, "hour", by)


def _window_counts(stem: str, counter: str, by: str, w: str) -> list[dict[str, object]]:
    """``{stem}:increase{w}`` and ``{stem}:increase{w}_same_hour_7d``: ``counter``'s increase over the last
    window ``w`` and over the same window of the past SEASONAL_DAYS days. A long window sums the hourly counts
    recorded for WINDOW (``{stem}:increase1h`` and its baseline ``{stem}:increase1h_same_hour_7d``) an hour
    apart, ending at the last evaluation: a handful of lookups per series, and a window that moves with the
    clock (summed over whole hours instead, it came up to an hour late)."""
    now, before = f"{stem}:increase{w}", f"{stem}:increase{w}_{SAME_HOUR}"
    if w == WINDOW:
        return [
            {"record": now, "expr": f"sum by ({by}) (increase({counter}[{w}]))"},
            {"record": before, "expr": _same_hour(f"increase({counter}[{w}])", by, w)},
        ]
    hourly = f"{stem}:increase{WINDOW}"
    return [
        {"record": now, "expr": _rolling(hourly, by, w)},
        {"record": before, "expr": f"{_rolling(f'{hourly}_{SAME_HOUR}', by, w)}\nunless on({by})\n"
                                   f"{_partial_day(counter, by, w)}"},
    ]


def _partial_day(counter: str, by: str, w: str) -> str:
    """Series whose baseline over window ``w`` holds a partial day: ``counter`` existed ``d`` days ago but not
    ``d`` days and ``w`` ago, so that day's window covers only its last hours. A baseline of other hours of the
    day than the window's is a different question mix (traffic swings over the day), and a new pipeline's
    second day paged on it (``ragmon alerts simulate`` with a day of history: 2 false pages in 2 pipeline-days
    on a judge that cannot tell). The long windows wait until every day of their baseline is whole: the 6h
    window skips the first 6 hours of each of a new pipeline's first 7 days, the 24h window waits 8 days."""
    hours = _seconds(w) // 3600
    days = [f"sum by ({by}) ({counter} offset {24 * d}h)\n  unless on({by})\n"
            f"  sum by ({by}) ({counter} offset {24 * d + hours}h)" for d in range(1, SEASONAL_DAYS + 1)]
    return "(\n  " + "\n  or\n  ".join(days) + "\n)"


def _share_rise_rules(events: str, events_counter: str, total: str, total_counter: str,
                      by: str, w: str) -> list[dict[str, object]]:
    """Recording rules for a share that must not rise: ``events_counter`` over ``total_counter`` in the
    last window ``w`` and in the same window of the past SEASONAL_DAYS days, and the one-sided test
    statistic of the rise that the drop and contradiction alerts compare with DROP_Z: the difference
    of the two shares on Anscombe's arcsine scale, whose variance is 1/(4n) whatever the share, so
    that small counts keep the test's level (the plain z with a pooled variance fires up to 9x too
    often at 30 traces a window; docs/alerts.md).

    Names (for ``w`` = 1h): ``{total}:increase1h`` (and ``_same_hour_7d``), ``{events}:increase1h``,
    ``{events}:share1h``, ``{events}:rise_z1h``."""
    b = SAME_HOUR
    e_w, n_w, e_b, n_b = f"{events}:increase{w}", f"{total}:increase{w}", f"{events}:increase{w}_{b}", \
        f"{total}:increase{w}_{b}"
    p_w, p_b = f"{events}:share{w}", f"{events}:share{w}_{b}"

    def arcsine(e: str, n: str) -> str:
        return f"asin(sqrt(({e} + 0.375) / on({by}) ({n} + 0.75)))"

    return [
        *_window_counts(total, total_counter, by, w),
        *_window_counts(events, events_counter, by, w),
        {"record": p_w, "expr": f"{e_w}\n/ on({by})\n({n_w} > 0)"},
        {"record": p_b, "expr": f"{e_b}\n/ on({by})\n({n_b} > 0)"},
        # the rise on the arcsine scale, in standard errors; > DROP_Z pages
        {"record": f"{events}:rise_z{w}", "expr": (
            f"2 * (\n  {arcsine(e_w, n_w)}\n  - on({by})\n  {arcsine(e_b, n_b)}\n)\n"
            f"/ on({by})\nsqrt(1 / ({n_w} > 0) + on({by}) 1 / ({n_b} > 0))"
        )},
    ]


def _mean_drop_rules(w: str) -> list[dict[str, object]]:
    """The mean score's drop test over window ``w``, beside the failing share's rise test.

    The share counts answers whose score crosses the threshold; a change that moves scores without
    carrying many across it (a judge whose scores of bad answers sit near the threshold) shows in the
    mean first. The test is a one-sided z of the drop of the window's mean below the same window of the
    past SEASONAL_DAYS days, with the variance of a score measured on that baseline (sum of squares:
    ``ragmon_score_squared_ratio_total``) — a week of samples, so the variance is known, not guessed from
    the window. The drop is turned into failing-share points by the judge's score gap (mean score of
    passing minus failing answers on labelled rows, ``ragmon_judge_score_gap_ratio``) for the minimum
    effect; without a gap the raw drop in score units is used (a stricter test)."""
    b, by = SAME_HOUR, SPJM
    sums, squares, count = "ragmon:score_ratio_sum", "ragmon:score_squared_ratio", "ragmon:score_ratio_count"
    n_w, n_b = f"{count}:increase{w}", f"{count}:increase{w}_{b}"
    mean_w, mean_b, var_b = f"ragmon:score_ratio:mean{w}", f"ragmon:score_ratio:mean{w}_{b}", \
        f"ragmon:score_ratio:variance{w}_{b}"
    gap = "ragmon:judge_score_gap:ratio"
    rules = [
        *_window_counts(sums, f"ragmon_score_ratio_sum{{{RATE_STREAM}}}", by, w),
        *_window_counts(squares, f"ragmon_score_squared_ratio_total{{{RATE_STREAM}}}", by, w),
    ]
    if w != WINDOW:  # the hourly mean is recorded with the other means (rate over the same window)
        rules.append({"record": mean_w, "expr": f"{sums}:increase{w}\n/ on({by})\n({n_w} > 0)"})
    rules += [
        {"record": mean_b, "expr": f"{sums}:increase{w}_{b}\n/ on({by})\n({n_b} > 0)"},
        # E[x^2] - E[x]^2 of the baseline's scores; the floor keeps a baseline of identical scores finite
        {"record": var_b, "expr": (
            f"clamp_min(\n  {squares}:increase{w}_{b} / on({by}) ({n_b} > 0)\n  - on({by}) {mean_b} ^ 2,\n"
            f"  {_r(MIN_SCORE_VARIANCE)}\n)"
        )},
        {"record": f"ragmon:score_ratio:drop_z{w}", "expr": (
            f"({mean_b} - on({by}) {mean_w})\n"
            f"/ on({by})\nsqrt({var_b} * on({by}) (1 / ({n_w} > 0) + on({by}) 1 / ({n_b} > 0)))"
        )},
        # DROP_Z + Cornish-Fisher's skewness term at the largest skewness of a [0, 1] score: mean / sd
        {"record": f"ragmon:score_ratio:drop_z_limit{w}", "expr": (
            f"{_r(DROP_Z)} + {_r(round((DROP_Z ** 2 - 1) / 6, 4))} * {mean_b}\n"
            f"/ on({by})\nsqrt({var_b} * on({by}) ({n_w} > 0))"
        )},
        {"record": f"ragmon:failing_share:mean_rise{w}",
         "expr": _divided_where_known(f"({mean_b} - on({by}) {mean_w})", gap, "judge, metric")},
    ]
    return rules


def _divided_where_known(expr: str, divisor: str, on: str) -> str:
    """``expr`` divided by the judge's ``divisor`` (its Youden's J or score gap) where the judge exports
    one, and ``expr`` as is where it does not."""
    return f"{expr}\n/ on({on}) group_left() {divisor}\nor\n{expr}"


def _failing_share_rules(w: str) -> list[dict[str, object]]:
    """The failing share's rise test over window ``w`` and the user's unit beside it: the estimated
    share of failing answers, its 95 % half-interval and its rise (corrected for the judge's errors)."""
    failures = f"ragmon_score_failures_total{{{RATE_STREAM}}}"
    score_count = f"ragmon_score_ratio_count{{{RATE_STREAM}}}"
    n_w = f"ragmon:score_ratio_count:increase{w}"
    p_w, p_b = f"ragmon:score_failures:share{w}", f"ragmon:score_failures:share{w}_{SAME_HOUR}"
    youden, false_pos = "ragmon:judge_youden:ratio", "ragmon:judge_false_positive:ratio"
    jm = "judge, metric"
    return [
        *_share_rise_rules("ragmon:score_failures", failures, "ragmon:score_ratio_count", score_count, SPJM, w),
        {"record": f"ragmon:failing_share:ratio{w}", "expr": (
            f"clamp(\n  ({p_w} - on({jm}) group_left() {false_pos})\n  / on({jm}) group_left() {youden},\n  0, 1\n)"
            f"\nor\n{p_w}"
        )},
        {"record": f"ragmon:failing_share:ci95_{w}",
         "expr": _divided_where_known(f"1.96 * sqrt({p_w} * (1 - {p_w}) / on({SPJM}) {n_w})", youden, jm)},
        {"record": f"ragmon:failing_share:rise{w}",
         "expr": _divided_where_known(f"({p_w} - on({SPJM}) {p_b})", youden, jm)},
        *_mean_drop_rules(w),
    ]


def recording_rules() -> dict[str, list[dict[str, object]]]:
    score_sum, score_count = f"ragmon_score_ratio_sum{{{RATE_STREAM}}}", f"ragmon_score_ratio_count{{{RATE_STREAM}}}"

    def mean(window: str) -> str:
        return f"sum by ({SPJM}) (rate({score_sum}[{window}]))\n/\nsum by ({SPJM}) (rate({score_count}[{window}]))"

    youden, false_pos = "ragmon:judge_youden:ratio", "ragmon:judge_false_positive:ratio"
    jm = "judge, metric"
    quality = [
        {"record": f"ragmon:score_ratio:mean{WINDOW}", "expr": mean(WINDOW)},
        # the judge's error rates (ragmon_judge_{sensitivity,specificity}_ratio, from the judge's
        # profile or its measured defaults): J = sensitivity + specificity - 1 turns observed
        # shares into estimated true ones (Rogan-Gladen); judges without them, and a J under
        # quality.MIN_CORRECTABLE_YOUDEN (where the correction would be mostly noise), stay uncorrected
        {"record": youden, "expr": (
            f"max by ({jm}) (ragmon_judge_sensitivity_ratio)\n"
            f"+ on({jm}) max by ({jm}) (ragmon_judge_specificity_ratio)\n- 1\n>= {_r(MIN_CORRECTABLE_YOUDEN)}"
        )},
        {"record": false_pos, "expr": f"1 - max by ({jm}) (ragmon_judge_specificity_ratio)"},
        # the judge's score gap (mean score of passing minus failing answers, labelled rows): turns a drop
        # of the mean score into failing-share points for the mean test's minimum effect
        {"record": "ragmon:judge_score_gap:ratio",
         "expr": f"clamp_min(max by ({jm}) (ragmon_judge_score_gap_ratio), 0.05)"},
        *_failing_share_rules(WINDOW),
        {
            "record": f"ragmon:traces_scored:increase{WINDOW}",
            "expr": f"sum by ({SP}) (increase(ragmon_traces_scored_total[{WINDOW}]))",
        },
        {
            "record": f"ragmon:traces_sampled:increase{WINDOW}",
            "expr": f"sum by ({SP}) (increase(ragmon_traces_sampled_total[{WINDOW}]))",
        },
        {
            "record": f"ragmon:coverage:ratio{WINDOW}",
            "expr": f"ragmon:traces_scored:increase{WINDOW}\n/\n(ragmon:traces_sampled:increase{WINDOW} > 0)",
        },
    ]
    baseline = [
        {"record": f"ragmon:score_ratio:mean{BASELINE}", "expr": mean(BASELINE)},
    ]
    latency = []
    for stage in ("retrieval", "pipeline"):
        bucket = f"ragmon_{stage}_latency_seconds_bucket"
        for q in ("0.95", "0.5"):
            latency.append(
                {
                    "record": f"ragmon:{stage}_latency_seconds:p{round(float(q) * 100)}_{LATENCY_WINDOW}",
                    "expr": f"histogram_quantile({q}, sum by ({SP}, le) (rate({bucket}[{LATENCY_WINDOW}])))",
                }
            )
    latency.append(
        {
            "record": f"ragmon:retrieval_latency_seconds_count:increase{LATENCY_WINDOW}",
            "expr": f"sum by ({SP}) (increase(ragmon_retrieval_latency_seconds_count[{LATENCY_WINDOW}]))",
        }
    )
    traffic = [
        {
            "record": f"ragmon:traces_received:rate{LATENCY_WINDOW}",
            "expr": f"sum by ({SP}) (rate(ragmon_traces_received_total[{LATENCY_WINDOW}]))",
        },
        {
            "record": "ragmon:kafka_consumer_lag_messages:sum",
            # max over replicas first: a partition briefly reported by two replicas around a rebalance
            "expr": "sum by (topic) (max by (topic, partition) (ragmon_kafka_consumer_lag_messages))",
        },
    ]
    return {"quality": quality, "baseline": baseline, "latency": latency, "health": traffic}


SPJ = "service, pipeline, judge"
CONTRADICTION_ALERT = "RagmonContradictionsRise"


def _window_label(w: str) -> dict[str, str]:
    return {"window": w}


def contradiction_rules(w: str) -> list[dict[str, object]]:
    """The share of judged answers with a contradicted claim (the judges' claim verdicts) over window
    ``w``, now against the same window of the past days: recording rules, then a warning and a critical
    alert built like the drop alerts (one-sided rise test, minimum effect, count guards). The rise is
    corrected for the contradiction check's measured error rates where the judge exports them
    (``ragmon_judge_{sensitivity,specificity}_ratio{metric="contradictions"}``), as the failing shares are."""
    b = SAME_HOUR
    events, total = "ragmon:answers_contradicting", "ragmon:answers_checked"
    n_w, n_b = f"{total}:increase{w}", f"{total}:increase{w}_{b}"
    p_w, p_b, z = f"{events}:share{w}", f"{events}:share{w}_{b}", f"{events}:rise_z{w}"
    rise = f"ragmon:contradicting_share:rise{w}"
    youden = f'ragmon:judge_youden:ratio{{metric="{CONTRADICTIONS}"}}'
    rules = _share_rise_rules(events, f"ragmon_answers_contradicting_total{{{RATE_STREAM}}}", total,
                              f"ragmon_answers_checked_total{{{RATE_STREAM}}}", SPJ, w)
    rules.append({"record": rise, "expr": _divided_where_known(f"({p_w} - on({SPJ}) {p_b})", youden, "judge")})
    sel = "{service=%q,pipeline=%q,judge=%q}"
    args = "$labels.service $labels.pipeline $labels.judge"
    pct = "humanizePercentage"
    share, before = _q(f'"{p_w}{sel}" {args}', pct), _q(f'"{p_b}{sel}" {args}', pct)
    n, n_before = _q(f'"{n_w}{sel}" {args}'), _q(f'"{n_b}{sel}" {args}')
    z_value = _q(f'"{z}{sel}" {args}', 'printf "%.1f"')
    # corrected only where the judge's check has a usable J (quality.MIN_CORRECTABLE_YOUDEN): say which
    corrected = (
        "{{ with printf " + f'"ragmon:judge_youden:ratio{{metric=\\"{CONTRADICTIONS}\\",judge=%q}}" $labels.judge'
        + " | query }}an estimated {{ $value | " + pct + " }} more answers "
        "contradict their sources (the flagged rise corrected for the contradiction check's measured error rates, "
        "Youden's J = {{ . | first | value | printf \"%.2f\" }}){{ else }}{{ $value | " + pct + " }} more answers "
        "were flagged as contradicting their sources (not corrected: the judge exports no error rates for its "
        f"contradiction check, or their Youden's J is under {_r(MIN_CORRECTABLE_YOUDEN)}, where a correction "
        "would be mostly noise){{ end }}"
    )
    for severity, step in (("warning", DROP_WARNING), ("critical", DROP_CRITICAL)):
        rules.append(_alert(
            CONTRADICTION_ALERT,
            f"{rise} >= {_r(round(step * MIN_EFFECT, 4))}\n"
            f"and on({SPJ}) {z} > {_r(DROP_Z)}\n"
            f"and on({SPJ}) {n_w} >= {MIN_SCORED_WINDOW}\n"
            f"and on({SPJ}) {n_b} >= {MIN_SCORED_BASELINE}",
            QUALITY_FOR,
            severity,
            f"Answers contradicting their sources in {{{{ $labels.service }}}}/{{{{ $labels.pipeline }}}}: {share} "
            f"over {w}, +{{{{ $value | {pct} }}}} on the same {w} last week",
            f"{share} of {n} rate-sampled answers in the last {w} have a claim their contexts contradict (a changed "
            f"number, negation, name, date or unit) against {before} of {n_before} in the same {w} of the past "
            f"{SEASONAL_DAYS} days: {corrected}. The "
            f"rise is significant: z = {z_value} (pages above {_r(DROP_Z)}); the {severity} step is "
            f"{_r(step * 100)} points. The agent's /worst lists the contradicted claims with the context sentence "
            "that decides each: usually the model or prompt changed.",
            _window_label(w),
        ))
    return rules


def drop_alerts(w: str) -> list[dict[str, object]]:
    """The failing-share drop alerts over window ``w``: per online metric a warning and a critical."""
    alerts = []
    b = SAME_HOUR
    rise, z_w = f"ragmon:failing_share:rise{w}", f"ragmon:score_failures:rise_z{w}"
    mean_rise, mean_z = f"ragmon:failing_share:mean_rise{w}", f"ragmon:score_ratio:drop_z{w}"
    mean_limit = f"ragmon:score_ratio:drop_z_limit{w}"
    count_w, count_b = f"ragmon:score_ratio_count:increase{w}", f"ragmon:score_ratio_count:increase{w}_{b}"
    sel = "{service=%q,pipeline=%q,judge=%q,metric=%q}"
    args = "$labels.service $labels.pipeline $labels.judge $labels.metric"
    pct = "humanizePercentage"
    share = _q(f'"ragmon:failing_share:ratio{w}{sel}" {args}', pct)
    ci = _q(f'"ragmon:failing_share:ci95_{w}{sel}" {args}', pct)
    before = _q(f'"ragmon:score_failures:share{w}_{b}{sel}" {args}', pct)
    n, n_before = _q(f'"{count_w}{sel}" {args}'), _q(f'"{count_b}{sel}" {args}')
    z = _q(f'"{z_w}{sel}" {args}', 'printf "%.1f"')
    z_mean = _q(f'"{mean_z}{sel}" {args}', 'printf "%.1f"')
    z_limit = _q(f'"{mean_limit}{sel}" {args}', 'printf "%.2f"')
    mean_now = _q(f'"ragmon:score_ratio:mean{w}{sel}" {args}', SCORE_FMT)
    # the mean test's sentence only where the score sums are there (series from older agents may lack them)
    mean_sentence = (
        "{{ with printf " + f'"ragmon:score_ratio:mean{w}_{b}{sel}" {args}' + " | query }}The mean score went from "
        "{{ . | first | value | " + SCORE_FMT + " }} to " + mean_now + ": its drop z = " + z_mean
        + " (pages above " + z_limit + ": " + _r(DROP_Z) + " plus the most its scores' skew can add). {{ end }}"
    )
    same = "the same hour" if w == "1h" else f"the same {w}"
    for m in quality_metrics():
        m_sel = f'{{metric="{m.name}"}}'
        look = (
            f"Low {m.title} usually points at {m.stage} first: compare ragmon_diagnosis_total "
            "by verdict (generation_failure = model/prompt, retrieval_failure = index/retriever)."
        )
        for severity, step in (("warning", DROP_WARNING), ("critical", DROP_CRITICAL)):
            effect = _r(round(step * MIN_EFFECT, 4))
            expr = (
                f"(\n  {rise}{m_sel} >= {effect}\n"
                f"  and on({SPJM}) {z_w}{m_sel} > {_r(DROP_Z)}\n"
                f"  and on({SPJM}) {count_w}{m_sel} >= {MIN_SCORED_WINDOW}\n"
                f"  and on({SPJM}) {count_b}{m_sel} >= {MIN_SCORED_BASELINE}\n)\nor\n(\n"
                f"  {mean_rise}{m_sel} >= {effect}\n"
                f"  and on({SPJM}) ({mean_z}{m_sel} > on({SPJM}) {mean_limit})\n"
                f"  and on({SPJM}) {count_w}{m_sel} >= {MIN_SCORED_MEAN_WINDOW}\n"
                f"  and on({SPJM}) {count_b}{m_sel} >= {MIN_SCORED_BASELINE}\n)"
            )
            alerts.append(
                _alert(
                    f"Ragmon{m.alert}Drop",
                    expr,
                    QUALITY_FOR,
                    severity,
                    f"Failing {m.title} of {{{{ $labels.service }}}}/{{{{ $labels.pipeline }}}}: {share} ± {ci} "
                    f"of answers over {w}, +{{{{ $value | {pct} }}}} on {same} last week",
                    f"The estimated share of answers failing {m.title} (score below its threshold; corrected "
                    f"for the judge's measured error rates where it exports them) is {share} ± {ci} over "
                    f"{n} rate-sampled traces in the last {w}: {{{{ $value | {pct} }}}} of all answers more than "
                    f"in {same} of the past {SEASONAL_DAYS} days ({before} flagged over {n_before} traces). "
                    f"{mean_sentence}The failing share's rise z = {z} (pages above {_r(DROP_Z)}); the "
                    f"{severity} step is {_r(step * 100)} points. {look}",
                    _window_label(w),
                )
            )
    return alerts


def floor_alerts() -> list[dict[str, object]]:
    """Absolute floors of the 1h mean score, for the metrics given a floor (FLOORS, --floor): none by default."""
    alerts = []
    w = WINDOW
    count_w, mean_w = f"ragmon:score_ratio_count:increase{w}", f"ragmon:score_ratio:mean{w}"
    sel = "{service=%q,pipeline=%q,judge=%q,metric=%q}"
    args = "$labels.service $labels.pipeline $labels.judge $labels.metric"
    value = "{{ $value | " + SCORE_FMT + " }}"
    n = _q(f'"{count_w}{sel}" {args}')
    for m in quality_metrics():
        if m.name not in FLOORS:
            continue
        floor = FLOORS[m.name]
        m_sel = f'{{metric="{m.name}"}}'
        look = (
            f"Low {m.title} usually points at {m.stage} first: compare ragmon_diagnosis_total "
            "by verdict (generation_failure = model/prompt, retrieval_failure = index/retriever)."
        )
        alerts.append(
            _alert(
                f"Ragmon{m.alert}BelowFloor",
                f"{mean_w}{m_sel} < {_r(floor)}\nand on({SPJM}) {count_w}{m_sel} >= {MIN_SCORED_WINDOW}",
                FLOOR_FOR,
                FLOOR_SEVERITY,
                f"{m.title.capitalize()} of {{{{ $labels.service }}}}/{{{{ $labels.pipeline }}}} is "
                f"{value}, below the floor {_r(floor)}",
                f"The {w} mean {m.title} is {value} over {n} scored traces "
                f"(judge {{{{ $labels.judge }}}}), below the floor {_r(floor)} set for this deployment. {look}",
            )
        )
    return alerts


def quality_alerts() -> list[dict[str, object]]:
    """The 1h drop alerts and the floors that are set (the long windows' alerts: ``long_window_rules``)."""
    return [*drop_alerts(WINDOW), *floor_alerts()]


def long_window_rules() -> list[dict[str, object]]:
    """Every long window's recording rules and alerts (failing shares and the contradiction share).

    A long window's counts are sums of the hourly counts the quality group records, an hour apart
    (``ragmon:...:increase1h`` now, ``offset 1h``, … ``offset 5h`` for 6 hours; ``_rolling``): a handful of
    lookups per series instead of iterating a week of raw samples seven times, and a window that ends at the
    last evaluation, as the hourly one does."""
    return [rule for w in LONG_WINDOWS for rule in (*_failing_share_rules(w), *drop_alerts(w),
                                                    *contradiction_rules(w))]


def latency_alerts() -> list[dict[str, object]]:
    p95 = f"ragmon:retrieval_latency_seconds:p95_{LATENCY_WINDOW}"
    count = f"ragmon:retrieval_latency_seconds_count:increase{LATENCY_WINDOW}"
    return [
        _alert(
            "RagmonRetrievalLatencyHigh",
            f"{p95} > {_r(limit)}\nand on({SP}) {count} >= {MIN_RETRIEVALS_LATENCY}",
            LATENCY_FOR,
            severity,
            "P95 retrieval latency of {{ $labels.service }}/{{ $labels.pipeline }} is {{ $value | humanizeDuration }}",
            f"P95 retrieval latency over {LATENCY_WINDOW} has been {{{{ $value | humanizeDuration }}}} "
            f"for {LATENCY_FOR} (the {severity} bound is {_r(limit * 1000)} ms). Check the vector store "
            "and the ragmon_retrieved_documents histogram; slow traces are sampled with "
            "reason=priority_slow_retrieval when that rule is on.",
        )
        for severity, limit in (("warning", RETRIEVAL_P95_WARNING_S), ("critical", RETRIEVAL_P95_CRITICAL_S))
    ]


def health_alerts() -> list[dict[str, object]]:
    target = _q('"max(ragmon_detect_target_drop_ratio)"', SCORE_FMT)
    scored, sampled = f"ragmon:traces_scored:increase{WINDOW}", f"ragmon:traces_sampled:increase{WINDOW}"
    return [
        _alert(
            "RagmonScoringStalled",
            f"sum by ({SP}) (rate(ragmon_traces_sampled_total[{STALLED_WINDOW}])) > 0\n"
            f"unless on({SP})\nsum by ({SP}) (rate(ragmon_traces_scored_total[{STALLED_WINDOW}])) > 0",
            STALLED_FOR,
            "critical",
            "ragmon scores nothing for {{ $labels.service }}/{{ $labels.pipeline }}",
            f"{{{{ $value | humanize }}}} traces/s were sampled for judging over the last {STALLED_WINDOW} "
            "but none was scored: quality is not being measured. Check ragmon_traces_skipped_total and "
            "ragmon_traces_failed_total by reason, and the judge's ragmon_judge_requests_total by outcome.",
        ),
        _alert(
            "RagmonCoverageLow",
            f"ragmon:coverage:ratio{WINDOW} < {_r(COVERAGE_MIN)}\nand on({SP}) {sampled} >= {MIN_SAMPLED_WINDOW}",
            COVERAGE_FOR,
            "warning",
            "Only {{ $value | humanizePercentage }} of sampled traces of "
            "{{ $labels.service }}/{{ $labels.pipeline }} were scored",
            f"Over {WINDOW}, {{{{ $value | humanizePercentage }}}} of the sampled traces were scored "
            f"({_q(_sp_query(scored))} of {_q(_sp_query(sampled))}); "
            f"the floor is {_r(COVERAGE_MIN * 100)}%. The rest were skipped (budget, backlog_full, "
            "no_content) or failed: see ragmon_traces_skipped_total and ragmon_traces_failed_total by reason.",
        ),
        _alert(
            "RagmonJudgeErrorsHigh",
            f'sum by (judge) (rate(ragmon_judge_requests_total{{outcome!~"ok|retry"}}[{JUDGE_ERROR_WINDOW}]))\n'
            f'/\nsum by (judge) (rate(ragmon_judge_requests_total{{outcome!="retry"}}[{JUDGE_ERROR_WINDOW}]))\n'
            f"> {_r(JUDGE_ERROR_RATIO)}\n"
            f"and on(judge) sum by (judge) (rate(ragmon_judge_requests_total[{JUDGE_ERROR_WINDOW}])) "
            f">= {_r(MIN_JUDGE_REQUESTS_PER_S)}",
            JUDGE_ERROR_FOR,
            "warning",
            "{{ $value | humanizePercentage }} of {{ $labels.judge }} judge requests fail",
            f"{{{{ $value | humanizePercentage }}}} of the {{{{ $labels.judge }}}} judge's requests over "
            f"{JUDGE_ERROR_WINDOW} ended in an error (threshold {_r(JUDGE_ERROR_RATIO * 100)}%). "
            "Break ragmon_judge_requests_total down by outcome: http_error/timeout point at the judge "
            "endpoint, rate_limited at quotas, invalid_reply at the judge model or prompt.",
        ),
        _alert(
            "RagmonJudgeBudgetExhausted",
            f'sum by (job, instance) (rate(ragmon_traces_skipped_total{{reason="budget"}}[{BUDGET_WINDOW}])) > 0\n'
            "and on(job, instance)\n(min by (job, instance) (ragmon_judge_budget_remaining_tokens) <= 0)",
            BUDGET_FOR,
            "warning",
            "Judge token budget of {{ $labels.instance }} is exhausted",
            f"The judge token budget is used up and {{{{ $value | humanize }}}} traces/s are skipped with "
            f'reason="budget" (over {BUDGET_WINDOW}). Raise RAGMON_JUDGE_BUDGET_TOKENS_PER_MINUTE/_PER_DAY '
            "or lower the sample rate (RAGMON_SAMPLER_RATE).",
        ),
        _alert(
            "RagmonKafkaLagGrowing",
            f"ragmon:kafka_consumer_lag_messages:sum > {KAFKA_LAG_MIN}\n"
            f"and deriv(ragmon:kafka_consumer_lag_messages:sum[{KAFKA_LAG_WINDOW}]) > 0",
            KAFKA_LAG_FOR,
            "warning",
            "Kafka consumer lag on {{ $labels.topic }} is {{ $value | humanize }} messages and growing",
            f"The agents' consumer lag on topic {{{{ $labels.topic }}}} is {{{{ $value | humanize }}}} messages "
            f"and has grown over {KAFKA_LAG_WINDOW} (alerts above {KAFKA_LAG_MIN}). The agents consume slower "
            "than spans arrive: add replicas (up to the partition count), check the judge backlog "
            "(ragmon_judge_backlog) and ragmon_kafka_paused_seconds_total.",
        ),
        _alert(
            "RagmonDetectionTargetMissed",
            # avg over replicas: each reports the whole pipeline's estimate (--detect-replicas)
            "avg by (service, pipeline) (ragmon_detectable_drop_ratio)\n> on() group_left()\n"
            "max(ragmon_detect_target_drop_ratio > 0)\n"
            f"and on({SP})\nsum by ({SP}) (rate(ragmon_traces_received_total[{WINDOW}])) > 0",
            DETECT_FOR,
            "warning",
            "{{ $labels.service }}/{{ $labels.pipeline }} can only detect drops of {{ $value | " + SCORE_FMT + " }}",
            f"With its current traffic and judge budget, the rate sample of {{{{ $labels.service }}}}/"
            f"{{{{ $labels.pipeline }}}} can only detect a rise of {{{{ $value | {SCORE_FMT} }}}} in the failing share "
            f"within the window, larger than the --detect-drop target "
            f"({target}). Drop alerts stay quiet for smaller drops. "
            "Check ragmon_sample_rate_ratio (at --detect-max-rate: too little traffic; below it: the judge budget "
            "or concurrency is the limit) and raise the budget, the max rate or the window.",
        ),
        _alert(
            "RagmonAgentDown",
            f"up{{{JOB_SELECTOR}}} == 0",
            AGENT_DOWN_FOR,
            "critical",
            "ragmon agent {{ $labels.instance }} is down",
            f"Prometheus could not scrape the ragmon agent {{{{ $labels.instance }}}} (job {{{{ $labels.job }}}}) "
            f"for {AGENT_DOWN_FOR}: no traces from it are measured. Check the pod/container status "
            "and its /healthz and /readyz endpoints.",
        ),
    ]


def offline_eval_alerts() -> list[dict[str, object]]:
    """Alerts on the gauges ``ragmon eval --pushgateway`` pushes (ragmon/evaluation/pushgateway.py).

    A pushed gauge keeps its value until the next run, so ``x offset 1d`` is the run that was current a
    day ago (the previous nightly run) and the regression holds until a better run replaces it; no
    range selector or rate applies to values that change once per run. A drop is not alerted while the
    previous value is still inside the current run's 95% interval (noise on a small golden set); the
    gate (``--baseline``, paired bootstrap) is the sound comparison and has its own alert."""
    score = 'ragmon_eval_score_ratio{question_type="all"}'
    upper = 'ragmon_eval_score_ci95_upper_ratio{question_type="all"}'
    previous = f"{score} offset {EVAL_COMPARE_OFFSET}"
    sel = "ragmon_eval_score_ratio{evalset=%q,metric=%q,question_type=%q}"
    args = '$labels.evalset $labels.metric "all"'
    now = _q(f'"{sel}" {args}', SCORE_FMT)
    before = _q(f'"{sel} offset {EVAL_COMPARE_OFFSET}" {args}', SCORE_FMT)
    value = "{{ $value | " + SCORE_FMT + " }}"
    return [
        _alert(
            "RagmonOfflineEvalGateFailed",
            'ragmon_eval_gate_rules{status="failed"} > 0\nand ignoring(status) ragmon_eval_gate_passed == 0',
            EVAL_FOR,
            "warning",
            "Scheduled evaluation of {{ $labels.evalset }} failed its gate",
            "The last `ragmon eval` run of the golden set {{ $labels.evalset }} (job {{ $labels.job }}) failed "
            "{{ $value }} gate rule(s). Read the run's Markdown/JUnit report (the CronJob's log) for the rule, "
            "its delta and interval, and the worst questions; ragmon_eval_verdicts says whether retrieval or "
            "generation regressed.",
        ),
        _alert(
            "RagmonOfflineEvalRegression",
            f"(\n  {previous}\n  - {score}\n) > {_r(EVAL_DROP)}\nunless\n{previous} <= {upper}",
            EVAL_FOR,
            "warning",
            "Offline {{ $labels.metric }} of {{ $labels.evalset }} dropped " + value + " since the previous run",
            f"The scheduled evaluation scored {{{{ $labels.metric }}}} = {now} on {{{{ $labels.evalset }}}}, "
            f"{value} below the value {EVAL_COMPARE_OFFSET} earlier ({before}); the threshold is {_r(EVAL_DROP)} "
            "and the earlier value lies above this run's 95% interval. Compare the two runs' reports "
            "(`ragmon eval --baseline`) to see which questions changed.",
        ),
        _alert(
            "RagmonOfflineEvalStale",
            f"time() - ragmon_eval_last_run_timestamp_seconds > {EVAL_STALE_AFTER_S}",
            EVAL_STALE_FOR,
            "warning",
            "No evaluation of {{ $labels.evalset }} for {{ $value | humanizeDuration }}",
            "The last `ragmon eval` run of {{ $labels.evalset }} pushed to the Pushgateway "
            "{{ $value | humanizeDuration }} ago (alerts after "
            f"{_r(EVAL_STALE_AFTER_S / 3600)}h): the scheduled evaluation is not running or cannot push. "
            "Check the CronJob's last Jobs and their logs (exit code 2 = bad input or push failure).",
        ),
    ]


# --- user-declared evaluators (--evaluators FILE, docs/evaluators.md) ----------------------------------
# Each scores 1 (pass) or 0 (fail) per judged trace, exported as ragmon_score_ratio_{sum,count}: the
# pass share of the window is sum / count. Its alert fires when that share is below the evaluator's
# threshold over at least MIN_EVALUATED_WINDOW rate-sampled traces.
MIN_EVALUATED_WINDOW = 10
EVALUATOR_FOR = "5m"
EVALUATOR_SEVERITY = "warning"
_EVALUATOR_NAME = re.compile(r"[a-z][a-z0-9_]{0,39}")


def load_evaluators(path: Path) -> list[dict[str, object]]:
    """Name, threshold, kind and description of each evaluator in ``path`` (the agent validates the
    rest of the file at its start-up; the names are checked here because they go into PromQL)."""
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    items = data.get("evaluators") if isinstance(data, dict) else None
    if not isinstance(items, list):
        raise SystemExit(f"{path}: expected a mapping with an 'evaluators' list")
    out = []
    for item in items:
        name = item.get("name") if isinstance(item, dict) else None
        if not isinstance(name, str) or not _EVALUATOR_NAME.fullmatch(name):
            raise SystemExit(f"{path}: evaluator name {name!r} must match [a-z][a-z0-9_]{{0,39}}")
        threshold = float(item.get("threshold", 0.95))
        out.append({"name": name, "threshold": threshold, "kind": str(item.get("kind", "")),
                    "description": str(item.get("description", ""))})
    return out


def evaluator_alert_name(name: str) -> str:
    return "RagmonEvaluator" + "".join(part.capitalize() for part in name.split("_"))


def evaluator_rules(evaluators: list[dict[str, object]]) -> list[dict[str, object]]:
    """Recording rules for the evaluators' pass share, and one alert per evaluator."""
    w = WINDOW
    names = "|".join(str(e["name"]) for e in evaluators)
    sel = f'metric=~"{names}", {RATE_STREAM}'
    passed, judged = f"ragmon:evaluator_passed:increase{w}", f"ragmon:evaluator_judged:increase{w}"
    share = f"ragmon:evaluator_pass_share:ratio{w}"
    out: list[dict[str, object]] = [
        {"record": passed, "expr": f"sum by ({SPJM}) (increase(ragmon_score_ratio_sum{{{sel}}}[{w}]))"},
        {"record": judged, "expr": f"sum by ({SPJM}) (increase(ragmon_score_ratio_count{{{sel}}}[{w}]))"},
        {"record": share, "expr": f"{passed}\n/ on({SPJM})\n({judged} > 0)"},
    ]
    args = "$labels.service $labels.pipeline $labels.judge $labels.metric"
    n = _q(f'"{judged}{{service=%q,pipeline=%q,judge=%q,metric=%q}}" {args}')
    for e in evaluators:
        name, threshold = str(e["name"]), float(e["threshold"])  # type: ignore[arg-type]
        m_sel = f'{{metric="{name}"}}'
        about = f" ({e['description']})" if e["description"] else ""
        out.append(_alert(
            evaluator_alert_name(name),
            f"{share}{m_sel} < {_r(threshold)}\nand on({SPJM}) {judged}{m_sel} >= {MIN_EVALUATED_WINDOW}",
            EVALUATOR_FOR,
            EVALUATOR_SEVERITY,
            f"{name} passes {{{{ $value | humanizePercentage }}}} of answers of "
            f"{{{{ $labels.service }}}}/{{{{ $labels.pipeline }}}} (threshold {_r(threshold)})",
            f"The declared evaluator {name}{about} passed {{{{ $value | humanizePercentage }}}} of {n} "
            f"rate-sampled traces in the last {w}, below its threshold {_r(threshold)}. The failing traces are "
            "in the agent's /worst (their reasons under details.evaluators in /traces/{id}).",
            {"evaluator": name},
        ))
    return out


def rules(evaluators: list[dict[str, object]] | None = None) -> dict[str, object]:
    # Rules in one group run in order, so each alert sits in the group of the recording rules it
    # reads and always sees their value from the same evaluation. Only the 7d baseline lives in
    # its own slower group: 7-day rates are the most expensive rules here and change slowly.
    rec = recording_rules()
    groups: list[dict[str, object]] = [
        {"name": "ragmon-quality", "interval": "1m",
         "rules": [*rec["quality"], *quality_alerts(), *contradiction_rules(WINDOW)]},
        *([{"name": "ragmon-quality-long", "interval": LONG_INTERVAL, "rules": long_window_rules()}]
          if LONG_WINDOWS else []),
        {"name": "ragmon-baseline", "interval": "5m", "rules": rec["baseline"]},
        {"name": "ragmon-latency", "interval": "30s", "rules": [*rec["latency"], *latency_alerts()]},
        {"name": "ragmon-health", "interval": "1m", "rules": [*rec["health"], *health_alerts()]},
        {"name": "ragmon-offline-eval", "interval": "1m", "rules": offline_eval_alerts()},
    ]
    if evaluators:
        groups.append({"name": "ragmon-evaluators", "interval": "1m", "rules": evaluator_rules(evaluators)})
    return {"groups": groups}


class _Dumper(yaml.SafeDumper):
    pass


def _str(dumper: yaml.SafeDumper, data: str) -> yaml.ScalarNode:
    style = "|" if "\n" in data else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)


_Dumper.add_representer(str, _str)

HEADER = (
    "# GENERATED by deploy/prometheus/generate_rules.py — edit the constants there and rerun it.\n"
    "# Recording rules (windowed score means, latency quantiles) and alerts for ragmon.\n"
    "# Runbooks: docs/alerts.md. Metrics: docs/metrics.md. Unit tests: deploy/prometheus/tests/.\n"
)


def render(evaluators: list[dict[str, object]] | None = None) -> str:
    return HEADER + yaml.dump(rules(evaluators), Dumper=_Dumper, sort_keys=False, width=100_000, allow_unicode=True)


def render_prometheus_rule() -> str:
    resource = {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        # release: kube-prometheus-stack's Prometheus selects rules by its Helm release name (its
        # ruleSelector defaults to release: <release name>); change it to yours (docs/deploying.md).
        "metadata": {"name": "ragmon", "labels": {"app.kubernetes.io/name": "ragmon", "role": "alert-rules",
                                                  "release": "kube-prometheus-stack"}},
        "spec": rules(),
    }
    return HEADER + yaml.dump(resource, Dumper=_Dumper, sort_keys=False, width=100_000, allow_unicode=True)


def set_budget(pipelines: int, budget_per_30d: float) -> None:
    """Size the drop tests' z for ``pipelines`` pipelines sharing ``budget_per_30d`` false pages a month."""
    g = globals()
    g["PIPELINES"], g["FLEET_BUDGET_PER_30D"] = pipelines, budget_per_30d
    g["DROP_ALPHA"] = _load_quality_table().alert_alpha(pipelines, budget_per_30d)
    g["DROP_Z"] = round(NormalDist().inv_cdf(1 - g["DROP_ALPHA"]), 2)


def parse_floors(items: list[str], parser: argparse.ArgumentParser) -> dict[str, float]:
    names = {m.name for m in quality_metrics()}
    out: dict[str, float] = {}
    for item in items:
        name, _, value = item.partition("=")
        try:
            floor = float(value)
        except ValueError:
            floor = -1.0
        if name not in names or not 0.0 < floor < 1.0:
            parser.error(f"--floor {item!r}: expected METRIC=VALUE with METRIC one of {', '.join(sorted(names))} "
                         "and VALUE in (0, 1)")
        out[name] = floor
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if a generated file is out of date")
    drill = parser.add_argument_group("drill", "short windows for a demo/incident drill, written to --output only")
    drill.add_argument("--output", type=Path, help="write only the rules file, here (e.g. a drill variant)")
    drill.add_argument("--window", help=f"quality window instead of {WINDOW}, e.g. 5m")
    drill.add_argument("--baseline", help=f"quality baseline instead of {BASELINE}, e.g. 1h")
    drill.add_argument("--quality-for", help=f"for: of the quality alerts instead of {QUALITY_FOR}, e.g. 2m")
    drill.add_argument("--long-windows", help=f"comma list instead of {','.join(LONG_WINDOWS)} ('' = none)")
    parser.add_argument("--evaluators", type=Path, metavar="FILE.yaml",
                        help="add a group with an alert per declared evaluator (docs/evaluators.md); needs --output")
    fleet = parser.add_argument_group("fleet", "your own rules file (--output): the false-page budget and floors")
    fleet.add_argument("--pipelines", type=int, default=None, metavar="N",
                       help="pipelines behind one Alertmanager that share the false-page budget (default 1)")
    fleet.add_argument("--fleet-budget", type=float, default=None, metavar="PAGES",
                       help=f"false pages per 30 days allowed for all of them (default {FLEET_BUDGET_PER_30D:g})")
    fleet.add_argument("--floor", action="append", default=[], metavar="METRIC=VALUE",
                       help="an absolute floor of a metric's 1h mean (Ragmon<Metric>BelowFloor); repeatable; "
                            "none by default")
    args = parser.parse_args(argv)
    custom = (args.evaluators, args.pipelines, args.fleet_budget, args.long_windows)
    if (any(v is not None for v in custom) or args.floor) and args.output is None:
        parser.error("--evaluators, --pipelines, --fleet-budget, --floor and --long-windows write your own rules "
                     "file: give it with --output")
    if args.output is not None:
        g = globals()
        for name, value in (("WINDOW", args.window), ("BASELINE", args.baseline), ("QUALITY_FOR", args.quality_for),
                            ("FLOOR_FOR", args.quality_for)):
            if value:
                g[name] = value
        if args.long_windows is not None:
            g["LONG_WINDOWS"] = tuple(w.strip() for w in args.long_windows.split(",") if w.strip())
        if args.pipelines is not None or args.fleet_budget is not None:
            set_budget(args.pipelines or PIPELINES,
                       FLEET_BUDGET_PER_30D if args.fleet_budget is None else args.fleet_budget)
        g["FLOORS"] = {**FLOORS, **parse_floors(args.floor, parser)}
        evaluators = load_evaluators(args.evaluators) if args.evaluators is not None else None
        args.output.write_text(render(evaluators), encoding="utf-8")
        print(f"wrote {args.output}")
        return 0
    outputs = {OUTPUT: render(), PROMETHEUS_RULE: render_prometheus_rule()}
    stale = [p for p, text in outputs.items() if not p.exists() or p.read_text(encoding="utf-8") != text]
    if args.check:
        for path in stale:
            print(f"{path} is out of date: run {Path(__file__).name}", file=sys.stderr)
        return 1 if stale else 0
    for path, text in outputs.items():
        path.write_text(text, encoding="utf-8")
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
