"""End to end: a faithfulness drop travels agent -> Prometheus -> Alertmanager -> webhook, and
its recovery resolves the alert.

Real parts: the agent with its offline local judge, spans from the OpenTelemetry SDK over
OTLP/HTTP, Prometheus and Alertmanager from the Debian packages, an aiohttp webhook.

Time is the one thing scaled down. A 7-day baseline and a 1-hour window cannot happen in a
test, so the rules Prometheus loads are generated from the real ``ragmon-rules.yml`` by
substitution (``stack.shrink_rules``): range windows 1h->20s, 7d->3m, 5m/10m/15m->20s, a day of
the same-hour baseline -> 20s (the baseline is then the seven 20-second windows before the current
one), every ``for:`` 3s, groups evaluated every second, and the minimum-count guards 30/200/20 -> 5/10/3.
The expressions themselves — the recording rules, the drop comparison against the baseline,
the count guards, labels and annotations — are the real ones. The Alertmanager config is the
example in ``deploy/alertmanager/alertmanager.yml`` (routes and inhibition kept) with its
receivers pointed at the test webhook and its timers shortened.
"""

from __future__ import annotations

import asyncio
import contextlib
import statistics
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp import web
from prometheus_client import CollectorRegistry

from ragmon import semconv as sc
from ragmon.agent import Agent
from ragmon.config import load_agent_config
from tests.helpers.traffic import OtlpTraffic, Request

from .conftest import REPO, require_binary
from .stack import Alertmanager, Prometheus, scrape_config, shrink_rules, wait_for

FAITH = sc.METRIC_FAITHFULNESS

pytestmark = [pytest.mark.prometheus, pytest.mark.timeout(420)]

SERVICE, PIPELINE = "shop", "qa"
WINDOWS = {"1h": "20s", "7d": "3m", "5m": "20s", "10m": "20s", "15m": "20s"}
MINIMUMS = {30: 5, 200: 10, 20: 3}
ALERT = "RagmonFaithfulnessDrop"

FACTS = [
    (
        "How much does the Pro plan cost per month?",
        "The Pro plan costs {n} dollars per month and includes {m} seats for the team.",
        "The Pro plan costs {n} dollars per month and includes {m} seats.",
        "The Pro plan costs {bad_n} dollars per week and includes only {bad_m} seats.",
    ),
    (
        "Who founded Acme and in which year?",
        "Acme was founded by Maria Lopez in {year} in Lisbon, Portugal.",
        "Acme was founded by Maria Lopez in {year} in Lisbon.",
        "Acme was founded by John Smith in {bad_year} in Berlin.",
    ),
    (
        "How many days do customers have to request a refund?",
        "Customers can request a refund within {n} days of purchase for annual plans.",
        "Customers can request a refund within {n} days of purchase.",
        "Customers can request a refund within {bad_n} hours, and only Gold members.",
    ),
]


def request(i: int, faithful: bool) -> Request:
    """A RAG request; the unfaithful answer contradicts its context with wrong numbers and names."""
    question, context, good, bad = FACTS[i % len(FACTS)]
    values = {
        "n": 20 + i % 50,
        "m": 3 + i % 20,
        "year": 1950 + i % 60,
        "bad_n": 500 + i % 50,
        "bad_m": 90 + i % 9,
        "bad_year": 2090 + i % 9,
    }
    return Request(
        question=question,
        contexts=[context.format(**values), "Support is open on weekdays."],
        answer=(good if faithful else bad).format(**values),
        pipeline=PIPELINE,
    )


class Webhook:
    """Alertmanager's webhook receiver: records every notification."""

    def __init__(self) -> None:
        self.notifications: list[dict[str, Any]] = []
        self.port = 0
        self._runner: web.AppRunner | None = None

    async def _receive(self, request: web.Request) -> web.Response:
        self.notifications.append(await request.json())
        return web.Response(text="ok")

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post("/{tail:.*}", self._receive)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    def alerts(self, alertname: str, status: str) -> list[dict[str, Any]]:
        return [
            a
            for n in self.notifications
            for a in n["alerts"]
            if a["labels"].get("alertname") == alertname and a["status"] == status
        ]


def alertmanager_config(webhook_port: int) -> dict[str, Any]:
    config = yaml.safe_load((REPO / "deploy" / "alertmanager" / "alertmanager.yml").read_text(encoding="utf-8"))
    url = f"http://127.0.0.1:{webhook_port}/ragmon"
    for receiver in config["receivers"]:
        for hook in receiver["webhook_configs"]:
            hook["url"] = url

    def shorten(route: dict[str, Any]) -> None:
        for key, value in (("group_wait", "1s"), ("group_interval", "1s"), ("repeat_interval", "1h")):
            if key in route:
                route[key] = value
        for child in route.get("routes", []):
            shorten(child)

    shorten(config["route"])
    return config


class Traffic:
    """Sends one request every ``pause_s`` in the background; ``faithful`` can flip any time."""

    def __init__(self, endpoint: str) -> None:
        self.otlp = OtlpTraffic(endpoint, service=SERVICE)
        self.faithful = True
        self.sent = 0

    async def run(self, pause_s: float = 0.2) -> None:
        while True:
            await asyncio.to_thread(self.otlp.send, request(self.sent, self.faithful))
            self.sent += 1
            await asyncio.sleep(pause_s)


@contextlib.asynccontextmanager
async def background(coro: Any) -> AsyncIterator[None]:
    task = asyncio.create_task(coro)
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def wait_async(check: Any, timeout_s: float, what: str) -> Any:
    return await asyncio.to_thread(wait_for, check, timeout_s, what, 0.5)


async def test_faithfulness_drop_pages_and_resolves(tmp_path: Path) -> None:
    require_binary("prometheus")
    require_binary("prometheus-alertmanager")
    rules = tmp_path / "rules.yml"
    shrunk = yaml.safe_load(shrink_rules(WINDOWS, for_="3s", interval="1s", minimums=MINIMUMS, day="20s"))
    # the 6h, 12h and 24h windows sum hourly counts an hour apart (offset 1h, 2h, ...), which a
    # test of minutes cannot shrink: they are unit-tested in deploy/prometheus/tests/windows_test.yml
    shrunk["groups"] = [g for g in shrunk["groups"] if g["name"] != "ragmon-quality-long"]
    rules.write_text(yaml.safe_dump(shrunk, sort_keys=False, width=100_000))

    webhook = Webhook()
    await webhook.start()
    config = load_agent_config(
        {"receiver_port": 0, "metrics_port": 0, "sample_rate": 1.0, "trace_timeout_s": 1.0, "judge": "local"},
        environ={},
    )
    agent = Agent(config, registry=CollectorRegistry())
    scores: dict[bool, list[float]] = {True: [], False: []}
    am = Alertmanager(tmp_path)
    prom = Prometheus(tmp_path)
    try:
        async with agent:
            am.start(alertmanager_config(webhook.port))
            prom.start(scrape_config(agent.metrics_port, alertmanager_port=am.port, rule_files=[str(rules)]))
            await wait_async(prom.targets_up, 30, "the first scrape of the agent")
            traffic = Traffic(f"http://127.0.0.1:{agent.receiver_port}/v1/traces")
            agent.add_listener(
                lambda trace, s, verdict: (
                    scores[traffic.faithful].append(s.get(FAITH)) if s.get(FAITH) is not None else None
                )
            )
            async with background(traffic.run()):
                # 1. healthy traffic builds the baseline; nothing pages
                await wait_async(lambda: len(scores[True]) >= 60, 90, "60 healthy traces scored")
                await asyncio.sleep(20)  # a full quality window of healthy traffic
                assert not webhook.alerts(ALERT, "firing"), webhook.notifications

                # 2. answers contradict their contexts: the judge must see it before we rely on it
                traffic.faithful = False
                await wait_async(lambda: len(scores[False]) >= 15, 60, "15 contradicting traces scored")
                healthy_mean, bad_mean = statistics.mean(scores[True]), statistics.mean(scores[False])
                assert bad_mean < healthy_mean - 0.2, f"local judge: faithful {healthy_mean:.2f} vs bad {bad_mean:.2f}"

                firing = await wait_async(lambda: webhook.alerts(ALERT, "firing"), 90, f"{ALERT} at the webhook")
                alert = firing[0]
                assert {k: alert["labels"][k] for k in ("service", "pipeline", "judge", "metric")} == {
                    "service": SERVICE,
                    "pipeline": PIPELINE,
                    "judge": "local",
                    "metric": "faithfulness",
                }
                assert alert["labels"]["severity"] in ("warning", "critical")
                assert alert["annotations"]["runbook_url"].endswith("docs/alerts.md#ragmonfaithfulnessdrop")
                assert "faithfulness" in alert["annotations"]["description"]
                assert "same hour of the past 7 days" in alert["annotations"]["description"]
                assert "z = " in alert["annotations"]["description"]
                # the contradictions are a generation problem: retrieval is not blamed
                assert not webhook.alerts("RagmonContextPrecisionDrop", "firing")

                # 3. healthy again: the alert resolves
                traffic.faithful = True
                await wait_async(lambda: webhook.alerts(ALERT, "resolved"), 120, f"{ALERT} resolved at the webhook")
    finally:
        prom.stop()
        am.stop()
        await webhook.stop()
        await asyncio.to_thread(traffic_close, locals().get("traffic"))


def traffic_close(traffic: Traffic | None) -> None:
    if traffic is not None:
        traffic.otlp.close()
