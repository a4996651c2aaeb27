"""How long one /metrics scrape takes at the most series the label caps allow (issue 17, item 4).

Fills every (service, pipeline)-labelled metric of ``AgentMetrics`` for the maximum number of
pairs ``PairLimiter`` lets through (RAGMON_METRICS_MAX_LABEL_VALUES + 1), with every reason,
judge metric and verdict, plus full exact-P95 windows, then times the exposition in both formats.

    python bench/scrape_max_series.py [--max-label-values 200]
"""

from __future__ import annotations

import argparse
import time
from functools import partial

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder

from ragmon import semconv as sc
from ragmon.export.latency import SlidingQuantile
from ragmon.export.metrics import AgentMetrics

SKIPS = (sc.SKIP_NOT_SAMPLED, sc.SKIP_NO_CONTENT, sc.SKIP_NO_ANSWER, sc.SKIP_NO_QUESTION, sc.SKIP_BUDGET,
         sc.SKIP_BACKLOG_FULL, sc.SKIP_DUPLICATE, sc.SKIP_SHUTDOWN)
FAILS = (sc.FAIL_TIMEOUT, sc.FAIL_HTTP, sc.FAIL_RATE_LIMITED, sc.FAIL_INVALID_REPLY, sc.FAIL_CIRCUIT_OPEN,
         sc.FAIL_INTERNAL)
SAMPLED = (sc.SAMPLED_RATE, sc.SAMPLED_PRIORITY_ERROR, sc.SAMPLED_PRIORITY_FEEDBACK, sc.SAMPLED_PRIORITY_SLOW,
           sc.SAMPLED_PRIORITY_LOW_SCORE)
METRICS = (sc.METRIC_FAITHFULNESS, sc.METRIC_ANSWER_RELEVANCY, sc.METRIC_CONTEXT_PRECISION)


def fill(m: AgentMetrics, limit: int, window_samples: int) -> int:
    pairs = set()
    # limit services x limit pipelines: the cap lets through limit + 1 pairs
    for i in range(limit):
        for j in range(limit):
            pairs.add(m.labels_sp(f"service-{i}", f"pipeline-{j}"))
    for s, p in pairs:
        m.traces_received.labels(s, p).inc()
        m.traces_incomplete.labels(s, p, "timeout").inc()
        m.traces_duplicate.labels(s, p).inc()
        for r in SAMPLED:
            m.traces_sampled.labels(s, p, r).inc()
        for r in SKIPS:
            m.traces_skipped.labels(s, p, r).inc()
        for r in FAILS:
            m.traces_failed.labels(s, p, "local", r).inc()
        m.traces_scored.labels(s, p, "local").inc()
        for h in (m.retrieval_latency, m.generation_latency, m.pipeline_latency):
            h.labels(s, p).observe(0.2)
        m.retrieved_documents.labels(s, p).observe(5)
        for metric in METRICS:
            m.score.labels(s, p, "local", metric, "rate").observe(0.7, exemplar={"trace_id": "ab" * 16})
        for v in sc.VERDICTS:
            m.diagnosis.labels(s, p, v).inc()
        for k in (sc.FEEDBACK_NEGATIVE, sc.FEEDBACK_POSITIVE):
            m.feedback.labels(s, p, k).inc()
        for gauge in (m.retrieval_latency_p95, m.pipeline_latency_p95):
            window = SlidingQuantile(300.0, max_samples=window_samples)
            for k in range(window_samples):
                window.observe(0.1 + (k % 100) / 1000)
            gauge.labels(s, p).set_function(partial(window.quantile, 0.95))
    return len(pairs)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--max-label-values", type=int, default=200)
    parser.add_argument("--window-samples", type=int, default=1_000,
                        help="samples held per exact-P95 window (the cap is 20,000; traffic decides)")
    args = parser.parse_args()
    m = AgentMetrics(CollectorRegistry(), max_label_values=args.max_label_values)
    pairs = fill(m, args.max_label_values, args.window_samples)
    for accept, name in (("text/plain", "text"), ("application/openmetrics-text; version=1.0.0", "openmetrics")):
        encoder, _ = choose_encoder(accept)
        times = []
        for _ in range(3):
            started = time.perf_counter()
            body = encoder(m.registry)
            times.append(time.perf_counter() - started)
        lines = body.count(b"\n")
        print(f"{pairs} pairs, {name}: {lines} lines, {len(body) / 2**20:.1f} MiB, "
              f"best {min(times):.3f} s, worst {max(times):.3f} s")


if __name__ == "__main__":
    main()
