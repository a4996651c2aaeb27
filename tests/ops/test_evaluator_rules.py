"""``generate_rules.py --evaluators FILE``: an alert per declared evaluator, evaluated by Prometheus's
own rule engine (``promtool test rules``) over the compact ``ragmon_score_ratio_{sum,count}`` series
the agent exports; the shipped rules stay as they are without the flag."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

from .conftest import REPO

GENERATOR = REPO / "deploy" / "prometheus" / "generate_rules.py"
EVALUATORS = """\
evaluators:
  - {name: no_pii, kind: regex, pattern: '@example\\.com', pass_when: no_match, threshold: 1.0}
  - {name: concise, kind: heuristic, check: length, max_words: 80, threshold: 0.5}
"""
LABELS = 'service="shop",pipeline="faq",judge="local",sample="rate"'


def _generate(tmp: Path) -> Path:
    (tmp / "evaluators.yaml").write_text(EVALUATORS)
    out = tmp / "rules.yml"
    subprocess.run([sys.executable, str(GENERATOR), "--evaluators", str(tmp / "evaluators.yaml"), "--output",
                    str(out)], check=True, capture_output=True, text=True, timeout=60)
    return out


def _promtool_test(promtool: str, rules: Path, tmp: Path, expected_at_90m: list[dict]) -> subprocess.CompletedProcess:
    # two traces a minute; from minute 60 no_pii fails one in ten (sum grows 1.8/min), concise never
    series = [
        {"series": f'ragmon_score_ratio_count{{{LABELS},metric="no_pii"}}', "values": "0+2x120"},
        {"series": f'ragmon_score_ratio_sum{{{LABELS},metric="no_pii"}}', "values": "0+2x60 121.8+1.8x60"},
        {"series": f'ragmon_score_ratio_count{{{LABELS},metric="concise"}}', "values": "0+2x120"},
        {"series": f'ragmon_score_ratio_sum{{{LABELS},metric="concise"}}', "values": "0+2x120"},
    ]
    firing = 'ALERTS{alertstate="firing",alertname=~"RagmonEvaluator.*"}'
    test = {
        "rule_files": [str(rules)], "evaluation_interval": "1m",
        "tests": [{"interval": "1m", "input_series": series, "promql_expr_test": [
            {"expr": firing, "eval_time": "55m", "exp_samples": []},
            {"expr": firing, "eval_time": "90m", "exp_samples": expected_at_90m},
            {"expr": 'ragmon:evaluator_pass_share:ratio1h{metric="concise"}', "eval_time": "90m",
             "exp_samples": [{"labels": 'ragmon:evaluator_pass_share:ratio1h{service="shop",pipeline="faq",'
                                        'judge="local",metric="concise"}', "value": 1}]},
        ]}],
    }
    path = tmp / "evaluators_test.yml"
    path.write_text(yaml.safe_dump(test))
    return subprocess.run([promtool, "test", "rules", str(path)], capture_output=True, text=True, timeout=120,
                          check=False)


def test_a_generated_evaluator_alert_fires_in_prometheus(promtool: str, tmp_path: Path) -> None:
    rules = _generate(tmp_path)
    check = subprocess.run([promtool, "check", "rules", str(rules)], capture_output=True, text=True, timeout=60,
                           check=False)
    assert check.returncode == 0, check.stdout + check.stderr
    group = next(g for g in yaml.safe_load(rules.read_text())["groups"] if g["name"] == "ragmon-evaluators")
    assert [r["alert"] for r in group["rules"] if "alert" in r] == ["RagmonEvaluatorNoPii", "RagmonEvaluatorConcise"]
    fired = {"labels": 'ALERTS{alertname="RagmonEvaluatorNoPii",alertstate="firing",evaluator="no_pii",'
                       'service="shop",pipeline="faq",judge="local",metric="no_pii",severity="warning"}', "value": 1}
    result = _promtool_test(promtool, rules, tmp_path, [fired])
    assert result.returncode == 0, result.stdout + result.stderr
    # the check can fail: expecting silence at 90 minutes is wrong
    assert _promtool_test(promtool, rules, tmp_path, []).returncode != 0


def test_without_evaluators_the_shipped_rules_are_unchanged() -> None:
    result = subprocess.run([sys.executable, str(GENERATOR), "--check"], capture_output=True, text=True, timeout=60,
                            check=False)
    assert result.returncode == 0, result.stderr
    assert "ragmon-evaluators" not in (REPO / "deploy" / "prometheus" / "ragmon-rules.yml").read_text()
    refused = subprocess.run([sys.executable, str(GENERATOR), "--evaluators", "x.yaml"], capture_output=True,
                             text=True, timeout=60, check=False)
    assert refused.returncode == 2 and "--output" in refused.stderr


def test_the_dashboard_gets_a_panel_per_evaluator_that_reads_the_rule(promtool: str, tmp_path: Path) -> None:
    import json

    rules = _generate(tmp_path)
    out = tmp_path / "dashboard.json"
    subprocess.run([sys.executable, str(REPO / "grafana" / "generate_dashboard.py"), "--evaluators",
                    str(tmp_path / "evaluators.yaml"), "--output", str(out)], check=True, capture_output=True,
                   timeout=120)
    panels = {p["title"]: p for p in json.loads(out.read_text())["panels"]}
    assert {"no_pii: passing share", "concise: passing share"} <= set(panels)
    steps = panels["no_pii: passing share"]["fieldConfig"]["defaults"]["thresholds"]["steps"]
    assert [s["value"] for s in steps] == [None, 1.0]
    # the panel's query, with Grafana's template variables set to "all", in Prometheus's engine
    expr = panels["no_pii: passing share"]["targets"][0]["expr"].replace("$service", ".*").replace("$pipeline", ".*")
    expr = f"round({expr}, 0.001)"  # 0.9 as Prometheus's float arithmetic gives it: 0.9000000000000052
    series = [
        {"series": f'ragmon_score_ratio_count{{{LABELS},metric="no_pii"}}', "values": "0+2x120"},
        {"series": f'ragmon_score_ratio_sum{{{LABELS},metric="no_pii"}}', "values": "0+2x60 121.8+1.8x60"},
    ]
    test = {"rule_files": [str(rules)], "evaluation_interval": "1m", "tests": [{
        "interval": "1m", "input_series": series, "promql_expr_test": [{
            "expr": expr, "eval_time": "120m", "exp_samples": [{
                "labels": '{service="shop",pipeline="faq",judge="local",metric="no_pii"}', "value": 0.9}]}]}]}
    path = tmp_path / "panel_test.yml"
    path.write_text(yaml.safe_dump(test))
    result = subprocess.run([promtool, "test", "rules", str(path)], capture_output=True, text=True, timeout=120,
                            check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert (REPO / "grafana" / "dashboards" / "ragmon.json").read_text().count("passing share") == 0
