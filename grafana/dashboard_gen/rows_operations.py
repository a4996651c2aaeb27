"""Operations rows: latency (all traffic), traffic and coverage, the judge (tokens, cost, errors), the
Kafka source, and the offline evaluation pushed by `ragmon eval`."""

from __future__ import annotations

from grafana_foundation_sdk.models import dashboard as dm

from .common import LW, RAG_ONLY, SP, R, W, ms
from .panels import Layout, stat, stepped, target, timeseries


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
            f"Dashed lines: the {ms(R.RETRIEVAL_P95_WARNING_S)} target"
            + (f" ({alert} warning) and {ms(R.RETRIEVAL_P95_CRITICAL_S)} (critical)." if alert else ".")
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


def traffic_rows(lay: Layout) -> None:
    lay.row("Traffic and coverage")
    lay.add(
        timeseries(
            "Traces: received, sampled, scored",
            [
                # traces that are not RAG requests (index building, health checks) are not traffic
                target(
                    f"sum(rate(ragmon_traces_received_total{{{SP}, {RAG_ONLY}}}[$__rate_interval]))", "received", "A"
                ),
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
    verdict_text = {
        "0": dm.ValueMappingResult(text="FAILED", color="red"),
        "1": dm.ValueMappingResult(text="PASSED", color="green"),
    }
    gate = gate.mappings([dm.ValueMap(options=verdict_text)])
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
            stepped(
                timeseries(
                    title,
                    [
                        target(
                            f'ragmon_eval_score_ratio{{question_type="all", {selector}}}', "{{metric}} {{evalset}}", "A"
                        )
                    ],
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
        stepped(
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
        stepped(
            timeseries(
                "Retrieval P95: offline vs online",
                [
                    target("ragmon_eval_retrieval_latency_p95_seconds", "offline {{evalset}}", "A"),
                    target("ragmon_eval_pipeline_latency_p95_seconds", "offline pipeline {{evalset}}", "B"),
                    target(
                        f"ragmon:retrieval_latency_seconds:p95_{LW}{{{SP}}}", "online {{service}}/{{pipeline}}", "C"
                    ),
                ],
                unit="s",
                steps=((None, "transparent"), (R.RETRIEVAL_P95_WARNING_S, "orange")),
                desc=f"P95 retrieval latency of the last golden-set run against live traffic's P95 over {LW}. "
                f"Dashed line: the {ms(R.RETRIEVAL_P95_WARNING_S)} target.",
            )
        ),
        12,
        8,
    )
    lay.add(
        stepped(
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
        stepped(
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
