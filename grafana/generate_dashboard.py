#!/usr/bin/env python3
"""Generate the Grafana dashboard ``grafana/dashboards/ragmon.json`` from code.

    python grafana/generate_dashboard.py           # rewrite the JSON
    python grafana/generate_dashboard.py --check   # exit 1 when the JSON is out of date (CI)

Panels read the recording rules of ``deploy/prometheus/ragmon-rules.yml`` where one exists, so
the dashboard and the alerts share one definition; alert thresholds are drawn as lines and are
imported from the rules generator, so a threshold changed there moves here too.
Template variables: ``datasource``, ``service``, ``pipeline`` and ``token_price`` (price of 1000
judge tokens in your currency, for the cost panel). Score panels have exemplars on: a dot per
sampled trace, linked by ``trace_id`` to your tracing backend.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
OUTPUT = HERE / "dashboards" / "ragmon.json"
UID = "ragmon-quality"
DS = {"type": "prometheus", "uid": "${datasource}"}
SP = 'service=~"$service", pipeline=~"$pipeline"'
RAG_ONLY = 'pipeline!="_not_rag"'  # the agent's label for traces that are not RAG requests (skipped not_rag)


def _load_rules_generator() -> Any:
    path = HERE.parent / "deploy" / "prometheus" / "generate_rules.py"
    spec = importlib.util.spec_from_file_location("ragmon_generate_rules", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


R = _load_rules_generator()
W, B, LW = R.WINDOW, R.BASELINE, R.LATENCY_WINDOW
# Quality panels read the rate stream only, like the rules: priority-sampled traces (errors, negative
# feedback, slow or weak retrievals) are chosen for being bad and have their own panels.
RATE = R.RATE_STREAM
PRIORITY = R.PRIORITY_STREAM


class Layout:
    """Places panels left to right on Grafana's 24-column grid, wrapping rows."""

    def __init__(self) -> None:
        self.x = self.y = 0
        self.row_h = 0
        self.next_id = 1
        self.panels: list[dict[str, Any]] = []

    def row(self, title: str) -> None:
        self.newline()
        self.panels.append(
            {
                "type": "row",
                "title": title,
                "id": self._id(),
                "collapsed": False,
                "gridPos": {"h": 1, "w": 24, "x": 0, "y": self.y},
                "panels": [],
            }
        )
        self.y += 1

    def newline(self) -> None:
        if self.x:
            self.y += self.row_h
            self.x = self.row_h = 0

    def add(self, panel: dict[str, Any], w: int, h: int) -> None:
        if self.x + w > 24:
            self.newline()
        panel["id"] = self._id()
        panel["gridPos"] = {"h": h, "w": w, "x": self.x, "y": self.y}
        self.panels.append(panel)
        self.x += w
        self.row_h = max(self.row_h, h)

    def _id(self) -> int:
        self.next_id += 1
        return self.next_id - 1


def target(
    expr: str, legend: str, ref: str, *, exemplar: bool = False, fmt: str | None = None, instant: bool = False
) -> dict[str, Any]:
    t: dict[str, Any] = {
        "datasource": DS,
        "expr": expr,
        "legendFormat": legend,
        "refId": ref,
        "exemplar": exemplar,
        "range": not instant,
        "instant": instant,
    }
    if fmt:
        t["format"] = fmt
    return t


def thresholds(*steps: tuple[float | None, str]) -> dict[str, Any]:
    return {"mode": "absolute", "steps": [{"value": v, "color": c} for v, c in steps]}


def timeseries(
    title: str,
    targets: list[dict[str, Any]],
    *,
    unit: str,
    desc: str = "",
    steps: tuple[tuple[float | None, str], ...] = ((None, "transparent"),),
    minmax: tuple[float | None, float | None] = (None, None),
) -> dict[str, Any]:
    """A time series panel; non-base threshold steps are drawn as dashed lines (alert bounds)."""
    defaults: dict[str, Any] = {
        "unit": unit,
        "thresholds": thresholds(*steps),
        "custom": {
            "drawStyle": "line",
            "lineWidth": 2,
            "fillOpacity": 0,
            "showPoints": "never",
            "spanNulls": True,
            "thresholdsStyle": {"mode": "dashed" if len(steps) > 1 else "off"},
        },
        "color": {"mode": "palette-classic"},
    }
    if minmax[0] is not None:
        defaults["min"] = minmax[0]
    if minmax[1] is not None:
        defaults["max"] = minmax[1]
    return {
        "type": "timeseries",
        "title": title,
        "description": desc,
        "datasource": DS,
        "targets": targets,
        "fieldConfig": {"defaults": defaults, "overrides": []},
        "options": {
            "legend": {"displayMode": "table", "placement": "bottom", "calcs": ["lastNotNull", "mean"]},
            "tooltip": {"mode": "multi", "sort": "desc"},
        },
    }


def stat(
    title: str,
    targets: list[dict[str, Any]],
    *,
    unit: str,
    desc: str = "",
    color: str = "blue",
    steps: tuple[tuple[float | None, str], ...] | None = None,
) -> dict[str, Any]:
    return {
        "type": "stat",
        "title": title,
        "description": desc,
        "datasource": DS,
        "targets": targets,
        "fieldConfig": {
            "defaults": {
                "unit": unit,
                "color": {"mode": "thresholds"},
                "thresholds": thresholds(*(steps or ((None, color),))),
            },
            "overrides": [],
        },
        "options": {
            "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
            "colorMode": "background",
            "graphMode": "area",
            "textMode": "value_and_name",
            "justifyMode": "center",
            "orientation": "auto",
        },
    }


def heatmap(title: str, expr: str, desc: str) -> dict[str, Any]:
    return {
        "type": "heatmap",
        "title": title,
        "description": desc,
        "datasource": DS,
        "targets": [target(expr, "{{le}}", "A", exemplar=True, fmt="heatmap")],
        "fieldConfig": {"defaults": {"custom": {"scaleDistribution": {"type": "linear"}}}, "overrides": []},
        "options": {
            "calculate": False,
            "yAxis": {"axisPlacement": "left", "unit": "percentunit", "decimals": 2},
            "cellGap": 1,
            "color": {
                "mode": "scheme",
                "scheme": "Oranges",
                "fill": "dark-orange",
                "scale": "exponential",
                "exponent": 0.5,
                "steps": 64,
            },
            "rowsFrame": {"layout": "auto"},
            "exemplars": {"color": "rgba(255,0,255,0.7)"},
            "tooltip": {"mode": "single", "yHistogram": True},
            "legend": {"show": True},
        },
    }


def quality_rows(lay: Layout) -> None:
    lay.row("Quality: score means (1h window vs 7d baseline, rate-sampled traces)")
    for m in R.QUALITY_METRICS:
        sel = f'{SP}, metric="{m.name}", {RATE}'
        lay.add(
            timeseries(
                f"{m.title.capitalize()} mean",
                [
                    target(
                        f"ragmon:score_ratio:mean{W}{{{sel}}}", "{{service}}/{{pipeline}} " + W + " ({{judge}})", "A"
                    ),
                    target(f"ragmon:score_ratio:mean{B}{{{sel}}}", "{{service}}/{{pipeline}} " + B + " baseline", "B"),
                    # short-window mean straight from the histogram, with trace-id exemplars
                    target(
                        f"sum by (service, pipeline, judge) (rate(ragmon_score_ratio_sum{{{sel}}}[$__rate_interval]))\n"
                        "/ sum by (service, pipeline, judge) "
                        f"(rate(ragmon_score_ratio_count{{{sel}}}[$__rate_interval]))",
                        "{{service}}/{{pipeline}} now",
                        "C",
                        exemplar=True,
                    ),
                ],
                unit="percentunit",
                minmax=(0, 1),
                steps=((None, "red"), (m.floor, "green")),
                desc=f"Mean {m.title} of rate-sampled judged traces (the unbiased stream; priority-sampled traces "
                f"have their own panels). Dashed line: the absolute floor alert "
                f"(Ragmon{m.alert}BelowFloor). Dots are exemplars: click one to open its trace.",
            ),
            8,
            8,
        )
    for m in R.QUALITY_METRICS:
        lay.add(
            timeseries(
                f"{m.title.capitalize()}: drop below baseline",
                [
                    target(
                        f'ragmon:score_ratio:mean{B}{{{SP}, metric="{m.name}"}}\n'
                        f'- ragmon:score_ratio:mean{W}{{{SP}, metric="{m.name}"}}',
                        "{{service}}/{{pipeline}} ({{judge}})",
                        "A",
                    )
                ],
                unit="none",
                steps=((None, "green"), (R.DROP_WARNING, "orange"), (R.DROP_CRITICAL, "red")),
                desc=f"{B} mean minus {W} mean. Dashed lines: Ragmon{m.alert}Drop warning and critical "
                f"(also needs the drop to be significant, z > {R.DROP_Z:g}, and {R.MIN_SCORED_WINDOW} scored "
                f"traces in {W}).",
            ),
            8,
            6,
        )
    lay.add(
        timeseries(
            f"Drop significance (Welch z, {W} vs {B})",
            [target(f"ragmon:score_ratio:drop_z{W}{{{SP}}}", "{{service}}/{{pipeline}} {{metric}} ({{judge}})", "A")],
            unit="none",
            steps=((None, "transparent"), (R.DROP_Z, "orange")),
            desc=f"How many standard errors the {W} mean lies below the {B} mean, from the scores' variance and "
            f"counts (Welch). Noise stays below the dashed line ({R.DROP_Z:g}, two-sided alpha {R.DROP_ALPHA:g}); "
            "a drop alert needs both this and the drop size.",
        ),
        24,
        6,
    )
    lay.row("Quality: score distributions")
    for m in R.QUALITY_METRICS:
        lay.add(
            heatmap(
                f"{m.title.capitalize()} distribution",
                f'sum by (le) (increase(ragmon_score_ratio_bucket{{{SP}, metric="{m.name}", {RATE}}}'
                "[$__rate_interval]))",
                f"Histogram of rate-sampled {m.title} scores over time (buckets of 0.05). A second mode at the "
                "bottom is a population of bad answers; exemplars link to example traces.",
            ),
            8,
            8,
        )


VERDICT_GRID = (
    ("ok", "Retrieval OK · Generation OK", "green"),
    ("generation_failure", "Retrieval OK · Generation failed", "orange"),
    ("retrieval_failure", "Retrieval failed · Generation OK", "orange"),
    ("both", "Retrieval failed · Generation failed", "red"),
)


def diagnosis_rows(lay: Layout) -> None:
    lay.row("Diagnosis: retrieval vs generation")
    for i, (verdict, title, color) in enumerate(VERDICT_GRID):
        lay.add(
            stat(
                title,
                [
                    target(
                        f'sum(increase(ragmon_diagnosis_total{{{SP}, verdict="{verdict}"}}[$__range]))',
                        verdict,
                        "A",
                        instant=True,
                    )
                ],
                unit="short",
                color=color,
                desc=f"Scored traces with verdict {verdict} over the dashboard's time range (2x2 diagnosis).",
            ),
            6,
            4,
        )
        if i % 2 == 1:
            lay.newline()
    lay.y -= 8  # the verdict rate panel sits to the right of the 2x2 grid
    lay.x, lay.row_h = 12, 8
    lay.add(
        timeseries(
            "Verdicts per second",
            [target(f"sum by (verdict) (rate(ragmon_diagnosis_total{{{SP}}}[$__rate_interval]))", "{{verdict}}", "A")],
            unit="reqps",
            desc="Rate of each diagnosis verdict; the first thing to read when a quality alert fires.",
        ),
        12,
        8,
    )
    lay.newline()
    lay.add(
        timeseries(
            "User feedback: negative share",
            [
                target(
                    "sum by (service, pipeline) "
                    f'(rate(ragmon_feedback_total{{{SP}, feedback="negative"}}[$__rate_interval]))'
                    f" / sum by (service, pipeline) (rate(ragmon_feedback_total{{{SP}}}[$__rate_interval]))",
                    "{{service}}/{{pipeline}}",
                    "A",
                )
            ],
            unit="percentunit",
            minmax=(0, 1),
            desc="Share of user feedback events (ragmon.feedback / record_feedback) that are negative: the "
            "users' own verdict, to read next to the judge's scores. Late feedback is counted too.",
        ),
        12,
        8,
    )
    lay.add(
        timeseries(
            "User feedback events per second",
            [target(f"sum by (feedback) (rate(ragmon_feedback_total{{{SP}}}[$__rate_interval]))", "{{feedback}}", "A")],
            unit="reqps",
            desc="How much feedback arrives; a share computed from a handful of events is noise.",
        ),
        12,
        8,
    )


def priority_rows(lay: Layout) -> None:
    """Priority-sampled traces: the ones to explain, kept out of every mean and alert above."""
    lay.row("Priority-sampled traces (errors, negative feedback, slow or weak retrievals)")
    lay.add(
        timeseries(
            "Priority-sampled traces: mean score",
            [
                target(
                    f"sum by (metric) (rate(ragmon_score_ratio_sum{{{SP}, {PRIORITY}}}[$__rate_interval]))\n"
                    f"/ sum by (metric) (rate(ragmon_score_ratio_count{{{SP}, {PRIORITY}}}[$__rate_interval]))",
                    "{{metric}}",
                    "A",
                    exemplar=True,
                )
            ],
            unit="percentunit",
            minmax=(0, 1),
            desc="Mean scores of the traces judged because a priority rule picked them, not the rate. They are "
            "chosen for being bad, so they never enter the quality means or drop alerts; open them in /worst or "
            "through the exemplars.",
        ),
        12,
        7,
    )
    lay.add(
        timeseries(
            "Priority-sampled traces per second by rule",
            [
                target(
                    f'sum by (reason) (rate(ragmon_traces_sampled_total{{{SP}, reason=~"priority_.*"}}'
                    "[$__rate_interval]))",
                    "{{reason}}",
                    "A",
                )
            ],
            unit="reqps",
            desc="How many traces each priority rule sends to the judge (on top of the rate sample).",
        ),
        12,
        7,
    )


def sampling_rows(lay: Layout) -> None:
    """Power-based sampling: the rate each pipeline is judged at and the drop that sample can detect."""
    lay.row("Sampling: judging rate and detectable drop")
    lay.add(
        timeseries(
            "Judging rate per pipeline",
            [target(f"max by (service, pipeline) (ragmon_sample_rate_ratio{{{SP}}})", "{{service}}/{{pipeline}}",
                    "A")],
            unit="percentunit",
            desc="Share of a pipeline's traces sent to the judge by the rate (fixed, or chosen by power-based "
            "sampling with --detect-drop: the least rate that detects the target drop within the window).",
        ),
        12,
        7,
    )
    lay.add(
        timeseries(
            "Detectable drop per pipeline",
            [
                target(f"avg by (service, pipeline) (ragmon_detectable_drop_ratio{{{SP}}})",
                       "{{service}}/{{pipeline}}", "A"),
                target("max(ragmon_detect_target_drop_ratio) > 0", "target (--detect-drop)", "B"),
            ],
            unit="none",
            steps=((None, "transparent"), (R.DROP_WARNING, "orange")),
            desc="The smallest drop in a mean score that the pipeline's rate sample detects within the window "
            "(alpha and power as configured). Above the target: RagmonDetectionTargetMissed. Dashed line: the "
            f"warning drop size ({R.DROP_WARNING:g}).",
        ),
        12,
        7,
    )


def latency_rows(lay: Layout) -> None:
    lay.row("Latency (all traffic)")
    lat_steps = ((None, "transparent"), (R.RETRIEVAL_P95_WARNING_S, "orange"), (R.RETRIEVAL_P95_CRITICAL_S, "red"))
    for stage, alert in (("retrieval", "RagmonRetrievalLatencyHigh"), ("pipeline", None)):
        targets = [
            target(f"ragmon:{stage}_latency_seconds:p95_{LW}{{{SP}}}", "P95 {{service}}/{{pipeline}}", "A"),
            target(f"ragmon:{stage}_latency_seconds:p50_{LW}{{{SP}}}", "P50 {{service}}/{{pipeline}}", "B"),
            target(
                f"max by (service, pipeline) (ragmon_{stage}_latency_p95_seconds{{{SP}}})",
                "exact P95 (per agent window) {{service}}/{{pipeline}}",
                "C",
            ),
        ]
        desc = (
            f"P95/P50 from the histogram over {LW} (all replicas), and the agents' exact sliding-window P95. "
            f"Dashed lines: the {_ms(R.RETRIEVAL_P95_WARNING_S)} target"
            + (f" ({alert} warning) and {_ms(R.RETRIEVAL_P95_CRITICAL_S)} (critical)." if alert else ".")
        )
        lay.add(
            timeseries(
                f"{stage.capitalize()} latency P95 / P50",
                targets,
                unit="s",
                steps=lat_steps if alert else lat_steps[:2],
                desc=desc,
            ),
            12,
            8,
        )
    lay.add(
        timeseries(
            "Generation latency P95",
            [
                target(
                    "histogram_quantile(0.95, sum by (service, pipeline, le) "
                    f"(rate(ragmon_generation_latency_seconds_bucket{{{SP}}}[$__rate_interval])))",
                    "{{service}}/{{pipeline}}",
                    "A",
                )
            ],
            unit="s",
            desc="LLM generation stage duration, P95.",
        ),
        12,
        7,
    )
    lay.add(
        timeseries(
            "Retrieved documents per request (P50 / P95)",
            [
                target(
                    "histogram_quantile(0.5, sum by (service, pipeline, le) "
                    f"(rate(ragmon_retrieved_documents_bucket{{{SP}}}[$__rate_interval])))",
                    "P50 {{service}}/{{pipeline}}",
                    "A",
                ),
                target(
                    "histogram_quantile(0.95, sum by (service, pipeline, le) "
                    f"(rate(ragmon_retrieved_documents_bucket{{{SP}}}[$__rate_interval])))",
                    "P95 {{service}}/{{pipeline}}",
                    "B",
                ),
            ],
            unit="short",
            desc="A change in top_k often explains latency and context-precision shifts.",
        ),
        12,
        7,
    )


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:g} ms"


def traffic_rows(lay: Layout) -> None:
    lay.row("Traffic and coverage")
    lay.add(
        timeseries(
            "Traces: received, sampled, scored",
            [
                # traces that are not RAG requests (index building, health checks) are not traffic
                target(f"sum(rate(ragmon_traces_received_total{{{SP}, {RAG_ONLY}}}[$__rate_interval]))",
                       "received", "A"),
                target(f"sum(rate(ragmon_traces_sampled_total{{{SP}}}[$__rate_interval]))", "sampled", "B"),
                target(f"sum(rate(ragmon_traces_scored_total{{{SP}}}[$__rate_interval]))", "scored", "C"),
                target(f"sum(rate(ragmon_traces_failed_total{{{SP}}}[$__rate_interval]))", "failed", "D"),
            ],
            unit="reqps",
            desc="received = scored + skipped + failed; sampled = scored + failed + skipped after sampling.",
        ),
        8,
        8,
    )
    lay.add(
        timeseries(
            "Skipped traces by reason",
            [
                target(
                    f"sum by (reason) (rate(ragmon_traces_skipped_total{{{SP}}}[$__rate_interval]))", "{{reason}}", "A"
                )
            ],
            unit="reqps",
            desc="not_sampled is by design; budget/backlog_full/no_content lower coverage.",
        ),
        8,
        8,
    )
    lay.add(
        timeseries(
            f"Judge coverage ({W})",
            [target(f"ragmon:coverage:ratio{W}{{{SP}}}", "{{service}}/{{pipeline}}", "A")],
            unit="percentunit",
            minmax=(0, 1),
            steps=((None, "red"), (R.COVERAGE_MIN, "green")),
            desc=f"Scored / sampled over {W}. Dashed line: RagmonCoverageLow ({R.COVERAGE_MIN:.0%}).",
        ),
        8,
        8,
    )
    lay.add(
        timeseries(
            "Dropped input by reason",
            [target("sum by (reason) (rate(ragmon_dropped_total[$__rate_interval]))", "{{reason}}", "A")],
            unit="cps",
            desc="Spans/requests/messages dropped before they became traces (malformed, limits).",
        ),
        12,
        7,
    )
    lay.add(
        timeseries(
            "Open traces and judge backlog",
            [
                target("sum(ragmon_open_traces)", "open traces", "A"),
                target("sum(ragmon_judge_backlog)", "judge backlog", "B"),
            ],
            unit="short",
            desc="Traces being assembled and sampled traces waiting for the judge.",
        ),
        12,
        7,
    )


def judge_rows(lay: Layout) -> None:
    lay.row("Judge: tokens, cost, errors")
    lay.add(
        timeseries(
            "Judge tokens per second",
            [
                target(
                    "sum by (judge, kind) (rate(ragmon_judge_tokens_total[$__rate_interval]))",
                    "{{judge}} {{kind}}",
                    "A",
                )
            ],
            unit="short",
            desc="Prompt and completion tokens, from the API's usage (or estimated).",
        ),
        8,
        7,
    )
    lay.add(
        stat(
            "Judge cost over the time range",
            [
                target(
                    "sum(increase(ragmon_judge_tokens_total[$__range])) / 1000 * $token_price",
                    "cost",
                    "A",
                    instant=True,
                )
            ],
            unit="currencyUSD",
            desc="Tokens used in the time range × the token_price variable (price per 1000 tokens).",
        ),
        4,
        7,
    )
    lay.add(
        timeseries(
            "Judge requests by outcome",
            [
                target(
                    "sum by (judge, outcome) (rate(ragmon_judge_requests_total[$__rate_interval]))",
                    "{{judge}} {{outcome}}",
                    "A",
                )
            ],
            unit="reqps",
            desc="ok, retry (attempt retried), and final failures by reason.",
        ),
        6,
        7,
    )
    lay.add(
        timeseries(
            "Judge error ratio",
            [
                target(
                    'sum by (judge) (rate(ragmon_judge_requests_total{outcome!~"ok|retry"}[$__rate_interval]))\n'
                    '/ sum by (judge) (rate(ragmon_judge_requests_total{outcome!="retry"}[$__rate_interval]))',
                    "{{judge}}",
                    "A",
                )
            ],
            unit="percentunit",
            steps=((None, "transparent"), (R.JUDGE_ERROR_RATIO, "red")),
            desc=f"Dashed line: RagmonJudgeErrorsHigh ({R.JUDGE_ERROR_RATIO:.0%}).",
        ),
        6,
        7,
    )
    lay.add(
        timeseries(
            "Judge duration P95 / P50",
            [
                target(
                    "histogram_quantile(0.95, sum by (judge, le) "
                    "(rate(ragmon_judge_duration_seconds_bucket[$__rate_interval])))",
                    "P95 {{judge}}",
                    "A",
                ),
                target(
                    "histogram_quantile(0.5, sum by (judge, le) "
                    "(rate(ragmon_judge_duration_seconds_bucket[$__rate_interval])))",
                    "P50 {{judge}}",
                    "B",
                ),
            ],
            unit="s",
            desc="Time to score one trace.",
        ),
        8,
        7,
    )
    lay.add(
        timeseries(
            "Judge budget remaining",
            [target("min by (window) (ragmon_judge_budget_remaining_tokens)", "{{window}}", "A")],
            unit="short",
            steps=((None, "red"), (1, "transparent")),
            desc="Tokens left in the budget windows (only when a budget is set). At 0 traces are skipped (budget).",
        ),
        8,
        7,
    )
    lay.add(
        timeseries(
            "Judge circuit breaker, cache, truncation",
            [
                target("max by (judge) (ragmon_judge_circuit_open)", "circuit open {{judge}}", "A"),
                target(
                    "sum by (judge) (rate(ragmon_judge_cache_hits_total[$__rate_interval]))",
                    "cache hits/s {{judge}}",
                    "B",
                ),
                target(
                    "sum by (judge) (rate(ragmon_judge_input_truncated_total[$__rate_interval]))",
                    "truncated/s {{judge}}",
                    "C",
                ),
            ],
            unit="short",
            desc="1 while the circuit is open; cache hits and truncated inputs per second.",
        ),
        8,
        7,
    )


def kafka_rows(lay: Layout) -> None:
    lay.row("Kafka source")
    lay.add(
        timeseries(
            "Consumer lag per topic",
            [
                target("ragmon:kafka_consumer_lag_messages:sum", "{{topic}}", "A"),
                target(
                    "max by (topic, partition) (ragmon_kafka_consumer_lag_messages)", "{{topic}}/{{partition}}", "B"
                ),
            ],
            unit="short",
            steps=((None, "transparent"), (R.KAFKA_LAG_MIN, "orange")),
            desc="Messages behind, per topic and partition. Dashed line: RagmonKafkaLagGrowing needs "
            f"> {R.KAFKA_LAG_MIN} and growing.",
        ),
        12,
        7,
    )
    lay.add(
        timeseries(
            "Messages consumed, paused time, dead letters",
            [
                target(
                    "sum by (topic) (rate(ragmon_kafka_messages_consumed_total[$__rate_interval]))",
                    "consumed/s {{topic}}",
                    "A",
                ),
                target("sum(rate(ragmon_kafka_paused_seconds_total[$__rate_interval]))", "paused (s/s)", "B"),
                target(
                    "sum by (reason) (rate(ragmon_kafka_dead_letters_total[$__rate_interval]))",
                    "dead letters/s {{reason}}",
                    "C",
                ),
            ],
            unit="short",
            desc="Throughput; paused > 0 means back-pressure from the judge backlog.",
        ),
        12,
        7,
    )


# Offline evaluation (`ragmon eval --pushgateway`): gauges pushed once per run, see
# ragmon/evaluation/pushgateway.py. Retrieval metrics are split from generation metrics by name.
EVAL_RETRIEVAL_METRICS = "(hit|recall|precision|ndcg|two_hop_recall)@.*|mrr"


def _stepped(panel: dict[str, Any]) -> dict[str, Any]:
    """A pushed gauge changes once per run: draw it as steps with a point at each value."""
    custom = panel["fieldConfig"]["defaults"]["custom"]
    custom["lineInterpolation"] = "stepAfter"
    custom["showPoints"] = "always"
    return panel


def offline_eval_rows(lay: Layout) -> None:
    """The scheduled evaluation against the golden set, beside the online panels above."""
    lay.row("Offline evaluation (golden set, ragmon eval)")
    gate = stat(
        "Offline gate",
        [target("ragmon_eval_gate_passed", "{{evalset}}", "A", instant=True)],
        unit="none",
        steps=((None, "red"), (1, "green")),
        desc="Gate verdict of the last `ragmon eval` run per golden set (RagmonOfflineEvalGateFailed).",
    )
    verdict_text = {"0": {"text": "FAILED", "color": "red"}, "1": {"text": "PASSED", "color": "green"}}
    gate["fieldConfig"]["defaults"]["mappings"] = [{"type": "value", "options": verdict_text}]
    lay.add(gate, 6, 5)
    lay.add(
        stat(
            "Offline questions evaluated",
            [target("ragmon_eval_questions", "{{evalset}}", "A", instant=True)],
            unit="short",
            desc="Golden-set rows evaluated in the last run.",
        ),
        6,
        5,
    )
    lay.add(
        stat(
            "Offline row problems",
            [target("sum by (evalset) (ragmon_eval_problems)", "{{evalset}}", "A", instant=True)],
            unit="short",
            steps=((None, "green"), (1, "orange")),
            desc="Rows of the last run that could not be evaluated (malformed, app errors/timeouts, missing "
            "responses); the breakdown by reason is in ragmon_eval_problems{reason}.",
        ),
        6,
        5,
    )
    lay.add(
        stat(
            "Time since the last offline run",
            [target("time() - ragmon_eval_last_run_timestamp_seconds", "{{evalset}}", "A", instant=True)],
            unit="s",
            steps=((None, "green"), (R.EVAL_STALE_AFTER_S, "red")),
            desc=f"RagmonOfflineEvalStale fires after {R.EVAL_STALE_AFTER_S / 3600:g} h without a run.",
        ),
        6,
        5,
    )
    for title, selector in (
        ("Offline retrieval scores", f'metric=~"{EVAL_RETRIEVAL_METRICS}"'),
        ("Offline generation scores", f'metric!~"{EVAL_RETRIEVAL_METRICS}"'),
    ):
        lay.add(
            _stepped(
                timeseries(
                    title,
                    [target(f'ragmon_eval_score_ratio{{question_type="all", {selector}}}', "{{metric}} {{evalset}}",
                            "A")],
                    unit="percentunit",
                    minmax=(0, 1),
                    desc="Mean over the golden set per run (all question types). The bootstrap 95% interval is in "
                    "ragmon_eval_score_ci95_lower_ratio / _upper_ratio.",
                )
            ),
            12,
            8,
        )
    lay.add(
        _stepped(
            timeseries(
                f"Offline score drop vs {R.EVAL_COMPARE_OFFSET} earlier",
                [
                    target(
                        f'ragmon_eval_score_ratio{{question_type="all"}} offset {R.EVAL_COMPARE_OFFSET}\n'
                        '- ragmon_eval_score_ratio{question_type="all"}',
                        "{{metric}} {{evalset}}",
                        "A",
                    )
                ],
                unit="none",
                steps=((None, "transparent"), (R.EVAL_DROP, "orange")),
                desc=f"Value {R.EVAL_COMPARE_OFFSET} earlier (the previous nightly run) minus now. Dashed line: "
                "RagmonOfflineEvalRegression (also needs the earlier value above this run's 95% interval).",
            )
        ),
        12,
        8,
    )
    lay.add(
        _stepped(
            timeseries(
                "Retrieval P95: offline vs online",
                [
                    target("ragmon_eval_retrieval_latency_p95_seconds", "offline {{evalset}}", "A"),
                    target("ragmon_eval_pipeline_latency_p95_seconds", "offline pipeline {{evalset}}", "B"),
                    target(f"ragmon:retrieval_latency_seconds:p95_{LW}{{{SP}}}", "online {{service}}/{{pipeline}}",
                           "C"),
                ],
                unit="s",
                steps=((None, "transparent"), (R.RETRIEVAL_P95_WARNING_S, "orange")),
                desc=f"P95 retrieval latency of the last golden-set run against live traffic's P95 over {LW}. "
                f"Dashed line: the {_ms(R.RETRIEVAL_P95_WARNING_S)} target.",
            )
        ),
        12,
        8,
    )
    lay.add(
        _stepped(
            timeseries(
                "Offline diagnosis verdicts",
                [target("ragmon_eval_verdicts", "{{verdict}} {{evalset}}", "A")],
                unit="short",
                desc="Questions of each run by retrieval-vs-generation verdict (the same 2x2 diagnosis as online).",
            )
        ),
        12,
        7,
    )
    lay.add(
        _stepped(
            timeseries(
                "Offline row problems by reason",
                [target("ragmon_eval_problems > 0", "{{reason}} {{evalset}}", "A")],
                unit="short",
                desc="Rows each run could not evaluate, by reason (reasons with no rows are hidden).",
            )
        ),
        12,
        7,
    )


def variables() -> list[dict[str, Any]]:
    def query_var(name: str, query: str) -> dict[str, Any]:
        return {
            "name": name,
            "label": name,
            "type": "query",
            "datasource": DS,
            "definition": query,
            "query": {"query": query, "refId": f"{name}-var"},
            "refresh": 2,
            "includeAll": True,
            "multi": True,
            "allValue": ".*",
            "current": {"selected": True, "text": ["All"], "value": ["$__all"]},
            "sort": 1,
        }

    return [
        {
            "name": "datasource",
            "label": "Prometheus",
            "type": "datasource",
            "query": "prometheus",
            "current": {"selected": True, "text": "Prometheus", "value": "prometheus"},
            "refresh": 1,
        },
        query_var("service", "label_values(ragmon_traces_received_total, service)"),
        query_var("pipeline",
                  f'label_values(ragmon_traces_received_total{{service=~"$service", {RAG_ONLY}}}, pipeline)'),
        {
            "name": "token_price",
            "label": "Price per 1000 judge tokens",
            "type": "textbox",
            "query": "0.002",
            "current": {"text": "0.002", "value": "0.002"},
        },
    ]


RELEASE_LABELS = "service, pipeline, app_version, prompt_version, model"
RELEASE_NEW = "10m"
RELEASE_ANNOTATION = (
    f'group by ({RELEASE_LABELS}) (ragmon_release_info{{service=~"$service", pipeline=~"$pipeline"}})\n'
    f"unless\ngroup by ({RELEASE_LABELS}) (ragmon_release_info offset {RELEASE_NEW})"
)


def dashboard() -> dict[str, Any]:
    lay = Layout()
    quality_rows(lay)
    diagnosis_rows(lay)
    priority_rows(lay)
    sampling_rows(lay)
    latency_rows(lay)
    traffic_rows(lay)
    judge_rows(lay)
    kafka_rows(lay)
    offline_eval_rows(lay)
    return {
        "uid": UID,
        "title": "ragmon / RAG quality",
        "tags": ["ragmon", "rag", "llm"],
        "description": "RAG quality scores, diagnosis, latency, coverage and judge cost from the ragmon agent.",
        "editable": True,
        "graphTooltip": 1,
        "schemaVersion": 39,
        "version": 1,
        "refresh": "30s",
        "time": {"from": "now-6h", "to": "now"},
        "timezone": "",
        "templating": {"list": variables()},
        "annotations": {
            "list": [
                {
                    "name": "Annotations & Alerts",
                    "builtIn": 1,
                    "type": "dashboard",
                    "enable": True,
                    "hide": True,
                    "datasource": {"type": "grafana", "uid": "-- Grafana --"},
                    "iconColor": "rgba(0, 211, 255, 1)",
                },
                {
                    "name": "ragmon alerts",
                    "enable": True,
                    "iconColor": "red",
                    "datasource": DS,
                    "expr": 'ALERTS{alertname=~"Ragmon.*", alertstate="firing"}',
                    "step": "60s",
                    "titleFormat": "{{alertname}}",
                    "textFormat": "{{severity}} {{service}}/{{pipeline}}",
                    "useValueForTime": False,
                },
                {
                    # a release (app version, prompt version, model) seen for the first time in the last
                    # RELEASE_NEW: drawn where it appeared, so a drop lines up with the release behind it
                    "name": "ragmon releases",
                    "enable": True,
                    "iconColor": "purple",
                    "datasource": DS,
                    "expr": RELEASE_ANNOTATION,
                    "step": "60s",
                    "titleFormat": "release {{service}}/{{pipeline}}",
                    "textFormat": "app {{app_version}} · prompt {{prompt_version}} · model {{model}}",
                    "tagKeys": "service,pipeline",
                    "useValueForTime": False,
                },
            ]
        },
        "links": [{"title": "Alert runbooks", "type": "link", "url": R.RUNBOOK_BASE, "targetBlank": True}],
        "panels": lay.panels,
    }


def render() -> str:
    return json.dumps(dashboard(), indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if the dashboard JSON is out of date")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        if not OUTPUT.exists() or OUTPUT.read_text(encoding="utf-8") != text:
            print(f"{OUTPUT} is out of date: run {Path(__file__).name}", file=sys.stderr)
            return 1
        return 0
    OUTPUT.parent.mkdir(parents=True, exist_ok=True)
    OUTPUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUTPUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
