"""End to end: a running agent receives real OTLP traffic (OpenTelemetry SDK -> OTLP/HTTP), a
real Prometheus (Debian package) scrapes it and evaluates the real rules, and every PromQL
expression of the Grafana dashboard and of the rules is run through Prometheus' HTTP API.

What "returns data" means here:
- dashboard panel queries and recording rules: the instant query returns at least one series
  (a counter that exists but did not move returns a 0-valued series: that is data, the panel
  draws it). Template variables are substituted as Grafana would ($service/$pipeline with the
  values this test sends, $__rate_interval/$__range with windows covering the test).
- alert rules: an alert only has a result while it fires, so each alert expression is split
  into its operands (the parts joined by and/unless/or) and each operand is evaluated without
  its threshold comparison; every operand must return series. The full expression must also
  evaluate without error (its result may be empty: nothing is wrong in this traffic).
- a few expressions are allowed to be empty, each for a stated reason (EMPTY_OK below).

The judge is ragmon's LLM judge talking real HTTP to the OpenAI-protocol test server (the
one stand-in the house allows), so judge tokens, requests by outcome, budget and cache panels
have data; traffic is shaped to produce every diagnosis verdict (no_context too), a judge error, a budget skip,
a no_content skip, a cache hit, a truncated input and a malformed request.
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from prometheus_client import CollectorRegistry

from ragmon import semconv as sc
from ragmon.agent import Agent
from ragmon.config import load_agent_config
from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.helpers.eventually import eventually_sync
from tests.helpers.traffic import OtlpTraffic, Request

from .conftest import REPO, require_binary
from .stack import Prometheus, scrape_config, shrink_rules, wait_for

pytestmark = [pytest.mark.prometheus, pytest.mark.timeout(300)]

DASHBOARD = REPO / "grafana" / "dashboards" / "ragmon.json"
SERVICE, PIPELINE = "shop", "qa"
# judged at rate 0: its negative-feedback trace is a priority sample (the priority panels), with a release
PRIORITY_PIPELINE = "qa-priority"
GRAFANA_VARS = {
    "$__rate_interval": "2m",  # > 4 scrape intervals, like Grafana's own rule; covers the test
    "$__range": "1h",
    "$service": SERVICE,
    "$pipeline": f"{PIPELINE}|{PRIORITY_PIPELINE}",
    "$token_price": "0.002",
}
EMPTY_OK = {
    "ragmon_kafka_": "the agent under test reads OTLP/HTTP; test_kafka_panels_e2e.py checks these with Kafka",
    "ragmon:kafka_consumer_lag_messages": "recorded from the Kafka lag gauge (see above)",
    "ALERTS{": "only present while an alert is pending or firing; tests/ops/test_alert_e2e.py covers it",
    "ragmon_eval_": "pushed by `ragmon eval` via a Pushgateway; tests/evaluation/test_pushgateway_e2e.py checks them",
    "ragmon_detect_target_drop_ratio": "0 unless power-based sampling is on (--detect-drop); "
    "deploy/prometheus/tests/sampling_test.yml and tests/agent/test_sample_streams.py cover it",
    "same_hour_7d": "the same hour of the past days: no value before a day of history; "
    "deploy/prometheus/tests/failing_share_test.yml covers it over 8 days",
    "[1h] offset 1d": "the same-hour baseline's own expression (see above)",
    "pooled_share1h": "needs the same-hour baseline (see above)",
    "rise_z1h": "needs the same-hour baseline (see above)",
    "ragmon:failing_share:rise1h": "needs the same-hour baseline (see above)",
    "ragmon:contradicting_share:rise1h": "needs the same-hour baseline (see above)",
    "ragmon_judge_sensitivity_ratio": "the LLM judge under test has no measured error rates (no profile); "
    "tests/agent/test_failing_share.py covers the export, failing_share_test.yml the correction",
    "ragmon_judge_specificity_ratio": "as ragmon_judge_sensitivity_ratio",
    "ragmon:judge_youden:ratio": "from the error-rate gauges (see above)",
    "ragmon:judge_false_positive:ratio": "from the error-rate gauges (see above)",
    "ragmon_judge_score_gap_ratio": "the LLM judge under test has no measured score gap (no profile); "
    "tests/agent/test_failing_share.py covers the export, windows_test.yml the mean test that reads it",
    "ragmon:judge_score_gap:ratio": "from the score-gap gauge (see above)",
    "ragmon:failing_share:mean_rise1h": "needs the score-gap gauge and the same-hour baseline (see above)",
    "drop_z1h": "the mean score's drop test: needs the same-hour baseline (see above)",
    "drop_z_limit1h": "the mean test's skew limit: from the same-hour baseline's mean and variance (see above)",
}


# --- traffic ---------------------------------------------------------------------------------------
RELEVANT = [
    "The Pro plan costs 49 dollars per month and includes 10 seats.",
    "Refunds for the Pro plan are possible within 30 days.",
]
UNRELATED = ["Parking garages open early.", "Bicycles need oil weekly."]
QUESTION = "How much does the Pro plan cost per month?"


def verdict_requests() -> list[Request]:
    """One request per 2x2 diagnosis cell, as the OpenAI test server's deterministic judge sees
    them (claims supported by word overlap, contexts relevant when they share a question word)."""
    return [
        Request(QUESTION, RELEVANT, "The Pro plan costs 49 dollars per month.", pipeline=PIPELINE),  # ok
        Request(QUESTION, RELEVANT, "Platinum unicorns graze quietly beyond Saturn.", pipeline=PIPELINE),  # generation
        Request(QUESTION, UNRELATED, "Parking garages open early.", pipeline=PIPELINE),  # retrieval
        Request(QUESTION, UNRELATED, "Platinum unicorns graze quietly beyond Saturn.", pipeline=PIPELINE),  # both
    ]


def varied(i: int) -> Request:
    seats = 10 + i
    return Request(
        f"How many seats does plan {i} include?",
        [f"Plan {i} includes {seats} seats and costs {40 + i} dollars per month."],
        f"Plan {i} includes {seats} seats.",
        pipeline=PIPELINE,
    )


INTERVAL_S = 1  # Prometheus' scrape and rule evaluation interval in this test
SCRAPE_PACING_S = 2.5  # > 2 scrape intervals: each stage is seen as a change by rate()/increase()


async def drive_traffic(agent: Agent, fake: FakeOpenAI) -> tuple[list[str], float]:
    """Stages of traffic, each idle-waited and then left to be scraped before the next one (the
    whole run takes well under a second otherwise, between two scrapes). Returns the trace ids and
    the wall-clock time after which the agent's metrics no longer change."""
    traffic = OtlpTraffic(f"http://127.0.0.1:{agent.receiver_port}/v1/traces", service=SERVICE)
    send = lambda req: asyncio.to_thread(traffic.send, req)  # noqa: E731
    try:
        # first, while the token budget is fresh: an input longer than judge_max_input_tokens (cut)
        long_context = " ".join(["The Pro plan includes priority support and an uptime guarantee."] * 400)
        await send(Request(QUESTION, [long_context], "The Pro plan includes priority support.", pipeline=PIPELINE))
        assert await agent.wait_idle(60)
        await asyncio.sleep(SCRAPE_PACING_S)
        for req in verdict_requests():
            await send(req)
        await send(Request(QUESTION, [], "I could not find anything about that.", pipeline=PIPELINE))  # no_context
        for i in range(4):
            await send(varied(i))
        # user feedback on two requests (thumbs down, thumbs up): the feedback panels
        await send(Request(QUESTION, RELEVANT, "The Pro plan costs 49 dollars.", pipeline=PIPELINE,
                           extra={sc.RAGMON_FEEDBACK: "negative"}))
        await send(Request(QUESTION, RELEVANT, "It costs 49 dollars per month.", pipeline=PIPELINE,
                           extra={sc.RAGMON_FEEDBACK: "positive"}))
        # a priority sample (negative feedback outside the rate) carrying a release: its own traffic
        # object, so the trace-id count of PIPELINE below stays exact
        priority = OtlpTraffic(f"http://127.0.0.1:{agent.receiver_port}/v1/traces", service=SERVICE)
        await asyncio.to_thread(priority.send, Request(
            QUESTION, RELEVANT, "The Pro plan costs 49 dollars.", pipeline=PRIORITY_PIPELINE,
            extra={sc.RAGMON_FEEDBACK: "negative", sc.LLM_MODEL_NAME: "gpt-test",
                   sc.LLM_PROMPT_TEMPLATE_VERSION: "v7"}))
        await asyncio.to_thread(priority.close)
        assert await agent.wait_idle(60)
        await asyncio.sleep(SCRAPE_PACING_S)
        fake.enqueue(Reply.error(400))  # exactly one trace in flight: it fails with http_error
        await send(varied(100))
        assert await agent.wait_idle(60)
        await asyncio.sleep(SCRAPE_PACING_S)
        await send(varied(0))  # same content as before: answered from the judge's cache
        await send(Request(QUESTION, RELEVANT, "text left off", pipeline=PIPELINE, content=False))  # no_content
        async with httpx.AsyncClient() as client:  # one malformed OTLP request -> dropped{malformed_body}
            await client.post(
                f"http://127.0.0.1:{agent.receiver_port}/v1/traces",
                content=b"\x00not protobuf",
                headers={"Content-Type": "application/x-protobuf"},
            )
        assert await agent.wait_idle(60)
        await asyncio.sleep(SCRAPE_PACING_S)
        for i in range(30):  # more than the per-minute token budget: some are skipped{reason="budget"}
            await send(varied(200 + i))
        assert await agent.wait_idle(60)
        settled = time.time()
        await asyncio.sleep(SCRAPE_PACING_S)
        return list(traffic.trace_ids), settled
    finally:
        await asyncio.to_thread(traffic.close)


# --- expressions -------------------------------------------------------------------------------------
def substitute(expr: str) -> str:
    for name in sorted(GRAFANA_VARS, key=len, reverse=True):
        expr = expr.replace(name, GRAFANA_VARS[name])
    assert "$" not in expr, f"unsubstituted template variable in {expr!r}"
    return expr


def dashboard_queries(dashboard: dict[str, Any]) -> Iterator[tuple[str, str]]:
    def walk(panels: list[dict[str, Any]]) -> Iterator[tuple[str, str]]:
        for panel in panels:
            for t in panel.get("targets", []):
                yield f"panel {panel['title']!r} {t['refId']}", t["expr"]
            yield from walk(panel.get("panels", []))

    yield from walk(dashboard["panels"])
    for ann in dashboard["annotations"]["list"]:
        if "expr" in ann:
            yield f"annotation {ann['name']!r}", ann["expr"]


_SPLIT = re.compile(r"\b(and|unless|or)\b(\s+(on|ignoring)\s*\([^)]*\))?")
_THRESHOLD = re.compile(r"\s*(>=|<=|==|!=|>|<)\s*-?[0-9.]+(e-?\d+)?\s*$")


def operands(expr: str) -> list[str]:
    """Split at top-level and/unless/or and drop each operand's trailing threshold comparison."""
    parts, depth, start = [], 0, 0
    i = 0
    while i < len(expr):
        ch = expr[i]
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif depth == 0:
            match = _SPLIT.match(expr, i)
            if match and (i == 0 or not (expr[i - 1].isalnum() or expr[i - 1] in "_:")):
                parts.append(expr[start:i])
                i = start = match.end()
                continue
        i += 1
    parts.append(expr[start:])
    out = []
    for part in parts:
        previous = None
        while part != previous:  # peel "(...)" and "... > 0.05" layers until nothing changes
            previous = part
            part = _THRESHOLD.sub("", part.strip()).strip()
            if part.startswith("(") and part.endswith(")") and _balanced(part[1:-1]):
                part = part[1:-1]
        out.append(part)
    return out


def _balanced(text: str) -> bool:
    depth = 0
    for ch in text:
        depth += ch == "("
        depth -= ch == ")"
        if depth < 0:
            return False
    return depth == 0


def empty_ok(expr: str) -> str | None:
    return next((why for key, why in EMPTY_OK.items() if key in expr), None)


def test_operand_splitting() -> None:
    """The splitter the e2e test relies on, on the shapes the rules use."""
    assert operands('(\n a{m="x"}\n - on(s) b\n) > 0.05\nand on(s, p) c >= 30\nand on(s) d >= 200') == [
        'a{m="x"}\n - on(s) b',
        "c",
        "d",
    ]
    assert operands("sum by (s) (rate(x[15m])) > 0\nunless on(s)\nsum by (s) (rate(y[15m])) > 0") == [
        "sum by (s) (rate(x[15m]))",
        "sum by (s) (rate(y[15m]))",
    ]
    assert operands("x > 0\nand on(job, instance)\n(min by (job, instance) (g) <= 0)") == [
        "x",
        "min by (job, instance) (g)",
    ]
    assert operands('sum(rate(a{outcome!~"ok|or"}[1m]))\n/\nsum(b) > 0.1') == [
        'sum(rate(a{outcome!~"ok|or"}[1m]))\n/\nsum(b)'
    ]


# --- the test ------------------------------------------------------------------------------------------
async def test_every_dashboard_and_rule_expression_returns_data(tmp_path: Path) -> None:
    require_binary("prometheus")
    promtool = require_binary("promtool")
    # The real rules with every group evaluated each second (instead of 30s-5m) so recording rules
    # have values within seconds; windows and thresholds are unchanged.
    rules_path = tmp_path / "ragmon-rules.yml"
    shrunk = yaml.safe_load(shrink_rules(None, for_="1s", interval=f"{INTERVAL_S}s"))
    # the 6h, 12h and 24h windows sum hourly counts an hour apart (offset 1h, 2h, ...): no value
    # within a test of minutes; deploy/prometheus/tests/windows_test.yml unit-tests them (as test_alert_e2e)
    shrunk["groups"] = [g for g in shrunk["groups"] if g["name"] != "ragmon-quality-long"]
    rules_path.write_text(yaml.safe_dump(shrunk, sort_keys=False))
    dashboard = json.loads(DASHBOARD.read_text(encoding="utf-8"))

    async with FakeOpenAI() as fake:
        config = load_agent_config(
            {
                "receiver_port": 0,
                "metrics_port": 0,
                "sample_rate": 1.0,
                "pipeline_sample_rates": {PRIORITY_PIPELINE: 0.0},
                "trace_timeout_s": 1.0,
                "judge": "llm",
                "judge_base_url": fake.base_url,
                "judge_model": "test-judge",
                "judge_max_retries": 0,
                "judge_max_input_tokens": 1_500,
                # one trace at a time, so budget reservations are predictable: ~15 traces fit in a minute
                "judge_concurrency": 1,
                "judge_budget_tokens_per_minute": 3_000,
            },
            environ={},
        )
        agent = Agent(config, registry=CollectorRegistry())
        async with agent:
            prometheus = Prometheus(tmp_path).start(
                scrape_config(agent.metrics_port, interval=f"{INTERVAL_S}s", rule_files=[str(rules_path)]))
            try:
                # Prometheus scrapes a new target only a few seconds after start: wait for the first
                # scrape, so counters are seen moving (increase/rate) and not only at their end value.
                await asyncio.to_thread(wait_for, prometheus.targets_up, 30, "the first scrape of the agent")
                trace_ids, settled = await drive_traffic(agent, fake)
                await asyncio.to_thread(check_everything, prometheus, dashboard, agent, trace_ids, promtool, settled)
            finally:
                prometheus.stop()


def check_everything(
    prom: Prometheus, dashboard: dict[str, Any], agent: Agent, trace_ids: list[str], promtool: str, settled: float
) -> None:
    # Wait until the last traffic is scraped and every rule group has evaluated it.
    wait_for(
        lambda: prom.query('ragmon_traces_skipped_total{reason="budget"} > 0'),
        60,
        "the budget skips to be scraped (per-minute judge budget exceeded)",
    )
    scraped = eventually_sync(lambda: scraped_twice_since(prom, settled), timeout_s=60, interval_s=0.2,
                              what="two scrapes of the final metrics")
    eventually_sync(lambda: evaluated_twice_since(prom, scraped), timeout_s=60, interval_s=0.2,
                    what="two rule evaluation rounds after those scrapes")
    wait_for(lambda: prom.query("ragmon:score_ratio:mean7d"), 30, "the baseline recording rule")

    bad_rules = [r for r in prom.rule_health() if r[1] == "err"]
    assert not bad_rules, f"rules failing in Prometheus: {bad_rules}"

    problems: list[str] = []
    checked = 0
    for where, raw in dashboard_queries(dashboard):
        expr = substitute(raw)
        result = prom.query(expr)  # raises on an invalid expression
        checked += 1
        if not result and not empty_ok(expr):
            problems.append(f"{where}: no data for {expr}")

    for name, query in (
        ("service", "ragmon_traces_received_total"),
        ("pipeline", f'ragmon_traces_received_total{{service=~"{SERVICE}"}}'),
    ):
        values = httpx.get(f"{prom.url}/api/v1/label/{name}/values", params={"match[]": query}, timeout=10).json()
        assert (SERVICE if name == "service" else PIPELINE) in values["data"], f"template variable {name}: {values}"

    rules = [r for g in prom_rules(prom) for r in g["rules"]]
    for rule in rules:
        expr = rule["query"]
        prom.query(expr)  # the full expression evaluates
        checked += 1
        if rule["type"] == "recording":
            for q in (rule["name"], expr):
                if not prom.query(q) and not empty_ok(q):
                    problems.append(f"recording rule {rule['name']}: no data for {q}")
        else:
            for part in operands(expr):
                checked += 1
                if not prom.query(part) and not empty_ok(part):
                    problems.append(f"alert {rule['name']}: operand returns no data: {part}")
    assert not problems, "\n".join(problems)
    assert checked > 80

    # Values, not only presence, for the core series.
    received = prom.query(f'sum(ragmon_traces_received_total{{service="{SERVICE}", pipeline="{PIPELINE}"}})')
    assert float(received[0]["value"][1]) == len(trace_ids)
    verdicts = {
        r["metric"]["verdict"]: float(r["value"][1])
        for r in prom.query(f'sum by (verdict) (ragmon_diagnosis_total{{pipeline="{PIPELINE}"}})')
    }
    assert {"ok", "retrieval_failure", "generation_failure", "both"} <= {v for v, n in verdicts.items() if n > 0}, (
        verdicts
    )
    assert verdicts.get("no_context") == 1, verdicts  # the retrieval that returned nothing, never judged

    # Exemplars on the score histogram link buckets to the trace ids we sent.
    now = time.time()
    body = httpx.get(
        f"{prom.url}/api/v1/query_exemplars",
        params={"query": 'ragmon_score_ratio_bucket{metric="faithfulness"}', "start": now - 600, "end": now},
        timeout=10,
    ).json()
    exemplar_ids = {e["labels"].get("trace_id") for s in body["data"] for e in s["exemplars"]}
    assert exemplar_ids & set(trace_ids), f"no trace_id exemplars stored: {body}"

    # promtool's linter on a real scrape of the agent.
    text = httpx.get(f"http://127.0.0.1:{agent.metrics_port}/metrics", timeout=10).text
    lint = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True, timeout=60)
    assert lint.returncode == 0 and not lint.stdout.strip() and not lint.stderr.strip(), lint.stdout + lint.stderr


def scraped_twice_since(prom: Prometheus, settled: float) -> float:
    """When the agent's last scrape ended, once it is at least the second to start after ``settled``
    (the metrics no longer change from then on); raises, saying why, before that. Prometheus'
    own wall-clock times."""
    targets = httpx.get(f"{prom.url}/api/v1/targets", timeout=10).json()["data"]["activeTargets"]
    assert targets, "no active targets"
    ends = []
    for t in targets:
        started = _prom_time(t["lastScrape"])
        assert started > settled + INTERVAL_S, f"{t['scrapeUrl']}: last scrape {t['lastScrape']} too early"
        ends.append(started + float(t["lastScrapeDuration"]))
    return max(ends)


def evaluated_twice_since(prom: Prometheus, since: float) -> bool:
    """True once every rule group has evaluated twice after ``since`` (a recording rule may read
    another group's result); raises, saying which group lags, before that."""
    for group in prom_rules(prom):
        evaluated = _prom_time(group["lastEvaluation"])
        assert evaluated > since + float(group["interval"]), (
            f"rule group {group['name']}: last evaluation {group['lastEvaluation']} too early")
    return True


def _prom_time(rfc3339: str) -> float:
    return datetime.fromisoformat(rfc3339).timestamp()


def prom_rules(prom: Prometheus) -> list[dict[str, Any]]:
    return list(httpx.get(f"{prom.url}/api/v1/rules", timeout=10).json()["data"]["groups"])
