"""End to end: ``push_report`` -> a real Pushgateway (Debian ``prometheus-pushgateway``) -> a real
Prometheus scraping it with ``honor_labels: true`` -> the dashboard's offline-evaluation panels
and the offline-evaluation alerts, queried through Prometheus' HTTP API.

Queries are read from the generated files (``grafana/dashboards/ragmon.json``,
``deploy/prometheus/ragmon-rules.yml``), never retyped. Time is the one thing scaled down: the
"value a day ago" (``offset 1d``, the generator's ``EVAL_COMPARE_OFFSET``) becomes
``offset 20s`` in both, every group is evaluated each second and ``for:`` is 1s, as in the other
ops end-to-end tests. Every wait is bounded and polls for the state it needs.
"""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from ragmon import semconv as sc
from ragmon.evaluation.pushgateway import PushgatewayError, push_report
from tests.ops.conftest import REPO, RULES, require_binary
from tests.ops.stack import Prometheus, Pushgateway, wait_for
from tests.ops.test_rules import load_generator

pytestmark = [pytest.mark.prometheus, pytest.mark.timeout(240)]

SAMPLE = Path(__file__).with_name("data") / "sample_report.json"
DASHBOARD = REPO / "grafana" / "dashboards" / "ragmon.json"
OFFSET = "20s"
ALERTS = ("RagmonOfflineEvalGateFailed", "RagmonOfflineEvalRegression", "RagmonOfflineEvalStale")
GRAFANA_VARS = {"$service": ".*", "$pipeline": ".*", "$__rate_interval": "1m", "$__range": "1h"}


def now_iso(delta: timedelta = timedelta(0)) -> str:
    return (datetime.now(UTC) + delta).isoformat()


def good_report() -> dict[str, Any]:
    report: dict[str, Any] = json.loads(SAMPLE.read_text(encoding="utf-8"))
    report["created_at"] = now_iso()
    return report


def worse_report(good: dict[str, Any]) -> dict[str, Any]:
    """The next run: faithfulness and recall@5 well below the previous values and their intervals,
    citation_coverage not computable any more, and the gate failing."""
    report = copy.deepcopy(good)
    report["created_at"] = now_iso()
    report["metrics"]["faithfulness"] = {"mean": 0.5, "ci95": [0.4, 0.6], "n": 6}
    report["metrics"]["recall@5"] = {"mean": 0.6, "ci95": [0.5, 0.7], "n": 5}
    report["metrics"]["citation_coverage"] = {"mean": None, "ci95": None, "n": 0}
    report["gate"]["passed"] = False
    report["gate"]["rules"][0].update(status="failed", observed=0.5, delta=-0.33, message="faithfulness dropped 0.33")
    return report


def stale_report(good: dict[str, Any]) -> dict[str, Any]:
    """Another golden set whose last run was two days ago."""
    report = copy.deepcopy(good)
    report["evalset_name"] = "old-golden"
    report["created_at"] = now_iso(-timedelta(days=2))
    return report


def shorten(expr: str, offset: str) -> str:
    return expr.replace(f"offset {offset}", f"offset {OFFSET}")


def offline_panel_queries(offset: str) -> list[tuple[str, str]]:
    """(panel title, expr) of every target in the dashboard's offline-evaluation row."""
    panels = json.loads(DASHBOARD.read_text(encoding="utf-8"))["panels"]
    start = next(i for i, p in enumerate(panels) if p["type"] == "row" and p["title"].startswith("Offline evaluation"))
    out = []
    for panel in panels[start + 1 :]:
        if panel["type"] == "row":
            break
        for target in panel["targets"]:
            expr = shorten(target["expr"], offset)
            for name, value in GRAFANA_VARS.items():
                expr = expr.replace(name, value)
            out.append((panel["title"], expr))
    return out


def offline_rules(offset: str) -> dict[str, Any]:
    """The generated rules file, reduced to its offline-evaluation group, with test-sized time."""
    data = yaml.safe_load(RULES.read_text(encoding="utf-8"))
    groups = [g for g in data["groups"] if any(r.get("alert") in ALERTS for r in g["rules"])]
    assert len(groups) == 1, "the offline-evaluation alerts live in one group"
    group = groups[0]
    assert {r["alert"] for r in group["rules"]} == set(ALERTS)
    group["interval"] = "1s"
    for rule in group["rules"]:
        rule["expr"] = shorten(rule["expr"], offset)
        rule["for"] = "1s"
    return {"groups": [group]}


def labels_of(result: list[dict[str, Any]], label: str) -> set[str]:
    return {series["metric"].get(label, "") for series in result}


def test_pushed_reports_reach_the_dashboard_and_the_alerts(tmp_path: Path) -> None:
    require_binary("prometheus")
    require_binary("prometheus-pushgateway")
    offset = load_generator().EVAL_COMPARE_OFFSET
    rules = offline_rules(offset)
    rules_path = tmp_path / "rules.yml"
    rules_path.write_text(yaml.safe_dump(rules, sort_keys=False, width=100_000))
    exprs = {rule["alert"]: rule["expr"] for rule in rules["groups"][0]["rules"]}
    queries = offline_panel_queries(offset)
    assert len(queries) >= 8 and any(f"offset {OFFSET}" in q for _, q in queries)

    gateway = Pushgateway(tmp_path).start()
    prometheus: Prometheus | None = None
    try:
        prometheus = Prometheus(tmp_path).start(
            {
                "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
                "rule_files": [str(rules_path)],
                "scrape_configs": [gateway.scrape_job()],
            }
        )
        check_pushes(prometheus, gateway, queries, exprs)
    finally:
        if prometheus is not None:
            prometheus.stop()
        gateway.stop()


def check_pushes(prom: Prometheus, gateway: Pushgateway, queries: list[tuple[str, str]], exprs: dict[str, str]) -> None:
    good = good_report()
    push_report(good, gateway.url)
    push_report(stale_report(good), gateway.url)
    wait_for(prom.targets_up, 30, "the first scrape of the Pushgateway")
    questions = wait_for(lambda: prom.query(sc.M_EVAL_QUESTIONS), 30, "the pushed run in Prometheus")
    # honor_labels: the pushed job and grouping key survive the scrape
    assert labels_of(questions, "job") == {"ragmon_eval"}
    assert labels_of(questions, "evalset") == {"shop-golden", "old-golden"}
    assert {float(s["value"][1]) for s in questions} == {6.0}

    # Once the first run has been current for OFFSET ("a day"), every offline panel has data.
    wait_for(lambda: prom.query(f"ragmon_eval_score_ratio offset {OFFSET}"), 60, f"the run to be {OFFSET} old")
    empty = [f"{title}: {expr}" for title, expr in queries if "ragmon_eval_" in expr and not prom.query(expr)]
    assert not empty, "offline panels without data:\n" + "\n".join(empty)
    for _, expr in queries:
        prom.query(expr)  # the online series in the same panels are at least valid PromQL
    assert not prom.query(exprs["RagmonOfflineEvalRegression"]), "no regression before the worse run"
    assert not prom.query(exprs["RagmonOfflineEvalGateFailed"])
    stale = prom.query(exprs["RagmonOfflineEvalStale"])
    assert labels_of(stale, "evalset") == {"old-golden"}

    # The next run is worse: the regression and gate alerts return data, and fire.
    push_report(worse_report(good), gateway.url)
    regression = wait_for(
        lambda: prom.query(exprs["RagmonOfflineEvalRegression"]), 30, "the regression expression to return data"
    )
    assert labels_of(regression, "metric") == {"faithfulness", "recall@5"}
    assert labels_of(regression, "evalset") == {"shop-golden"}
    drops = {s["metric"]["metric"]: float(s["value"][1]) for s in regression}
    assert drops["recall@5"] == pytest.approx(0.2) and drops["faithfulness"] == pytest.approx(0.8333 - 0.5)
    gate = prom.query(exprs["RagmonOfflineEvalGateFailed"])
    assert labels_of(gate, "evalset") == {"shop-golden"} and float(gate[0]["value"][1]) == 1.0
    expected = {"RagmonOfflineEvalRegression", "RagmonOfflineEvalGateFailed", "RagmonOfflineEvalStale"}
    wait_for(
        lambda: labels_of(prom.query('ALERTS{alertstate="firing"}'), "alertname") == expected,
        30,
        f"{sorted(expected)} to fire",
    )
    assert not [r for r in prom.rule_health() if r[1] == "err"]

    # PUT semantics: a metric the new run could not compute is gone, not left from the last run.
    assert wait_for(
        lambda: not prom.query('ragmon_eval_score_ratio{evalset="shop-golden", metric="citation_coverage"}'),
        30,
        "the stale citation_coverage series to disappear",
    )
    gauges = httpx.get(gateway.url + "/metrics", timeout=10).text
    assert 'ragmon_eval_gate_passed{evalset="shop-golden",instance="",job="ragmon_eval"} 0' in gauges


def test_push_failures_raise_pushgateway_error(tmp_path: Path) -> None:
    require_binary("prometheus-pushgateway")
    gateway = Pushgateway(tmp_path).start()
    try:
        with pytest.raises(PushgatewayError, match="HTTP 404"):
            push_report(good_report(), gateway.url + "/not-a-gateway-path")
        with pytest.raises(PushgatewayError, match="HTTP 400"):
            # a grouping label the gateway rejects: "bad-name" is not a valid label name
            push_report(good_report(), gateway.url, grouping={"bad-name": "x"})
    finally:
        gateway.stop()
    with pytest.raises(PushgatewayError, match="refused"):
        push_report(good_report(), gateway.url, timeout_s=5)
