"""The quality row's judge calibration panel, as shipped in grafana/dashboards/ragmon.json: its query,
run by Prometheus's own engine (``promtool test rules``) over ``ragmon_judge_info`` series, says
"default judge, not fitted to this domain" (value 0, orange) when no profile is loaded and the
profile's name (value 1, green) when one is."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import yaml

from .conftest import REPO

DASHBOARD = REPO / "grafana" / "dashboards" / "ragmon.json"
NOT_FITTED = "default judge, not fitted to this domain"


def panel() -> dict:
    panels = json.loads(DASHBOARD.read_text(encoding="utf-8"))["panels"]
    [found] = [p for p in panels if p["title"] == "Judge calibration"]
    return found


def test_panel_sits_first_in_the_quality_row_and_shows_the_name() -> None:
    panels = json.loads(DASHBOARD.read_text(encoding="utf-8"))["panels"]
    titles = [p["title"] for p in panels]
    quality_row = next(i for i, p in enumerate(panels) if p["type"] == "row" and p["title"].startswith("Quality"))
    assert titles[quality_row + 1] == "Judge calibration"
    p = panel()
    assert p["type"] == "stat" and p["options"]["textMode"] == "name"
    steps = p["fieldConfig"]["defaults"]["thresholds"]["steps"]
    assert [(s["value"], s["color"]) for s in steps] == [(None, "orange"), (1, "green")]
    assert "ragmon_judge_info" in p["targets"][0]["expr"]


def _series(labels: dict[str, str]) -> str:
    return "ragmon_judge_info{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}"


def test_panel_query_in_prometheus(promtool: str, tmp_path: Path) -> None:
    target = panel()["targets"][0]
    expr, legend = target["expr"], target["legendFormat"]
    # what Grafana shows: the legend over the series' labels (a missing label renders empty)
    assert legend == "{{shown}}{{profile}} · {{judge}} judge {{version}}"
    assert "$" not in expr, "Grafana would read it as a template variable"
    default = {"judge": "local", "version": "local-4", "profile": "none"}
    fitted = {"judge": "local", "version": "local-4", "profile": "shop-faq"}
    cases = [
        # two replicas on the shipped defaults: one line, not fitted
        ([{**default, "instance": "a:9464"}, {**default, "instance": "b:9464"}],
         [({"judge": "local", "version": "local-4", "shown": NOT_FITTED}, 0)]),
        ([{**fitted, "instance": "a:9464"}], [({**fitted, "shown": "fitted profile "}, 1)]),
        # a rollout half done: both are shown
        ([{**fitted, "instance": "a:9464"}, {**default, "instance": "b:9464"}],
         [({**fitted, "shown": "fitted profile "}, 1),
          ({"judge": "local", "version": "local-4", "shown": NOT_FITTED}, 0)]),
        ([{"judge": "llm", "version": "gpt-4o-mini", "profile": "none", "instance": "a:9464"}],
         [({"judge": "llm", "version": "gpt-4o-mini", "shown": NOT_FITTED}, 0)]),
    ]
    tests = [{
        "interval": "1m",
        "input_series": [{"series": _series(s), "values": "1x10"} for s in series],
        "promql_expr_test": [{"expr": expr, "eval_time": "5m", "exp_samples": [
            {"labels": "{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}", "value": value}
            for labels, value in expected]}],
    } for series, expected in cases]
    path = tmp_path / "calibration_panel_test.yml"
    path.write_text(yaml.safe_dump({"rule_files": [], "evaluation_interval": "1m", "tests": tests}))
    result = subprocess.run([promtool, "test", "rules", str(path)], capture_output=True, text=True, timeout=60,
                            check=False)
    assert result.returncode == 0, result.stdout + result.stderr

    # and a wrong expectation fails: the check can fail
    tests[0]["promql_expr_test"][0]["exp_samples"][0]["value"] = 1
    path.write_text(yaml.safe_dump({"rule_files": [], "evaluation_interval": "1m", "tests": tests[:1]}))
    result = subprocess.run([promtool, "test", "rules", str(path)], capture_output=True, text=True, timeout=60,
                            check=False)
    assert result.returncode != 0
